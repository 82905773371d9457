"""DescribeConfigs (32): topic and broker configs with their sources, as Kafka answers them; error codes."""

from __future__ import annotations

import pytest

from twisted_kafka.config import ConfigSource, Type
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.server.handlers.describe_configs import CONFIG_TYPE_IDS

from .helpers import Broker, result_of

DC = m.DescribeConfigsRequest
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


def describe(resources, *, synonyms=False, documentation=False):
    """``resources``: [(type, name, keys or None)]."""
    return DC(include_synonyms=synonyms, include_documentation=documentation, resources=[
        DC.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=keys)
        for t, n, keys in resources])


def entries(result):
    return {c.name: c for c in result.configs}


@pytest.fixture
def described(tmp_path):
    node = Broker(tmp_path, {"log.retention.hours": "10", "ssl.key.password": "hunter2", "custom.key": "x"})
    node.create_topic("t", configs={"segment.ms": "1000"})
    result_of(node.admin_manager.alter_broker_configs("", lambda current: {"log.roll.ms": "5000"}))
    return node


def test_a_topic_s_configs_with_their_sources(described):
    [result] = described.call(describe([(TOPIC, "t", None)]), 4).results
    assert (result.error_code, result.error_message, result.resource_type, result.resource_name) == (
        ErrorCode.NONE, None, TOPIC, "t")
    got = entries(result)
    assert list(got) == sorted(got) and not any(c.read_only for c in got.values())
    assert (got["segment.ms"].value, got["segment.ms"].config_source) == (
        "1000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert (got["retention.ms"].value, got["retention.ms"].config_source) == (
        str(10 * 3600 * 1000), ConfigSource.STATIC_BROKER_CONFIG.value)
    assert (got["segment.bytes"].config_source, got["segment.bytes"].is_default) == (
        ConfigSource.DEFAULT_CONFIG.value, False)                  # is_default only exists in v0
    assert got["cleanup.policy"].config_type == CONFIG_TYPE_IDS[Type.LIST]


def test_only_the_keys_asked_for(described):
    [result] = described.call(describe([(TOPIC, "t", ["segment.ms", "no.such.key"])]), 4).results
    assert list(entries(result)) == ["segment.ms"]
    [result] = described.call(describe([(TOPIC, "t", [])]), 4).results
    assert len(result.configs) > 20                                         # empty means every key


def test_this_broker_s_configs(described):
    [result] = described.call(describe([(BROKER, "0", None)]), 4).results
    got = entries(result)
    assert {name for name, c in got.items() if not c.read_only} == described.dynamic_config.dynamic_keys
    assert (got["log.retention.hours"].value, got["log.retention.hours"].config_source) == (
        "10", ConfigSource.STATIC_BROKER_CONFIG.value)
    assert (got["log.roll.ms"].value, got["log.roll.ms"].config_source) == (
        "5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    for secret in ("ssl.key.password", "custom.key"):                      # passwords and unknown keys
        assert (got[secret].value, got[secret].is_sensitive) == (None, True)


def test_synonyms_types_and_documentation_when_asked(described):
    [result] = described.call(describe([(BROKER, "0", ["log.roll.ms"])], synonyms=True, documentation=True),
                              4).results
    [entry] = result.configs
    assert [(s.name, s.value, s.source) for s in entry.synonyms][:2] == [
        ("log.roll.ms", "5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
        ("log.roll.hours", "168", ConfigSource.DEFAULT_CONFIG.value)]
    assert entry.documentation and entry.config_type == 5                  # LONG
    [result] = described.call(describe([(BROKER, "0", ["log.roll.ms"])]), 4).results
    assert (result.configs[0].synonyms, result.configs[0].documentation) == ([], None)


def test_v0_reports_is_default(described):
    [result] = described.call(describe([(TOPIC, "t", ["segment.ms", "segment.bytes"])]), 0).results
    got = entries(result)
    assert (got["segment.ms"].is_default, got["segment.bytes"].is_default) == (False, True)


def test_the_cluster_default_lists_its_dynamic_layer(described):
    [result] = described.call(describe([(BROKER, "", None)]), 4).results
    assert [(c.name, c.value, c.read_only, c.config_source) for c in result.configs] == [
        ("log.roll.ms", "5000", False, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)]


def test_each_resource_fails_alone(described):
    body = described.call(describe([
        (TOPIC, "missing", None), (TOPIC, "bad/name", None), (BROKER, "1", None), (BROKER, "zero", None),
        (BROKER_LOGGER, "0", None), (BROKER_LOGGER, "", None), (BROKER_LOGGER, "3", None), (3, "group", None),
        (TOPIC, "t", ["segment.ms"])]), 4)
    assert [(r.resource_name, r.error_code, len(r.configs)) for r in body.results] == [
        ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0), ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION, 0),
        ("1", ErrorCode.INVALID_REQUEST, 0), ("zero", ErrorCode.INVALID_REQUEST, 0),
        ("0", ErrorCode.NONE, len(described.admin_manager.log_levels.loggers())), ("", ErrorCode.INVALID_REQUEST, 0),
        ("3", ErrorCode.INVALID_REQUEST, 0),
        ("group", ErrorCode.INVALID_REQUEST, 0), ("t", ErrorCode.NONE, 1)]
    messages = {r.resource_name: r.error_message for r in body.results}
    assert messages["1"] == "Unexpected broker id, expected 0 or empty string, but received 1"
    assert messages[""] == "Broker id must not be empty"
    assert messages["group"] == "Unsupported resource type: 3"

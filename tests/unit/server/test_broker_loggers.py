"""KIP-412: DescribeConfigs and IncrementalAlterConfigs on BROKER_LOGGER resources, as Kafka answers them.

Each test gives the broker its own ``LogLevels``, so the process's levels stay as they were.
"""

from __future__ import annotations

import pytest
from twisted.logger import LogLevel, PredicateResult

from twisted_kafka.config import ConfigSource
from twisted_kafka.logging import LogLevels
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

from .helpers import Broker, result_of
from .test_alter_configs import alter, incremental, results
from .test_describe_configs import describe

BROKER_LOGGER = 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@pytest.fixture
def levels(node) -> LogLevels:
    node.admin_manager.log_levels = LogLevels()
    return node.admin_manager.log_levels


def described(node, keys=None, version=4) -> dict:
    [result] = node.call(describe([(BROKER_LOGGER, "0", keys)]), version).results
    assert result.error_code == ErrorCode.NONE, result.error_message
    return {c.name: c for c in result.configs}


def test_every_logger_is_described_with_its_level(node, levels):
    levels.set_level("kafka.controller", "DEBUG")
    got = described(node)
    assert list(got)[:3] == ["root", "kafka", "kafka.request.logger"]
    assert {"state.change.logger", "kafka.log.LogCleaner", "kafka.network.Processor",
            "twisted_kafka.server.admin_manager.AdminManager", "twisted_kafka.controller"} <= set(got)
    assert (got["root"].value, got["kafka.controller"].value, got["twisted_kafka.controller"].value,
            got["kafka.request.logger"].value) == ("INFO", "DEBUG", "DEBUG", "INFO")
    # As Kafka's ConfigHelper: source 6 for every logger, writable, not sensitive, no synonyms.
    assert {(c.config_source, c.read_only, c.is_sensitive, tuple(c.synonyms)) for c in got.values()} == {
        (ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG.value, False, False, ())}


def test_configuration_keys_pick_loggers(node, levels):
    assert list(described(node, ["kafka.request.logger", "root"])) == ["root", "kafka.request.logger"]


def test_a_level_set_at_runtime_reaches_the_filter_and_delete_returns_to_the_parent_s(node, levels):
    event = {"log_namespace": "twisted_kafka.controller.kafka_controller.KafkaController"}

    def passes(level):
        return levels.predicate({**event, "log_level": level}) != PredicateResult.no

    assert not passes(LogLevel.debug)
    body = node.call(incremental([(BROKER_LOGGER, "0", [("kafka.controller", SET, "DEBUG")])]), 1)
    assert results(body) == [(BROKER_LOGGER, "0", ErrorCode.NONE, None)]
    assert passes(LogLevel.debug) and described(node)["kafka.controller"].value == "DEBUG"
    body = node.call(incremental([(BROKER_LOGGER, "0", [("kafka.controller", DELETE, None)])]), 1)
    assert results(body) == [(BROKER_LOGGER, "0", ErrorCode.NONE, None)]
    assert not passes(LogLevel.debug) and described(node)["kafka.controller"].value == "INFO"
    # Removed, the logger follows its nearest ancestor with a level: here "kafka" (twisted_kafka).
    node.call(incremental([(BROKER_LOGGER, "0", [("kafka", SET, "WARN")])]), 1)
    assert described(node)["kafka.controller"].value == "WARN" and not passes(LogLevel.info)
    node.call(incremental([(BROKER_LOGGER, "0", [("root", SET, "ERROR")])]), 1)
    assert described(node)["root"].value == "ERROR"


def test_validate_only_changes_nothing(node, levels):
    body = node.call(incremental([(BROKER_LOGGER, "0", [("kafka.controller", SET, "TRACE")])], validate_only=True), 1)
    assert results(body)[0][2] == ErrorCode.NONE
    assert described(node)["kafka.controller"].value == "INFO"


@pytest.mark.parametrize(("ops", "code", "message"), [
    ([("kafka.controler", SET, "DEBUG")], ErrorCode.INVALID_CONFIG, "Logger kafka.controler does not exist!"),
    ([("kafka.controler", DELETE, None)], ErrorCode.INVALID_CONFIG, "Logger kafka.controler does not exist!"),
    ([("kafka.controller", SET, "LOUD")], ErrorCode.INVALID_CONFIG,
     "Cannot set the log level of kafka.controller to LOUD as it is not a supported log level. "
     "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"),
    ([("kafka.controller", SET, "debug")], ErrorCode.INVALID_CONFIG, None),      # Kafka compares upper case
    ([("root", DELETE, None)], ErrorCode.INVALID_REQUEST, "Removing the log level of the root logger is not allowed"),
    ([("kafka.controller", APPEND, "DEBUG")], ErrorCode.INVALID_REQUEST,
     "APPEND operation is not allowed for the BROKER_LOGGER resource"),
    ([("kafka.controller", SUBTRACT, "DEBUG")], ErrorCode.INVALID_REQUEST,
     "SUBTRACT operation is not allowed for the BROKER_LOGGER resource"),
    ([("kafka.controller", SET, None)], ErrorCode.INVALID_REQUEST, "Null value not supported for : kafka.controller"),
    ([("kafka", SET, "DEBUG"), ("kafka", SET, "INFO")], ErrorCode.INVALID_REQUEST,
     "Error due to duplicate config keys"),
    # One bad operation and nothing of the resource is applied.
    ([("kafka.controller", SET, "DEBUG"), ("nope", SET, "DEBUG")], ErrorCode.INVALID_CONFIG,
     "Logger nope does not exist!"),
])
def test_refusals(node, levels, ops, code, message):
    [(_, _, got_code, got_message)] = results(node.call(incremental([(BROKER_LOGGER, "0", ops)]), 1))
    assert got_code == code
    if message is not None:
        assert got_message == message
    assert described(node)["kafka.controller"].value == "INFO" and described(node)["root"].value == "INFO"


@pytest.mark.parametrize(("name", "message"), [
    ("", "Broker id must not be empty"), ("1", "Unexpected broker id, expected 0 but received 1")])
def test_another_broker_s_loggers_are_an_invalid_request(node, levels, name, message):
    body = node.call(incremental([(BROKER_LOGGER, name, [("kafka", SET, "DEBUG")])]), 1)
    assert results(body)[0][2:] == (ErrorCode.INVALID_REQUEST, message)
    [result] = node.call(describe([(BROKER_LOGGER, name, None)]), 4).results
    assert (result.error_code, result.error_message, result.configs) == (ErrorCode.INVALID_REQUEST, message, [])


def test_the_legacy_alter_configs_refuses_broker_loggers(node, levels):
    [(_, _, code, message)] = results(node.call(alter([(BROKER_LOGGER, "0", {"kafka": "DEBUG"})]), 2))
    assert code == ErrorCode.INVALID_REQUEST and "IncrementalAlterConfigs" in message
    assert described(node)["kafka"].value == "INFO"


def test_broker_loggers_need_the_cluster_s_describe_and_alter_configs(tmp_path):
    node = Broker(tmp_path, {"authorizer.class.name": "twisted_kafka.security.authorizer.AclAuthorizer",
                             "super.users": "User:admin"})
    node.admin_manager.log_levels = levels = LogLevels()
    request = incremental([(BROKER_LOGGER, "0", [("kafka", SET, "DEBUG")])])
    assert results(node.call(request, 1, principal="User:alice"))[0][2] == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    [result] = node.call(describe([(BROKER_LOGGER, "0", None)]), 4, principal="User:alice").results
    assert (result.error_code, result.configs) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [])
    assert levels.level("kafka") == "INFO"

    binding = AclBinding(ResourcePattern(ResourceType.CLUSTER, "kafka-cluster", PatternType.LITERAL),
                         AccessControlEntry("User:alice", "*", AclOperation.ALTER_CONFIGS, AclPermissionType.ALLOW))
    assert all(error == ErrorCode.NONE for error, _ in result_of(node.controller_client.create_acls([binding])))
    assert results(node.call(request, 1, principal="User:alice"))[0][2] == ErrorCode.NONE
    [result] = node.call(describe([(BROKER_LOGGER, "0", ["kafka"])]), 4, principal="User:alice").results
    assert [(c.name, c.value) for c in result.configs] == [("kafka", "DEBUG")]   # ALTER_CONFIGS implies DESCRIBE

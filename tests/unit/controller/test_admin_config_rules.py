"""The rules behind AlterConfigs/IncrementalAlterConfigs: operations, live broker keys, broker names.

(``server/handlers/alter_configs.py`` and ``server/handlers/broker_configs.py``;
the wire behaviour is covered by tests/integration/admin.)
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from twisted_kafka.config import BROKER_CONFIG, TOPIC_CONFIG, ConfigSource, KafkaConfig
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.server.handlers.alter_configs import APPEND, DELETE, SET, SUBTRACT, apply_operations
from twisted_kafka.server.handlers.broker_configs import (
    LIVE_BROKER_KEYS,
    broker_entity,
    load_dynamic_broker_configs,
    validate_update,
)


def raises(code, f, *args):
    with pytest.raises(KafkaError) as info:
        f(*args)
    assert info.value.code == code
    return info.value.message


def test_incremental_operations():
    current = {"retention.ms": "5", "cleanup.policy": "compact"}
    assert apply_operations(current, [("retention.ms", DELETE, None), ("segment.ms", SET, "9"),
                                      ("cleanup.policy", APPEND, "delete,compact")], TOPIC_CONFIG) == {
        "segment.ms": "9", "cleanup.policy": "compact,delete"}
    assert current == {"retention.ms": "5", "cleanup.policy": "compact"}          # not modified in place
    # APPEND/SUBTRACT start from the key's default when there is no override
    assert apply_operations({}, [("cleanup.policy", SUBTRACT, "delete")], TOPIC_CONFIG) == {"cleanup.policy": ""}
    assert apply_operations({}, [("cleanup.policy", APPEND, "compact")], TOPIC_CONFIG) == {
        "cleanup.policy": "delete,compact"}
    assert apply_operations({}, [("retention.ms", DELETE, None)], TOPIC_CONFIG) == {}
    message = raises(ErrorCode.INVALID_CONFIG, apply_operations, {}, [("retention.ms", APPEND, "1")], TOPIC_CONFIG)
    assert message == "Config value append is not allowed for config key: retention.ms"
    raises(ErrorCode.INVALID_CONFIG, apply_operations, {}, [("no.such", SUBTRACT, "1")], TOPIC_CONFIG)
    raises(ErrorCode.INVALID_REQUEST, apply_operations, {}, [("a", SET, "1"), ("a", DELETE, None)], TOPIC_CONFIG)
    raises(ErrorCode.INVALID_REQUEST, apply_operations, {}, [("retention.ms", SET, None)], TOPIC_CONFIG)
    raises(ErrorCode.INVALID_REQUEST, apply_operations, {}, [("retention.ms", 9, "1")], TOPIC_CONFIG)
    # broker list keys
    assert apply_operations({}, [("log.cleanup.policy", APPEND, "compact")], BROKER_CONFIG) == {
        "log.cleanup.policy": "delete,compact"}


def test_broker_resource_names():
    assert broker_entity("", 3) == "" and broker_entity(None, 3) == ""
    assert broker_entity("3", 3) == "3"
    assert raises(ErrorCode.INVALID_REQUEST, broker_entity, "4", 3) == \
        "Unexpected broker id, expected 3 or empty string, but received 4"
    assert raises(ErrorCode.INVALID_REQUEST, broker_entity, "three", 3) == \
        "Broker id must be an integer, but it is: three"


def test_validate_update_accepts_only_live_keys_with_valid_values():
    static = KafkaConfig.from_props({"log.retention.hours": "10", "num.io.threads": "8"})
    updated = validate_update(static, "0", {"log.retention.ms": "1000", "max.connections": "50"})
    assert updated["log.retention.ms"] == 1000 and updated.log_retention_ms == 1000
    assert updated.source("max.connections") is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert static["max.connections"] != 50                                  # the old config is untouched
    default = validate_update(updated, "", {"log.segment.bytes": "2048"})
    assert default.source("log.segment.bytes") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert default["log.retention.ms"] == 1000                              # the per-broker layer stays

    message = raises(ErrorCode.INVALID_REQUEST, validate_update, static, "0",
                     {"num.io.threads": "2", "log.retention.hours": "1", "log.retention.ms": "5"})
    assert message == "Cannot update these configs dynamically: log.retention.hours, num.io.threads"
    assert "log.segment.bytes" in raises(ErrorCode.INVALID_REQUEST, validate_update, static, "0",
                                         {"log.segment.bytes": "10"})      # below its minimum of 14
    raises(ErrorCode.INVALID_REQUEST, validate_update, static, "0", {"log.retention.ms": None})
    assert "max.connections.per.ip.overrides" in raises(
        ErrorCode.INVALID_REQUEST, validate_update, static, "0",
        {"max.connections.per.ip.overrides": "no-such-host.invalid:3"})
    assert all(BROKER_CONFIG[key].update_mode.value != "read-only" for key in LIVE_BROKER_KEYS)


class _RecordingLogManager:
    def __init__(self):
        self.config = None
        self.updated = []

    def all_logs(self):
        return []

    def update_topic_config(self, topic, overrides):
        self.updated.append((topic, overrides))


def test_stored_broker_configs_are_applied_at_startup_skipping_bad_ones():
    static = KafkaConfig.from_props({"log.retention.hours": "10"})
    store = SimpleNamespace(
        broker_configs={"": {"log.roll.ms": "5000", "num.io.threads": "3"},
                        "7": {"log.retention.bytes": "100", "log.segment.bytes": "1"},
                        "8": {"log.retention.bytes": "999"}},
        topics={"t": SimpleNamespace(configs={"retention.ms": "5"})})
    quotas = SimpleNamespace(max_connections=1, max_connections_per_ip=1, max_connections_per_ip_overrides={})
    server = SimpleNamespace(config=static, store=store, broker=SimpleNamespace(broker_id=7), controller=None,
                             log_manager=_RecordingLogManager(), socket_server=SimpleNamespace(quotas=quotas))
    load_dynamic_broker_configs(server)
    config = server.config
    assert config["log.roll.ms"] == 5000 and config.source("log.roll.ms") is \
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert config["log.retention.bytes"] == 100                 # our own entity ("7"), not broker 8's
    assert config.source("log.segment.bytes") is ConfigSource.DEFAULT_CONFIG   # invalid stored value skipped
    assert config.source("num.io.threads") is ConfigSource.DEFAULT_CONFIG      # not a live key: skipped
    assert server.log_manager.config is config
    assert server.log_manager.updated == [("t", {"retention.ms": "5"})]
    assert quotas.max_connections == 1                          # connection keys unchanged: left alone


def test_only_the_active_controller_serves_topic_changes():
    from twisted.internet.defer import ensureDeferred

    from twisted_kafka.protocol import messages as m
    from twisted_kafka.server.handlers.create_topics import CreateTopicsHandler
    from twisted_kafka.server.handlers.delete_topics import DeleteTopicsHandler

    server = SimpleNamespace(controller=SimpleNamespace(active=False), config=KafkaConfig.from_props({}))
    CT = m.CreateTopicsRequest
    request = SimpleNamespace(api_version=7, header=SimpleNamespace(client_id="c"), body=CT(
        topics=[CT.CreatableTopic(name="t", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=1000, validate_only=False))
    failures = []
    ensureDeferred(CreateTopicsHandler(server).handle(request)).addErrback(failures.append)
    assert failures and failures[0].value.code == ErrorCode.NOT_CONTROLLER
    response = CreateTopicsHandler(server).error_response(request, ErrorCode.NOT_CONTROLLER, "not me")
    assert [(t.name, t.error_code, t.error_message) for t in response.topics] == [("t", 41, "not me")]

    DT = m.DeleteTopicsRequest
    request = SimpleNamespace(api_version=6, body=DT(topics=[DT.DeleteTopicState(name="t", topic_id=None)],
                                                     timeout_ms=1000))
    failures = []
    ensureDeferred(DeleteTopicsHandler(server).handle(request)).addErrback(failures.append)
    assert failures and failures[0].value.code == ErrorCode.NOT_CONTROLLER

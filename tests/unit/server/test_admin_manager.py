"""AdminManager: topic and config administration from the broker's own views, changes through the controller.

Runs on the single-node harness: the controller's LeaderAndIsr and
UpdateMetadata reach this broker's real handlers, so "the change is visible
here" is checked in the metadata cache, the config repository, the dynamic
broker config and the logs themselves.
"""

from __future__ import annotations

import uuid

import pytest
from twisted.internet.defer import ensureDeferred

from twisted_kafka.config import ConfigSource
from twisted_kafka.controller.client import NoControllerClient
from twisted_kafka.controller.interface import NewTopic
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.server.admin_manager import AdminManager

from .helpers import Broker, result_of


def fails(code, coroutine):
    with pytest.raises(KafkaError) as info:
        result_of(coroutine)
    assert info.value.code == code
    return info.value.message


def without_controller(node: Broker) -> AdminManager:
    return AdminManager(controller=NoControllerClient(), metadata_cache=node.metadata_cache,
                        config_repository=node.config_repository, dynamic_config=node.dynamic_config)


def test_created_topics_are_known_here_by_name_and_id(node):
    admin = node.admin_manager
    [result] = result_of(admin.create_topics([NewTopic("t", 2, 1, configs={"retention.ms": "5"})], timeout_ms=1000))
    assert (result.error, result.num_partitions, result.replication_factor) == (ErrorCode.NONE, 2, 1)
    assert admin.topic_exists("t") and admin.topic_name(result.topic_id) == "t"
    assert admin.topic_name(uuid.uuid4()) is None and not admin.topic_exists("other")
    assert node.config_repository.topic_overrides("t") == {"retention.ms": "5"}
    assert node.log("t", 1).config.retention_ms == 5                    # created with its overrides
    effective = admin.effective_topic_config({"retention.ms": "5"})
    assert effective["retention.ms"] == 5 and effective.source("retention.ms") is ConfigSource.DYNAMIC_TOPIC_CONFIG

    [validated] = result_of(admin.create_topics([NewTopic("v", 3, 1)], validate_only=True))
    assert (validated.error, validated.topic_id, admin.topic_exists("v")) == (ErrorCode.NONE, None, False)


def test_waiting_for_the_brokers_is_bounded_by_the_timeout(node):
    admin = node.admin_manager
    node.channels.hold = True
    waiting = ensureDeferred(admin.create_topics([NewTopic("slow", 1, 1)], timeout_ms=500))
    assert not waiting.called
    node.reactor.advance(0.5)
    [result] = result_of(waiting)
    assert result.error == ErrorCode.REQUEST_TIMED_OUT and "500 ms" in result.message
    # without a timeout the answer comes once the topic is persisted
    [result] = result_of(admin.create_topics([NewTopic("quick", 1, 1)], timeout_ms=0))
    assert result.error == ErrorCode.NONE and not admin.topic_exists("quick")
    node.channels.release()
    assert admin.topic_exists("slow") and admin.topic_exists("quick")


def test_auto_creation_reports_what_is_still_missing(tmp_path):
    node = Broker(tmp_path, {"default.replication.factor": "1"})
    node.create_topic("a.b")
    admin = node.admin_manager
    errors = result_of(admin.auto_create_topics(["new", "a.b", "a_b"]))
    # created; already there; colliding with "a.b": Kafka answers LEADER_NOT_AVAILABLE while it cannot create
    assert errors == {"a_b": ErrorCode.LEADER_NOT_AVAILABLE}
    assert admin.topic_exists("new") and node.log("new") is not None

    assert result_of(without_controller(node).auto_create_topics(["x", "y"])) == {
        "x": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "y": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_auto_creation_with_an_impossible_replication_factor(tmp_path):
    node = Broker(tmp_path, {"default.replication.factor": "3"})
    assert result_of(node.admin_manager.auto_create_topics(["t"])) == {"t": ErrorCode.INVALID_REPLICATION_FACTOR}
    assert not node.admin_manager.topic_exists("t")


def test_auto_creation_passes_on_errors_other_than_not_controller(node):
    node.controller.shutdown()                      # the controller still refuses with NOT_CONTROLLER ...
    assert result_of(node.admin_manager.auto_create_topics(["t"])) == {"t": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

    class Broken(NoControllerClient):
        async def create_topics(self, topics, **kwargs):
            raise KafkaError(ErrorCode.POLICY_VIOLATION, "no")

    admin = AdminManager(controller=Broken(), metadata_cache=node.metadata_cache,
                         config_repository=node.config_repository, dynamic_config=node.dynamic_config)
    assert fails(ErrorCode.POLICY_VIOLATION, admin.auto_create_topics(["t"])) == "no"   # ... others propagate


def test_deleting_and_growing_topics(node):
    admin = node.admin_manager
    topic_id = node.create_topic("t")
    result_of(admin.create_partitions("t", 3, None, timeout_ms=1000))
    assert sorted(node.metadata_cache.topics["t"].partitions) == [0, 1, 2] and node.log("t", 2) is not None
    result_of(admin.create_partitions("t", 4, None, validate_only=True))
    assert len(node.metadata_cache.topics["t"].partitions) == 3
    assert fails(ErrorCode.INVALID_PARTITIONS, admin.create_partitions("t", 2, None)) == \
        "Topic currently has 3 partitions, which is higher than the requested 2."

    results = result_of(admin.delete_topics(["t", "never"], timeout_ms=1000))
    assert {name: (r.error, r.topic_id) for name, r in results.items()} == {
        "t": (ErrorCode.NONE, topic_id), "never": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)}
    assert not admin.topic_exists("t") and admin.topic_name(topic_id) is None
    assert node.log("t") is None and node.config_repository.topics() == []


def test_every_change_needs_a_controller(node):
    node.create_topic("t")
    admin = without_controller(node)
    for call in (admin.create_topics([NewTopic("u", 1, 1)]), admin.delete_topics(["t"]),
                 admin.create_partitions("t", 2, None), admin.alter_topic_configs("t", dict),
                 admin.alter_broker_configs("", lambda current: {"log.roll.ms": "1"})):
        assert fails(ErrorCode.NOT_CONTROLLER, call) == "This broker is not the active controller"


def test_describing_a_topic(tmp_path):
    node = Broker(tmp_path, {"log.retention.hours": "10"})
    node.create_topic("t", configs={"segment.ms": "1000"})
    entries = {name: (entry, read_only, value) for name, entry, read_only, value
               in node.admin_manager.describe_topic_configs("t")}
    assert list(entries) == sorted(entries)
    assert not any(read_only for _, read_only, _ in entries.values())
    segment, _, value = entries["segment.ms"]
    assert (value, segment.source) == ("1000", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    retention, _, value = entries["retention.ms"]
    assert (value, retention.source) == (str(10 * 3600 * 1000), ConfigSource.STATIC_BROKER_CONFIG)
    assert entries["cleanup.policy"][0].source is ConfigSource.DEFAULT_CONFIG
    with pytest.raises(KafkaError) as info:
        node.admin_manager.describe_topic_configs("missing")
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(KafkaError) as info:
        node.admin_manager.describe_topic_configs("bad/name")
    assert info.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_describing_the_broker(tmp_path):
    node = Broker(tmp_path, {"log.retention.hours": "10", "custom.unknown.key": "secret",
                             "ssl.key.password": "hunter2"})
    admin = node.admin_manager
    result_of(admin.alter_broker_configs("", lambda current: {"log.roll.ms": "5000"}))
    entries = {name: (entry, read_only, value) for name, entry, read_only, value
               in admin.describe_broker_configs("0")}
    dynamic = node.dynamic_config.dynamic_keys
    assert {name for name, (_, read_only, _) in entries.items() if not read_only} == dynamic
    entry, read_only, value = entries["log.retention.hours"]
    assert (value, entry.source, read_only) == ("10", ConfigSource.STATIC_BROKER_CONFIG, True)
    entry, read_only, value = entries["log.roll.ms"]
    assert (value, entry.source, read_only) == ("5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, False)
    entry, read_only, value = entries["custom.unknown.key"]             # unknown: sensitive, no value
    assert (entry.sensitive, read_only, value) == (True, True, None)
    assert entries["ssl.key.password"][0].sensitive

    # the cluster default ("") lists its dynamic layer only, with the value set there
    defaults = admin.describe_broker_configs("")
    assert [(name, read_only, value) for name, _, read_only, value in defaults] == [("log.roll.ms", False, "5000")]
    with pytest.raises(KafkaError) as info:
        admin.describe_broker_configs("1")
    assert info.value.code == ErrorCode.INVALID_REQUEST


def test_broker_loggers_are_this_broker_s_only(node):
    admin = node.admin_manager
    admin.check_broker_logger("0")
    for name, message in (("", "Broker id must not be empty"), (None, "Broker id must not be empty"),
                          ("1", "Unexpected broker id, expected 0 but received 1"),
                          ("x", "Unexpected broker id, expected 0 but received x")):
        with pytest.raises(KafkaError) as info:
            admin.check_broker_logger(name)
        assert (info.value.code, info.value.message) == (ErrorCode.INVALID_REQUEST, message)


def test_altering_a_topic_reaches_its_logs(node):
    admin = node.admin_manager
    node.create_topic("t", configs={"retention.ms": "5"})
    seen = []

    def replace(current):
        seen.append(current)
        return {**current, "segment.ms": "1000"}

    result_of(admin.alter_topic_configs("t", replace, validate_only=True))
    assert node.config_repository.topic_overrides("t") == {"retention.ms": "5"}
    result_of(admin.alter_topic_configs("t", replace))
    assert seen == [{"retention.ms": "5"}] * 2
    assert node.config_repository.topic_overrides("t") == {"retention.ms": "5", "segment.ms": "1000"}
    assert node.log("t").config.segment_ms == 1000 and node.log("t").config.retention_ms == 5
    assert fails(ErrorCode.INVALID_CONFIG, admin.alter_topic_configs("t", lambda c: {"segment.ms": "0"}))
    assert fails(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, admin.alter_topic_configs("missing", dict)) == \
        "The topic 'missing' does not exist."
    fails(ErrorCode.INVALID_TOPIC_EXCEPTION, admin.alter_topic_configs("bad/name", dict))


def test_altering_the_broker_is_validated_here_and_applied_through_the_controller(node):
    admin = node.admin_manager
    node.create_topic("t")
    result_of(admin.alter_broker_configs("0", lambda current: {"log.retention.ms": "1234"}, validate_only=True))
    assert node.dynamic_config.layer("0") == {} and node.controller.broker_configs == {}

    result_of(admin.alter_broker_configs("0", lambda current: {**current, "log.retention.ms": "1234"}))
    assert node.dynamic_config.layer("0") == {"log.retention.ms": "1234"}
    assert node.controller.broker_configs == {"0": {"log.retention.ms": "1234"}}
    assert node.log("t").config.retention_ms == 1234                   # applied to the logs at once

    assert fails(ErrorCode.INVALID_REQUEST, admin.alter_broker_configs("", lambda c: {"num.partitions": "2"})) == \
        "Cannot update these configs dynamically: num.partitions"
    fails(ErrorCode.INVALID_REQUEST, admin.alter_broker_configs("7", lambda c: {"log.retention.ms": "1"}))
    result_of(admin.alter_broker_configs("0", lambda current: {}))
    assert node.dynamic_config.layer("0") == {} and node.log("t").config.retention_ms == 7 * 24 * 3600 * 1000

"""CreateTopics (19): new topics through the controller, answered per topic, with Kafka's error codes."""

from __future__ import annotations

import pytest

from twisted_kafka.config import ConfigSource
from twisted_kafka.controller.client import NoControllerClient
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

from .helpers import decode, result_of

CT = m.CreateTopicsRequest
T = CT.CreatableTopic
ZERO = None          # the zero topic id: kafka-python decodes it as None


def topic(name, partitions=-1, factor=-1, *, assignments=None, configs=None):
    return T(name=name, num_partitions=partitions, replication_factor=factor,
             assignments=[T.CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                          for i, b in (assignments or {}).items()],
             configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])


def create(*topics, timeout_ms=1000, validate_only=False):
    return CT(topics=list(topics), timeout_ms=timeout_ms, validate_only=validate_only)


def results(body):
    return {t.name: t for t in body.topics}


def test_topics_are_created_with_their_configs(node):
    body = node.call(create(topic("t", 3, 1, configs={"retention.ms": "5"}), topic("defaults")), 7)
    got = results(body)
    t = got["t"]
    assert (t.error_code, t.error_message, t.num_partitions, t.replication_factor) == (ErrorCode.NONE, None, 3, 1)
    assert t.topic_id == node.metadata_cache.topics["t"].topic_id is not ZERO
    configs = {c.name: c for c in t.configs}
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
        "5", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert configs["segment.ms"].config_source == ConfigSource.DEFAULT_CONFIG.value
    assert not any(c.read_only for c in t.configs)
    assert (got["defaults"].num_partitions, got["defaults"].replication_factor) == (
        node.config["num.partitions"], node.config["default.replication.factor"])
    # the topics exist on this broker by the time the answer is sent
    assert node.log("t", 2).config.retention_ms == 5 and node.log("defaults") is not None


def test_each_topic_fails_alone_with_its_error_and_message(node):
    node.create_topic("taken")
    body = node.call(create(
        topic("taken", 1, 1), topic("zero", 0, 1), topic("rf", 1, 2), topic("both", 2, 1, assignments={0: [0]}),
        topic("gap", assignments={0: [0], 2: [0]}), topic("bad", 1, 1, configs={"retention.ms": "x"}),
        topic("bad/name", 1, 1), topic("dup", 1, 1), topic("ok", 1, 1), topic("dup", 2, 1)), 7)
    got = results(body)
    assert {n: t.error_code for n, t in got.items()} == {
        "taken": ErrorCode.TOPIC_ALREADY_EXISTS, "zero": ErrorCode.INVALID_PARTITIONS,
        "rf": ErrorCode.INVALID_REPLICATION_FACTOR, "both": ErrorCode.INVALID_REQUEST,
        "gap": ErrorCode.INVALID_REPLICA_ASSIGNMENT, "bad": ErrorCode.INVALID_CONFIG,
        "bad/name": ErrorCode.INVALID_TOPIC_EXCEPTION, "dup": ErrorCode.INVALID_REQUEST, "ok": ErrorCode.NONE}
    assert [t.name for t in body.topics] == ["taken", "zero", "rf", "both", "gap", "bad", "bad/name", "dup", "ok"]
    assert got["taken"].error_message == "Topic 'taken' already exists."
    assert got["dup"].error_message == ("Create topics request from client `unit` contains multiple entries for "
                                        "the following topics: dup")
    assert "retention.ms" in got["bad"].error_message
    for failed in (t for n, t in got.items() if n != "ok"):
        assert (failed.topic_id, failed.num_partitions, failed.replication_factor, failed.configs) == (
            ZERO, -1, -1, [])
    assert set(node.metadata_cache.topics) == {"taken", "ok"}


def test_validate_only_creates_nothing(node):
    [t] = node.call(create(topic("v", 4, 1, configs={"retention.ms": "10"}), validate_only=True), 7).topics
    assert (t.error_code, t.topic_id, t.num_partitions) == (ErrorCode.NONE, ZERO, 4)
    assert {c.name: c.value for c in t.configs}["retention.ms"] == "10"
    assert node.metadata_cache.topics == {} and node.controller.topics == {} and node.log("v") is None


def test_waiting_for_the_brokers_times_out_but_the_topic_exists(node):
    node.channels.hold = True
    request, pending = node.pending(create(topic("slow", 1, 1), timeout_ms=500), 7)
    assert not pending.called and request.local_complete_ns > 0
    node.reactor.advance(0.5)
    [t] = decode(request, result_of(pending)).topics
    assert t.error_code == ErrorCode.REQUEST_TIMED_OUT and "500 ms" in t.error_message
    assert t.num_partitions == 1 and t.topic_id == node.controller.topics["slow"].topic_id
    # with no timeout the answer does not wait for the brokers
    [t] = node.call(create(topic("quick", 1, 1), timeout_ms=0), 7).topics
    assert t.error_code == ErrorCode.NONE and "quick" not in node.metadata_cache.topics
    node.channels.release()
    assert {"slow", "quick"} <= set(node.metadata_cache.topics)


@pytest.mark.parametrize("version", [0, 1, 4, 5])
def test_older_versions(node, version):
    body = node.call(create(topic("t", 2, 1), topic("t", 1, 1), topic("u", 0, 1)), version)
    got = results(body)
    assert (got["t"].error_code, got["u"].error_code) == (ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_PARTITIONS)
    assert got["u"].error_message == ("" if version == 0 else         # no message field in v0
                                      "Number of partitions was set to an invalid non-positive value.")
    [created] = node.call(create(topic("v", 2, 1)), version).topics
    assert created.error_code == ErrorCode.NONE and len(node.metadata_cache.topics["v"].partitions) == 2
    if version >= 5:
        assert created.num_partitions == 2 and created.configs


def test_only_the_active_controller_creates_topics(node):
    node.admin_manager.controller = NoControllerClient()
    [t] = node.call(create(topic("t", 1, 1)), 7).topics
    assert (t.name, t.error_code, t.error_message) == ("t", ErrorCode.NOT_CONTROLLER,
                                                       "This broker is not the active controller")
    node.controller.shutdown()
    node.admin_manager.controller = node.controller_client
    assert node.call(create(topic("t", 1, 1)), 7).topics[0].error_code == ErrorCode.NOT_CONTROLLER

"""Metadata (3): brokers on the request's listener, topics from the cache, auto-creation, error codes."""

from __future__ import annotations

import pytest

from twisted_kafka.controller.client import NoControllerClient
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.server.metadata_cache import CLUSTER_AUTHORIZED_OPERATIONS, TOPIC_OPERATIONS

from .helpers import CLUSTER_ID, Broker

MT = m.MetadataRequest.MetadataRequestTopic


def metadata(node, names, version=12, **fields):
    topics = None if names is None else [MT(name=n) for n in names]
    return node.call(m.MetadataRequest(topics=topics, **fields), version)


def topics(body):
    return {t.name: t.error_code for t in body.topics}


def test_every_topic_with_the_brokers_of_the_request_s_listener(node):
    node.create_topic("b", 2)
    node.create_topic("a")
    body = metadata(node, None)
    assert [t.name for t in body.topics] == ["a", "b"]
    assert (body.cluster_id, body.controller_id) == (CLUSTER_ID, 0)
    assert [(b.node_id, b.host, b.port) for b in body.brokers] == [(0, "127.0.0.1", 9092)]
    [b_topic] = [t for t in body.topics if t.name == "b"]
    assert b_topic.topic_id == node.metadata_cache.topics["b"].topic_id
    assert [(p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes)
            for p in b_topic.partitions] == [(0, 0, 0, [0], [0]), (1, 0, 0, [0], [0])]

    # the same broker, asked on the control-plane listener, is described by that listener's endpoint
    body = node.call(m.MetadataRequest(topics=[]), 12, plane="control", listener="CONTROLLER")
    assert [(b.node_id, b.port) for b in body.brokers] == [(0, 9093)] and body.topics == []


def test_topic_list_semantics_follow_the_version(node):
    node.create_topic("t")
    assert topics(metadata(node, [], version=0)) == {"t": ErrorCode.NONE}     # v0: empty means all
    assert topics(metadata(node, [], version=1)) == {}                         # v1+: empty means none
    assert topics(metadata(node, None, version=1)) == {"t": ErrorCode.NONE}    # v1+: null means all
    assert [t.name for t in metadata(node, ["t", "t"]).topics] == ["t"]         # asked twice, answered once


def test_topics_asked_for_by_id(node):
    """Metadata v10+: a topic named by its id alone, as librdkafka asks for the topics of a KIP-848
    assignment; an unknown id is UNKNOWN_TOPIC_ID, and nothing is created for it."""
    import uuid
    node.create_topic("by-id", 2)
    topic_id = node.metadata_cache.topics["by-id"].topic_id
    unknown = uuid.uuid4()
    body = node.call(m.MetadataRequest(topics=[MT(name=None, topic_id=topic_id), MT(name=None, topic_id=unknown)],
                                       allow_auto_topic_creation=True), 12)
    answered = {t.topic_id: (t.name, t.error_code, len(t.partitions)) for t in body.topics}
    assert answered == {topic_id: ("by-id", ErrorCode.NONE, 2), unknown: (None, ErrorCode.UNKNOWN_TOPIC_ID, 0)}
    assert set(node.metadata_cache.topics) == {"by-id"}


def test_unknown_topics_are_created_when_allowed(node):
    body = metadata(node, ["new", "bad/name"], version=12, allow_auto_topic_creation=True)
    assert topics(body) == {"new": ErrorCode.NONE, "bad/name": ErrorCode.INVALID_TOPIC_EXCEPTION}
    [new] = [t for t in body.topics if t.name == "new"]
    assert len(new.partitions) == node.config["num.partitions"] and node.log("new") is not None
    assert "bad/name" not in node.metadata_cache.topics

    # librdkafka's consumers send false: nothing is created
    assert topics(metadata(node, ["other"], allow_auto_topic_creation=False)) == {
        "other": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    # before v4 the request cannot forbid it
    assert topics(metadata(node, ["old"], version=3)) == {"old": ErrorCode.NONE}
    assert set(node.metadata_cache.topics) == {"new", "old"}


def test_nothing_is_created_when_the_broker_forbids_it(tmp_path):
    node = Broker(tmp_path, {"auto.create.topics.enable": "false"})
    assert topics(metadata(node, ["t"], version=3)) == {"t": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert node.metadata_cache.topics == {}


def test_creation_problems_are_answered_per_topic(tmp_path):
    node = Broker(tmp_path, {"default.replication.factor": "2"})
    assert topics(metadata(node, ["t"])) == {"t": ErrorCode.INVALID_REPLICATION_FACTOR}
    node.create_topic("a.b")
    # a topic that cannot be created for another reason (here: it collides with "a.b") is not available yet
    assert topics(metadata(node, ["a_b"])) == {"a_b": ErrorCode.LEADER_NOT_AVAILABLE}
    node.admin_manager.controller = NoControllerClient()
    assert topics(metadata(node, ["u"])) == {"u": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


def test_authorized_operations_when_asked(node):
    node.create_topic("t")
    body = metadata(node, None, version=10, include_cluster_authorized_operations=True,
                    include_topic_authorized_operations=True)
    assert set(body.authorized_operations) == CLUSTER_AUTHORIZED_OPERATIONS
    assert set(body.topics[0].authorized_operations) == TOPIC_OPERATIONS
    body = metadata(node, None, version=10)
    assert body.topics[0].authorized_operations is None


@pytest.mark.parametrize("version", [12, 13])
def test_a_failure_answers_every_topic_with_the_error(node, version):
    node.create_topic("t")

    class Refusing(NoControllerClient):
        async def create_topics(self, topics, **kwargs):
            raise KafkaError(ErrorCode.POLICY_VIOLATION, "not here")

    node.admin_manager.controller = Refusing()
    body = metadata(node, ["t", "missing"], version=version)
    assert topics(body) == {"t": ErrorCode.POLICY_VIOLATION, "missing": ErrorCode.POLICY_VIOLATION}
    assert [b.node_id for b in body.brokers] == [0]
    if version >= 13:
        assert body.error_code == ErrorCode.POLICY_VIOLATION


def test_the_error_codes_of_a_cached_topic_entry_follow_its_partitions():
    """ErrorsPerSec of an answer built from cached fragments: the topic's code and each partition's."""
    import uuid

    from twisted_kafka.server.metadata_cache import MetadataCache, PartitionState

    cache = MetadataCache(listeners=None)  # type: ignore[arg-type]
    cache.update_partitions([PartitionState("t", 0, 0, 0, (0,), (0,)), PartitionState("t", 1, -1, 0, (0,), ())],
                            {"t": uuid.uuid4()})
    assert cache.fragment_errors("t") == {ErrorCode.NONE: 2, ErrorCode.LEADER_NOT_AVAILABLE: 1}
    cache.update_partitions([PartitionState("t", 1, 0, 1, (0,), (0,))], {})          # a leader: recomputed
    assert cache.fragment_errors("t") == {ErrorCode.NONE: 3}

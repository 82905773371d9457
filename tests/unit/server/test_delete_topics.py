"""DeleteTopics (20): by name (v0+) or by id (v6), through the controller; Kafka's error codes."""

from __future__ import annotations

import uuid

import pytest

from twisted_kafka.controller.client import NoControllerClient
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

from .helpers import Broker, decode, records, result_of

DT = m.DeleteTopicsRequest
S = DT.DeleteTopicState


def by_name(*names, version=6, timeout_ms=1000):
    if version >= 6:
        return DT(topics=[S(name=n) for n in names], timeout_ms=timeout_ms)
    return DT(topic_names=list(names), timeout_ms=timeout_ms)


def results(body):
    return [(r.name, r.topic_id, r.error_code) for r in body.responses]


def test_topics_are_deleted_everywhere_before_the_answer(node):
    topic_id = node.create_topic("t", 2)
    node.create_topic("kept")
    body = node.call(by_name("t", "t", "never"), 6)
    assert results(body) == [("t", topic_id, ErrorCode.NONE), ("never", None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert set(node.metadata_cache.topics) == {"kept"} and node.log("t", 1) is None
    assert node.controller.topics.keys() == {"kept"}
    # produce now fails; the name can be used again, under a new id
    P = m.ProduceRequest
    produce = P(acks=1, timeout_ms=1000, topic_data=[P.TopicProduceData(name="t", partition_data=[
        P.TopicProduceData.PartitionProduceData(index=0, records=records(b"x"))])])
    [topic] = node.call(produce, 9).responses
    assert topic.partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert node.create_topic("t") != topic_id


def test_a_topic_created_again_does_not_inherit_the_old_overrides(node):
    node.create_topic("t", configs={"retention.ms": "5"})
    node.call(by_name("t"), 6)
    node.create_topic("t")
    assert node.config_repository.topic_overrides("t") == {}
    assert node.log("t").config.retention_ms == 7 * 24 * 3600 * 1000


def test_topics_named_by_id(node):
    topic_id = node.create_topic("t")
    unknown = uuid.uuid4()
    body = node.call(DT(topics=[S(topic_id=topic_id), S(topic_id=unknown), S(name="x", topic_id=unknown), S()],
                        timeout_ms=1000), 6)
    assert results(body) == [("t", topic_id, ErrorCode.NONE), (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID),
                             ("x", unknown, ErrorCode.INVALID_REQUEST), (None, None, ErrorCode.INVALID_REQUEST)]
    messages = [r.error_message for r in body.responses]
    assert messages[1:] == [f"Topic id {unknown} does not exist.", "You may not specify both topic name and topic id.",
                            "Either a topic name or a topic id must be given."]
    assert "t" not in node.metadata_cache.topics


@pytest.mark.parametrize("version", [0, 1, 3, 5])
def test_older_versions_name_topics(node, version):
    node.create_topic("t")
    body = node.call(by_name("t", "never", version=version), version)
    assert [(r.name, r.error_code) for r in body.responses] == [
        ("t", ErrorCode.NONE), ("never", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert "t" not in node.metadata_cache.topics


@pytest.mark.parametrize(("version", "error"), [(2, ErrorCode.INVALID_REQUEST), (3, ErrorCode.TOPIC_DELETION_DISABLED),
                                                (6, ErrorCode.TOPIC_DELETION_DISABLED)])
def test_deletion_can_be_disabled(tmp_path, version, error):
    node = Broker(tmp_path, {"delete.topic.enable": "false"})
    node.create_topic("t")
    body = node.call(by_name("t", version=version), version)
    assert [(r.name, r.error_code) for r in body.responses] == [("t", error)]
    assert "t" in node.metadata_cache.topics


def test_waiting_for_the_brokers_times_out_but_the_topic_is_gone(node):
    node.create_topic("t")
    node.channels.hold = True
    request, pending = node.pending(by_name("t", timeout_ms=500), 6)
    assert not pending.called and request.local_complete_ns > 0
    node.reactor.advance(0.5)
    [result] = decode(request, result_of(pending)).responses
    assert result.error_code == ErrorCode.REQUEST_TIMED_OUT and "500 ms" in result.error_message
    assert "t" not in node.controller.topics
    node.channels.release()
    assert "t" not in node.metadata_cache.topics


def test_only_the_active_controller_deletes_topics(node):
    node.create_topic("t")
    node.admin_manager.controller = NoControllerClient()
    body = node.call(by_name("t"), 6)
    assert [(r.name, r.error_code, r.error_message) for r in body.responses] == [
        ("t", ErrorCode.NOT_CONTROLLER, "This broker is not the active controller")]
    assert "t" in node.metadata_cache.topics

"""Produce (0): each partition appended (or refused) alone; acks=0 answered by silence or by closing."""

from __future__ import annotations

import pytest
from twisted.internet.defer import fail

from twisted_kafka.network.processor import CloseReason
from twisted_kafka.network.request import CloseConnectionResponse, NoOpResponse
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.records import build_batch

from .helpers import NOW, decode, records, result_of

P = m.ProduceRequest
TD = P.TopicProduceData
PD = TD.PartitionProduceData


def produce(topic_data, *, acks=1, transactional_id=None):
    """``topic_data``: {topic: {partition: records}}."""
    return P(transactional_id=transactional_id, acks=acks, timeout_ms=1000, topic_data=[
        TD(name=name, partition_data=[PD(index=i, records=r) for i, r in partitions.items()])
        for name, partitions in topic_data.items()])


def answers(body):
    return {(t.name, p.index): (p.error_code, p.base_offset) for t in body.responses for p in t.partition_responses}


def offsets_in_log(node, topic, partition=0):
    log = node.log(topic, partition)
    return log.log_start_offset, log.log_end_offset


def test_every_partition_is_appended_and_answered(node):
    node.create_topic("t", 2)
    node.produce("t", 1, b"earlier")
    body = node.call(produce({"t": {0: records(b"a", b"b"), 1: records(b"c")}}), 9)
    assert answers(body) == {("t", 0): (ErrorCode.NONE, 0), ("t", 1): (ErrorCode.NONE, 1)}
    [partition] = [p for t in body.responses for p in t.partition_responses if p.index == 1]
    assert (partition.log_append_time_ms, partition.log_start_offset, partition.error_message) == (-1, 0, None)
    assert offsets_in_log(node, "t", 0) == (0, 2) and offsets_in_log(node, "t", 1) == (0, 2)


def test_log_append_time_topics_report_the_broker_s_time(node):
    node.create_topic("stamped", configs={"message.timestamp.type": "LogAppendTime"})
    node.reactor.advance(5)
    [(_, partition)] = [(t, p) for t in node.call(produce({"stamped": {0: records(b"x")}}), 9).responses
                        for p in t.partition_responses]
    assert partition.error_code == ErrorCode.NONE and partition.log_append_time_ms == NOW + 5000


def test_a_bad_partition_fails_alone(node):
    node.create_topic("t", 2)
    node.create_topic("small", configs={"max.message.bytes": "100"})
    corrupt = bytearray(records(b"payload"))
    corrupt[-1] ^= 0xFF                                    # the CRC no longer matches
    body = node.call(produce({"t": {0: records(b"ok"), 1: bytes(corrupt), 7: records(b"x")},
                              "missing": {0: records(b"x")},
                              "small": {0: records(b"v" * 200)}}), 9)
    assert answers(body) == {
        ("t", 0): (ErrorCode.NONE, 0), ("t", 1): (ErrorCode.CORRUPT_MESSAGE, -1),
        ("t", 7): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("missing", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("small", 0): (ErrorCode.MESSAGE_TOO_LARGE, -1)}
    messages = {(t.name, p.index): p.error_message for t in body.responses for p in t.partition_responses}
    assert messages[("t", 7)] == "This server does not host this topic-partition."
    assert messages[("t", 0)] is None and messages[("small", 0)]
    assert offsets_in_log(node, "t", 0) == (0, 1) and offsets_in_log(node, "t", 1) == (0, 0)


def test_null_records_are_an_invalid_record(node):
    node.create_topic("t")
    assert answers(node.call(produce({"t": {0: None}}), 9)) == {("t", 0): (ErrorCode.INVALID_RECORD, -1)}


def test_acks_all_needs_enough_in_sync_replicas(node):
    node.create_topic("strict", configs={"min.insync.replicas": "2"})
    node.create_topic("t")
    body = node.call(produce({"strict": {0: records(b"x")}, "t": {0: records(b"y")}}, acks=-1), 9)
    assert answers(body) == {("strict", 0): (ErrorCode.NOT_ENOUGH_REPLICAS, -1), ("t", 0): (ErrorCode.NONE, 0)}


@pytest.mark.parametrize(("fields", "version", "error"), [
    ({"acks": 2}, 9, ErrorCode.INVALID_REQUIRED_ACKS),
    ({}, 2, ErrorCode.UNSUPPORTED_VERSION),
])
def test_requests_refused_as_a_whole(node, fields, version, error):
    node.create_topic("t", 2)
    request = produce({"t": {0: records(b"a"), 1: records(b"b")}}, **{"acks": 1, **fields})
    assert answers(node.call(request, version)) == {("t", 0): (error, -1), ("t", 1): (error, -1)}
    assert offsets_in_log(node, "t", 0) == (0, 0)


def test_transactional_records_without_a_transactional_id_are_refused(node):
    """Kafka's rule, checked before any append: the log takes transactional batches now."""
    node.create_topic("t", 2)
    txn = records(b"a", producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    request = produce({"t": {0: records(b"b"), 1: txn}})
    assert answers(node.call(request, 9)) == {("t", 0): (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1),
                                              ("t", 1): (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)}
    assert offsets_in_log(node, "t", 0) == offsets_in_log(node, "t", 1) == (0, 0)


def test_acks_0_is_answered_by_silence(node):
    node.create_topic("t")
    request, response = node.handle(produce({"t": {0: records(b"a")}}, acks=0), 9)
    assert isinstance(response, NoOpResponse) and response.request is request
    assert offsets_in_log(node, "t") == (0, 1)


def test_a_failed_acks_0_produce_closes_the_connection(node):
    node.create_topic("t")
    request, response = node.handle(produce({"t": {0: records(b"a")}, "missing": {3: records(b"b")}}, acks=0), 9,
                                    correlation_id=41)
    assert isinstance(response, CloseConnectionResponse) and response.graceful
    assert response.reason == CloseReason.PRODUCE_ERROR
    assert response.message == ("acks=0 Produce (correlation id 41) failed for 1 partition(s) "
                                "(missing-3: UNKNOWN_TOPIC_OR_PARTITION); closing the connection")
    assert offsets_in_log(node, "t") == (0, 1)                  # the good partition was still written
    # a request refused as a whole closes too
    txn = records(b"a", producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    _, response = node.handle(produce({"t": {0: txn}}, acks=0), 9)
    assert isinstance(response, CloseConnectionResponse) and "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" in response.message


def test_the_answer_waits_for_the_fsync_flush_messages_asks_for(node):
    node.create_topic("durable", configs={"flush.messages": "1"})
    node.create_topic("lazy")
    for acks in (1, 0):
        node.pool.hold()
        request, pending = node.pending(produce({"durable": {0: records(b"a")}, "lazy": {0: records(b"b")}},
                                                acks=acks), 9)
        assert not pending.called and request.local_complete_ns > 0    # waiting, its handler slot given back
        assert node.pool.release() >= 1                                # the fsync
        response = result_of(pending)
        if acks:
            assert answers(decode(request, response)) == {("durable", 0): (ErrorCode.NONE, 0),
                                                          ("lazy", 0): (ErrorCode.NONE, 0)}
        else:
            assert isinstance(response, NoOpResponse)                  # only once the appends are done
    assert node.log("durable").recovery_point == 2


def test_a_storage_failure_is_a_storage_error_for_that_partition(node, monkeypatch):
    node.create_topic("t", 2)
    real_append = node.replica_manager.append

    def append(partition, records_, version, acks=1, **kwargs):
        if partition.index == 1:
            return fail(OSError(5, "Input/output error"))
        return real_append(partition, records_, version, acks, **kwargs)

    monkeypatch.setattr(node.replica_manager, "append", append)
    body = node.call(produce({"t": {0: records(b"a"), 1: records(b"b")}}), 9)
    assert answers(body) == {("t", 0): (ErrorCode.NONE, 0), ("t", 1): (ErrorCode.KAFKA_STORAGE_ERROR, -1)}
    [message] = [p.error_message for t in body.responses for p in t.partition_responses if p.index == 1]
    assert "Input/output error" in message


def test_a_handler_failure_is_an_unknown_server_error_or_a_close_for_acks_0(node, monkeypatch):
    node.create_topic("t")

    def broken(topic, index):
        raise RuntimeError("bug")

    monkeypatch.setattr(node.replica_manager, "leader_partition", broken)
    assert answers(node.call(produce({"t": {0: records(b"a")}}), 9)) == {
        ("t", 0): (ErrorCode.UNKNOWN_SERVER_ERROR, -1)}
    _, response = node.handle(produce({"t": {0: records(b"a")}}, acks=0), 9)
    assert isinstance(response, CloseConnectionResponse) and "UNKNOWN_SERVER_ERROR" in response.message


@pytest.mark.parametrize("policy", ["compact", "compact,delete"])
def test_a_compacted_topic_refuses_a_batch_with_keyless_records_naming_them(node, policy):
    """Kafka's LogValidator: INVALID_RECORD for the partition, one KIP-467 record error per
    keyless record (its index in the batch), and the summary as the error message (v8+)."""
    node.create_topic("c", 2, configs={"cleanup.policy": policy})
    keyless = build_batch([(b"k", b"v", (), NOW), (None, b"v", (), NOW)])
    keyed = build_batch([(b"k", b"v", (), NOW), (b"k2", None, (), NOW)])
    body = node.call(produce({"c": {0: keyless, 1: keyed}}), 9)
    assert answers(body) == {("c", 0): (ErrorCode.INVALID_RECORD, -1), ("c", 1): (ErrorCode.NONE, 0)}
    [refused] = [p for t in body.responses for p in t.partition_responses if p.index == 0]
    expected = "Compacted topic cannot accept message without key in topic partition c-0."
    assert [(e.batch_index, e.batch_index_error_message) for e in refused.record_errors] == [(1, expected)]
    assert refused.error_message.startswith("One or more records have been rejected due to 1 record errors")
    assert expected in refused.error_message
    assert offsets_in_log(node, "c", 0) == (0, 0) and offsets_in_log(node, "c", 1) == (0, 2)
    # Before v8 the response has neither field: the error code alone.
    old = node.call(produce({"c": {0: keyless}}), 7)
    assert answers(old) == {("c", 0): (ErrorCode.INVALID_RECORD, -1)}


def test_a_topic_that_is_not_compacted_takes_keyless_records(node):
    node.create_topic("d", configs={"cleanup.policy": "delete"})
    assert answers(node.call(produce({"d": {0: records(b"a")}}), 9)) == {("d", 0): (ErrorCode.NONE, 0)}

"""Produce, Fetch, ListOffsets and OffsetForLeaderEpoch on a raw socket: exact answers.

Requests are built with the project's message classes and framed by
``codec.encode_request``; record batches come from
``records.builder.build_batch``.  Each bad input is sent next to good ones
in the same request, and must fail only its own partition, with Kafka's
error code.
"""

from __future__ import annotations

import time

import pytest

from support.raw_client import RawClient, auto_create_topic
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.records.batch import iter_batch_headers
from twisted_kafka.protocol.records.builder import build_batch
from twisted_kafka.protocol.records.record import iter_records

from .helpers import fetch_request, list_offsets_request, produce_request

MAX_MESSAGE_BYTES = 4096
BROKER_OVERRIDES = {"num.partitions": "4", "message.max.bytes": str(MAX_MESSAGE_BYTES)}


def create_topic(client: RawClient, topic: str) -> None:
    auto_create_topic(client, topic, partitions=4)


def partition_errors(response) -> dict[tuple[str, int], tuple[int, int]]:
    return {(t.name, p.index): (p.error_code, p.base_offset)
            for t in response.responses for p in t.partition_responses}


def fetched_records(partition) -> list[tuple[int, bytes, bytes]]:
    data = b"".join(bytes(c) for c in ([partition.records] if isinstance(partition.records, (bytes, bytearray))
                                       else partition.records or []))
    out = []
    for pos, header in iter_batch_headers(data, allow_partial_tail=True):
        for record in iter_records(data, pos, header):
            out.append((record.offset, record.key, record.value))
    return out


def fetch_partitions(response) -> dict[tuple[str, int], object]:
    return {(t.topic, p.partition_index): p for t in response.responses for p in t.partitions}


# -- acks=0 ---------------------------------------------------------------------------------


def test_acks_0_gets_no_response(data_broker):
    topic = "acks0-raw"
    with RawClient(data_broker.data_port) as client:
        create_topic(client, topic)
        batch = build_batch([(b"k", b"v0"), (b"k", b"v1")])
        client.send_request(produce_request({topic: {0: batch}}, acks=0))
        versions_id = client.send_request(m.ApiVersionsRequest(version=0), 0)
        correlation_id, answer = client.read_response(18, 0)
        assert correlation_id == versions_id, "the first frame back must answer ApiVersions"
        assert answer.error_code == 0
        assert client.no_response_within(0.2)
        # ... and the records were written.
        fetch = client.request(fetch_request({topic: {0: 0}}))
        part = fetch_partitions(fetch)[(topic, 0)]
        assert part.error_code == 0 and part.high_watermark == 2
        assert [v for _, _, v in fetched_records(part)] == [b"v0", b"v1"]


def test_acks_0_error_closes_the_connection(data_broker):
    """Kafka answers nothing to acks=0, so a failed partition closes the connection instead
    (the producer reconnects and refreshes its metadata); the good partition is written."""
    topic = "acks0-error"
    with RawClient(data_broker.data_port) as client:
        create_topic(client, topic)
        # A response the client has not read yet must still arrive before the close.
        versions_id = client.send_request(m.ApiVersionsRequest(version=0), 0)
        client.send_request(produce_request({topic: {0: build_batch([(None, b"kept")])},
                                             "acks0-unknown-topic": {0: build_batch([(None, b"x")])}}, acks=0))
        assert client.read_response(18, 0)[0] == versions_id
        assert client.wait_closed(5), "the connection stayed open after a failed acks=0 produce"
    with RawClient(data_broker.data_port) as client:
        part = fetch_partitions(client.request(fetch_request({topic: {0: 0}})))[(topic, 0)]
        assert [v for _, _, v in fetched_records(part)] == [b"kept"]
    assert "acks=0 Produce" in data_broker.log_text()


# -- bad input --------------------------------------------------------------------------------


def test_bad_batches_fail_only_their_partition(data_broker):
    topic = "bad-input"
    good = build_batch([(b"a", b"good-0"), (b"b", b"good-1")])
    oversized = build_batch([(b"big", b"x" * (MAX_MESSAGE_BYTES + 100))])
    corrupt = bytearray(build_batch([(b"c", b"payload-with-a-flipped-bit")]))
    corrupt[-3] ^= 0x01                        # a record byte: CRC-covered
    with RawClient(data_broker.data_port) as client:
        create_topic(client, topic)
        response = client.request(produce_request({
            topic: {0: good, 1: oversized, 2: bytes(corrupt), 3: good},
            "no-such-topic-in-produce": {0: good},
        }, version=7))
        errors = partition_errors(response)
        assert errors == {
            (topic, 0): (ErrorCode.NONE, 0),
            (topic, 1): (ErrorCode.MESSAGE_TOO_LARGE, -1),
            (topic, 2): (ErrorCode.CORRUPT_MESSAGE, -1),
            (topic, 3): (ErrorCode.NONE, 0),
            ("no-such-topic-in-produce", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        }
        # v8+ carries an error message for the failed partitions.
        response = client.request(produce_request({topic: {1: oversized, 0: good}}, version=9))
        (entry,) = response.responses
        by_index = {p.index: p for p in entry.partition_responses}
        assert by_index[0].error_code == 0 and by_index[0].base_offset == 2
        assert by_index[1].error_code == ErrorCode.MESSAGE_TOO_LARGE and by_index[1].error_message

        fetch = client.request(fetch_request({topic: {0: 0, 1: 0, 2: 0, 3: 0}}))
        parts = fetch_partitions(fetch)
        assert [v for _, _, v in fetched_records(parts[(topic, 0)])] == [b"good-0", b"good-1"] * 2
        assert [v for _, _, v in fetched_records(parts[(topic, 3)])] == [b"good-0", b"good-1"]
        assert parts[(topic, 1)].high_watermark == 0 and parts[(topic, 2)].high_watermark == 0
        assert not fetched_records(parts[(topic, 1)]) and not fetched_records(parts[(topic, 2)])


def test_fetch_beyond_log_end_is_offset_out_of_range(data_broker):
    topic = "fetch-oor"
    with RawClient(data_broker.data_port) as client:
        create_topic(client, topic)
        client.request(produce_request({topic: {0: build_batch([(None, b"one"), (None, b"two")])}}))
        for version in (4, 11, 12):
            fetch = client.request(fetch_request({topic: {0: 0, 1: 5}, "fetch-oor-unknown": {0: 0}},
                                                 version=version), version)
            parts = fetch_partitions(fetch)
            assert parts[(topic, 0)].error_code == 0
            assert [v for _, _, v in fetched_records(parts[(topic, 0)])] == [b"one", b"two"]
            assert parts[(topic, 1)].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
            assert parts[("fetch-oor-unknown", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # At the log end exactly: no error, no records (an empty record set, not null).
        fetch = client.request(fetch_request({topic: {0: 2}}))
        part = fetch_partitions(fetch)[(topic, 0)]
        assert part.error_code == 0 and part.high_watermark == 2 and not fetched_records(part)
        assert part.records is not None


def test_list_offsets_earliest_latest_and_by_timestamp(data_broker):
    topic = "list-offsets"
    base = int(time.time() * 1000) - 600_000
    with RawClient(data_broker.data_port) as client:
        create_topic(client, topic)
        # Three batches, timestamps base+0 .. base+8 s (one record per second).
        for b in range(3):
            records = [(None, b"v%d" % i, None, base + i * 1000) for i in range(b * 3, b * 3 + 3)]
            assert partition_errors(client.request(produce_request({topic: {0: build_batch(records)}}))) \
                == {(topic, 0): (0, b * 3)}
        cases = {-2: 0, -1: 9, base: 0, base + 1: 1, base + 4000: 4, base + 4500: 5, base + 8000: 8,
                 base + 8001: -1}
        for version in (1, 2, 4, 7):
            for timestamp, expected in cases.items():
                response = client.request(list_offsets_request({topic: {0: timestamp}}, version=version),
                                          version)
                (p,) = response.topics[0].partitions
                assert p.error_code == 0, (version, timestamp)
                assert p.offset == expected, (version, timestamp, p.offset)
                if timestamp >= 0 and expected >= 0:
                    assert p.timestamp == base + expected * 1000
                if version >= 4 and expected >= 0:
                    assert p.leader_epoch == 0
        # v7: the record with the largest timestamp.
        response = client.request(list_offsets_request({topic: {0: -3}}, version=7), 7)
        (p,) = response.topics[0].partitions
        assert (p.error_code, p.offset, p.timestamp) == (0, 8, base + 8000)
        # An empty partition, an unknown partition.
        response = client.request(list_offsets_request({topic: {1: -1, 9: -1}}, version=2), 2)
        answers = {p.partition_index: (p.error_code, p.offset) for p in response.topics[0].partitions}
        assert answers == {1: (0, 0), 9: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)}


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(data_broker, version):
    topic = f"ofle-v{version}"
    Req = m.OffsetForLeaderEpochRequest
    T = Req.OffsetForLeaderTopic
    P = T.OffsetForLeaderPartition

    def ask(entries):
        kwargs = {"version": version, "topics": [T(topic=topic, partitions=[
            P(partition=index, current_leader_epoch=current, leader_epoch=epoch)
            for index, current, epoch in entries])]}
        if version >= 3:
            kwargs["replica_id"] = -1
        response = client.request(Req(**kwargs), version)
        return [(p.partition, p.error_code, p.leader_epoch, p.end_offset) for p in response.topics[0].partitions]

    with RawClient(data_broker.data_port) as client:
        create_topic(client, topic)
        client.request(produce_request({topic: {0: build_batch([(None, b"a"), (None, b"b"), (None, b"c")])}}))
        assert ask([(0, -1, 0), (0, 0, 0), (1, 0, 0), (0, -1, 7), (0, 1, 0), (8, -1, 0)]) == [
            (0, 0, 0, 3),                                    # epoch 0 is the latest: ends at the log end
            (0, 0, 0, 3),
            (1, 0, 0, 0),                                    # an empty partition led since epoch 0
            (0, 0, -1, -1),                                  # an epoch above the latest: undefined
            (0, ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1),     # the client knows a newer leader epoch
            (8, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        ]


# -- long-poll fetch ----------------------------------------------------------------------------


def test_long_poll_fetch_is_answered_by_the_produce(data_broker):
    """The fetch may wait ten minutes, far longer than this test waits for it: if it is answered,
    the produce answered it.  (That it is answered within the same reactor turn as the append is
    the purgatory's unit test, tests/unit/server/test_fetch_purgatory.py.)"""
    topic = "long-poll"
    with RawClient(data_broker.data_port) as fetcher, RawClient(data_broker.data_port) as producer:
        create_topic(producer, topic)
        fetcher.send_request(fetch_request({topic: {0: 0}}, max_wait_ms=600_000, min_bytes=1))
        assert fetcher.no_response_within(0.3), "the fetch answered before any data arrived"
        answer = producer.request(produce_request({topic: {0: build_batch([(None, b"wake up")])}}, acks=1))
        assert partition_errors(answer) == {(topic, 0): (0, 0)}
        _, fetch = fetcher.read_response(1, 11, timeout=30)
        assert [v for _, _, v in fetched_records(fetch_partitions(fetch)[(topic, 0)])] == [b"wake up"]


def test_long_poll_fetch_waits_max_wait_ms_when_nothing_comes(data_broker):
    """Answered, empty, no sooner than max_wait_ms (a lower bound a slow machine cannot break; the
    exact timer is the purgatory's Clock test)."""
    topic = "long-poll-idle"
    with RawClient(data_broker.data_port) as client:
        create_topic(client, topic)
        began = time.monotonic()
        fetch = client.request(fetch_request({topic: {0: 0, 1: 0}}, max_wait_ms=300, min_bytes=1), timeout=30)
        assert time.monotonic() - began >= 0.3
        assert all(p.error_code == 0 and not fetched_records(p) for p in fetch_partitions(fetch).values())
        # min_bytes above what is there: it still waits the whole max_wait_ms, then returns what it has.
        client.request(produce_request({topic: {0: build_batch([(None, b"small")])}}))
        began = time.monotonic()
        fetch = client.request(fetch_request({topic: {0: 0}}, max_wait_ms=300, min_bytes=1_000_000), timeout=30)
        assert time.monotonic() - began >= 0.3
        assert [v for _, _, v in fetched_records(fetch_partitions(fetch)[(topic, 0)])] == [b"small"]


# -- min.insync.replicas ------------------------------------------------------------------


def test_acks_all_needs_min_insync_replicas(data_broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "min-isr-two"
    admin = AdminClient({"bootstrap.servers": data_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"min.insync.replicas": "2"})])[topic].result(10)
    batch = build_batch([(b"k", b"v")])
    with RawClient(data_broker.data_port) as client:
        strict = client.request(produce_request({topic: {0: batch}}, acks=-1))
        assert partition_errors(strict)[(topic, 0)][0] == ErrorCode.NOT_ENOUGH_REPLICAS
        leader_only = client.request(produce_request({topic: {0: batch}}, acks=1))
        assert partition_errors(leader_only)[(topic, 0)] == (ErrorCode.NONE, 0)

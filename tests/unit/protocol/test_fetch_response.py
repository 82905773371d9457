"""The hand-written FetchResponse encoder: client parsers agree, records are not copied."""

from __future__ import annotations

import io
import struct
import uuid

import pytest
from aiokafka.protocol import fetch as ak_fetch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twisted_kafka.protocol.codec import encode_response, frame_size
from twisted_kafka.protocol.fetch_response import (
    MAX_VERSION,
    MIN_VERSION,
    FetchableTopicResponse,
    FetchResponseData,
    NodeEndpoint,
    PartitionData,
    encode_fetch_response_body,
)
from twisted_kafka.protocol.header import RequestHeader
from twisted_kafka.protocol.messages import FetchResponse

I16 = st.integers(-2 ** 15, 2 ** 15 - 1)
I32 = st.integers(-2 ** 31, 2 ** 31 - 1)
I64 = st.integers(-2 ** 63, 2 ** 63 - 1)
NAMES = st.text(min_size=0, max_size=12)
BLOB = st.binary(max_size=64)
RECORDS = st.one_of(
    st.none(), BLOB, BLOB.map(memoryview), BLOB.map(bytearray),
    st.lists(st.one_of(BLOB, BLOB.map(memoryview)), max_size=4),
)
PARTITIONS = st.builds(
    PartitionData,
    partition_index=I32, error_code=I16, high_watermark=I64, last_stable_offset=I64, log_start_offset=I64,
    aborted_transactions=st.one_of(st.none(), st.lists(st.tuples(I64, I64), max_size=3)),
    preferred_read_replica=I32, records=RECORDS,
    diverging_epoch=st.one_of(st.none(), st.tuples(I32, I64)),
    current_leader=st.one_of(st.none(), st.tuples(I32, I32)),
    snapshot_id=st.one_of(st.none(), st.tuples(I64, I32)),
)
TOPICS = st.builds(FetchableTopicResponse, topic=NAMES, topic_id=st.uuids().filter(lambda u: u.int != 0),
                   partitions=st.lists(PARTITIONS, max_size=3))
ENDPOINTS = st.lists(st.builds(NodeEndpoint, node_id=I32, host=NAMES, port=I32, rack=st.one_of(st.none(), NAMES)),
                     max_size=3)
RESPONSES = st.builds(FetchResponseData, responses=st.lists(TOPICS, max_size=3), throttle_time_ms=I32,
                      error_code=I16, session_id=I32, node_endpoints=st.one_of(st.none(), ENDPOINTS))
VERSIONS = st.integers(MIN_VERSION, MAX_VERSION)


def records_bytes(records):
    if records is None:
        return None
    if isinstance(records, list):
        return b"".join(bytes(chunk) for chunk in records)
    return bytes(records)


def check_with_kafka_python(decoded, data: FetchResponseData, version: int):
    assert decoded.throttle_time_ms == data.throttle_time_ms
    if version >= 7:
        assert (decoded.error_code, decoded.session_id) == (data.error_code, data.session_id)
    assert len(decoded.responses) == len(data.responses)
    for got_topic, topic in zip(decoded.responses, data.responses, strict=True):
        if version >= 13:
            assert got_topic.topic_id == topic.topic_id
        else:
            assert got_topic.topic == topic.topic
        assert len(got_topic.partitions) == len(topic.partitions)
        for got, part in zip(got_topic.partitions, topic.partitions, strict=True):
            assert (got.partition_index, got.error_code, got.high_watermark, got.last_stable_offset) == (
                part.partition_index, part.error_code, part.high_watermark, part.last_stable_offset)
            if version >= 5:
                assert got.log_start_offset == part.log_start_offset
            aborted = got.aborted_transactions
            assert (None if aborted is None else [(a.producer_id, a.first_offset) for a in aborted]) == \
                part.aborted_transactions
            if version >= 11:
                assert got.preferred_read_replica == part.preferred_read_replica
            assert got.records == records_bytes(part.records)
            if version >= 12:
                div, leader, snap = got.diverging_epoch, got.current_leader, got.snapshot_id
                assert (None if div is None else (div.epoch, div.end_offset)) == part.diverging_epoch
                assert (None if leader is None else (leader.leader_id, leader.leader_epoch)) == part.current_leader
                assert (None if snap is None else (snap.end_offset, snap.epoch)) == part.snapshot_id
    if version >= 16:
        endpoints = decoded.node_endpoints or []
        assert [(e.node_id, e.host, e.port, e.rack) for e in endpoints] == \
            [(e.node_id, e.host, e.port, e.rack) for e in data.node_endpoints or []]


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(RESPONSES, VERSIONS, I32)
def test_encoded_fetch_responses_parse_in_kafka_python(data, version, correlation_id):
    header = RequestHeader(api_key=1, api_version=version, correlation_id=correlation_id)
    chunks = encode_response(header, data)
    frame = b"".join(bytes(c) for c in chunks)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4 == frame_size(chunks) - 4
    decoded = FetchResponse.decode(frame[4:], version=version, header=True)
    assert decoded.header.correlation_id == correlation_id
    check_with_kafka_python(decoded, data, version)


def aiokafka_expected(data: FetchResponseData, version: int):
    topics = []
    for topic in data.responses:
        partitions = []
        for part in topic.partitions:
            row = [part.partition_index, part.error_code, part.high_watermark, part.last_stable_offset]
            if version >= 5:
                row.append(part.log_start_offset)
            row.append(None if part.aborted_transactions is None else [tuple(a) for a in part.aborted_transactions])
            if version >= 11:
                row.append(part.preferred_read_replica)
            row.append(records_bytes(part.records))
            partitions.append(tuple(row))
        topics.append((topic.topic, partitions))
    head = [data.throttle_time_ms] + ([data.error_code, data.session_id] if version >= 7 else [])
    return (*head, topics)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(RESPONSES, st.integers(4, 11), I32)
def test_encoded_fetch_responses_parse_in_aiokafka(data, version, correlation_id):
    header = RequestHeader(api_key=1, api_version=version, correlation_id=correlation_id)
    frame = b"".join(bytes(c) for c in encode_response(header, data))
    stream = io.BytesIO(frame[4:])
    request_struct = getattr(ak_fetch, f"FetchRequest_v{version}")
    assert object.__new__(request_struct).parse_response_header(stream).correlation_id == correlation_id
    decoded = getattr(ak_fetch, f"FetchResponse_v{version}").decode(stream)
    assert stream.read() == b""
    got = tuple(decoded.__dict__[name] for name in decoded.SCHEMA.names)
    expected = aiokafka_expected(data, version)
    assert got[:-1] == expected[:-1]
    assert [(t[0], [tuple(p) for p in t[1]]) for t in got[-1]] == [(t[0], t[1]) for t in expected[-1]]


def test_records_are_passed_through_without_copying():
    mib = bytes(1 << 20)
    view = memoryview(bytearray(1 << 20))
    pieces = [b"batch-1" * 1000, memoryview(b"batch-2" * 1000)]
    data = FetchResponseData(responses=[FetchableTopicResponse(topic="t", partitions=[
        PartitionData(partition_index=0, records=mib),
        PartitionData(partition_index=1, records=view),
        PartitionData(partition_index=2, records=pieces),
        PartitionData(partition_index=3, records=None),
    ])])
    for version in (4, 11, 12, 13, 16):
        chunks = encode_fetch_response_body(data, version)
        assert any(chunk is mib for chunk in chunks)
        assert any(chunk is view for chunk in chunks)
        assert any(chunk is pieces[0] for chunk in chunks) and any(chunk is pieces[1] for chunk in chunks)
        # every other chunk is small: field bytes only
        others = [c for c in chunks if c is not mib and c is not view and c is not pieces[0] and c is not pieces[1]]
        assert all(isinstance(c, bytes) and len(c) < 200 for c in others)
        framed = encode_response(RequestHeader(1, version, 5), data)
        assert struct.unpack_from(">i", framed[0])[0] == frame_size(framed) - 4


def test_topic_ids_replace_names_from_v13():
    topic_id = uuid.uuid4()
    data = FetchResponseData(responses=[FetchableTopicResponse(topic="named", topic_id=topic_id, partitions=[])])
    v12 = b"".join(encode_fetch_response_body(data, 12))
    v13 = b"".join(encode_fetch_response_body(data, 13))
    assert b"named" in v12 and topic_id.bytes not in v12
    assert topic_id.bytes in v13 and b"named" not in v13


def test_versions_outside_the_encoder_range_are_refused():
    with pytest.raises(ValueError):
        encode_fetch_response_body(FetchResponseData(), 3)
    with pytest.raises(ValueError):
        encode_fetch_response_body(FetchResponseData(), MAX_VERSION + 1)


def test_response_header_is_flexible_from_v12():
    data = FetchResponseData()
    assert encode_response(RequestHeader(1, 11, 7), data)[0][4:8] == b"\x00\x00\x00\x07"
    v11 = encode_response(RequestHeader(1, 11, 7), data)[0]
    v12 = encode_response(RequestHeader(1, 12, 7), data)[0]
    assert v11[4:8] == v12[4:8] == b"\x00\x00\x00\x07" and v12[8] == 0

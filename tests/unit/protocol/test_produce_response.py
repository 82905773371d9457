"""The all-appended ProduceResponse encoder gives the generic encoder's bytes at every version."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.codec import decode_response, encode_response
from twisted_kafka.protocol.header import RequestHeader
from twisted_kafka.protocol.produce_response import encode_produce_success
from twisted_kafka.protocol.registry import ApiKey

R = m.ProduceResponse
Partition = R.TopicProduceResponse.PartitionProduceResponse

int32 = st.integers(-2 ** 31, 2 ** 31 - 1)
int64 = st.integers(-2 ** 63, 2 ** 63 - 1)
partition = st.tuples(st.integers(0, 2 ** 31 - 1), int64, int64, int64)
topics = st.lists(st.tuples(st.text(min_size=1, max_size=300), st.lists(partition, max_size=4)), max_size=4,
                  unique_by=lambda t: t[0])


def generic(correlation_id: int, version: int, topics) -> bytes:
    response = R(responses=[R.TopicProduceResponse(name=name, partition_responses=[
        Partition(index=index, error_code=0, base_offset=base, log_append_time_ms=append_time,
                  log_start_offset=start, record_errors=[], error_message=None)
        for index, base, append_time, start in partitions]) for name, partitions in topics], throttle_time_ms=0)
    return b"".join(encode_response(RequestHeader(ApiKey.PRODUCE, version, correlation_id), response, version))


@settings(max_examples=60, deadline=None)
@given(st.integers(3, 10), int32, topics)
def test_same_bytes_as_the_generic_encoder(version, correlation_id, topics):
    assert b"".join(encode_produce_success(correlation_id, version, topics)) == generic(correlation_id, version,
                                                                                          topics)


def test_a_client_decodes_it():
    for version in range(3, 11):
        frame = b"".join(encode_produce_success(7, version, [("t", [(0, 42, -1, 0), (3, 9, 1700, 2)])]))
        correlation_id, body = decode_response(ApiKey.PRODUCE, version, frame[4:])
        assert correlation_id == 7
        [topic] = body.responses
        assert topic.name == "t"
        assert [(p.index, p.error_code, p.base_offset) for p in topic.partition_responses] == [(0, 0, 42), (3, 0, 9)]

"""MetadataResponse assembled from cached topic fragments equals kafka-python's full encoding."""

from __future__ import annotations

import io
import random
import struct

from aiokafka.protocol import metadata as ak_metadata
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twisted_kafka.protocol import metadata_response as mr
from twisted_kafka.protocol.header import RequestHeader
from twisted_kafka.protocol.messages import MetadataResponse

from .schema_values import assert_object_matches, assert_positional_matches, build_object, random_values

I32 = st.integers(-2 ** 31, 2 ** 31 - 1)
BROKERS = st.lists(st.tuples(I32, st.text(max_size=15), I32, st.one_of(st.none(), st.text(max_size=5))), max_size=4)
OPS = st.one_of(st.none(), st.sets(st.integers(0, 30), max_size=5))
TOPIC_STRUCT = MetadataResponse._struct.fields["topics"].array_of


def random_topics(seed: int, version: int, count: int):
    rng = random.Random(seed)
    values = [random_values(rng, TOPIC_STRUCT, version) for _ in range(count)]
    return values, [build_object(mr.TopicMetadata, TOPIC_STRUCT, version, v) for v in values]


def _full_values(version, throttle, brokers, cluster_id, controller_id, topic_values, cluster_ops, error_code):
    values = {"throttle_time_ms": throttle, "brokers": [
        {"node_id": b[0], "host": b[1], "port": b[2], "rack": b[3]} for b in brokers],
        "cluster_id": cluster_id, "controller_id": controller_id, "topics": topic_values,
        "authorized_operations": cluster_ops, "error_code": error_code}
    fields = {f.name for f in MetadataResponse._struct.untagged_fields(version)}
    for broker in values["brokers"]:
        if version < 1:
            del broker["rack"]
    return {k: v for k, v in values.items() if k in fields}


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 13), st.integers(0, 2 ** 32), st.integers(0, 5), I32, BROKERS,
       st.one_of(st.none(), st.text(max_size=10)), I32, OPS, st.integers(-2 ** 15, 2 ** 15 - 1), I32)
def test_assembled_response_equals_kafka_python_encoding(version, seed, count, throttle, brokers, cluster_id,
                                                         controller_id, cluster_ops, error_code, correlation_id):
    if version < 1:
        brokers = [(b[0], b[1], b[2], None) for b in brokers]
    if version < 2:
        cluster_id = None
    topic_values, topics = random_topics(seed, version, count)
    fragments = [mr.encode_topic_fragment(version, topic) for topic in topics]
    body = b"".join(mr.assemble(None, version, throttle, brokers, cluster_id, controller_id, fragments,
                                cluster_ops, error_code))

    values = _full_values(version, throttle, brokers, cluster_id, controller_id, topic_values, cluster_ops,
                          error_code)
    full = build_object(MetadataResponse, MetadataResponse._struct, version, values)
    assert body == bytes(full.encode(version=version))

    # and the framed form parses in kafka-python (header included)
    header = RequestHeader(api_key=3, api_version=version, correlation_id=correlation_id)
    framed = mr.assemble(header, version, throttle, brokers, cluster_id, controller_id, fragments, cluster_ops,
                         error_code)
    frame = b"".join(framed)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    decoded = MetadataResponse.decode(frame[4:], version=version, header=True)
    assert decoded.header.correlation_id == correlation_id
    assert_object_matches(decoded, MetadataResponse._struct, version, values)
    if version <= 5:
        stream = io.BytesIO(frame[4:])
        request_struct = getattr(ak_metadata, f"MetadataRequest_v{version}")
        assert object.__new__(request_struct).parse_response_header(stream).correlation_id == correlation_id
        response_struct = getattr(ak_metadata, f"MetadataResponse_v{version}")
        parsed = response_struct.decode(stream)
        assert stream.read() == b""
        assert_positional_matches(parsed, response_struct.SCHEMA, MetadataResponse._struct, version, values)


def test_fragments_are_reused_as_is():
    _, topics = random_topics(1, 12, 100)
    fragments = [mr.encode_topic_fragment(12, topic) for topic in topics]
    chunks = mr.assemble(RequestHeader(3, 12, 1), 12, 0, [(1, "h", 9092, None)], "c", 1, fragments)
    assert len(chunks) == 102
    assert all(chunk is fragment for chunk, fragment in zip(chunks[1:-1], fragments, strict=True))
    assert all(isinstance(chunk, bytes) for chunk in chunks)


def test_topic_fragment_from_a_dict_and_brokers_as_objects():
    version = 10
    topic = {"error_code": 0, "name": "t", "topic_id": None, "is_internal": False, "partitions": [],
             "authorized_operations": None, "version": version}
    fragment = mr.encode_topic_fragment(version, topic)
    broker = MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=1, rack=None, version=version)
    body = b"".join(mr.assemble(None, version, 0, [broker], None, 1, [fragment]))
    decoded = MetadataResponse.decode(body, version=version)
    assert decoded.topics[0].name == "t" and decoded.brokers[0].host == "h"


def test_authorized_operations_bits():
    assert mr.authorized_operations_int(None) == -2 ** 31
    assert mr.authorized_operations_int({3, 4}) == 24
    assert mr.authorized_operations_int({31}) == -2 ** 31
    assert mr.authorized_operations_int(5) == 5

"""ElectLeaders (43), AlterPartitionReassignments (45) and ListPartitionReassignments (46): kafka-python's
message classes checked against frames written byte by byte from Kafka's protocol guide, and every
advertised version round-tripping through the codec, both directions."""

from __future__ import annotations

import random
import struct

import pytest

from twisted_kafka.protocol import primitives as p
from twisted_kafka.protocol.codec import decode_request, decode_response, encode_request, encode_response
from twisted_kafka.protocol.header import parse_request_header
from twisted_kafka.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
)
from twisted_kafka.protocol.registry import REGISTRY, ApiKey

from .schema_values import assert_object_matches, build_object, random_values

i8, i16, i32 = (struct.Struct(f">{c}").pack for c in "bhi")
s, cs = p.encode_string, p.encode_compact_string


def arr(items):
    return i32(len(items)) + b"".join(items)


def carr(items):
    return p.encode_unsigned_varint(len(items) + 1) + b"".join(items)


def frame(api_key, version, body):
    flexible = REGISTRY[api_key].is_flexible(version)
    return struct.pack(">hhi", api_key, version, 5) + s("x") + (b"\x00" if flexible else b"") + body


def test_advertised_ranges():
    assert (REGISTRY[ApiKey.ELECT_LEADERS].min_version, REGISTRY[ApiKey.ELECT_LEADERS].max_version) == (0, 2)
    assert REGISTRY[ApiKey.ALTER_PARTITION_REASSIGNMENTS].max_version == 1
    assert REGISTRY[ApiKey.LIST_PARTITION_REASSIGNMENTS].max_version == 0
    assert REGISTRY[ApiKey.ELECT_LEADERS].first_flexible == 2
    assert REGISTRY[ApiKey.ALTER_PARTITION_REASSIGNMENTS].first_flexible == 0


def test_elect_leaders_v1_and_v2_layouts():
    _, request = decode_request(frame(43, 1, i8(1) + arr([s("t") + arr([i32(0), i32(2)])]) + i32(5000)))
    assert (request.election_type, request.timeout_ms) == (1, 5000)
    assert [(t.topic, list(t.partitions)) for t in request.topic_partitions] == [("t", [0, 2])]
    # v2: compact, tagged; a null list (every partition) is a length of 0
    _, request = decode_request(frame(43, 2, i8(0) + b"\x00" + i32(60000) + b"\x00"))
    assert request.topic_partitions is None
    body = i32(0) + i16(0) + carr([cs("t") + carr([i32(2) + i16(84) + cs("no") + b"\x00"]) + b"\x00"]) + b"\x00"
    _, response = decode_response(43, 2, i32(5) + b"\x00" + body)
    [result] = response.replica_election_results
    assert [(r.partition_id, r.error_code, r.error_message) for r in result.partition_result] == [(2, 84, "no")]


def test_alter_partition_reassignments_v1_layout():
    partition = i32(3) + carr([i32(1), i32(2)]) + b"\x00"
    cancel = i32(4) + b"\x00" + b"\x00"                      # null replicas: cancel
    body = i32(1000) + b"\x00" + carr([cs("t") + carr([partition, cancel]) + b"\x00"]) + b"\x00"
    _, request = decode_request(frame(45, 1, body))
    assert (request.timeout_ms, request.allow_replication_factor_change) == (1000, False)
    assert [(q.partition_index, q.replicas) for q in request.topics[0].partitions] == [(3, [1, 2]), (4, None)]


def test_list_partition_reassignments_v0_layout():
    _, request = decode_request(frame(46, 0, i32(100) + b"\x00" + b"\x00"))
    assert request.topics is None
    _, request = decode_request(frame(46, 0, i32(100) + carr([cs("t") + carr([i32(1)]) + b"\x00"]) + b"\x00"))
    assert [(t.name, list(t.partition_indexes)) for t in request.topics] == [("t", [1])]


CASES = [(key, v) for key in (43, 45, 46) for v in range(REGISTRY[key].max_version + 1)]


@pytest.mark.parametrize("api_key, version", CASES, ids=lambda x: str(x))
def test_every_version_round_trips(api_key, version):
    spec = REGISTRY[api_key]
    for seed in range(4):
        rng = random.Random(f"lead-{api_key}-{version}-{seed}")
        values = random_values(rng, spec.request_class._struct, version)
        request = build_object(spec.request_class, spec.request_class._struct, version, values)
        encoded = b"".join(encode_request(request, version, correlation_id=seed, client_id="broker-2"))
        header, decoded = decode_request(encoded[4:])
        assert header.client_id == "broker-2"
        assert_object_matches(decoded, spec.request_class._struct, version, values)

        values = random_values(rng, spec.response_class._struct, version)
        response = build_object(spec.response_class, spec.response_class._struct, version, values)
        out = b"".join(encode_response(parse_request_header(encoded[4:]), response))
        correlation_id, decoded = decode_response(api_key, version, out[4:])
        assert correlation_id == seed
        assert_object_matches(decoded, spec.response_class._struct, version, values)


def test_the_classes_are_kafka_python_s():
    assert ElectLeadersRequest.API_KEY == 43 and ElectLeadersResponse.API_KEY == 43
    assert AlterPartitionReassignmentsRequest.API_KEY == 45 and ListPartitionReassignmentsRequest.API_KEY == 46

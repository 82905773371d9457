"""The controller APIs defined by this project's schema files (api keys 4-7).

No client library ships these, so the schemas are checked against frames
written byte by byte here from the layouts in Kafka's protocol guide, and every
version round-trips through the controller's client side of the codec
(``encode_request``/``decode_request``, ``encode_response``/``decode_response``).
"""

from __future__ import annotations

import random
import struct
import uuid

import pytest

from twisted_kafka.protocol import primitives as p
from twisted_kafka.protocol.codec import decode_request, decode_response, encode_request, encode_response
from twisted_kafka.protocol.header import parse_request_header
from twisted_kafka.protocol.messages import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
)
from twisted_kafka.protocol.registry import REGISTRY, ApiKey

from .schema_values import assert_object_matches, build_object, random_values

i8, i16, i32, i64 = (struct.Struct(f">{c}").pack for c in "bhiq")
s, cs = p.encode_string, p.encode_compact_string


def arr(items):
    return i32(len(items)) + b"".join(items)


def carr(items):
    return p.encode_unsigned_varint(len(items) + 1) + b"".join(items)


def ints(values):
    return arr([i32(v) for v in values])


def cints(values):
    return carr([i32(v) for v in values])


def request_frame(api_key, version, body, client_id=b"\x00\x04ctrl", tags=None):
    flexible = REGISTRY[api_key].is_flexible(version)
    head = struct.pack(">hhi", api_key, version, 99) + client_id
    return head + (b"\x00" if flexible and tags is None else (tags or b"")) + body


TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")


def test_leader_and_isr_v0_layout():
    partition = s("t") + i32(0) + i32(5) + i32(1) + i32(7) + ints([1, 2]) + i32(3) + ints([1, 2, 3])
    body = i32(1) + i32(5) + arr([partition]) + arr([i32(1) + s("h1") + i32(9092)])
    request = decode_request(request_frame(4, 0, body))[1]
    assert (request.controller_id, request.controller_epoch) == (1, 5)
    (state,) = request.ungrouped_partition_states
    assert (state.topic_name, state.partition_index, state.controller_epoch, state.leader, state.leader_epoch,
            state.isr, state.partition_epoch, state.replicas) == ("t", 0, 5, 1, 7, [1, 2], 3, [1, 2, 3])
    assert [(x.broker_id, x.host_name, x.port) for x in request.live_leaders] == [(1, "h1", 9092)]


def test_leader_and_isr_v7_layout():
    partition = (i32(2) + i32(5) + i32(1) + i32(8) + cints([1]) + i32(4) + cints([1, 2]) + cints([2]) + cints([])
                 + b"\x01" + i8(1) + b"\x00")
    topic = cs("orders") + TOPIC_ID.bytes + carr([partition]) + b"\x00"
    body = (i32(1) + b"\x01" + i32(5) + i64(77) + i8(2) + carr([topic])
            + carr([i32(1) + cs("h") + i32(9093) + b"\x00"]) + b"\x00")
    request = decode_request(request_frame(4, 7, body))[1]
    assert (request.controller_id, request.is_k_raft_controller, request.controller_epoch, request.broker_epoch,
            request.request_type) == (1, True, 5, 77, 2)
    (topic_state,) = request.topic_states
    assert (topic_state.topic_name, topic_state.topic_id) == ("orders", TOPIC_ID)
    (state,) = topic_state.partition_states
    assert (state.partition_index, state.leader_epoch, state.isr, state.partition_epoch, state.replicas,
            state.adding_replicas, state.removing_replicas, state.is_new, state.leader_recovery_state) == (
        2, 8, [1], 4, [1, 2], [2], [], True, 1)


def test_leader_and_isr_responses_v4_and_v5():
    v4 = i16(0) + carr([cs("t") + i32(0) + i16(6) + b"\x00"]) + b"\x00"
    _, response = decode_response(4, 4, i32(11) + b"\x00" + v4)
    assert [(e.topic_name, e.partition_index, e.error_code) for e in response.partition_errors] == [("t", 0, 6)]
    v5 = i16(0) + carr([TOPIC_ID.bytes + carr([i32(3) + i16(0) + b"\x00"]) + b"\x00"]) + b"\x00"
    _, response = decode_response(4, 5, i32(11) + b"\x00" + v5)
    (topic,) = response.topics
    assert topic.topic_id == TOPIC_ID
    assert [(e.partition_index, e.error_code) for e in topic.partition_errors] == [(3, 0)]


def test_update_metadata_v0_layout():
    partition = s("t") + i32(1) + i32(5) + i32(2) + i32(3) + ints([2]) + i32(9) + ints([2, 3])
    body = i32(1) + i32(5) + arr([partition]) + arr([i32(2) + s("b2") + i32(9092)])
    request = decode_request(request_frame(6, 0, body))[1]
    (state,) = request.ungrouped_partition_states
    assert (state.topic_name, state.partition_index, state.leader, state.zk_version, state.replicas) == (
        "t", 1, 2, 9, [2, 3])
    (broker,) = request.live_brokers
    assert (broker.id, broker.v0_host, broker.v0_port) == (2, "b2", 9092)


def test_update_metadata_v3_endpoints_and_rack():
    endpoint = i32(9092) + s("h") + s("PLAINTEXT") + i16(0)
    body = i32(1) + i32(5) + arr([]) + arr([i32(2) + arr([endpoint]) + p.encode_nullable_string(None)])
    request = decode_request(request_frame(6, 3, body))[1]
    (broker,) = request.live_brokers
    (ep,) = broker.endpoints
    assert (ep.port, ep.host, ep.listener, ep.security_protocol, broker.rack) == (9092, "h", "PLAINTEXT", 0, None)


def test_update_metadata_v8_with_tagged_type():
    partition = i32(0) + i32(5) + i32(1) + i32(1) + cints([1]) + i32(0) + cints([1]) + cints([]) + b"\x00"
    topic = cs("t") + TOPIC_ID.bytes + carr([partition]) + b"\x00"
    endpoint = i32(9093) + cs("h") + cs("CONTROLLER") + i16(1) + b"\x00"
    broker = i32(1) + carr([endpoint]) + p.encode_compact_nullable_string("r1") + b"\x00"
    tags = p.encode_tagged_fields({0: i8(2)})
    body = i32(1) + b"\x00" + i32(5) + i64(3) + carr([topic]) + carr([broker]) + tags
    request = decode_request(request_frame(6, 8, body))[1]
    assert (request.request_type, request.is_k_raft_controller, request.broker_epoch) == (2, False, 3)
    assert request.topic_states[0].topic_id == TOPIC_ID
    assert request.live_brokers[0].endpoints[0].listener == "CONTROLLER"
    assert request.live_brokers[0].rack == "r1"
    # and our encoder writes the tag the same way
    assert b"".join(encode_request(request, 8, 99, client_id="ctrl")) == i32(len(request_frame(6, 8, body))) + \
        request_frame(6, 8, body)


def test_stop_replica_v0_v1_v3_layouts():
    v0 = i32(1) + i32(5) + b"\x01" + arr([s("t") + i32(0), s("t") + i32(1)])
    request = decode_request(request_frame(5, 0, v0))[1]
    assert request.delete_partitions is True
    assert [(x.topic_name, x.partition_index) for x in request.ungrouped_partitions] == [("t", 0), ("t", 1)]

    v1 = i32(1) + i32(5) + i64(9) + b"\x00" + arr([s("t") + ints([0, 1])])
    request = decode_request(request_frame(5, 1, v1))[1]
    assert (request.broker_epoch, request.delete_partitions) == (9, False)
    assert [(x.name, x.partition_indexes) for x in request.topics] == [("t", [0, 1])]

    state = i32(4) + i32(-2) + b"\x01" + b"\x00"
    v3 = i32(1) + i32(5) + i64(9) + carr([cs("t") + carr([state]) + b"\x00"]) + b"\x00"
    request = decode_request(request_frame(5, 3, v3))[1]
    (topic,) = request.topic_states
    assert [(x.partition_index, x.leader_epoch, x.delete_partition) for x in topic.partition_states] == [(4, -2, True)]

    v4 = i32(1) + b"\x01" + i32(5) + i64(9) + carr([]) + b"\x00"
    assert decode_request(request_frame(5, 4, v4))[1].is_k_raft_controller is True


def test_stop_replica_response_v2():
    body = i16(0) + carr([cs("t") + i32(1) + i16(3) + b"\x00"]) + b"\x00"
    correlation_id, response = decode_response(5, 2, i32(5) + b"\x00" + body)
    assert correlation_id == 5
    assert [(e.topic_name, e.partition_index, e.error_code) for e in response.partition_errors] == [("t", 1, 3)]


def test_controlled_shutdown_v0_uses_header_v0():
    frame = struct.pack(">hhi", 7, 0, 12) + i32(1001)
    header, request = decode_request(frame)
    assert (header.header_version, header.client_id, request.broker_id) == (0, None, 1001)
    # and encode_request writes the same header for v0
    encoded = b"".join(encode_request(ControlledShutdownRequest(version=0, broker_id=1001), 0, 12))
    assert encoded == i32(len(frame)) + frame


def test_controlled_shutdown_v2_v3_layouts():
    header, request = decode_request(request_frame(7, 2, i32(3) + i64(44)))
    assert (request.broker_id, request.broker_epoch) == (3, 44)
    header, request = decode_request(request_frame(7, 3, i32(3) + i64(44) + b"\x00"))
    assert header.header_version == 2 and request.broker_epoch == 44
    body = i16(0) + carr([cs("t") + i32(2) + b"\x00"]) + b"\x00"
    _, response = decode_response(7, 3, i32(1) + b"\x00" + body)
    assert [(x.topic_name, x.partition_index) for x in response.remaining_partitions] == [("t", 2)]


CONTROLLER_CASES = [(key, v) for key in (4, 5, 6, 7) for v in range(REGISTRY[key].max_version + 1)]


@pytest.mark.parametrize("api_key, version", CONTROLLER_CASES, ids=lambda x: str(x))
def test_every_version_round_trips_through_the_controller_client_side(api_key, version):
    spec = REGISTRY[api_key]
    for seed in range(4):
        rng = random.Random(f"ctrl-{api_key}-{version}-{seed}")
        values = random_values(rng, spec.request_class._struct, version)
        request = build_object(spec.request_class, spec.request_class._struct, version, values)
        frame = b"".join(encode_request(request, version, correlation_id=seed, client_id="controller-1"))
        assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
        header, decoded = decode_request(frame[4:])
        assert header.client_id == (None if spec.request_header_version(version) == 0 else "controller-1")
        assert_object_matches(decoded, spec.request_class._struct, version, values)

        values = random_values(rng, spec.response_class._struct, version)
        response = build_object(spec.response_class, spec.response_class._struct, version, values)
        out = b"".join(encode_response(parse_request_header(frame[4:]), response))
        correlation_id, decoded = decode_response(api_key, version, out[4:])
        assert correlation_id == seed
        assert_object_matches(decoded, spec.response_class._struct, version, values)


def test_controller_classes_are_requests_and_responses():
    for request_class, response_class in ((LeaderAndIsrRequest, LeaderAndIsrResponse),
                                          (StopReplicaRequest, StopReplicaResponse),
                                          (UpdateMetadataRequest, UpdateMetadataResponse),
                                          (ControlledShutdownRequest, ControlledShutdownResponse)):
        assert request_class.is_request() and not response_class.is_request()
        assert request_class.API_KEY == response_class.API_KEY
        assert REGISTRY[request_class.API_KEY].name + "Request" == request_class.__name__
    assert ApiKey.LEADER_AND_ISR == LeaderAndIsrRequest.API_KEY


@pytest.mark.parametrize("cls, version, fields", [
    (UpdateMetadataRequest, 8, dict(controller_id=0, is_k_raft_controller=False, controller_epoch=1, broker_epoch=9,
                                    topic_states=[], live_brokers=[])),
    (LeaderAndIsrRequest, 7, dict(controller_id=0, is_k_raft_controller=False, controller_epoch=1, broker_epoch=9,
                                  request_type=0, topic_states=[], live_leaders=[])),
    (StopReplicaRequest, 4, dict(controller_id=0, is_k_raft_controller=False, controller_epoch=1, broker_epoch=9,
                                 topic_states=[])),
])
def test_target_broker_and_cluster_are_the_last_tagged_fields(cls, version, fields):
    """twisted_kafka's tags 1002 (BrokerId) and 1003 (ClusterId): absent by default, so
    a request without them is byte-for-byte Kafka's."""
    plain = b"".join(encode_request(cls(version=version, **fields), version, 99, "ctrl"))
    targeted = b"".join(encode_request(cls(version=version, broker_id=3, cluster_id="c", **fields), version, 99,
                                       "ctrl"))
    tags = (p.encode_unsigned_varint(2) + p.encode_unsigned_varint(1002) + p.encode_unsigned_varint(4) + i32(3)
            + p.encode_unsigned_varint(1003) + p.encode_unsigned_varint(2) + cs("c"))
    assert plain[4:].endswith(b"\x00") and targeted[4:] == plain[4:-1] + tags
    request = decode_request(targeted[4:])[1]
    assert (request.broker_id, request.cluster_id) == (3, "c")
    request = decode_request(plain[4:])[1]
    assert (request.broker_id, request.cluster_id) == (-1, None)

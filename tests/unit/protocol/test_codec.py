"""codec entry points: framing, header choice, ApiVersions and KIP-511, request side."""

from __future__ import annotations

import struct

import pytest
from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse

from twisted_kafka.protocol import codec
from twisted_kafka.protocol.exceptions import ProtocolDecodeError
from twisted_kafka.protocol.fetch_response import FetchResponseData
from twisted_kafka.protocol.header import RequestHeader
from twisted_kafka.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FetchRequest,
    HeartbeatResponse,
    MetadataRequest,
    ProduceResponse,
)
from twisted_kafka.protocol.registry import CONTROLLER_API_KEYS, REGISTRY

CLIENT_KEYS = [spec.api_key for spec in REGISTRY if spec.api_key not in CONTROLLER_API_KEYS]


def join(chunks) -> bytes:
    return b"".join(bytes(c) for c in chunks)


def test_encode_response_frame_layout():
    header = RequestHeader(api_key=12, api_version=4, correlation_id=0x01020304)
    frame = join(codec.encode_response(header, HeartbeatResponse(version=4, throttle_time_ms=7, error_code=27)))
    # size | correlation id | tags (v4 is flexible) | throttle | error | body tags
    assert frame == struct.pack(">ii", 12, 0x01020304) + b"\x00" + struct.pack(">ih", 7, 27) + b"\x00"
    frame = join(codec.encode_response(RequestHeader(12, 3, 5), HeartbeatResponse(version=3, throttle_time_ms=7,
                                                                                 error_code=27)))
    assert frame == struct.pack(">iiih", 10, 5, 7, 27)


def test_encode_response_returns_bytes_chunks_starting_with_the_size():
    chunks = codec.encode_response(RequestHeader(0, 9, 1), ProduceResponse(version=9, responses=[]))
    assert all(isinstance(chunk, bytes) for chunk in chunks)
    assert struct.unpack_from(">i", chunks[0])[0] == codec.frame_size(chunks) - 4


def test_encode_response_at_an_explicit_version():
    header = RequestHeader(api_key=12, api_version=4, correlation_id=1)
    frame = join(codec.encode_response(header, HeartbeatResponse(version=0, error_code=0), version=0))
    assert frame == struct.pack(">iih", 6, 1, 0)


def test_a_body_of_another_api_is_a_programming_error():
    with pytest.raises(TypeError):
        codec.encode_response(RequestHeader(12, 0, 1), ProduceResponse(version=0, responses=[]))


def test_encoding_errors_name_the_message():
    with pytest.raises(Exception) as info:
        codec.encode_response(RequestHeader(12, 0, 1), HeartbeatResponse(version=0, error_code="not a number"))
    assert any("HeartbeatResponse v0" in note for note in getattr(info.value, "__notes__", []))


def test_api_versions_response_lists_the_served_keys_with_header_v0():
    for version in range(5):
        header = RequestHeader(api_key=18, api_version=version, correlation_id=9)
        frame = join(codec.encode_response(header, codec.api_versions_response(CLIENT_KEYS, version)))
        # header v0 even for the flexible v3/v4 bodies: kafka-python reads it that way
        decoded = KpApiVersionsResponse.decode(frame[4:], version=version, header=True)
        assert decoded.header.correlation_id == 9 and decoded.error_code == 0
        assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == \
            REGISTRY.api_versions_entries(CLIENT_KEYS)
        if version >= 3:
            assert frame[8:10] == b"\x00\x00"  # the error code follows the correlation id directly


def test_kip_511_error_response_bytes():
    header = RequestHeader(api_key=18, api_version=7, correlation_id=3)
    frame = join(codec.encode_api_versions_error(header))
    # size, correlation id, error 35, one entry: ApiVersions 0-4 (v0 body: no throttle time)
    assert frame == struct.pack(">iihihhh", 16, 3, 35, 1, 18, 0, 4)
    body = codec.api_versions_error_response(header)
    assert (body.version, body.error_code) == (0, 35)
    # kafka-python (and librdkafka) read an error body as v0 whatever they asked for
    decoded = KpApiVersionsResponse.decode(frame[4:], version=4, header=True)
    assert decoded.error_code == 35 and decoded.api_keys[0].max_version == 4


def test_decode_response_reads_api_versions_errors_as_v0():
    frame = join(codec.encode_api_versions_error(RequestHeader(18, 9, 3)))
    correlation_id, message = codec.decode_response(18, 9, frame[4:])
    assert (correlation_id, message.version, message.error_code) == (3, 0, 35)


def test_encode_request_header_versions_and_round_trip():
    request = MetadataRequest(version=12, topics=None, allow_auto_topic_creation=True,
                              include_topic_authorized_operations=False)
    frame = join(codec.encode_request(request, 12, correlation_id=77, client_id="ctrl"))
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    header, decoded = codec.decode_request(frame[4:])
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id, header.header_version) == (
        3, 12, 77, "ctrl", 2)
    assert decoded.topics is None and decoded.allow_auto_topic_creation is True
    frame = join(codec.encode_request(ApiVersionsRequest(version=0), 0, correlation_id=1, client_id=None))
    header, _ = codec.decode_request(frame[4:])
    assert (header.client_id, header.header_version, header.header_size) == (None, 1, 10)


def test_encode_response_passes_self_encoding_bodies_through():
    class Chunks:
        def encode_chunks(self, version):
            return [b"abc", memoryview(b"defg")]

    chunks = codec.encode_response(RequestHeader(1, 12, 5), Chunks())
    assert chunks[1:] == [b"abc", memoryview(b"defg")]
    assert chunks[0] == struct.pack(">ii", 5 + 7, 5) + b"\x00"
    fetch = codec.encode_response(RequestHeader(1, 11, 5), FetchResponseData())
    assert struct.unpack_from(">i", fetch[0])[0] == codec.frame_size(fetch) - 4


def test_decoders_are_compiled_once_per_version():
    frame = join(codec.encode_request(ApiVersionsRequest(version=3, client_software_name="a",
                                                         client_software_version="1"), 3, 1))[4:]
    codec.decode_request(frame)
    first = codec._REQUEST_CODECS[(18, 3)]
    codec.decode_request(frame)
    assert codec._REQUEST_CODECS[(18, 3)] is first


def test_decode_response_rejects_unknown_keys_and_truncation():
    with pytest.raises(ProtocolDecodeError, match="unknown api key"):
        codec.decode_response(9999, 0, b"\x00\x00\x00\x01")
    frame = join(codec.encode_response(RequestHeader(12, 4, 1), HeartbeatResponse(version=4, error_code=0)))
    with pytest.raises(ProtocolDecodeError) as info:
        codec.decode_response(12, 4, frame[4:-2])
    assert (info.value.api_key, info.value.correlation_id) == (12, 1)


def test_api_versions_bodies_are_our_message_classes():
    assert codec.api_versions_response([18]).__class__ is ApiVersionsResponse


def test_known_tagged_fields_in_a_request_body_are_decoded():
    # FetchRequest v12+ carries ClusterId as tag 0 (kafka-python writes it when set).
    request = FetchRequest(version=12, cluster_id="cluster-a", replica_id=-1, max_wait_ms=500, min_bytes=1,
                           max_bytes=100, isolation_level=1, session_id=0, session_epoch=-1, topics=[],
                           forgotten_topics_data=[], rack_id="")
    frame = join(codec.encode_request(request, 12, correlation_id=5))
    assert frame.endswith(b"\x01\x00\x0a\x0acluster-a")  # 1 tag: tag 0, size 10, compact string
    _, decoded = codec.decode_request(frame[4:], strict=True)
    assert decoded.cluster_id == "cluster-a" and decoded.tags == {"cluster_id"}


def test_cached_api_versions_response_equals_the_encoded_one():
    for version in range(5):
        header = RequestHeader(api_key=18, api_version=version, correlation_id=1000 + version)
        expected = join(codec.encode_response(header, codec.api_versions_response(CLIENT_KEYS, version)))
        assert join(codec.encode_api_versions_response(header, CLIENT_KEYS)) == expected
        assert join(codec.encode_api_versions_response(header, reversed(CLIENT_KEYS))) == expected

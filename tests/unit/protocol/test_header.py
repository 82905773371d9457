"""Request header v0/v1/v2 parsing and response header v0/v1 encoding."""

from __future__ import annotations

import struct

import pytest
from aiokafka.protocol.admin import ApiVersionRequest_v0
from aiokafka.protocol.api import RequestHeader_v1, RequestHeader_v2
from aiokafka.protocol.metadata import MetadataRequest_v1
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.api_header import RequestHeader as KpRequestHeader

from twisted_kafka.protocol import primitives as p
from twisted_kafka.protocol.exceptions import ProtocolDecodeError
from twisted_kafka.protocol.header import (
    RequestHeader,
    encode_response_header,
    parse_request_header,
    response_header_for,
)


def raw_header(api_key, version, correlation_id, client_id=b"\x00\x03abc", tags=b""):
    return struct.pack(">hhi", api_key, version, correlation_id) + client_id + tags


def test_v1_header_from_aiokafka():
    request = MetadataRequest_v1([])
    frame = RequestHeader_v1(request, correlation_id=77, client_id="aiokafka-0.14").encode() + request.encode()
    header = parse_request_header(frame)
    assert header == RequestHeader(api_key=3, api_version=1, correlation_id=77, client_id="aiokafka-0.14",
                                   tagged_fields={}, header_size=10 + len("aiokafka-0.14"), header_version=1)
    assert frame[header.header_size:] == request.encode()


def test_v1_header_with_null_client_id():
    header = parse_request_header(raw_header(18, 0, 5, client_id=b"\xff\xff"))
    assert header.client_id is None
    assert header.header_size == 10


def test_v2_header_client_id_stays_a_non_compact_string():
    # Metadata v9 is flexible: header v2 = v1 + tagged fields; the client id is
    # still INT16-prefixed (KIP-482 keeps it readable by any broker).
    frame = raw_header(3, 9, 1, client_id=b"\x00\x02id", tags=b"\x00") + b"body"
    header = parse_request_header(frame)
    assert (header.client_id, header.tagged_fields, header.header_version, header.header_size) == ("id", {}, 2, 13)


def test_v2_header_with_tagged_fields_from_kafka_python():
    kp = KpRequestHeader(request_api_key=18, request_api_version=3, correlation_id=9, client_id="kp")
    encoded = kp.encode(flexible=True)
    header = parse_request_header(encoded)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 3, 9, "kp")
    assert header.header_size == len(encoded)

    tagged = raw_header(18, 3, 9, tags=p.encode_tagged_fields({0: b"x", 7: b"\x01\x02"}))
    header = parse_request_header(tagged)
    assert header.tagged_fields == {0: b"x", 7: b"\x01\x02"}
    assert header.header_size == len(tagged)


def test_v2_header_from_aiokafka():
    request = MetadataRequest_v1([])
    request.FLEXIBLE_VERSION = True  # only the header class is under test here
    encoded = RequestHeader_v2(request, correlation_id=3, client_id="x").encode()
    # aiokafka writes the v1 API version; pretend it is a flexible Metadata v9.
    encoded = struct.pack(">hh", 3, 9) + encoded[4:]
    header = parse_request_header(encoded)
    assert (header.client_id, header.header_version, header.header_size) == ("x", 2, len(encoded))


def test_v0_header_for_controlled_shutdown_v0():
    frame = struct.pack(">hhi", 7, 0, 42) + struct.pack(">i", 1001)
    header = parse_request_header(frame)
    assert (header.header_version, header.client_id, header.header_size) == (0, None, 8)
    v1 = parse_request_header(raw_header(7, 1, 42))
    assert (v1.header_version, v1.client_id) == (1, "abc")


def test_api_versions_v99_header_is_parsed_as_v2():
    """KIP-511: a client may send an ApiVersions version the broker does not know;
    v3+ is flexible, so the header carries tagged fields and must be read as v2."""
    frame = raw_header(18, 99, 1234, client_id=b"\x00\x04kcat", tags=b"\x00") + b"\x05whatever"
    header = parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (18, 99, 1234, "kcat")
    assert header.header_version == 2
    assert header.header_size == len(frame) - len(b"\x05whatever")


def test_api_versions_v0_to_v2_headers_are_v1_and_v3_is_v2():
    versions = [parse_request_header(raw_header(18, v, 0, tags=b"\x00")).header_version for v in range(5)]
    assert versions == [1, 1, 1, 2, 2]
    frame = ApiVersionRequest_v0().build_request_header(correlation_id=1, client_id="aiokafka").encode()
    assert parse_request_header(frame).client_id == "aiokafka"


def test_unknown_api_key_is_parsed_as_v1_for_logging():
    frame = raw_header(9999, 3, 17, client_id=b"\x00\x05mystr") + b"\x00\x00garbage"
    header = parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (9999, 3, 17, "mystr")
    assert header.header_version == 1


@pytest.mark.parametrize("frame", [b"", b"\x00\x03\x00\x01\x00\x00\x00"])
def test_too_short_for_a_header(frame):
    with pytest.raises(ProtocolDecodeError) as info:
        parse_request_header(frame)
    assert info.value.api_key is None


@pytest.mark.parametrize("frame, reason", [
    (raw_header(3, 1, 5, client_id=b"\x00\x09abc"), "truncated"),
    (raw_header(3, 1, 5, client_id=b"\x00"), "truncated"),
    (raw_header(3, 1, 5, client_id=b"\xff\xfe"), "negative"),
    (raw_header(3, 1, 5, client_id=b"\x00\x02\xc3\x28"), "UTF-8"),
    (raw_header(3, 9, 5, tags=b""), "truncated"),
    (raw_header(3, 9, 5, tags=b"\x01\x00\x09ab"), "truncated"),
    (raw_header(3, 9, 5, tags=b"\x80\x80\x80\x80\x80\x01"), "longer than 5 bytes"),
])
def test_malformed_headers_carry_what_was_read(frame, reason):
    with pytest.raises(ProtocolDecodeError, match=reason) as info:
        parse_request_header(frame)
    assert (info.value.api_key, info.value.correlation_id) == (3, 5)
    assert info.value.api_version in (1, 9)


@given(st.integers(-2 ** 15, 2 ** 15 - 1), st.integers(-2 ** 15, 2 ** 15 - 1), st.integers(-2 ** 31, 2 ** 31 - 1),
       st.one_of(st.none(), st.text(max_size=30)), st.binary(max_size=20))
def test_any_header_parses_or_raises_protocol_decode_error(api_key, version, correlation_id, client_id, tail):
    frame = struct.pack(">hhi", api_key, version, correlation_id) + p.encode_nullable_string(client_id) + tail
    try:
        header = parse_request_header(frame)
    except ProtocolDecodeError as exc:
        assert exc.api_key == api_key
        return
    assert (header.api_key, header.api_version, header.correlation_id) == (api_key, version, correlation_id)
    if header.header_version:
        assert header.client_id == client_id
    assert header.header_size <= len(frame)


def test_response_headers():
    assert encode_response_header(7, flexible=False) == b"\x00\x00\x00\x07"
    assert encode_response_header(-1, flexible=True) == b"\xff\xff\xff\xff\x00"
    # Produce v9+ is flexible; ApiVersions never gets the tagged-field header.
    assert response_header_for(RequestHeader(0, 9, 7)) == b"\x00\x00\x00\x07\x00"
    assert response_header_for(RequestHeader(0, 8, 7)) == b"\x00\x00\x00\x07"
    assert response_header_for(RequestHeader(18, 3, 7)) == b"\x00\x00\x00\x07"
    assert response_header_for(RequestHeader(18, 99, 7)) == b"\x00\x00\x00\x07"

"""Wire primitives: round trips (hypothesis), known encodings, and strict decoding."""

from __future__ import annotations

import struct
import uuid

import pytest
from aiokafka.protocol import types as ak
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kafka.record import util as record_util

from twisted_kafka.protocol import primitives as p
from twisted_kafka.protocol.exceptions import ProtocolDecodeError

INT32 = st.integers(-2 ** 31, 2 ** 31 - 1)
INT64 = st.integers(-2 ** 63, 2 ** 63 - 1)
UINT32 = st.integers(0, 2 ** 32 - 1)
TEXT = st.text(max_size=40)
TAGS = st.dictionaries(st.integers(0, 2 ** 20), st.binary(max_size=30), max_size=6)


# --- known encodings (Kafka's protocol guide / the JVM's ByteUtils) -----------------

@pytest.mark.parametrize("value, encoded", [
    (0, b"\x00"), (1, b"\x01"), (127, b"\x7f"), (128, b"\x80\x01"), (300, b"\xac\x02"),
    (16383, b"\xff\x7f"), (16384, b"\x80\x80\x01"), (2 ** 32 - 1, b"\xff\xff\xff\xff\x0f"),
])
def test_unsigned_varint_known_encodings(value, encoded):
    assert p.encode_unsigned_varint(value) == encoded
    assert p.decode_unsigned_varint(encoded, 0) == (value, len(encoded))


@pytest.mark.parametrize("value, encoded", [
    (0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-2, b"\x03"), (63, b"\x7e"), (-64, b"\x7f"),
    (64, b"\x80\x01"), (2 ** 31 - 1, b"\xfe\xff\xff\xff\x0f"), (-2 ** 31, b"\xff\xff\xff\xff\x0f"),
])
def test_zigzag_varint_known_encodings(value, encoded):
    assert p.encode_varint(value) == encoded
    assert p.decode_varint(encoded) == (value, len(encoded))


def test_varlong_extremes_take_ten_bytes():
    for value in (2 ** 63 - 1, -2 ** 63):
        encoded = p.encode_varlong(value)
        assert len(encoded) == 10
        assert p.decode_varlong(encoded) == (value, 10)


# --- round trips (hypothesis) -------------------------------------------------------

@given(UINT32)
def test_unsigned_varint_round_trip_and_size(value):
    encoded = p.encode_unsigned_varint(value)
    assert len(encoded) == p.unsigned_varint_size(value)
    assert p.decode_unsigned_varint(b"junk" + encoded + b"tail", 4) == (value, 4 + len(encoded))


def _reference_zigzag(value: int) -> bytes:
    # kafka-python's record-batch varint writer, an independent implementation.
    # (aiokafka's VarInt32/VarInt64 encoders mask before zigzagging and get
    # negative numbers wrong, so they are not used as a reference.)
    out = bytearray()
    record_util.encode_varint(value, out.append)
    return bytes(out)


@given(INT32)
def test_varint_round_trip_matches_reference(value):
    encoded = p.encode_varint(value)
    assert p.decode_varint(encoded) == (value, len(encoded))
    assert encoded == _reference_zigzag(value)


@given(INT64)
def test_varlong_round_trip_matches_reference(value):
    encoded = p.encode_varlong(value)
    assert p.decode_varlong(encoded) == (value, len(encoded))
    assert encoded == _reference_zigzag(value)
    assert record_util.decode_varint(encoded, 0) == (value, len(encoded))


@given(st.integers(-2 ** 7, 2 ** 7 - 1), st.integers(-2 ** 15, 2 ** 15 - 1), INT32, INT64, st.booleans())
def test_fixed_width_round_trip(i8, i16, i32, i64, flag):
    data = p.encode_int8(i8) + p.encode_int16(i16) + p.encode_int32(i32) + p.encode_int64(i64) + p.encode_bool(flag)
    assert data == struct.pack(">bhiq?", i8, i16, i32, i64, flag)
    pos = 0
    for decode, want in ((p.decode_int8, i8), (p.decode_int16, i16), (p.decode_int32, i32),
                         (p.decode_int64, i64), (p.decode_bool, flag)):
        value, pos = decode(data, pos)
        assert value == want
    assert pos == len(data)


@given(TEXT)
def test_strings_round_trip_and_match_aiokafka(text):
    for encode, decode, reference in (
        (p.encode_string, p.decode_string, ak.String("utf-8").encode),
        (p.encode_compact_string, p.decode_compact_string, ak.CompactString("utf-8").encode),
    ):
        encoded = encode(text)
        assert encoded == reference(text)
        assert decode(memoryview(encoded + b"!"), 0) == (text, len(encoded))


@given(st.one_of(st.none(), TEXT))
def test_nullable_strings_round_trip(text):
    for encode, decode in ((p.encode_nullable_string, p.decode_string),
                           (p.encode_compact_nullable_string, p.decode_compact_string)):
        encoded = encode(text)
        assert decode(encoded, 0, nullable=True) == (text, len(encoded))


@given(st.one_of(st.none(), st.binary(max_size=300)))
def test_nullable_bytes_round_trip(blob):
    for encode, decode, reference in (
            (p.encode_nullable_bytes, p.decode_bytes, ak.Bytes.encode),
            (p.encode_compact_nullable_bytes, p.decode_compact_bytes, ak.CompactBytes.encode)):
        encoded = encode(blob)
        assert encoded == reference(blob)
        value, end = decode(memoryview(encoded), 0, nullable=True)
        assert end == len(encoded)
        assert (None if value is None else bytes(value)) == blob


@given(st.one_of(st.none(), st.lists(INT32, max_size=50)))
def test_arrays_round_trip_and_match_aiokafka(items):
    encode_item = p.encode_int32
    for encode, decode, reference in ((p.encode_array, p.decode_array, ak.Array(ak.Int32)),
                                      (p.encode_compact_array, p.decode_compact_array, ak.CompactArray(ak.Int32))):
        encoded = encode(items, encode_item)
        assert encoded == reference.encode(items)
        assert decode(encoded, 0, p.decode_int32, nullable=True) == (items, len(encoded))


@given(st.lists(TEXT, max_size=10))
def test_compact_array_of_compact_strings(items):
    encoded = p.encode_compact_array(items, p.encode_compact_string)
    assert p.decode_compact_array(encoded, 0, p.decode_compact_string) == (items, len(encoded))


@given(TAGS)
def test_tagged_fields_round_trip(tags):
    encoded = p.encode_tagged_fields(tags)
    decoded, end = p.decode_tagged_fields(encoded + b"\xaa", 0)
    assert end == len(encoded)
    assert {tag: bytes(value) for tag, value in decoded.items()} == tags
    # Tags are written in ascending order, as KIP-482 requires.
    order, pos = [], 1 if tags else 0
    for _ in tags:
        tag, pos = p.decode_unsigned_varint(encoded, pos)
        size, pos = p.decode_unsigned_varint(encoded, pos)
        pos += size
        order.append(tag)
    assert order == sorted(tags)


def test_empty_tagged_fields_is_one_zero_byte():
    assert p.encode_tagged_fields({}) == b"\x00" == p.EMPTY_TAGGED_FIELDS
    assert p.decode_tagged_fields(b"\x00") == ({}, 1)


@given(st.uuids())
def test_uuid_round_trip(value):
    assert p.decode_uuid(p.encode_uuid(value)) == (value, 16)


def test_uuid_none_is_the_zero_uuid():
    assert p.encode_uuid(None) == bytes(16)
    assert p.decode_uuid(bytes(16)) == (uuid.UUID(int=0), 16)


# --- strict decoding ---------------------------------------------------------------

@pytest.mark.parametrize("decode, data", [
    (p.decode_int16, b"\x00"), (p.decode_int32, b"\x00\x00\x00"), (p.decode_int64, b"\x00" * 7),
    (p.decode_int8, b""), (p.decode_bool, b""), (p.decode_uuid, b"\x00" * 15),
    (p.decode_unsigned_varint, b"\x80\x80"), (p.decode_varint, b"\xff"), (p.decode_varlong, b"\x80" * 9),
    (p.decode_string, b"\x00\x05abc"), (p.decode_compact_string, b"\x06abc"),
    (p.decode_bytes, b"\x00\x00\x00\x04ab"), (p.decode_compact_bytes, b"\x05ab"),
    (p.decode_tagged_fields, b"\x01\x00\x05ab"), (p.decode_tagged_fields, b"\x02\x00\x00"),
])
def test_truncated_input_raises_protocol_decode_error(decode, data):
    with pytest.raises(ProtocolDecodeError, match="truncated"):
        decode(data, 0)


@pytest.mark.parametrize("decode, data, match", [
    (p.decode_unsigned_varint, b"\x80\x80\x80\x80\x80\x01", "longer than 5 bytes"),
    (p.decode_unsigned_varint, b"\xff\xff\xff\xff\x1f", "overflows 32 bits"),
    (p.decode_varint, b"\xff\xff\xff\xff\xff\x01", "longer than 5 bytes"),
    (p.decode_varlong, b"\x80" * 10 + b"\x01", "longer than 10 bytes"),
    (p.decode_string, b"\xff\xff", "not nullable"),
    (p.decode_string, b"\xff\xfe", "negative string length -2"),
    (p.decode_compact_string, b"\x00", "not nullable"),
    (p.decode_string, b"\x00\x02\xff\xfe", "not valid UTF-8"),
    (p.decode_compact_string, b"\x02\xc3", "not valid UTF-8"),
    (p.decode_bytes, b"\xff\xff\xff\xfe", "negative bytes length -2"),
    (p.decode_tagged_fields, b"\x02\x01\x00\x01\x00", "not above the previous tag"),
    (p.decode_tagged_fields, b"\x02\x05\x00\x03\x00", "not above the previous tag"),
])
def test_malformed_input_raises_protocol_decode_error(decode, data, match):
    with pytest.raises(ProtocolDecodeError, match=match):
        decode(data, 0)


def test_negative_array_counts_other_than_null_are_rejected():
    with pytest.raises(ProtocolDecodeError, match="negative array length -2"):
        p.decode_array(b"\xff\xff\xff\xfe", 0, p.decode_int32, nullable=True)
    with pytest.raises(ProtocolDecodeError, match="not nullable"):
        p.decode_array(b"\xff\xff\xff\xff", 0, p.decode_int32)


def test_array_count_beyond_the_buffer_is_refused_before_looping():
    with pytest.raises(ProtocolDecodeError, match="claims 2147483647 elements"):
        p.decode_array(b"\x7f\xff\xff\xff\x00", 0, p.decode_int8)


@settings(max_examples=300)
@given(st.binary(max_size=40), st.integers(0, 8))
@example(b"\x80" * 40, 0)
def test_decoders_only_ever_raise_protocol_decode_error(data, pos):
    for decode in (p.decode_unsigned_varint, p.decode_varint, p.decode_varlong, p.decode_string,
                   p.decode_compact_string, p.decode_bytes, p.decode_compact_bytes, p.decode_tagged_fields,
                   p.decode_uuid, p.decode_int64):
        try:
            _, end = decode(data, pos)
        except ProtocolDecodeError:
            continue
        assert pos < end <= len(data)


def test_encoders_refuse_null_for_non_nullable_types():
    for encode in (p.encode_string, p.encode_compact_string, p.encode_bytes, p.encode_compact_bytes):
        with pytest.raises(ValueError):
            encode(None)

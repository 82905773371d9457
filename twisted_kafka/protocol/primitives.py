"""Kafka wire primitives, hand-written for the encoders this project owns.

Most messages go through kafka-python's compiled codecs (see ``messages.py``);
the hand-written parts of the codec (request header, FetchResponse with
zero-copy records, MetadataResponse assembly) need the same primitives without
building kafka-python objects. They live here, with strict decoding: every
``decode_*`` takes ``(buf, pos)`` and returns ``(value, new_pos)``, and raises
:class:`ProtocolDecodeError` -- never ``struct.error`` or ``IndexError`` -- on
truncated or malformed input, because these functions read bytes that came
straight off a socket.

Encodings follow Kafka's protocol guide: big-endian fixed-width integers,
unsigned varints (at most 5 bytes for 32 bits), zigzag varints/varlongs, INT16-
or INT32-prefixed strings/bytes with -1 for null, their "compact" forms
(length + 1 as an unsigned varint, 0 for null) and KIP-482 tagged fields.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from .exceptions import ProtocolDecodeError

__all__ = [
    "INT8", "INT16", "INT32", "INT64", "UINT16", "UINT32", "FLOAT64",
    "EMPTY_TAGGED_FIELDS",
    "encode_int8", "encode_int16", "encode_int32", "encode_int64", "encode_bool",
    "decode_int8", "decode_int16", "decode_int32", "decode_int64", "decode_bool",
    "decode_uint32",
    "encode_unsigned_varint", "decode_unsigned_varint", "unsigned_varint_size",
    "encode_varint", "decode_varint", "encode_varlong", "decode_varlong",
    "encode_string", "encode_nullable_string", "decode_string",
    "encode_compact_string", "encode_compact_nullable_string", "decode_compact_string",
    "encode_bytes", "encode_nullable_bytes", "decode_bytes",
    "encode_compact_bytes", "encode_compact_nullable_bytes", "decode_compact_bytes",
    "encode_array", "decode_array", "encode_compact_array", "decode_compact_array",
    "encode_tagged_fields", "decode_tagged_fields",
    "encode_uuid", "decode_uuid", "ZERO_UUID",
]

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")

#: An empty tagged-field buffer: a single unsigned varint 0.
EMPTY_TAGGED_FIELDS = b"\x00"

ZERO_UUID = uuid.UUID(int=0)

_MAX_VARINT_BYTES = 5    # 32-bit values
_MAX_VARLONG_BYTES = 10  # 64-bit values


def _truncated(what: str, pos: int, need: int, have: int) -> ProtocolDecodeError:
    return ProtocolDecodeError(
        f"truncated {what} at offset {pos}: need {need} byte(s), {max(have, 0)} left")


# --- fixed-width integers ---------------------------------------------------

def encode_int8(value: int) -> bytes:
    return INT8.pack(value)


def encode_int16(value: int) -> bytes:
    return INT16.pack(value)


def encode_int32(value: int) -> bytes:
    return INT32.pack(value)


def encode_int64(value: int) -> bytes:
    return INT64.pack(value)


def encode_bool(value: bool) -> bytes:
    return b"\x01" if value else b"\x00"


def _fixed_decoder(codec: struct.Struct, what: str):
    size = codec.size
    unpack_from = codec.unpack_from

    def decode(buf, pos: int = 0):
        if pos < 0 or pos + size > len(buf):
            raise _truncated(what, pos, size, len(buf) - pos)
        return unpack_from(buf, pos)[0], pos + size

    decode.__name__ = f"decode_{what}"
    decode.__doc__ = f"Read a big-endian {what} at ``pos``; returns ``(value, pos + {size})``."
    return decode


decode_int8 = _fixed_decoder(INT8, "int8")
decode_int16 = _fixed_decoder(INT16, "int16")
decode_int32 = _fixed_decoder(INT32, "int32")
decode_int64 = _fixed_decoder(INT64, "int64")
decode_uint32 = _fixed_decoder(UINT32, "uint32")


def decode_bool(buf, pos: int = 0):
    """Kafka booleans are one byte; any non-zero value reads as true (as in Java)."""
    if pos < 0 or pos >= len(buf):
        raise _truncated("boolean", pos, 1, len(buf) - pos)
    return buf[pos] != 0, pos + 1


# --- varints -----------------------------------------------------------------

def unsigned_varint_size(value: int) -> int:
    """Bytes the unsigned varint encoding of ``value`` takes (1..5)."""
    if value < 0x80:
        return 1
    if value < 0x4000:
        return 2
    if value < 0x200000:
        return 3
    if value < 0x10000000:
        return 4
    return 5


_SMALL_UVARINTS = tuple(bytes((i,)) for i in range(0x80))


def encode_unsigned_varint(value: int) -> bytes:
    """Unsigned LEB128 of a 32-bit value (what Kafka calls UNSIGNED_VARINT)."""
    if 0 <= value < 0x80:
        return _SMALL_UVARINTS[value]
    if value < 0 or value > 0xFFFFFFFF:
        raise ValueError(f"unsigned varint out of range: {value}")
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _decode_uvarint(buf, pos: int, max_bytes: int, what: str):
    value = 0
    shift = 0
    end = len(buf)
    start = pos
    for _ in range(max_bytes):
        if pos >= end:
            raise _truncated(what, start, pos - start + 1, end - start)
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise ProtocolDecodeError(f"{what} at offset {start} is longer than {max_bytes} bytes")


def decode_unsigned_varint(buf, pos: int = 0):
    """Read an unsigned varint of at most 5 bytes; the value fits in 32 bits."""
    if 0 <= pos < len(buf):
        byte = buf[pos]
        if byte < 0x80:  # the overwhelmingly common one-byte case
            return byte, pos + 1
    value, pos = _decode_uvarint(buf, pos, _MAX_VARINT_BYTES, "unsigned varint")
    if value > 0xFFFFFFFF:
        raise ProtocolDecodeError(f"unsigned varint overflows 32 bits: {value}")
    return value, pos


def encode_varint(value: int) -> bytes:
    """Zigzag-encoded signed 32-bit varint (record headers, KIP-98 records)."""
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        raise ValueError(f"varint out of range: {value}")
    return encode_unsigned_varint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def decode_varint(buf, pos: int = 0):
    raw, pos = _decode_uvarint(buf, pos, _MAX_VARINT_BYTES, "varint")
    if raw > 0xFFFFFFFF:
        raise ProtocolDecodeError(f"varint overflows 32 bits: {raw}")
    return (raw >> 1) ^ -(raw & 1), pos


def encode_varlong(value: int) -> bytes:
    """Zigzag-encoded signed 64-bit varint."""
    if not -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        raise ValueError(f"varlong out of range: {value}")
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while raw > 0x7F:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def decode_varlong(buf, pos: int = 0):
    raw, pos = _decode_uvarint(buf, pos, _MAX_VARLONG_BYTES, "varlong")
    if raw > 0xFFFFFFFFFFFFFFFF:
        raise ProtocolDecodeError(f"varlong overflows 64 bits: {raw}")
    return (raw >> 1) ^ -(raw & 1), pos


# --- strings and bytes -------------------------------------------------------

def _utf8(value: str) -> bytes:
    return value.encode("utf-8")


def encode_string(value: str) -> bytes:
    """INT16 length + UTF-8 bytes (STRING)."""
    if value is None:
        raise ValueError("STRING is not nullable; use encode_nullable_string")
    raw = _utf8(value)
    if len(raw) > 0x7FFF:
        raise ValueError(f"string too long for INT16 length: {len(raw)} bytes")
    return INT16.pack(len(raw)) + raw


def encode_nullable_string(value: str | None) -> bytes:
    """NULLABLE_STRING: like STRING, with length -1 for null."""
    if value is None:
        return b"\xff\xff"
    return encode_string(value)


def encode_compact_string(value: str) -> bytes:
    """COMPACT_STRING: unsigned varint (length + 1) + UTF-8 bytes."""
    if value is None:
        raise ValueError("COMPACT_STRING is not nullable; use encode_compact_nullable_string")
    raw = _utf8(value)
    return encode_unsigned_varint(len(raw) + 1) + raw


def encode_compact_nullable_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    return encode_compact_string(value)


def _take(buf, pos: int, length: int, what: str):
    end = pos + length
    if end > len(buf):
        raise _truncated(what, pos, length, len(buf) - pos)
    return buf[pos:end], end


def _to_str(raw, what: str, pos: int) -> str:
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolDecodeError(f"{what} at offset {pos} is not valid UTF-8: {exc.reason}") from None


def _check_length(length: int, nullable: bool, what: str, pos: int) -> bool:
    """True when the length means null; raises for anything else below zero."""
    if length >= 0:
        return False
    if length == -1 and nullable:
        return True
    if length == -1:
        raise ProtocolDecodeError(f"null {what} at offset {pos} where the field is not nullable")
    raise ProtocolDecodeError(f"negative {what} length {length} at offset {pos}")


def decode_string(buf, pos: int = 0, nullable: bool = False):
    """Read a (NULLABLE_)STRING. Null (-1) is accepted only when ``nullable``."""
    length, body = decode_int16(buf, pos)
    if _check_length(length, nullable, "string", pos):
        return None, body
    raw, end = _take(buf, body, length, "string")
    return _to_str(raw, "string", pos), end


def decode_compact_string(buf, pos: int = 0, nullable: bool = False):
    """Read a COMPACT_(NULLABLE_)STRING."""
    length, body = decode_unsigned_varint(buf, pos)
    if _check_length(length - 1, nullable, "compact string", pos):
        return None, body
    raw, end = _take(buf, body, length - 1, "compact string")
    return _to_str(raw, "compact string", pos), end


def _byte_len(value) -> int:
    return value.nbytes if isinstance(value, memoryview) else len(value)


def encode_bytes(value) -> bytes:
    """BYTES: INT32 length + the bytes (copied; for zero-copy see fetch_response)."""
    if value is None:
        raise ValueError("BYTES is not nullable; use encode_nullable_bytes")
    return INT32.pack(_byte_len(value)) + bytes(value)


def encode_nullable_bytes(value) -> bytes:
    if value is None:
        return b"\xff\xff\xff\xff"
    return encode_bytes(value)


def encode_compact_bytes(value) -> bytes:
    if value is None:
        raise ValueError("COMPACT_BYTES is not nullable; use encode_compact_nullable_bytes")
    return encode_unsigned_varint(_byte_len(value) + 1) + bytes(value)


def encode_compact_nullable_bytes(value) -> bytes:
    if value is None:
        return b"\x00"
    return encode_compact_bytes(value)


def decode_bytes(buf, pos: int = 0, nullable: bool = False):
    """Read (NULLABLE_)BYTES. Returns a slice of ``buf`` (a memoryview slice, no
    copy, when ``buf`` is a memoryview)."""
    length, body = decode_int32(buf, pos)
    if _check_length(length, nullable, "bytes", pos):
        return None, body
    return _take(buf, body, length, "bytes")


def decode_compact_bytes(buf, pos: int = 0, nullable: bool = False):
    length, body = decode_unsigned_varint(buf, pos)
    if _check_length(length - 1, nullable, "compact bytes", pos):
        return None, body
    return _take(buf, body, length - 1, "compact bytes")


# --- arrays ------------------------------------------------------------------

def encode_array(items, encode_item: Callable[[Any], bytes]) -> bytes:
    """ARRAY: INT32 count (-1 for null) + each item's encoding."""
    if items is None:
        return b"\xff\xff\xff\xff"
    return b"".join([INT32.pack(len(items)), *map(encode_item, items)])


def encode_compact_array(items, encode_item: Callable[[Any], bytes]) -> bytes:
    """COMPACT_ARRAY: unsigned varint (count + 1, 0 for null) + items."""
    if items is None:
        return b"\x00"
    return b"".join([encode_unsigned_varint(len(items) + 1), *map(encode_item, items)])


def _decode_items(buf, pos: int, count: int, decode_item, what: str):
    # Every element takes at least one byte, so a count larger than what is left
    # is malformed; refusing it up front avoids looping over a bogus 2**31.
    if count > len(buf) - pos:
        raise ProtocolDecodeError(
            f"{what} claims {count} elements at offset {pos} but only {len(buf) - pos} bytes remain")
    items: list[Any] = []
    append = items.append
    for _ in range(count):
        item, pos = decode_item(buf, pos)
        append(item)
    return items, pos


def decode_array(buf, pos: int, decode_item, nullable: bool = False):
    """Read an ARRAY whose elements are read by ``decode_item(buf, pos) -> (item, pos)``."""
    count, body = decode_int32(buf, pos)
    if _check_length(count, nullable, "array", pos):
        return None, body
    return _decode_items(buf, body, count, decode_item, "array")


def decode_compact_array(buf, pos: int, decode_item, nullable: bool = False):
    count, body = decode_unsigned_varint(buf, pos)
    if _check_length(count - 1, nullable, "compact array", pos):
        return None, body
    return _decode_items(buf, body, count - 1, decode_item, "compact array")


# --- tagged fields (KIP-482) ----------------------------------------------------

def encode_tagged_fields(fields: Mapping[int, bytes] | None) -> bytes:
    """Encode ``{tag: raw value bytes}`` as a tagged-field buffer.

    Tags are written in ascending order, as KIP-482 requires; the values are the
    already-encoded field bytes (each is prefixed with its size here).
    """
    if not fields:
        return EMPTY_TAGGED_FIELDS
    parts = [encode_unsigned_varint(len(fields))]
    for tag in sorted(fields):
        if tag < 0:
            raise ValueError(f"negative tag: {tag}")
        value = fields[tag]
        parts.append(encode_unsigned_varint(tag))
        parts.append(encode_unsigned_varint(_byte_len(value)))
        parts.append(bytes(value))
    return b"".join(parts)


def decode_tagged_fields(buf, pos: int = 0):
    """Read a tagged-field buffer into ``{tag: raw bytes}``.

    Tags must be strictly ascending (duplicates are malformed, as in Kafka).
    Values are slices of ``buf``; interpreting known tags is the caller's job.
    """
    count, pos = decode_unsigned_varint(buf, pos)
    if not count:
        return {}, pos
    if count > len(buf) - pos:
        raise ProtocolDecodeError(f"tagged fields claim {count} entries; only {len(buf) - pos} bytes remain")
    fields = {}
    previous = -1
    for _ in range(count):
        tag_pos = pos
        tag, pos = decode_unsigned_varint(buf, pos)
        if tag <= previous:
            raise ProtocolDecodeError(f"tag {tag} at offset {tag_pos} is not above the previous tag {previous}")
        previous = tag
        size, pos = decode_unsigned_varint(buf, pos)
        fields[tag], pos = _take(buf, pos, size, f"tagged field {tag}")
    return fields, pos


# --- UUID --------------------------------------------------------------------

def encode_uuid(value) -> bytes:
    """16 raw bytes; ``None`` encodes as the all-zero UUID (Kafka's "no id")."""
    if value is None:
        return ZERO_UUID.bytes
    if isinstance(value, uuid.UUID):
        return value.bytes
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if len(raw) != 16:
            raise ValueError(f"a UUID is 16 bytes, got {len(raw)}")
        return raw
    return uuid.UUID(str(value)).bytes


def decode_uuid(buf, pos: int = 0):
    """Read 16 bytes as a :class:`uuid.UUID` (the zero UUID is returned as is)."""
    raw, end = _take(buf, pos, 16, "uuid")
    return uuid.UUID(bytes=bytes(raw)), end

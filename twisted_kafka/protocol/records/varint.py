"""Zig-zag varints, as Kafka's records use them for every length and delta.

A varint (int32) takes at most 5 bytes and a varlong (int64) at most 10;
longer encodings are rejected like Kafka's ``ByteUtils`` does, so a run of
0x80 bytes cannot make the decoder loop over a whole buffer.  Decoding reads
any indexable buffer (bytes, bytearray, memoryview); running off its end
raises ``IndexError``, which callers turn into ``InvalidRecordBatch`` once per
record instead of testing bounds per byte.
"""

from __future__ import annotations

from ..errors import ErrorCode
from .errors import InvalidRecordBatch


def read_varint(buf, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Decode the zig-zag varint at ``pos``; returns ``(value, next_pos)``."""
    b = buf[pos]
    if b < 0x80:                                  # one byte: the common case
        return (b >> 1) ^ -(b & 1), pos + 1
    raw = b & 0x7F
    shift = 7
    limit = pos + max_bytes
    pos += 1
    while True:
        if pos >= limit:
            raise InvalidRecordBatch(f"varint longer than {max_bytes} bytes", ErrorCode.INVALID_RECORD)
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


def read_varlong(buf, pos: int) -> tuple[int, int]:
    """Decode the zig-zag varlong (up to 10 bytes) at ``pos``."""
    return read_varint(buf, pos, 10)


def encode_varint(value: int) -> bytes:
    """Zig-zag encode a signed int32/int64 value."""
    raw = (value << 1) ^ (value >> 63)
    raw &= 0xFFFFFFFFFFFFFFFF
    if raw < 0x80:
        return bytes((raw,))
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)

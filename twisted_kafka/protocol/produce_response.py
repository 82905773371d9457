"""ProduceResponse for the common case -- every partition appended -- encoded straight to bytes.

A sequential producer (acks=1, linger 0) sends one Produce per record batch,
and building the generic response (a message object per topic and per
partition, an empty ``record_errors`` list each), walking it for its error
codes and encoding it through the generated encoder cost more than the rest
of the handler.  When every partition succeeded the layout is fixed: per
partition its index, error code 0, base offset, log append time, log start
offset (v5+), an empty ``record_errors`` and a null ``error_message`` (v8+),
empty tagged fields (v9+, flexible; v10's ``current_leader`` is tagged and
only sent with NOT_LEADER_OR_FOLLOWER, v10's top-level ``node_endpoints``
likewise).  Anything else (an error anywhere) takes the generic encoder.
Layout: Kafka's ProduceResponse.json, versions 3-10; tests compare every
version byte for byte with the generic encoder.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from .primitives import encode_unsigned_varint

__all__ = ["encode_produce_success", "FIRST_FLEXIBLE_VERSION"]

FIRST_FLEXIBLE_VERSION = 9

_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_PARTITION = struct.Struct(">ihqq")        # index, error code (0), base offset, log append time
_INT64 = struct.Struct(">q")
# v8: empty record_errors (int32 0), null error_message (int16 -1);
# v9+: compact empty array (1), compact null string (0), no tagged fields (0).
_V8_TAIL = b"\x00\x00\x00\x00\xff\xff"
_FLEXIBLE_TAIL = b"\x01\x00\x00"


def encode_produce_success(correlation_id: int, version: int,
                           topics: Sequence[tuple[str, Sequence[tuple[int, int, int, int]]]]) -> list[bytes]:
    """The framed response (size, header, body) to a Produce request at ``version`` (3-10) whose every
    partition was appended: ``topics`` is ``[(name, [(index, base_offset, log_append_time_ms,
    log_start_offset), ...]), ...]`` in request order."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    parts = [_INT32.pack(correlation_id)]
    if flexible:
        parts.append(b"\x00")                              # response header v1: no tagged fields
        parts.append(encode_unsigned_varint(len(topics) + 1))
        tail = _FLEXIBLE_TAIL
    else:
        parts.append(_INT32.pack(len(topics)))
        tail = _V8_TAIL if version >= 8 else b""
    with_start = version >= 5
    pack_partition, pack_int64 = _PARTITION.pack, _INT64.pack
    for name, partitions in topics:
        encoded = name.encode()
        if flexible:
            parts.append(encode_unsigned_varint(len(encoded) + 1))
            parts.append(encoded)
            parts.append(encode_unsigned_varint(len(partitions) + 1))
        else:
            parts.append(_INT16.pack(len(encoded)))
            parts.append(encoded)
            parts.append(_INT32.pack(len(partitions)))
        for index, base_offset, log_append_time_ms, log_start_offset in partitions:
            parts.append(pack_partition(index, 0, base_offset, log_append_time_ms))
            if with_start:
                parts.append(pack_int64(log_start_offset))
            if tail:
                parts.append(tail)
        if flexible:
            parts.append(b"\x00")                          # the topic's tagged fields
    parts.append(b"\x00\x00\x00\x00")                      # throttle_time_ms
    if flexible:
        parts.append(b"\x00")                              # the response's tagged fields
    size = 0
    for part in parts:
        size += len(part)
    parts.insert(0, _INT32.pack(size))
    return [b"".join(parts)]

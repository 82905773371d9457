"""Helpers for record tests: patch header fields of a built batch, with or without a valid CRC."""

from __future__ import annotations

import struct

from crc32c import crc32c

# (offset, struct format) of each v2 header field, from Kafka's documented layout.
FIELDS = {
    "base_offset": (0, ">q"), "batch_length": (8, ">i"), "partition_leader_epoch": (12, ">i"),
    "magic": (16, ">b"), "crc": (17, ">I"), "attributes": (21, ">h"), "last_offset_delta": (23, ">i"),
    "base_timestamp": (27, ">q"), "max_timestamp": (35, ">q"), "producer_id": (43, ">q"),
    "producer_epoch": (51, ">h"), "base_sequence": (53, ">i"), "records_count": (57, ">i"),
}


def fix_crc(batch: bytearray, pos: int = 0) -> bytearray:
    (length,) = struct.unpack_from(">i", batch, pos + 8)
    struct.pack_into(">I", batch, pos + 17, crc32c(bytes(batch[pos + 21:pos + 12 + length])))
    return batch


def patched(batch: bytes, recrc: bool = True, **fields) -> bytes:
    """A copy of ``batch`` with header fields replaced (CRC recomputed unless ``recrc=False``)."""
    out = bytearray(batch)
    for name, value in fields.items():
        offset, fmt = FIELDS[name]
        struct.pack_into(fmt, out, offset, value)
    if recrc:
        fix_crc(out)
    return bytes(out)

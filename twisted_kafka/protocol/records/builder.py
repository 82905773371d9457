"""Build v2 record batches: for tests, and for the broker's own internal topics.

Clients build the batches a broker stores; the broker builds batches only
for what it writes itself (group offsets, transaction markers) and tests
build them to feed the codec.  The layout is the one ``batch.py`` documents;
baseTimestamp is the first record's timestamp and maxTimestamp the largest,
as the Java client writes them.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Sequence

from crc32c import crc32c

from .batch import BATCH_HEADER_SIZE, CONTROL_MASK, LOG_OVERHEAD, MAGIC, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_MASK
from .compression import CompressionType, compress
from .varint import encode_varint

__all__ = ["build_batch", "encode_record", "control_record", "ControlRecordType"]

_ATTRS_ON = struct.Struct(">hiqqqhii")       # the CRC-covered part of the header


class ControlRecordType:
    """Control record types (the key of a control record): transaction markers."""

    ABORT = 0
    COMMIT = 1


def control_record(record_type: int, coordinator_epoch: int = 0) -> tuple[bytes, bytes]:
    """Key and value of a transaction marker (key: version 0 + type; value: version 0 + epoch)."""
    return struct.pack(">hh", 0, record_type), struct.pack(">hi", 0, coordinator_epoch)


def _bytes_field(value) -> bytes:
    if value is None:
        return encode_varint(-1)
    return encode_varint(len(value)) + bytes(value)


def encode_record(offset_delta: int, timestamp_delta: int, key, value,
                  headers: Sequence[tuple[str, bytes | None]] = ()) -> bytes:
    """One record, length prefix included."""
    parts = [b"\x00", encode_varint(timestamp_delta), encode_varint(offset_delta),
             _bytes_field(key), _bytes_field(value), encode_varint(len(headers))]
    for hkey, hvalue in headers:
        parts.append(_bytes_field(hkey.encode("utf-8", "surrogateescape")))
        parts.append(_bytes_field(hvalue))
    body = b"".join(parts)
    return encode_varint(len(body)) + body


def build_batch(records: Iterable[tuple], *, base_offset: int = 0,
                compression: int = CompressionType.NONE, producer_id: int = -1,
                producer_epoch: int = -1, base_sequence: int = -1, transactional: bool = False,
                control: bool = False, partition_leader_epoch: int = -1,
                timestamp_type: int = 0) -> bytes:
    """Encode a v2 batch from ``(key, value[, headers[, timestamp_ms]])`` tuples.

    A missing timestamp is "now".  At least one record is required: empty
    batches only arise from log compaction, which copies existing headers.
    """
    now = None
    encoded = []
    timestamps = []
    for index, rec in enumerate(records):
        key, value = rec[0], rec[1]
        headers = rec[2] if len(rec) > 2 and rec[2] is not None else ()
        if len(rec) > 3 and rec[3] is not None:
            ts = rec[3]
        else:
            if now is None:
                now = int(time.time() * 1000)
            ts = now
        timestamps.append(ts)
        encoded.append(encode_record(index, ts - timestamps[0], key, value, headers))
    if not encoded:
        raise ValueError("a record batch needs at least one record")
    payload = compress(compression, b"".join(encoded))
    attributes = int(CompressionType(compression))
    if timestamp_type:
        attributes |= TIMESTAMP_TYPE_MASK
    if transactional:
        attributes |= TRANSACTIONAL_MASK
    if control:
        attributes |= CONTROL_MASK
    count = len(encoded)
    covered = _ATTRS_ON.pack(attributes, count - 1, timestamps[0], max(timestamps),
                             producer_id, producer_epoch, base_sequence, count) + payload
    crc = crc32c(covered)
    batch_length = BATCH_HEADER_SIZE - LOG_OVERHEAD + len(payload)
    return struct.pack(">qiibI", base_offset, batch_length, partition_leader_epoch, MAGIC, crc) + covered

"""What the log needs from the record-batch codec, in one place.

The log stores batches as received and only ever looks at their 61-byte
headers — except to validate a client's batches (``validate_records``, which
decompresses compressed ones) and to answer ListOffsets by timestamp, where
Kafka's answer is the first *record* at or after the timestamp.  The codec
(``twisted_kafka.protocol.records``) owns parsing, CRC, produce validation
and decompression; this module re-exports the few names the log uses and adds
``whole_batches``, a fast walk over batch boundaries in a buffer read from a
segment (it reads two header fields per batch and nothing else, because a
fetch may cut through thousands of small batches).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from twisted_kafka.protocol.records.batch import (  # noqa: F401  (re-exported)
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    InvalidRecordBatch,
    RecordBatchHeader,
    iter_batch_headers,
    parse_batch_header,
    rewrite_offsets_and_epoch,
    set_log_append_time,
    validate_batch,
    verify_crc,
)
from twisted_kafka.protocol.records.record import iter_records
from twisted_kafka.protocol.records.validation import validate_records  # noqa: F401

NO_TIMESTAMP = -1
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_POS = 23
_MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD


class BatchSpan(NamedTuple):
    """Where one whole batch sits in a buffer, and its offset range."""

    position: int
    size: int
    base_offset: int
    last_offset: int


def whole_batches(buf, limit_offset: int | None = None, max_size: int | None = None) -> Iterator[BatchSpan]:
    """Whole batches from the start of ``buf``, stopping before a partial one,
    one whose last offset reaches ``limit_offset``, or one ending past ``max_size``.
    """
    end = len(buf) if max_size is None else min(len(buf), max_size)
    pos = 0
    while pos + BATCH_HEADER_SIZE <= end:
        base, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
        size = length + LOG_OVERHEAD
        if length < _MIN_BATCH_LENGTH or pos + size > end:
            return
        last = base + _LAST_OFFSET_DELTA.unpack_from(buf, pos + _LAST_OFFSET_DELTA_POS)[0]
        if limit_offset is not None and last >= limit_offset:
            return
        yield BatchSpan(pos, size, base, last)
        pos += size


def record_offsets_and_timestamps(buf, pos: int, header: RecordBatchHeader) -> Iterator[tuple[int, int]]:
    """(offset, timestamp) of every record in the batch at ``buf[pos:]`` (decompressing it).

    For LogAppendTime batches every record carries the batch's max timestamp
    (the broker's append time), as Kafka defines it.
    """
    for record in iter_records(buf, pos, header):
        yield record.offset, record.timestamp

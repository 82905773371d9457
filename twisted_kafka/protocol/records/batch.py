"""RecordBatch v2 headers: parse, walk, check and patch them without touching records.

Layout of a v2 batch (Kafka's "Record Batch" documentation); the 61 header
bytes are read with one ``struct`` call::

    offset  size  field                   CRC-covered
         0     8  baseOffset              no  (rewritten by the broker)
         8     4  batchLength             no  (bytes after this field)
        12     4  partitionLeaderEpoch    no  (rewritten by the broker)
        16     1  magic (2)               no
        17     4  crc (CRC-32C)           -
        21     2  attributes              yes (from here to the end of the batch)
        23     4  lastOffsetDelta
        27     8  baseTimestamp
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordsCount
        61     .  records (compressed as a whole when attributes say so)

Attributes: bits 0-2 codec, bit 3 timestamp type (1 = LogAppendTime), bit 4
transactional, bit 5 control, bit 6 delete-horizon set (KIP-534).

Magic, and the error each bad value maps to (Apache Kafka 3.x/4.x):

* magic < 0 or > 2: Kafka's batch iterator (``ByteBufferLogInputStream``)
  throws ``CorruptRecordException`` -> **CORRUPT_MESSAGE**.
* magic 0 or 1 (the old MessageSet format): a valid *legacy* message, which
  this broker does not read or store.  Without request context
  ``parse_batch_header`` reports **UNSUPPORTED_FOR_MESSAGE_FORMAT** (the
  precise diagnosis for logs and recovery).  Inside a Produce request of
  version >= 3, Kafka's ``ProduceRequest.validateRecords`` answers
  **INVALID_RECORD** ("only allowed to contain record batches with magic
  version 2"); ``validation.validate_records`` does the same.  Produce v0-v2
  (the only requests that legitimately carry magic 0/1) are, since Kafka 4.0
  (KIP-896, KAFKA-18659), advertised in ApiVersions for librdkafka's sake but
  refused as UNSUPPORTED_VERSION: a request-level decision for the handler.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from crc32c import crc32c

from ..errors import ErrorCode
from .compression import CompressionType
from .errors import InvalidRecordBatch

__all__ = [
    "BATCH_HEADER_SIZE", "LOG_OVERHEAD", "MAGIC", "InvalidRecordBatch", "RecordBatchHeader",
    "parse_batch_header", "iter_batch_headers", "verify_crc", "validate_batch",
    "rewrite_offsets_and_epoch", "set_log_append_time", "compute_crc",
]

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12
MAGIC = 2
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD     # batchLength of a batch with no records
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21                                  # the CRC covers [21, end)
MAX_TIMESTAMP_OFFSET = 35
_HEADER_UP_TO_MAGIC = MAGIC_OFFSET + 1
MIN_RECORD_SIZE = 7     # length, attributes, tsDelta, offsetDelta, keyLen, valueLen, headerCount: 1 byte each

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

_CODECS = tuple(CompressionType)
_N_CODECS = len(_CODECS)
_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == BATCH_HEADER_SIZE
_I64 = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")


class RecordBatchHeader(NamedTuple):
    """The 61 header bytes of a v2 batch, parsed (field order is the wire order)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies in a records blob or a segment."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> CompressionType:
        """The codec; raises InvalidRecordBatch(UNSUPPORTED_COMPRESSION_TYPE) for ids 5-7."""
        codec = self.attributes & COMPRESSION_MASK
        if codec < _N_CODECS:
            return _CODECS[codec]
        raise InvalidRecordBatch(f"unknown compression type {codec}", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


def _check_magic(magic: int, pos: int) -> None:
    if magic == MAGIC:
        return
    if magic in (0, 1):
        raise InvalidRecordBatch(
            f"record batch magic {magic} (legacy message format) is not supported; magic 2 is required",
            ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, position=pos)
    raise InvalidRecordBatch(f"invalid magic {magic} found in record batch", ErrorCode.CORRUPT_MESSAGE,
                             position=pos)


def parse_batch_header(buf, pos: int = 0) -> RecordBatchHeader:
    """Parse the batch header at ``pos`` (the records after it need not be present).

    Raises InvalidRecordBatch: CORRUPT_MESSAGE when fewer than 61 bytes are
    there or batchLength is too small for a header, and the magic mapping
    described in the module docstring.
    """
    available = len(buf) - pos
    if pos < 0 or available < _HEADER_UP_TO_MAGIC:
        raise InvalidRecordBatch(f"truncated record batch header ({max(available, 0)} bytes)",
                                 ErrorCode.CORRUPT_MESSAGE, position=pos)
    magic = buf[pos + MAGIC_OFFSET]
    if magic > 127:
        magic -= 256
    _check_magic(magic, pos)
    if available < BATCH_HEADER_SIZE:
        raise InvalidRecordBatch(f"truncated record batch header ({available} bytes)",
                                 ErrorCode.CORRUPT_MESSAGE, position=pos)
    header = RecordBatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.batch_length < MIN_BATCH_LENGTH:
        raise InvalidRecordBatch(f"record batch length {header.batch_length} is smaller than a batch header",
                                 ErrorCode.CORRUPT_MESSAGE, position=pos)
    return header


def iter_batch_headers(buf, pos: int = 0, end: int | None = None, *,
                       allow_partial_tail: bool = False) -> Iterator[tuple[int, RecordBatchHeader]]:
    """Walk a records blob (a Produce partition's records, a segment chunk) batch by batch.

    Yields ``(position, header)`` for every complete batch in ``buf[pos:end]``;
    it checks the framing (magic, batchLength) but not CRCs.  A batch that
    runs past ``end`` raises CORRUPT_MESSAGE, or, with
    ``allow_partial_tail=True``, ends the walk: log recovery truncates a torn
    tail there, and a fetch read that stops mid-batch is normal.  Like Kafka,
    bytes too short to show a length and magic count as a partial tail.
    """
    if end is None:
        end = len(buf)
    elif end > len(buf):
        raise ValueError(f"end {end} is beyond the buffer ({len(buf)} bytes)")
    while pos < end:
        remaining = end - pos
        if remaining < _HEADER_UP_TO_MAGIC:
            if allow_partial_tail:
                return
            raise InvalidRecordBatch(f"{remaining} trailing bytes are not a record batch",
                                     ErrorCode.CORRUPT_MESSAGE, position=pos)
        (length,) = _I32.unpack_from(buf, pos + 8)
        if remaining < BATCH_HEADER_SIZE or remaining < LOG_OVERHEAD + length:
            # Tell a real partial batch from garbage first: bad magic or a
            # length no header fits in is corruption even at the tail.
            magic = buf[pos + MAGIC_OFFSET]
            _check_magic(magic - 256 if magic > 127 else magic, pos)
            if length < MIN_BATCH_LENGTH:
                raise InvalidRecordBatch(f"record batch length {length} is smaller than a batch header",
                                         ErrorCode.CORRUPT_MESSAGE, position=pos)
            if allow_partial_tail:
                return
            raise InvalidRecordBatch(
                f"record batch of {LOG_OVERHEAD + length} bytes is truncated to {remaining}",
                ErrorCode.CORRUPT_MESSAGE, position=pos)
        header = parse_batch_header(buf, pos)
        yield pos, header
        pos += LOG_OVERHEAD + length


def compute_crc(buf, pos: int, header: RecordBatchHeader) -> int:
    """CRC-32C of the batch's CRC-covered bytes (attributes to the end)."""
    return crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:pos + header.size])


def verify_crc(buf, pos: int, header: RecordBatchHeader) -> None:
    """Raise CORRUPT_MESSAGE unless the stored CRC matches the batch bytes."""
    if pos + header.size > len(buf):
        raise InvalidRecordBatch(f"record batch of {header.size} bytes is truncated to {len(buf) - pos}",
                                 ErrorCode.CORRUPT_MESSAGE, position=pos)
    actual = compute_crc(buf, pos, header)
    if actual != header.crc:
        raise InvalidRecordBatch(
            f"record batch is corrupt (stored crc = {header.crc}, computed crc = {actual})",
            ErrorCode.CORRUPT_MESSAGE, position=pos)


def validate_batch(buf, pos: int, header: RecordBatchHeader, *, max_size: int | None = None) -> None:
    """Check one batch as stored data: size, CRC, codec, and count sanity.

    This is the check for any batch (recovery, replication, produce); the
    rules Kafka applies only to batches *from clients* (count equal to
    lastOffsetDelta + 1, no control batches, baseOffset 0, ...) are in
    ``validation.validate_records``, because log compaction legitimately
    leaves batches with fewer records than their offset span, or none.

    Order and codes follow Kafka's ``analyzeAndValidateRecords``: a batch
    over ``max_size`` (``message.max.bytes``, counted with the 12-byte log
    overhead as Kafka's ``sizeInBytes`` does) is MESSAGE_TOO_LARGE before
    its CRC is even looked at; then CRC (CORRUPT_MESSAGE); then the codec
    (UNSUPPORTED_COMPRESSION_TYPE); then counts (INVALID_RECORD).  The cost
    is one CRC-32C pass over the batch (hardware CRC: ~1 us per 16 KiB) plus
    a few comparisons: no record is decoded.
    """
    _check_magic(header.magic, pos)
    if header.batch_length < MIN_BATCH_LENGTH:
        raise InvalidRecordBatch(f"record batch length {header.batch_length} is smaller than a batch header",
                                 ErrorCode.CORRUPT_MESSAGE, position=pos)
    if max_size is not None and header.size > max_size:
        raise InvalidRecordBatch(
            f"record batch of {header.size} bytes exceeds the maximum of {max_size} bytes",
            ErrorCode.MESSAGE_TOO_LARGE, position=pos)
    verify_crc(buf, pos, header)
    try:
        codec = header.compression
    except InvalidRecordBatch as exc:
        exc.at(pos)
        raise
    count = header.records_count
    if count < 0 or header.last_offset_delta < 0:
        raise InvalidRecordBatch(
            f"invalid record count {count} / lastOffsetDelta {header.last_offset_delta}",
            ErrorCode.INVALID_RECORD, position=pos)
    if count > header.last_offset_delta + 1:
        raise InvalidRecordBatch(
            f"record count {count} exceeds the offset range of {header.last_offset_delta + 1}",
            ErrorCode.INVALID_RECORD, position=pos)
    if codec is CompressionType.NONE and count * MIN_RECORD_SIZE > header.batch_length - MIN_BATCH_LENGTH:
        raise InvalidRecordBatch(
            f"{count} records cannot fit in {header.batch_length - MIN_BATCH_LENGTH} bytes",
            ErrorCode.INVALID_RECORD, position=pos)


def rewrite_offsets_and_epoch(buf, pos: int, base_offset: int, partition_leader_epoch: int) -> None:
    """Assign the batch its offsets and leader epoch, in place.

    Only bytes 0-7 and 12-15 change, both outside the CRC, so the CRC stays
    valid and no record is touched (kafka-python and aiokafka verify the CRC by
    default and would report any other change as CorruptRecordError).
    ``buf`` must be writable (bytearray, or a writable memoryview).
    """
    _I64.pack_into(buf, pos, base_offset)
    _I32.pack_into(buf, pos + 12, partition_leader_epoch)


def set_log_append_time(buf, pos: int, timestamp_ms: int) -> None:
    """Stamp a batch with LogAppendTime, in place, and recompute its CRC.

    Sets the timestamp-type attribute bit and maxTimestamp (Kafka's
    ``setMaxTimestamp(LOG_APPEND_TIME, now)``); readers then report
    maxTimestamp as every record's timestamp.  Both fields are CRC-covered,
    hence the new CRC.  ``buf`` must be writable and hold the whole batch.
    """
    header = parse_batch_header(buf, pos)
    if pos + header.size > len(buf):
        raise InvalidRecordBatch(f"record batch of {header.size} bytes is truncated to {len(buf) - pos}",
                                 ErrorCode.CORRUPT_MESSAGE, position=pos)
    _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, header.attributes | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, timestamp_ms)
    _U32.pack_into(buf, pos + CRC_OFFSET, compute_crc(buf, pos, header))

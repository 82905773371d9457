"""Produce-path validation of one partition's records, in one pass, as Kafka's broker does it.

``validate_records`` applies, in Kafka's order and with Kafka's error codes:

1. the request-level rules of ``ProduceRequest.validateRecords`` (Produce
   v3+): at least one batch, exactly one batch, magic 2 (INVALID_RECORD),
   zstd only from Produce v7 (UNSUPPORTED_COMPRESSION_TYPE);
2. the log-append checks of ``UnifiedLog.analyzeAndValidateRecords``:
   baseOffset 0 from clients (INVALID_RECORD), batch size against
   ``message.max.bytes`` (MESSAGE_TOO_LARGE), CRC (CORRUPT_MESSAGE), codec;
3. the client-batch checks of ``LogValidator.validateBatch``: recordsCount
   positive and equal to lastOffsetDelta + 1, no control batches, a base
   sequence with every producer id (INVALID_RECORD); and the LogAppendTime
   attribute, which producers must not set (INVALID_TIMESTAMP);
4. the per-record check of ``LogValidator.validateKey`` on a compacted
   topic (``compacted=True``): every record needs a key; each keyless record
   is a KIP-467 record error (its index in the batch and Kafka's message),
   and the batch fails with INVALID_RECORD carrying them all;
5. the records-blob size against the segment size (RECORD_LIST_TOO_LARGE,
   ``RecordBatchTooLargeException`` in Kafka).

What it costs, and why record-level work is limited to compressed batches
by default (``deep=None``):

* An uncompressed batch costs one CRC-32C pass and a header parse: ~4 us for
  16 KiB (hardware CRC ~1 us; the rest is Python).  Its CRC proves the
  bytes are exactly what the client wrote, and walking its records in
  Python would cost ~0.35 us per record (~55 us for 150 records, >10x
  more): the records are the writer's responsibility, and every consumer
  checks their framing anyway.  ``deep=True`` walks them too.
* A compressed batch is decompressed (~10-25 us per 16 KiB) and its records'
  framing is walked (``record.scan_records``: lengths, offset deltas
  0..n-1, exact fill): ~70-85 us per 16 KiB batch in all.
  Kafka also decompresses every compressed batch on produce.  Here it proves
  the payload is readable with this broker's codecs (snappy framing, lz4
  frame flavours, zstd without content size, decompression bombs) before
  anything is stored, so a batch that passed is one the broker itself can
  read back later (compaction, transaction index).  ``deep=False`` skips it.
* A compacted topic's batches are all walked, uncompressed ones included
  (without a copy), to read each record's key length: Kafka iterates every
  record there too.  Topics that are not compacted pay nothing for it.
* Unlike Kafka, nothing is rewritten: a batch whose offset deltas are not
  0..n-1 is refused (INVALID_RECORD) instead of being re-assigned, since the
  broker never rewrites record payloads (CRC-covered bytes, which consumers
  verify).  No real client writes one.
* Per-record timestamp policies (``log.message.timestamp.*.max.ms``) are
  left to the caller, using the header's baseTimestamp/maxTimestamp.
* A partial batch after the last complete one is refused (CORRUPT_MESSAGE);
  Kafka silently trims it, which would acknowledge records it never stored.
"""

from __future__ import annotations

from ..errors import ErrorCode
from .batch import InvalidRecordBatch, RecordBatchHeader, iter_batch_headers, validate_batch
from .compression import MAX_DECOMPRESSED_SIZE, CompressionType
from .record import keyless_records, records_payload, scan_records

__all__ = ["validate_records"]


def validate_records(buf, *, max_batch_size: int | None = None, max_records_size: int | None = None,
                     produce_version: int | None = None, deep: bool | None = None,
                     max_decompressed_size: int = MAX_DECOMPRESSED_SIZE,
                     compacted: bool = False, topic_partition: str = "?"
                     ) -> list[tuple[int, RecordBatchHeader]]:
    """Validate one Produce partition's ``records``; returns ``[(position, header), ...]``.

    ``max_batch_size`` is the topic's ``max.message.bytes``,
    ``max_records_size`` its ``segment.bytes``; ``produce_version`` switches
    on the Produce v3+/v7 request rules.  ``deep``: None = walk the records
    of compressed batches only, True = of every batch, False = of none.
    ``compacted``: the topic's ``cleanup.policy`` includes ``compact``, so
    every record of every batch must have a key (walked whatever ``deep``
    says); ``topic_partition`` ("topic-partition") names the partition in
    those errors.  Raises ``InvalidRecordBatch`` whose ``error_code`` is the partition's
    Produce error and whose ``position`` is the offending batch.
    """
    v3 = produce_version is not None and produce_version >= 3
    if buf is None:
        buf = b""
    try:
        batches = list(iter_batch_headers(buf))
    except InvalidRecordBatch as exc:
        if v3 and exc.error_code is ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT:
            raise _magic_error(produce_version, exc.position) from exc
        raise
    if v3:
        if not batches:
            raise InvalidRecordBatch(
                f"Produce requests with version {produce_version} must have at least one record batch"
                " per partition", ErrorCode.INVALID_RECORD, position=0)
        if len(batches) > 1:
            raise InvalidRecordBatch(
                f"Produce requests with version {produce_version} are only allowed to contain exactly"
                " one record batch per partition", ErrorCode.INVALID_RECORD, position=batches[1][0])
    total = 0
    for pos, header in batches:
        if header.base_offset != 0:
            raise InvalidRecordBatch(
                f"the baseOffset of a record batch from a client should be 0, but it is {header.base_offset}",
                ErrorCode.INVALID_RECORD, position=pos)
        validate_batch(buf, pos, header, max_size=max_batch_size)
        codec = header.compression
        if codec is CompressionType.ZSTD and produce_version is not None and produce_version < 7:
            raise InvalidRecordBatch(
                f"Produce requests with version {produce_version} are not allowed to use ZStandard compression",
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, position=pos)
        _validate_client_batch(pos, header)
        if compacted or deep or (deep is None and codec is not CompressionType.NONE):
            try:
                data, start, end = records_payload(buf, pos, header, max_decompressed_size=max_decompressed_size)
                scan_records(data, start, end, header.records_count)
                if compacted:
                    _require_keys(keyless_records(data, start, end, header.records_count), topic_partition)
            except InvalidRecordBatch as exc:
                exc.at(pos)
                raise
        total += header.size
    if max_records_size is not None and total > max_records_size:
        raise InvalidRecordBatch(
            f"records of {total} bytes exceed the maximum of {max_records_size} bytes (segment size)",
            ErrorCode.RECORD_LIST_TOO_LARGE, position=0)
    return batches


def _require_keys(keyless: list[int], topic_partition: str) -> None:
    """LogValidator.validateKey and processRecordErrors: one record error per keyless record."""
    if not keyless:
        return
    message = f"Compacted topic cannot accept message without key in topic partition {topic_partition}."
    errors = [(index, message) for index in keyless]
    shown = ", ".join(f"RecordError(batchIndex={index}, message='{text}')" for index, text in errors[:3])
    raise InvalidRecordBatch(
        f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]", ErrorCode.INVALID_RECORD, record_errors=errors)


def _magic_error(produce_version: int | None, position: int | None) -> InvalidRecordBatch:
    return InvalidRecordBatch(
        f"Produce requests with version {produce_version} are only allowed to contain record batches"
        " with magic version 2", ErrorCode.INVALID_RECORD, position=position)


def _validate_client_batch(pos: int, header: RecordBatchHeader) -> None:
    """LogValidator.validateBatch for AppendOrigin.CLIENT, plus the LogAppendTime rule."""
    count_from_offsets = header.last_offset_delta + 1
    if count_from_offsets <= 0:
        raise InvalidRecordBatch(f"batch has an invalid offset range: lastOffsetDelta {header.last_offset_delta}",
                                 ErrorCode.INVALID_RECORD, position=pos)
    if header.records_count <= 0:
        raise InvalidRecordBatch(f"invalid reported count for record batch: {header.records_count}",
                                 ErrorCode.INVALID_RECORD, position=pos)
    if header.records_count != count_from_offsets:
        raise InvalidRecordBatch(
            f"inconsistent batch offset range [0, {header.last_offset_delta}] and count of records"
            f" {header.records_count}", ErrorCode.INVALID_RECORD, position=pos)
    if header.is_control:
        raise InvalidRecordBatch("clients are not allowed to write control records",
                                 ErrorCode.INVALID_RECORD, position=pos)
    if header.has_producer_id and header.base_sequence < 0:
        raise InvalidRecordBatch(
            f"invalid sequence number {header.base_sequence} in record batch with producerId {header.producer_id}",
            ErrorCode.INVALID_RECORD, position=pos)
    if header.timestamp_type == 1:
        raise InvalidRecordBatch("producers should not set the timestamp type to LogAppendTime",
                                 ErrorCode.INVALID_TIMESTAMP, position=pos)

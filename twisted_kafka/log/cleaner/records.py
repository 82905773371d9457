"""One stored batch through the cleaner: which records stay, and the batch that holds them.

Sans-IO: bytes in, bytes out.  The rules are Kafka's (``LogCleaner.cleanInto``
with ``MemoryRecords.filterTo``):

* a record stays when it is past the offset map's last offset (not yet
  mapped), or when it is the latest record of its key (its offset is at least
  the map's offset for the key; keys the map does not hold have no later
  record in the dirty section);
* a record without a key is dropped (a compacted topic refuses them, so only
  data written before the topic became compacted can have one);
* a tombstone (null value) that is the latest of its key stays until its
  batch's *delete horizon* has passed.  The horizon is set the first time the
  cleaner copies the batch -- now + ``delete.retention.ms`` -- by rebuilding
  the batch with the horizon as its base timestamp and the delete-horizon
  attribute bit (KIP-534): a tombstone is kept at least that long after the
  cleaning that first saw it, then removed;
* a batch whose records all stay, and that needs no horizon, is copied byte
  for byte;
* a batch that loses some records is rebuilt with the same base offset,
  last offset delta, partition leader epoch, producer id, epoch and base
  sequence, timestamp type and codec (recompressed), its records copied
  as stored -- each keeps its offset delta, so no offset ever changes; only a
  newly set horizon rewrites the records' timestamp deltas (their
  timestamps stay the same);
* a batch that loses every record is dropped -- unless it is the last data
  batch of its producer (its header keeps the producer's last sequence, so
  the producer state survives cleaning; ``producers``) or the last batch
  before the end of the cleaning round (so the last offset stays known):
  then an empty batch (the header alone, no records) stays in its place;
* transactions (``transactions``): the batches of an aborted transaction
  lose every record (whatever the offset map says), so they go, or stay
  empty by the rule above; a transaction marker is copied as it is while
  batches of its transaction may remain.  Once the cleaning saw none, it
  gets a delete horizon as a tombstone's batch does (now +
  ``delete.retention.ms``, the KIP-534 attribute bit and base timestamp),
  and a cleaning past the horizon removes it (emptied instead when it is the
  last batch of the round, or the marker that carries its producer's
  epoch).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

from twisted_kafka.protocol.records.batch import (
    BATCH_HEADER_SIZE,
    COMPRESSION_MASK,
    CONTROL_MASK,
    DELETE_HORIZON_MASK,
    LOG_OVERHEAD,
    MAGIC,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    RecordBatchHeader,
)
from twisted_kafka.protocol.records.compression import CompressionType, compress
from twisted_kafka.protocol.records.control import parse_end_txn_marker
from twisted_kafka.protocol.records.errors import InvalidRecordBatch
from twisted_kafka.protocol.records.record import RecordSpan, record_spans, records_payload
from twisted_kafka.protocol.records.varint import encode_varint

from .offset_map import OffsetMap
from .producers import ProducerLast, retains_batch
from .transactions import CleanedTransactions

NO_TIMESTAMP = -1

_HEAD = struct.Struct(">qiibI")          # base offset, batch length, leader epoch, magic, crc
_COVERED = struct.Struct(">hiqqqhii")    # attributes .. records count (the CRC-covered header part)


def batch_records(buf, pos: int, header: RecordBatchHeader) -> tuple[object, list[RecordSpan]]:
    """(payload buffer, record spans) of the batch at ``buf[pos:]``, decompressed if needed."""
    data, start, end = records_payload(buf, pos, header)
    return data, record_spans(data, start, end, header.records_count)


def encode_batch(header: RecordBatchHeader, *, attributes: int, base_timestamp: int, max_timestamp: int,
                 count: int, records: bytes) -> bytes:
    """A v2 batch with ``header``'s offsets, epoch and producer fields around ``records``
    (already encoded and, for a compressed codec, compressed)."""
    covered = _COVERED.pack(attributes, header.last_offset_delta, base_timestamp, max_timestamp,
                            header.producer_id, header.producer_epoch, header.base_sequence, count) + records
    length = len(covered) + BATCH_HEADER_SIZE - LOG_OVERHEAD - _COVERED.size
    return _HEAD.pack(header.base_offset, length, header.partition_leader_epoch, MAGIC, crc32c(covered)) + covered


def empty_batch(header: RecordBatchHeader) -> bytes:
    """The header of ``header``'s batch with no records (Kafka's ``writeEmptyHeader``):
    same offsets, producer fields and max timestamp, no codec, no delete horizon."""
    attributes = header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    return encode_batch(header, attributes=attributes, base_timestamp=NO_TIMESTAMP,
                        max_timestamp=header.max_timestamp, count=0, records=b"")


@dataclass
class FilterStats:
    records_read: int = 0
    records_kept: int = 0
    bytes_read: int = 0
    bytes_kept: int = 0
    batches_rebuilt: int = 0
    keyless_dropped: int = 0
    tombstones_dropped: int = 0
    aborted_batches_dropped: int = 0       # batches of aborted transactions emptied or removed
    markers_dropped: int = 0               # transaction markers past their delete horizon


class BatchFilter:
    """The cleaner's decision for each batch of one cleaning round."""

    def __init__(self, offset_map: OffsetMap, *, now_ms: int, delete_retention_ms: int,
                 producers: dict[int, ProducerLast], round_end_offset: int,
                 transactions: CleanedTransactions | None = None):
        self.map = offset_map
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.producers = producers
        self.round_end_offset = round_end_offset
        #: The pass's transactions: told every batch, in offset order (``transactions``).
        self.transactions = transactions if transactions is not None else CleanedTransactions()
        self.stats = FilterStats()

    def _retain_empty(self, header: RecordBatchHeader) -> bool:
        return retains_batch(header, self.producers) or header.next_offset == self.round_end_offset

    def _emptied(self, header: RecordBatchHeader):
        """What stays of a batch that keeps no record: its header alone, or nothing."""
        if not self._retain_empty(header):
            return None
        out = empty_batch(header)
        self.stats.bytes_kept += len(out)
        return out

    def filter(self, buf, pos: int, header: RecordBatchHeader):
        """The bytes that replace the batch at ``buf[pos:]``: the batch itself (a view),
        a rebuilt or empty batch, or None (dropped).  The batch's CRC must have been
        checked.  Raises InvalidRecordBatch on records that cannot be read."""
        stats = self.stats
        stats.bytes_read += header.size
        if header.is_control:
            return self._filter_marker(buf, pos, header)
        if self.transactions.on_batch(header):          # an aborted transaction's batch
            stats.records_read += header.records_count
            stats.aborted_batches_dropped += 1
            return self._emptied(header)
        base_offset = header.base_offset
        latest = self.map.latest_offset
        data, spans = batch_records(buf, pos, header)
        stats.records_read += len(spans)
        has_horizon = header.has_delete_horizon
        keep_tombstones = not has_horizon or self.now_ms < header.base_timestamp
        lookup = self.map.get
        kept = []
        tombstones = False
        for span in spans:
            offset = base_offset + span.offset_delta
            if offset > latest:
                kept.append(span)
                tombstones = tombstones or span.tombstone
                continue
            key = span.key
            if key is None:
                stats.keyless_dropped += 1
                continue
            if offset < lookup(key):
                continue
            if span.tombstone:
                if not keep_tombstones:
                    stats.tombstones_dropped += 1
                    continue
                tombstones = True
            kept.append(span)
        stats.records_kept += len(kept)
        set_horizon = tombstones and not has_horizon
        if len(kept) == len(spans) and not set_horizon:
            stats.bytes_kept += header.size
            return memoryview(buf)[pos:pos + header.size]
        if not kept:
            return self._emptied(header)
        stats.batches_rebuilt += 1
        out = self._rebuild(header, data, kept, set_horizon)
        stats.bytes_kept += len(out)
        return out

    def _filter_marker(self, buf, pos: int, header: RecordBatchHeader):
        """A control batch: kept as it is while its transaction may have batches left; once not,
        kept ``delete.retention.ms`` more (its delete horizon set by this cleaning), then removed
        (Kafka's ``checkBatchRetention`` for control batches)."""
        stats = self.stats
        try:
            marker = parse_end_txn_marker(buf, pos, header)
        except InvalidRecordBatch:
            marker = None          # not a transaction marker: nothing to track, kept as it is
            if header.records_count:
                stats.bytes_kept += header.size
                return memoryview(buf)[pos:pos + header.size]
        removable = self.transactions.on_control_batch(header, marker)
        stats.records_read += header.records_count
        if removable and header.has_delete_horizon and header.base_timestamp <= self.now_ms:
            stats.markers_dropped += 1
            return self._emptied(header)
        if not header.records_count:
            return self._emptied(header)
        stats.records_kept += header.records_count
        if not removable or header.has_delete_horizon:
            stats.bytes_kept += header.size
            return memoryview(buf)[pos:pos + header.size]
        data, spans = batch_records(buf, pos, header)
        stats.batches_rebuilt += 1
        out = self._rebuild(header, data, spans, True)
        stats.bytes_kept += len(out)
        return out

    def _rebuild(self, header: RecordBatchHeader, data, kept: list[RecordSpan], set_horizon: bool) -> bytes:
        attributes = header.attributes
        base_ts = header.base_timestamp
        log_append_time = bool(attributes & TIMESTAMP_TYPE_MASK)
        if set_horizon:
            horizon = self.now_ms + self.delete_retention_ms
            attributes |= DELETE_HORIZON_MASK
            parts = []
            for span in kept:
                # The record keeps its timestamp: its delta is now counted from the horizon.
                rest = bytes(data[span.body:span.end])
                body = (bytes((span.attributes,)) + encode_varint(base_ts + span.timestamp_delta - horizon)
                        + encode_varint(span.offset_delta) + rest)
                parts.append(encode_varint(len(body)) + body)
            new_base = horizon
        else:
            parts = [bytes(data[span.start:span.end]) for span in kept]
            new_base = base_ts
        max_ts = header.max_timestamp if log_append_time \
            else max(base_ts + span.timestamp_delta for span in kept)
        payload = b"".join(parts)
        codec = attributes & COMPRESSION_MASK
        if codec:
            payload = compress(CompressionType(codec), payload)
        return encode_batch(header, attributes=attributes, base_timestamp=new_base, max_timestamp=max_ts,
                            count=len(kept), records=payload)


__all__ = ["BatchFilter", "FilterStats", "RecordSpan", "batch_records", "empty_batch", "encode_batch",
           "record_spans"]

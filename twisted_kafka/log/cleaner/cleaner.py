"""``CleanTask``: one cleaning of one log (Kafka's ``Cleaner.doClean``), as blocking steps.

The steps run in the I/O thread pool, one at a time per task, each reading
at most ``chunk`` bytes of segment data, so ``LogCleaner`` can throttle
between them on the reactor's clock and stop a cleaning between two steps:

1. ``build_map_step`` (repeated): the offset map of the cleanable dirty
   section [first dirty, first uncleanable) -- each key's latest offset,
   the batches of aborted transactions left out (``transactions``) --
   until the section is mapped or the map is full (a batch that might not
   fit ends the pass: the next pass starts there).  The cleaning round then
   covers [log start, ``end_offset`` = the map's last offset + 1): Kafka
   recopies the clean section too, since keys updated in the dirty section
   make records there obsolete.
2. ``plan``: the segments below ``end_offset`` in groups of at most
   ``segment.bytes`` (and ``segment.index.bytes`` of index; an offset span
   that fits a segment), each group to become one segment -- so repeated
   cleanings do not leave ever smaller segments.  A segment holding damaged
   data is left alone.  Also: the last data batch of every producer
   (``producers``).
3. per group: ``start_group`` creates ``<base>.log.cleaned`` (and indexes);
   ``clean_step`` (repeated) copies what the ``BatchFilter`` keeps, telling
   it each segment's aborted transactions first (its transaction index gets
   those whose markers and data it keeps);
   ``finish_group`` writes the indexes and fsyncs; then ``LogCleaner`` swaps
   it in on the reactor (``Log.replace_segments``), or ``discard_group``
   removes it.

Every batch read is CRC-checked first: a log with data that fails the check
raises ``CleanerError`` and is not cleaned again until a restart (Kafka
marks such a partition uncleanable).  An ``OSError`` (a full disk: ENOSPC)
reaches the caller, which discards the output: the log keeps its segments.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from twisted_kafka.log.batches import (
    BATCH_HEADER_SIZE,
    InvalidRecordBatch,
    RecordBatchHeader,
    iter_batch_headers,
    parse_batch_header,
    validate_batch,
)
from twisted_kafka.log.layout import CLEANED_SUFFIX
from twisted_kafka.log.log import Log
from twisted_kafka.log.segment import MAX_RELATIVE_OFFSET, BatchInfo, LogSegment
from twisted_kafka.protocol.records.control import EndTransactionMarker, parse_end_txn_marker

from .offset_map import OffsetMap
from .producers import ProducerLast, last_data_offsets, note_batch
from .records import BatchFilter, FilterStats, batch_records
from .transactions import CleanedTransactions


def _marker(data, pos: int, header: RecordBatchHeader) -> EndTransactionMarker | None:
    try:
        return parse_end_txn_marker(data, pos, header)
    except InvalidRecordBatch:
        return None


class CleanerError(Exception):
    """The log holds data the cleaner cannot read; it is not cleaned again until a restart."""


@dataclass
class CleanerStats:
    """What one cleaning did (Kafka's ``CleanerStats``)."""

    started: float = field(default_factory=time.monotonic)
    map_done: float = 0.0
    ended: float = 0.0
    map_bytes_read: int = 0
    map_records_read: int = 0
    map_keys: int = 0
    map_utilization: float = 0.0
    segments_in: int = 0
    segments_out: int = 0
    filter: FilterStats = field(default_factory=FilterStats)

    @property
    def bytes_read(self) -> int:
        return self.map_bytes_read + self.filter.bytes_read

    @property
    def bytes_written(self) -> int:
        return self.filter.bytes_kept

    @property
    def elapsed(self) -> float:
        return (self.ended or time.monotonic()) - self.started

    def summary(self, name: str, first_dirty: int, end_offset: int) -> str:
        elapsed = max(self.elapsed, 1e-9)
        mapping = max(self.map_done - self.started, 1e-9) if self.map_done else elapsed
        mb = 1024 * 1024
        f = self.filter
        reduction = 100.0 * (1 - f.bytes_kept / f.bytes_read) if f.bytes_read else 0.0
        return (f"cleaned {name} (dirty section [{first_dirty}, {end_offset})) in {elapsed:.2f} s: "
                f"read {self.bytes_read / mb:.1f} MB ({self.bytes_read / mb / elapsed:.1f} MB/s), "
                f"wrote {self.bytes_written / mb:.1f} MB; offset map: {self.map_records_read} records, "
                f"{self.map_keys} keys, {self.map_bytes_read / mb:.1f} MB in {mapping:.2f} s "
                f"({100 * self.map_utilization:.1f}% full); {self.segments_in} segment(s) into "
                f"{self.segments_out}, {f.records_read} records read, {f.records_kept} kept, "
                f"{f.batches_rebuilt} batch(es) rebuilt, {reduction:.1f}% size reduction")


def _group_segments(segments: list[LogSegment], max_size: int, max_index_size: int,
                    end_offset: int) -> list[list[LogSegment]]:
    """Kafka's ``groupSegmentsBySize``: consecutive segments totalling at most ``max_size``
    bytes (and ``max_index_size`` of each index) whose offsets fit a segment.
    ``segments`` ends with the last segment to clean; damaged segments break groups
    and are left out."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        first = segments[i]
        i += 1
        if first.damaged:
            continue
        group = [first]
        size = first.size
        index_size = first.offset_index.size_bytes
        time_size = first.time_index.size_bytes
        while i < len(segments):
            candidate = segments[i]
            last = (segments[i + 1].base_offset if i + 1 < len(segments) else end_offset) - 1
            if candidate.damaged or size + candidate.size > max_size \
                    or index_size + candidate.offset_index.size_bytes > max_index_size \
                    or time_size + candidate.time_index.size_bytes > max_index_size \
                    or (candidate.size and last - first.base_offset > MAX_RELATIVE_OFFSET):
                break
            group.append(candidate)
            size += candidate.size
            index_size += candidate.offset_index.size_bytes
            time_size += candidate.time_index.size_bytes
            i += 1
        groups.append(group)
    return groups


class CleanTask:
    """One cleaning of ``log``'s range [``first_dirty``, ``first_uncleanable``); see the module docstring."""

    def __init__(self, log: Log, first_dirty: int, first_uncleanable: int, offset_map: OffsetMap, *,
                 now_ms: int,
                 producer_last_offsets: Callable[[list[LogSegment]], dict[int, ProducerLast]] = last_data_offsets):
        self.log = log
        self.name = f"{log.topic}-{log.partition}"
        self.first_dirty = first_dirty
        self.first_uncleanable = first_uncleanable
        self.now_ms = now_ms
        self.map = offset_map
        self.stats = CleanerStats()
        self._producer_last_offsets = producer_last_offsets
        segments = log.segments
        self.dirty = [s for i, s in enumerate(segments[:-1])
                      if s.base_offset < first_uncleanable and segments[i + 1].base_offset > first_dirty]
        self._map_index = 0
        self._map_position: int | None = None
        self._map_txns: CleanedTransactions | None = None
        self.map_done = not self.dirty
        self.end_offset = first_dirty
        self.filter: BatchFilter | None = None
        self.groups: list[list[LogSegment]] = []
        self._group: list[LogSegment] = []
        self._group_index = 0
        self._group_position = 0
        self._txn_segment = -1            # the group's segment whose aborted transactions were added
        self.cleaned: LogSegment | None = None
        self._cleaned_producers: dict[int, ProducerLast] = {}
        offset_map.clear()

    # -- reading -------------------------------------------------------------

    def _read_batches(self, segment: LogSegment, position: int,
                      chunk: int) -> tuple[object, list[tuple[int, RecordBatchHeader]], int]:
        """(data, [(position in data, header)], bytes consumed) of the whole batches in about
        ``chunk`` bytes from ``position``, each CRC-checked; at least one batch."""
        data = segment.read(position, min(chunk, segment.size - position))
        batches = []
        consumed = 0
        try:
            for p, header in iter_batch_headers(data, allow_partial_tail=True):
                batches.append((p, header))
                consumed = p + header.size
            if not batches:
                head = data if len(data) >= BATCH_HEADER_SIZE else segment.read(position, BATCH_HEADER_SIZE)
                header = parse_batch_header(head, 0)
                if position + header.size > segment.size:
                    raise InvalidRecordBatch(f"a batch of {header.size} bytes at {position} runs past the "
                                             f"end of the segment", position=0)
                data = segment.read(position, header.size)
                batches.append((0, parse_batch_header(data, 0)))
                consumed = header.size
            for p, header in batches:
                validate_batch(data, p, header)
        except InvalidRecordBatch as e:
            raise CleanerError(f"{segment.log_path}: {e} (position {position} + {e.position})") from e
        return data, batches, consumed

    # -- 1. the offset map ----------------------------------------------------

    def build_map_step(self, chunk: int) -> int:
        """Map up to about ``chunk`` bytes of the dirty section; returns bytes read (BLOCKING)."""
        offset_map = self.map
        first_dirty = self.first_dirty
        txns = self._map_txns
        if txns is None:
            txns = self._map_txns = CleanedTransactions()
            txns.add_aborted(self.log.collect_aborted_txns(first_dirty, self.first_uncleanable))
        done = 0
        while not self.map_done and done < chunk:
            if self._map_index >= len(self.dirty):
                self._finish_map()
                break
            segment = self.dirty[self._map_index]
            following = self.dirty[self._map_index + 1].base_offset \
                if self._map_index + 1 < len(self.dirty) else self.first_uncleanable
            if self._map_position is None:
                self._map_position = segment.offset_index.lookup(first_dirty)[1] \
                    if self._map_index == 0 else 0
            position = self._map_position
            if position >= segment.size:
                # Offsets up to the next segment are covered (gaps included).
                offset_map.latest_offset = max(offset_map.latest_offset, following - 1)
                self._map_index += 1
                self._map_position = None
                continue
            data, batches, consumed = self._read_batches(segment, position, chunk - done)
            for p, header in batches:
                if header.is_control:
                    txns.on_control_batch(header, _marker(data, p, header))
                    aborted = False
                else:
                    aborted = txns.on_batch(header)
                if header.last_offset < first_dirty:
                    continue
                if not header.is_control and not aborted:
                    if len(offset_map) and not offset_map.has_room_for(header.records_count):
                        self._finish_map()          # full: this batch starts the next pass
                        break
                    try:
                        _, spans = batch_records(data, p, header)
                    except InvalidRecordBatch as e:
                        raise CleanerError(f"{segment.log_path}: {e}") from e
                    base = header.base_offset
                    self.stats.map_records_read += len(spans)
                    put = offset_map.put
                    for span in spans:
                        if span.key is not None and base + span.offset_delta >= first_dirty:
                            put(span.key, base + span.offset_delta)
                offset_map.latest_offset = max(offset_map.latest_offset, header.last_offset)
            self._map_position = position + consumed
            self.stats.map_bytes_read += consumed
            done += consumed
        return done

    def _finish_map(self) -> None:
        self.map_done = True
        self.stats.map_done = time.monotonic()
        self.stats.map_keys = len(self.map)
        self.stats.map_utilization = self.map.utilization
        self.end_offset = max(self.first_dirty, self.map.latest_offset + 1)

    # -- 2. the plan -----------------------------------------------------------

    def plan(self) -> list[list[LogSegment]]:
        """Group the segments to clean and find each producer's last batch (BLOCKING: may walk
        batch headers).  Nothing to clean (no dirty offset mapped): no groups."""
        if self.end_offset <= self.first_dirty:
            self.groups = []
            return self.groups
        segments = self.log.segments
        config = self.log.config
        todo = [s for s in segments[:-1] if s.base_offset < self.end_offset]
        self.groups = _group_segments(todo, config.segment_bytes, config.max_index_size, self.end_offset)
        self.filter = BatchFilter(self.map, now_ms=self.now_ms, delete_retention_ms=config.delete_retention_ms,
                                  producers=self._producer_last_offsets(segments),
                                  round_end_offset=self.first_uncleanable, transactions=CleanedTransactions())
        self.filter.stats = self.stats.filter
        return self.groups

    # -- 3. one group into one segment -------------------------------------------

    def start_group(self, group: list[LogSegment]) -> LogSegment:
        """Create the group's ``.cleaned`` segment (BLOCKING)."""
        self._group = group
        self._group_index = 0
        self._group_position = 0
        self._txn_segment = -1
        self._cleaned_producers = {}
        self.cleaned = LogSegment.create(self.log.dir, group[0].base_offset, self.log.config, self.now_ms,
                                         files=self.log.files, suffix=CLEANED_SUFFIX)
        if self.filter is not None:
            self.filter.transactions.cleaned_index = self.cleaned.txn_index
        self.stats.segments_in += len(group)
        return self.cleaned

    @property
    def group_done(self) -> bool:
        return self._group_index >= len(self._group)

    def clean_step(self, chunk: int) -> int:
        """Copy what stays of about ``chunk`` bytes of the group into the cleaned segment;
        returns bytes read + written (BLOCKING)."""
        assert self.filter is not None and self.cleaned is not None
        keep = self.filter.filter
        out = bytearray()
        infos: list[BatchInfo] = []
        done = 0
        producers = self._cleaned_producers
        while done < chunk and self._group_index < len(self._group):
            segment = self._group[self._group_index]
            position = self._group_position
            if self._txn_segment != self._group_index:
                # Kafka collects each segment's whole range: the cleaned index is rebuilt from it.
                self._txn_segment = self._group_index
                following = self._group[self._group_index + 1].base_offset \
                    if self._group_index + 1 < len(self._group) else segment.next_offset
                self.filter.transactions.add_aborted(self.log.collect_aborted_txns(segment.base_offset, following))
            if position >= segment.size:
                self._group_index += 1
                self._group_position = 0
                continue
            data, batches, consumed = self._read_batches(segment, position, chunk - done)
            for p, header in batches:
                try:
                    kept = keep(data, p, header)
                except InvalidRecordBatch as e:
                    raise CleanerError(f"{segment.log_path}: batch at {position + p}: {e}") from e
                if kept is None:
                    continue
                if kept.__class__ is not memoryview:
                    header = parse_batch_header(kept, 0)
                infos.append(BatchInfo(len(out), header.size, header.base_offset, header.last_offset,
                                       header.max_timestamp))
                out += kept
                note_batch(producers, header)
            self._group_position = position + consumed
            done += consumed
        if out:
            self.cleaned.append(out, infos)
        return done + len(out)

    def finish_group(self) -> LogSegment:
        """Final time-index entry, indexes written, everything fsynced (BLOCKING); the cleaned
        segment keeps the last replaced segment's modification time, as Kafka's does."""
        cleaned = self.cleaned
        assert cleaned is not None
        cleaned.on_become_inactive()
        cleaned.flush()
        try:
            mtime = os.stat(self._group[-1].log_path).st_mtime
            os.utime(cleaned.log_path, (mtime, mtime))
        except OSError:
            pass             # the segment was deleted meanwhile: the swap will not happen anyway
        cleaned.verified = True
        cleaned.producer_last_offsets = dict(self._cleaned_producers)
        self.stats.segments_out += 1
        return cleaned

    def discard_group(self) -> None:
        """Remove the cleaned segment's files (BLOCKING)."""
        cleaned, self.cleaned = self.cleaned, None
        if cleaned is not None:
            cleaned.delete()

    def swapped(self) -> None:
        """The cleaned segment is part of the log now."""
        self.cleaned = None

"""``Log``: one partition's ordered sequence of segments.

The log owns the offsets: an append validates the producer's batches, gives
them the next offsets and the leader epoch by rewriting the two header
fields outside the CRC (records are never touched; LogAppendTime topics also
get the append time stamped, which does recompute the CRC), and writes them
to the active segment, rolling to a new one when Kafka's rules say so.
Reads hand back whole batches, as stored.

An append has two halves so that its write can leave the reactor:
``prepare_append_as_leader`` (validate, assign offsets, reserve the file
position — ``log_end_offset`` moves at once, so appends are ordered by
arrival) and ``complete_append`` once ``PendingAppend.write()`` has put the
bytes in place (on any thread).  Completion is applied strictly in prepare
order: indexes, the visible segment size, ``committed_end_offset`` and the
high watermark advance only then.  ``append_as_leader`` does all three in a
row.

Threading: every method runs on the reactor thread, except
``PendingAppend.write`` and ``flush`` (fsync), both BLOCKING, which run in
the thread pool concurrently with appends and reads: ``flush`` works on a
snapshot of the segment list and only moves ``recovery_point`` forward,
under its own lock.  ``read`` and ``fetch_offset_by_timestamp`` are also safe
on a pool thread (they read bytes below a snapshot of each segment's
committed size; deleted segments keep their descriptors until the delayed
unlink).

Where future issues hook in:

* idempotent producers — ``producer_state`` (a ``ProducerStateManager``):
  ``prepare_append_as_leader`` checks each batch with a producer id before
  offsets are assigned (a duplicate is answered with the original offsets
  and nothing is written), applies the new state once the append is
  ordered, and undoes it if the write fails; ``roll`` captures a snapshot,
  ``flush`` writes it; segment deletion removes snapshots; loading rebuilds
  the state (``recovery.load_log``);
* transactions (KIP-98) — ``AppendOrigin.COORDINATOR`` is the origin allowed
  to write control batches (transaction markers); the producer state tracks
  open and completed transactions, ``last_stable_offset`` follows from it
  and the high watermark, each aborted transaction becomes an entry of its
  marker's segment's transaction index when the marker's append commits, and
  ``collect_aborted_txns`` searches those indexes.  ``UnifiedLog`` bounds
  ``read`` by the last stable offset through ``max_offset``
  (``FetchIsolation.TXN_COMMITTED``) exactly like the high watermark;
  ``on_offsets_changed`` tells it when the high watermark or the last stable
  offset moves;
* replication — ``append_as_follower``, ``truncate_to``, the
  ``high_watermark`` setter, ``hw_follows_leo=False`` and
  ``end_offset_for_epoch``, which ``UnifiedLog`` offers to the broker as
  ``PartitionLog``'s high-watermark and epoch methods;
* compaction — ``replace_segments`` swaps the log cleaner's output in for
  finished segments (``twisted_kafka.log.cleaner``); ``_delete_segments`` is
  the other way out.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from itertools import pairwise
from typing import TYPE_CHECKING

from twisted.logger import Logger

from twisted_kafka.log.batches import (
    InvalidRecordBatch,
    iter_batch_headers,
    record_offsets_and_timestamps,
    rewrite_offsets_and_epoch,
    set_log_append_time,
    validate_batch,
    validate_records,
    whole_batches,
)
from twisted_kafka.log.checkpoints import write_damaged_ranges, write_partition_metadata
from twisted_kafka.log.disk_space import LogDirSpace
from twisted_kafka.log.epoch_cache import LeaderEpochCache
from twisted_kafka.log.file_handles import FileHandleCache
from twisted_kafka.log.layout import (
    CLEANED_SUFFIX,
    DAMAGED_RANGES,
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    SWAP_SUFFIX,
    fsync_dir,
)
from twisted_kafka.log.log_config import LogConfig
from twisted_kafka.log.partition_log import AppendOrigin, FetchDataInfo, LogAppendInfo, TimestampAndOffset
from twisted_kafka.log.producer_state import (
    BatchMetadata,
    Checks,
    ProducerStateConfig,
    ProducerStateManager,
    Undo,
)
from twisted_kafka.log.segment import BatchInfo, DamagedRange, LogSegment
from twisted_kafka.log.txn_index import AbortedTxn
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.records.control import EndTransactionMarker, parse_end_txn_marker

if TYPE_CHECKING:
    from twisted_kafka.log.recovery import RecoveryStats

log = Logger()

NO_TIMESTAMP = -1


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


#: How much of the producer state each origin is checked against (Kafka's rules).
_PRODUCER_CHECKS = {AppendOrigin.CLIENT: Checks.ALL, AppendOrigin.COORDINATOR: Checks.EPOCH}


class PendingAppend:
    """An append whose offsets are assigned and file position reserved.

    ``write()`` (BLOCKING, any thread) puts the bytes at the reserved
    position; ``Log.complete_append`` then makes it visible — strictly in the
    order appends were prepared, whatever order the writes finish in.
    ``on_commit(callback)`` registers ``callback(error)`` (error None on
    success, else the ``KafkaError`` the append failed with).  The segment's
    descriptor (``fd``) stays pinned open until then.
    """

    __slots__ = ("segment", "fd", "position", "data", "batches", "info", "written", "write_error",
                 "done", "error", "producer_undo", "aborted", "duplicate_of", "_callbacks")

    def __init__(self, segment: LogSegment | None, position: int, data, batches: list[BatchInfo],
                 info: LogAppendInfo, fd: int | None = None):
        self.segment = segment
        self.fd = fd
        self.position = position
        self.data = data
        self.batches = batches
        self.info = info
        self.written = segment is None
        self.write_error: BaseException | None = None
        self.done = False
        self.error: Exception | None = None
        #: What this append changed in the producer state (put back if its write fails).
        self.producer_undo: Undo | None = None
        #: The transactions its markers abort: entries of its segment's transaction index once it commits.
        self.aborted: list[AbortedTxn] = []
        #: A duplicate (nothing to write) of this append, whose write is still in flight.
        self.duplicate_of: PendingAppend | None = None
        self._callbacks: list[Callable[[Exception | None], None]] = []

    @property
    def nbytes(self) -> int:
        return 0 if self.data is None else len(self.data)

    def write(self) -> None:
        """Write the batches to the segment file (BLOCKING; safe on a pool thread)."""
        if self.segment is not None:
            self.segment.write_at(self.position, self.data, self.fd)

    def on_commit(self, callback: Callable[[Exception | None], None]) -> None:
        if self.done:
            callback(self.error)
        else:
            self._callbacks.append(callback)

    def _finish(self, error: Exception | None) -> None:
        self.done = True
        self.error = error
        self.data = None
        if self.fd is not None and self.segment is not None:
            self.fd = None
            self.segment.unpin()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback(error)


#: Reads longer than this find their last whole batch through the offset index
#: rather than by walking every batch header from the start (see below).
INDEX_JUMP_MIN_BYTES = 32 * 1024


def _whole_batches_prefix(segment: LogSegment, position: int, data, limit: int) -> tuple[int, int]:
    """(bytes, next offset): the longest prefix of ``data`` (read at ``position``) made of
    whole batches whose last offset is below ``limit``; (0, -1) when there is none.

    A read may cut through thousands of small batches (1 MiB of one-record
    batches is ~6000): walking all of their headers costs ~0.6 us each, ~4 ms
    per MiB.  The offset index already knows batch boundaries every
    ``index.interval.bytes``: the walk starts at the last indexed batch inside
    the data whose base offset is at most ``limit`` (every batch before it
    ends below its base offset, so below ``limit``), and covers a few KiB.
    """
    start = 0
    next_offset = -1
    if len(data) > INDEX_JUMP_MIN_BYTES and segment.offset_index.loaded:
        entry = segment.offset_index.floor_entry(limit, position + len(data))
        if entry is not None and entry[1] > position:
            start = entry[1] - position
            next_offset = entry[0]
    cut = start
    for span in whole_batches(memoryview(data)[start:] if start else data, limit):
        cut = start + span.position + span.size
        next_offset = span.last_offset + 1
    return cut, next_offset


def _whole_batches_extent(segment: LogSegment, position: int, size: int, limit: int,
                          nowait: bool) -> tuple[int, int]:
    """``_whole_batches_prefix`` for bytes left in the file: (bytes, next offset) of the whole batches
    from ``position`` within ``size`` bytes whose last offset is below ``limit``, reading only their
    headers (from the last indexed batch inside the span whose base offset is at most ``limit``)."""
    start = position
    next_offset = -1
    if size > INDEX_JUMP_MIN_BYTES and segment.offset_index.loaded:
        entry = segment.offset_index.floor_entry(limit, position + size)
        if entry is not None and entry[1] > position:
            start = entry[1]
            next_offset = entry[0]
    end = start
    for batch_position, header in segment.iter_headers(start, position + size, nowait=nowait):
        if header.last_offset >= limit:
            break
        end = batch_position + header.size
        next_offset = header.last_offset + 1
    return end - position, next_offset


SegmentDeleter = Callable[["Log", list[LogSegment]], None]


def delete_segments_now(log_: Log, segments: list[LogSegment]) -> None:
    """The default deleter: close and unlink at once (LogManager delays instead)."""
    for segment in segments:
        segment.delete()


class Log:
    """One partition's log: ``<log.dir>/<topic>-<partition>/``."""

    def __init__(self, dir: str, topic: str, partition: int, config: LogConfig, *,
                 segments: list[LogSegment], log_start_offset: int, recovery_point: int,
                 epoch_cache: LeaderEpochCache, topic_id=None,
                 files: FileHandleCache, segment_deleter: SegmentDeleter | None = None,
                 producer_state: ProducerStateManager | None = None):
        if not segments:
            raise ValueError("a log has at least one segment")
        self.dir = dir
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.config = config
        self._segments = list(segments)
        self._bases = [s.base_offset for s in segments]
        self._leo = segments[-1].next_offset       # next offset to assign
        self._committed_leo = self._leo             # end of what readers can see
        self._pending: deque[PendingAppend] = deque()
        #: Set when a write failed, until every append prepared before the
        #: failure has finished and the log is rolled back to its committed
        #: end (``_roll_back``): appends are refused meanwhile.
        self.failed: KafkaError | None = None
        self._aborting = False        # the queue reached the failed write: the rest fail too
        self._aborted_segments: set[LogSegment] = set()
        #: The log dir's ``LogDirSpace`` (set by ``LogManager``): small files may use its reserve.
        self.space: LogDirSpace | None = None
        self.log_start_offset = log_start_offset
        self.recovery_point = min(recovery_point, self._leo)
        #: Single node: the high watermark follows the log end after every
        #: leader append.  Replication turns this off and sets the setter.
        self.hw_follows_leo = True
        self._high_watermark = self._leo
        #: Called with (high watermark, last stable offset) on the reactor after either moved
        #: (``UnifiedLog.set_offsets_listener``); None: nobody listens.
        self.on_offsets_changed: Callable[[int, int], None] | None = None
        self._notified_offsets: tuple[int, int] | None = None
        #: The descriptor cache of the ``LogManager`` that made the log: every file of the
        #: log (segments, indexes, checkpoints) is opened through it.
        self.files = files
        self.epoch_cache = epoch_cache
        epoch_cache.files = files
        #: Idempotent producers' epochs and last batches (``producer_state``).
        self.producer_state = producer_state if producer_state is not None else \
            ProducerStateManager(dir, f"{topic}-{partition}")
        self.producer_state.files = files
        #: Producer state changes of appends that failed with their write, undone at the roll back.
        self._producer_undos: list[Undo] = []
        self.segment_deleter = segment_deleter or delete_segments_now
        #: Called with (log, new_base_offset) after a roll; ``UnifiedLog`` uses
        #: it to flush the finished segment in the thread pool, as Kafka does.
        self.on_roll: Callable[[Log, int], None] | None = None
        self.last_flush_ms = wall_clock_ms()
        self._flush_lock = threading.Lock()
        self._dir_generation = 0          # bumped when files are created in the dir
        self._dir_flushed_generation = 0
        self.closed = False
        self.deleted = False          # set by LogManager.delete_log
        self.recovery_stats: RecoveryStats | None = None    # set by the loader

    # -- construction -------------------------------------------------------

    @classmethod
    def open(cls, dir: str, config: LogConfig, **kwargs) -> Log:
        """Load (and if needed recover) the log in ``dir``; see ``recovery.load_log``."""
        from twisted_kafka.log.recovery import load_log

        return load_log(dir, config, **kwargs)

    @classmethod
    def create(cls, dir: str, topic: str, partition: int, config: LogConfig, *,
               files: FileHandleCache, topic_id=None, now_ms: int | None = None,
               segment_deleter: SegmentDeleter | None = None, space=None,
               producer_state_config: ProducerStateConfig | None = None) -> Log:
        """A new empty log at offset 0 (writes ``partition.metadata`` when a topic id is given);
        its files are opened through ``files``."""
        os.makedirs(dir, exist_ok=True)
        if topic_id is not None:
            write_partition_metadata(os.path.join(dir, PARTITION_METADATA), topic_id, fsync=False,
                                     space=space, files=files)
        now_ms = wall_clock_ms() if now_ms is None else now_ms
        segment = LogSegment.create(dir, 0, config, now_ms, files=files)
        new = cls(dir, topic, partition, config, segments=[segment], log_start_offset=0,
                  recovery_point=0,
                  epoch_cache=LeaderEpochCache(os.path.join(dir, LEADER_EPOCH_CHECKPOINT)),
                  topic_id=topic_id, files=files, segment_deleter=segment_deleter,
                  producer_state=ProducerStateManager(dir, f"{topic}-{partition}", producer_state_config))
        new._dir_generation += 1
        return new

    # -- state --------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Set by replication; clamped to [log_start_offset, committed end]."""
        self._set_high_watermark(max(self.log_start_offset, min(offset, self._committed_leo)))

    def _set_high_watermark(self, offset: int) -> None:
        moved = offset != self._high_watermark
        self._high_watermark = offset
        if moved:
            self.producer_state.on_high_watermark_updated(offset)
            self._offsets_changed()

    # -- transactions (KIP-98) ----------------------------------------------

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of an undecided transaction, or of a decided one whose marker the
        high watermark has not passed, at least the log start (Kafka's ``firstUnstableOffset``);
        None when there is none."""
        first = self.producer_state.first_unstable_offset(self._high_watermark)
        return None if first is None else max(first, self.log_start_offset)

    @property
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided and its marker replicated: min(first unstable
        offset, high watermark) (Kafka's ``lastStableOffset``)."""
        hw = self._high_watermark
        first = self.producer_state.first_unstable_offset(hw)
        if first is None:
            return hw
        return min(max(first, self.log_start_offset), hw)

    def collect_aborted_txns(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [``start_offset``, ``upper_bound_offset``), oldest
        first (Kafka's ``collectAbortedTransactions``): the transaction indexes from the segment
        holding ``start_offset`` on, until one says no later entry can overlap the range.
        Safe on a pool thread (the log cleaner)."""
        segments = self._segments
        bases = self._bases
        if len(bases) != len(segments) or (segments and segments[-1].base_offset != bases[-1]):
            bases = [s.base_offset for s in segments]     # replaced meanwhile (this may run on a pool thread)
        i = max(0, bisect_right(bases, start_offset) - 1)
        found: list[AbortedTxn] = []
        for segment in segments[i:]:
            txns, complete = segment.txn_index.collect(start_offset, upper_bound_offset)
            found.extend(txns)
            if complete:
                break
        return found

    def set_offsets_listener(self, listener: Callable[[int, int], None] | None) -> None:
        """``listener(high watermark, last stable offset)`` after either moves, from now on."""
        self.on_offsets_changed = listener
        self._notified_offsets = (self._high_watermark, self.last_stable_offset)

    def _offsets_changed(self) -> None:
        """Tell the listener when the high watermark or the last stable offset moved."""
        listener = self.on_offsets_changed
        if listener is None:
            return
        offsets = (self._high_watermark, self.last_stable_offset)
        if offsets != self._notified_offsets:
            self._notified_offsets = offsets
            try:
                listener(*offsets)
            except Exception:
                log.failure("the offsets listener of {topic}-{partition} failed", topic=self.topic,
                            partition=self.partition)

    def _marker_of(self, records, pos: int, header, *, strict: bool) -> EndTransactionMarker | None:
        """What the control batch at ``records[pos:]`` says.  ``strict`` (the coordinator's own
        append): INVALID_RECORD unless it is a transaction marker of a producer; else (a
        leader's batch) one that is not is skipped with a warning, as replay does."""
        try:
            if header.producer_id < 0:
                raise InvalidRecordBatch(f"a control batch without a producer id (offset {header.base_offset})",
                                         ErrorCode.INVALID_RECORD)
            marker = parse_end_txn_marker(records, pos, header)
            if marker is None and strict:
                raise InvalidRecordBatch("a transaction marker batch holds one control record, not 0",
                                         ErrorCode.INVALID_RECORD)
            return marker
        except InvalidRecordBatch as e:
            if strict:
                raise KafkaError(ErrorCode.INVALID_RECORD,
                                 f"invalid control batch for {self.topic}-{self.partition}: {e}") from e
            log.warn("{topic}-{partition}: the control batch at offset {offset} is not a transaction marker "
                     "({e}); the producer state ignores it", topic=self.topic, partition=self.partition,
                     offset=header.base_offset, e=e)
            return None

    @property
    def latest_epoch(self) -> int:
        return self.epoch_cache.latest_epoch

    @property
    def unflushed_messages(self) -> int:
        return self._committed_leo - self.recovery_point

    @property
    def committed_end_offset(self) -> int:
        """End of the written and visible log (== log_end_offset when no write is in flight)."""
        return self._committed_leo

    @property
    def has_writes_in_flight(self) -> bool:
        return bool(self._pending)

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def num_segments(self) -> int:
        return len(self._segments)

    @property
    def size(self) -> int:
        """Bytes on disk over all segments (what retention.bytes limits)."""
        return sum(s.size for s in self._segments)

    def update_config(self, config: LogConfig) -> None:
        """New effective settings (AlterConfigs); they apply from the next append/check."""
        self.config = config

    def __repr__(self) -> str:
        return (f"<Log {self.topic}-{self.partition} start={self.log_start_offset} "
                f"end={self._leo} segments={len(self._segments)}>")

    # -- appends ------------------------------------------------------------

    def _validate(self, records, origin: AppendOrigin, produce_version: int | None = None) -> list:
        """(position, header) of each batch, after Kafka's checks for this origin.

        Clients get the whole produce-path validation of the codec
        (``validate_records``: framing, CRC, sizes, codec, base offset 0,
        counts, no control batches, sequence numbers, no LogAppendTime;
        compressed batches are decompressed and their records' framing
        checked; on a compacted topic every record must have a key).  The
        broker's own writes and replicated batches get the stored-data
        checks only (framing, CRC, codec, counts).
        """
        try:
            if origin is AppendOrigin.CLIENT:
                return validate_records(records, max_batch_size=self.config.max_message_bytes,
                                        max_records_size=self.config.segment_bytes,
                                        produce_version=produce_version,
                                        compacted=self.config.compact_enabled,
                                        topic_partition=f"{self.topic}-{self.partition}")
            batches = []
            for pos, header in iter_batch_headers(records):
                validate_batch(records, pos, header, max_size=self.config.max_message_bytes)
                batches.append((pos, header))
        except InvalidRecordBatch as e:
            raise KafkaError(e.error_code, str(e), record_errors=e.record_errors) from e
        if len(records) > self.config.segment_bytes:
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                             f"{len(records)} bytes of records exceed segment.bytes "
                             f"({self.config.segment_bytes})")
        return batches

    def _check_timestamp(self, ts: int, now_ms: int) -> None:
        if ts == NO_TIMESTAMP:
            return
        low = now_ms - self.config.message_timestamp_before_max_ms
        high = now_ms + self.config.message_timestamp_after_max_ms
        if ts < low or ts > high:
            raise KafkaError(ErrorCode.INVALID_TIMESTAMP,
                             f"timestamp {ts} of a record batch for {self.topic}-{self.partition} "
                             f"is out of range: it must be within [{low}, {high}]")

    def append_as_leader(self, records, leader_epoch: int, now_ms: int | None = None, *,
                         origin: AppendOrigin = AppendOrigin.CLIENT,
                         produce_version: int | None = None) -> LogAppendInfo:
        """Validate, assign offsets and epoch, write (on this thread).  Raises ``KafkaError``.

        Errors (all before anything is written): CORRUPT_MESSAGE (framing,
        CRC, partial batch), MESSAGE_TOO_LARGE (a batch over
        max.message.bytes), RECORD_LIST_TOO_LARGE (over segment.bytes),
        INVALID_RECORD (control batch from a client, count/offset mismatch,
        base offset not 0, bad record framing in a compressed batch, a
        record without a key on a compacted topic, with ``record_errors``; with
        ``produce_version`` >= 3 also: not exactly one batch, magic < 2),
        INVALID_TIMESTAMP (a client batch claiming LogAppendTime; a
        CreateTime batch outside message.timestamp.before/after.max.ms,
        checked on each batch's first and max timestamp),
        UNSUPPORTED_COMPRESSION_TYPE, UNSUPPORTED_FOR_MESSAGE_FORMAT (magic
        0/1 without a produce version), FENCED_LEADER_EPOCH (an epoch below
        the latest one), UNKNOWN_TOPIC_OR_PARTITION (log deleted),
        KAFKA_STORAGE_ERROR (the write failed, or one before it did: the next
        append is the retry).
        """
        pending = self.prepare_append_as_leader(records, leader_epoch, now_ms, origin=origin,
                                                produce_version=produce_version)
        self._write_now(pending)
        return pending.info

    def prepare_append_as_leader(self, records, leader_epoch: int, now_ms: int | None = None, *,
                                 origin: AppendOrigin = AppendOrigin.CLIENT,
                                 produce_version: int | None = None) -> PendingAppend:
        """First half of ``append_as_leader``: everything except the write.

        Offsets are assigned and ``log_end_offset`` moves at once, so the
        next append can be prepared before this one is written; readers and
        the high watermark only see it after ``complete_append``.
        """
        self._check_writable()
        now_ms = wall_clock_ms() if now_ms is None else now_ms
        if leader_epoch < self.epoch_cache.latest_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH,
                             f"leader epoch {leader_epoch} is older than the log's latest epoch "
                             f"{self.epoch_cache.latest_epoch}")
        batches = self._validate(records, origin, produce_version)
        if not batches:
            return PendingAppend(None, 0, None, [], LogAppendInfo(
                -1, -1, NO_TIMESTAMP, -1, -1, self.log_start_offset, 0, 0, 0, leader_epoch))
        log_append_time = self.config.log_append_time
        if not log_append_time:
            for _, header in batches:
                self._check_timestamp(header.base_timestamp, now_ms)
                self._check_timestamp(header.max_timestamp, now_ms)
        buf = bytearray(records)
        offset = self._leo
        infos = []
        num_records = 0
        max_ts, offset_of_max = NO_TIMESTAMP, offset
        producers = None
        for pos, header in batches:
            if log_append_time:
                set_log_append_time(buf, pos, now_ms)
                batch_max = now_ms
            else:
                batch_max = header.max_timestamp
            rewrite_offsets_and_epoch(buf, pos, offset, leader_epoch)
            last = offset + header.last_offset_delta
            if header.producer_id >= 0 or header.is_control:    # idempotent or transactional (the only test others pay)
                # Control batches come from the coordinator only (a client's were refused by
                # ``_validate``): transaction markers of a producer, nothing else.
                marker = self._marker_of(buf, pos, header, strict=True) if header.is_control else None
                if producers is None:
                    producers = self.producer_state.begin_append(_PRODUCER_CHECKS[origin])
                duplicate = producers.add(header, offset, last, batch_max, marker)
                if duplicate is not None:
                    return self._duplicate(duplicate, leader_epoch)
            infos.append(BatchInfo(pos, header.size, offset, last, batch_max))
            if batch_max > max_ts:
                max_ts, offset_of_max = batch_max, offset
            num_records += header.records_count
            offset = last + 1
        info = LogAppendInfo(
            first_offset=infos[0].base_offset, last_offset=infos[-1].last_offset,
            max_timestamp=max_ts, offset_of_max_timestamp=offset_of_max,
            log_append_time=now_ms if log_append_time else -1,
            log_start_offset=self.log_start_offset, num_records=num_records,
            num_batches=len(infos), valid_bytes=len(buf), leader_epoch=leader_epoch)
        pending = self._reserve(buf, infos, max_ts, now_ms, info)
        if producers is not None:
            undo = pending.producer_undo = self.producer_state.commit(producers)
            pending.aborted = undo.aborted
        self.epoch_cache.assign(leader_epoch, infos[0].base_offset)
        return pending

    def _duplicate(self, batch: BatchMetadata, leader_epoch: int) -> PendingAppend:
        """An append that repeats a batch the log holds (a producer's retry): nothing is
        written, and it is answered with the original's offsets -- once the original is
        committed, if its write is still in flight (``duplicate_of``)."""
        first, last = batch.first_offset, batch.last_offset
        info = LogAppendInfo(first_offset=first, last_offset=last, max_timestamp=batch.timestamp,
                             offset_of_max_timestamp=first,
                             log_append_time=batch.timestamp if self.config.log_append_time else -1,
                             log_start_offset=self.log_start_offset, num_records=0, num_batches=0,
                             valid_bytes=0, leader_epoch=leader_epoch)
        pending = PendingAppend(None, 0, None, [], info)
        if last >= self._committed_leo:
            for original in self._pending:
                if original.info.first_offset <= last <= original.info.last_offset:
                    pending.duplicate_of = original
                    break
        log.debug("{topic}-{partition}: a duplicate of offsets {first}-{last} is answered with them",
                  topic=self.topic, partition=self.partition, first=first, last=last)
        return pending

    def append_as_follower(self, records, now_ms: int | None = None) -> LogAppendInfo:
        """Append batches that already carry offsets and epochs (replication).

        The batches must be intact (framing, CRC) and continue the log: the
        first base offset at or above the log end, offsets increasing.
        Raises ``KafkaError`` (CORRUPT_MESSAGE, OFFSET_OUT_OF_RANGE,
        KAFKA_STORAGE_ERROR).
        """
        self._check_writable()
        now_ms = wall_clock_ms() if now_ms is None else now_ms
        batches = self._validate(records, AppendOrigin.COORDINATOR)
        if not batches:
            return LogAppendInfo(-1, -1, NO_TIMESTAMP, -1, -1, self.log_start_offset, 0, 0, 0, -1)
        expected = self._leo
        infos = []
        max_ts, offset_of_max = NO_TIMESTAMP, batches[0][1].base_offset
        num_records = 0
        for pos, header in batches:
            if header.base_offset < expected:
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                 f"batch base offset {header.base_offset} is below the expected "
                                 f"{expected}")
            infos.append(BatchInfo(pos, header.size, header.base_offset, header.last_offset,
                                   header.max_timestamp))
            if header.max_timestamp > max_ts:
                max_ts, offset_of_max = header.max_timestamp, header.base_offset
            num_records += header.records_count
            expected = header.next_offset
        info = LogAppendInfo(
            first_offset=infos[0].base_offset, last_offset=infos[-1].last_offset,
            max_timestamp=max_ts, offset_of_max_timestamp=offset_of_max, log_append_time=-1,
            log_start_offset=self.log_start_offset, num_records=num_records,
            num_batches=len(infos), valid_bytes=len(records),
            leader_epoch=batches[-1][1].partition_leader_epoch)
        data = bytes(records)
        pending = self._reserve(data, infos, max_ts, now_ms, info)
        producers = self.producer_state.begin_append(Checks.NONE)
        for pos, header in batches:
            self.epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
            if header.producer_id >= 0:
                marker = None
                if header.is_control:
                    marker = self._marker_of(data, pos, header, strict=False)
                    if marker is None:
                        continue
                producers.add(header, header.base_offset, header.last_offset, header.max_timestamp, marker)
        if producers.updated:
            undo = pending.producer_undo = self.producer_state.commit(producers)
            pending.aborted = undo.aborted
        self._write_now(pending)
        return info

    def _check_writable(self) -> None:
        if self.failed is not None:
            raise self.failed
        if self.deleted:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                             f"{self.topic}-{self.partition} has been deleted")
        if self.closed:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"the log of {self.topic}-{self.partition} is closed")

    def _reserve(self, data, infos: list[BatchInfo], max_ts: int, now_ms: int,
                 info: LogAppendInfo) -> PendingAppend:
        """Roll if needed, claim file space, move the log end: the append is now ordered.

        A roll that cannot create its files (a full disk) raises
        KAFKA_STORAGE_ERROR with nothing changed.
        """
        segment = self.active_segment
        if segment.should_roll(self.config, len(data), max_ts, infos[-1].last_offset, now_ms):
            try:
                segment = self.roll(now_ms, base_offset=infos[0].base_offset)
            except OSError as e:
                # Nothing changed: the active segment stays active; this append fails alone.
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                                 f"cannot roll {self.topic}-{self.partition} to a new segment: "
                                 f"{e.strerror or e}") from e
        try:
            fd = segment.pin()          # O(1) when open; opened here if it was closed while idle
        except OSError as e:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"cannot open {segment.log_path} to append to "
                             f"{self.topic}-{self.partition}: {e.strerror or e}") from e
        position = segment.reserve(len(data))
        self._leo = infos[-1].last_offset + 1
        pending = PendingAppend(segment, position, data, infos, info, fd)
        self._pending.append(pending)
        return pending

    def _write_now(self, pending: PendingAppend) -> None:
        try:
            pending.write()
        except OSError as e:
            self.complete_append(pending, e)
        else:
            self.complete_append(pending)
        if pending.error is not None:
            raise pending.error

    def complete_append(self, pending: PendingAppend, error: BaseException | None = None) -> None:
        """Second half of an append: its bytes are written (or ``error`` says they are not).

        Appends become visible in the order they were prepared; one that
        finishes early waits for those before it.  A failed write fails its
        append and every append prepared after it with KAFKA_STORAGE_ERROR
        (offsets are contiguous: none of them can become visible); appends
        prepared before it still commit when their writes succeed.  New
        appends are refused until all of those have finished; then the log
        drops the uncommitted bytes and takes appends again at its committed
        end — the next append is the retry (``_roll_back``).
        """
        if pending.done:
            return
        if pending.segment is None:          # nothing to write
            pending._finish(None)
            return
        pending.written = True
        if error is not None:
            pending.write_error = error
            if self.failed is None:
                log.error("write to {topic}-{partition} failed: {error}; this append and those "
                          "queued behind it fail with KAFKA_STORAGE_ERROR", topic=self.topic,
                          partition=self.partition, error=error)
                self.failed = KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                                         f"write to {self.topic}-{self.partition} failed: {error}")
        committed = False
        while self._pending and self._pending[0].written:
            head = self._pending.popleft()
            segment = head.segment
            assert segment is not None           # appends with nothing to write are never queued
            if head.write_error is None and not self._aborting:
                segment.commit(head.position, head.nbytes, head.batches)
                for txn in head.aborted:
                    self._index_abort(segment, txn)
                self._committed_leo = head.info.last_offset + 1
                if self.hw_follows_leo:
                    self._high_watermark = self._committed_leo
                    committed = True
                head._finish(None)
            else:
                self._aborting = True
                segment.abort_write()
                self._aborted_segments.add(segment)
                if head.producer_undo is not None:
                    self._producer_undos.append(head.producer_undo)
                head._finish(self.failed)
        if committed:
            self.producer_state.on_high_watermark_updated(self._high_watermark)
            self._offsets_changed()
        if not self._pending and self.failed is not None:
            self._roll_back()

    def _index_abort(self, segment: LogSegment, txn: AbortedTxn) -> None:
        """Add an aborted transaction to the index of the segment holding its marker.  Markers
        come in offset order, so the index's order holds; should it not, the entry is lost
        (logged), never the append."""
        try:
            segment.txn_index.append(txn)
        except ValueError as e:
            log.error("{topic}-{partition}: the aborted transaction {txn} is not indexed: {e}", topic=self.topic,
                      partition=self.partition, txn=txn, e=e)

    def _roll_back(self) -> None:
        """Every append in flight has finished after a failed write: back to the committed end.

        Segments rolled for appends that failed, and so hold nothing, are
        removed; the uncommitted tail of the others is cut off; the log end
        and the leader-epoch cache return to the committed end.
        """
        end = self._committed_leo
        while len(self._segments) > 1 and self._segments[-1].size == 0 \
                and self._segments[-1].base_offset > end:
            doomed = self._segments.pop()
            self._bases.pop()
            self._aborted_segments.discard(doomed)
            self._dir_generation += 1
            self.segment_deleter(self, [doomed])
            self._segments[-1].reactivate()
        for segment in self._aborted_segments:
            segment.discard_uncommitted()
        self._aborted_segments = set()
        self._leo = end
        self.epoch_cache.truncate_from_end(end + 1)
        producers = self.producer_state
        for undo in reversed(self._producer_undos):
            producers.undo(undo)
        self._producer_undos = []
        producers.delete_snapshots_above(end)
        self._aborting = False
        self.failed = None

    def roll(self, now_ms: int | None = None, *, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at the log end (no-op when the active one is empty).

        Raises OSError (a full disk) with nothing changed.
        """
        now_ms = wall_clock_ms() if now_ms is None else now_ms
        active = self.active_segment
        base = self._leo if base_offset is None else max(base_offset, self._leo)
        if active.reserved_size == 0 and active.base_offset == base:
            return active
        segment = LogSegment.create(self.dir, base, self.config, now_ms, files=self.files)
        if active.reserved_size == 0:
            # An empty active segment at the wrong base (follower jumped ahead): replace it.
            self._segments.pop()
            self._bases.pop()
            self.segment_deleter(self, [active])
        else:
            active.on_become_inactive()
        self._segments.append(segment)
        self._bases.append(base)
        self._dir_generation += 1
        # The producer state as of the new segment's base (every append below it, none
        # above): written with the finished segment's flush, so recovery can start here.
        self.producer_state.take_snapshot(base)
        log.debug("rolled {topic}-{partition} to segment {base}", topic=self.topic,
                  partition=self.partition, base=base)
        if self.on_roll is not None:
            self.on_roll(self, base)
        return segment

    # -- reads --------------------------------------------------------------

    def _check_in_range(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self._leo:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"offset {offset} is outside [{self.log_start_offset}, {self._leo}] "
                             f"of {self.topic}-{self.partition}")

    def read(self, fetch_offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_message: bool = True, nowait: bool = False, regions: bool = False) -> FetchDataInfo:
        """Whole batches from the one holding ``fetch_offset``, up to ``max_bytes``.

        ``max_offset`` (exclusive; the high watermark for consumers) stops
        before any batch reaching it.  With ``min_one_message`` the first
        batch is returned even if larger than ``max_bytes`` (KIP-74).  Raises
        ``KafkaError(OFFSET_OUT_OF_RANGE)`` outside [log start, log end].
        ``nowait``: raise ``segment.WouldBlock`` rather than wait for the disk
        (data or index not in memory) — ``UnifiedLog.read`` then retries in
        the thread pool.  Safe to call on a pool thread.  A read stops before
        damaged data; one that starts in it raises CORRUPT_MESSAGE (see
        ``segment.DamagedRange``).  ``regions``: the chunks of undamaged
        segments are ``FileRegion``s (the bytes left in the file, for
        ``sendfile``; only the batch headers are read), to be closed by whoever
        sends them.
        """
        self._check_in_range(fetch_offset)
        leo = self._leo
        limit = leo if max_offset is None else min(max_offset, leo)
        if fetch_offset >= limit:
            return FetchDataInfo(fetch_offset, [], 0, fetch_offset, fetch_offset)
        segments = self._segments
        bases = self._bases
        i = max(0, bisect_right(bases, fetch_offset) - 1)
        if len(bases) != len(segments) or segments[i].base_offset != bases[i]:
            # The reactor replaced the segment list between the two reads above (this
            # runs on a pool thread too): find the segment in the list itself.
            i = max(0, bisect_right([s.base_offset for s in segments], fetch_offset) - 1)
        chunks: list = []
        remaining = max_bytes
        first_offset = -1
        next_offset = fetch_offset
        while i < len(segments) and next_offset < limit:
            segment = segments[i]
            if segment.damaged:
                damage = segment.damaged_range_of(next_offset)
                if damage is not None:
                    if chunks:
                        break
                    raise KafkaError(
                        ErrorCode.CORRUPT_MESSAGE,
                        f"offsets {damage.first_offset}-{damage.last_offset} of {self.topic}-"
                        f"{self.partition} are damaged on disk ({segment.log_path}, bytes "
                        f"{damage.start}-{damage.end}); fetch from {damage.last_offset + 1} to skip them")
            found = segment.find_batch(next_offset, nowait=nowait)
            if found is None:
                i += 1
                continue
            position, header = found
            end = segment.readable_end(position) if segment.damaged else segment.size
            if header.last_offset >= limit:
                break
            want = remaining
            if not chunks and min_one_message:
                want = max(want, header.size)
            if header.size > want:
                break
            if regions and not segment.damaged:
                cut, after = _whole_batches_extent(segment, position, min(want, end - position), limit, nowait)
                if cut == 0:
                    break
                chunks.append(segment.region(position, cut))
            else:
                data = segment.read(position, min(want, end - position), nowait=nowait)
                cut, after = _whole_batches_prefix(segment, position, data, limit)
                if cut == 0:
                    break
                chunks.append(data if cut == len(data) else memoryview(data)[:cut])
            next_offset = after
            if first_offset < 0:
                first_offset = header.base_offset
            remaining -= cut
            if position + cut < segment.size or remaining <= 0:
                break
            i += 1
        size = max_bytes - remaining
        if not chunks:
            return FetchDataInfo(fetch_offset, [], 0, fetch_offset, fetch_offset)
        return FetchDataInfo(fetch_offset, chunks, size, first_offset, next_offset)

    # -- damaged data ---------------------------------------------------------

    def mark_damaged(self, segment: LogSegment, ranges: list[DamagedRange]) -> None:
        """Damage found in ``segment`` after loading (the background check): reads of
        those offsets fail with CORRUPT_MESSAGE from now on, and the ranges are
        recorded in ``damaged-ranges`` so a restart knows them too."""
        if segment not in self._segments or not ranges:
            return
        segment.damaged = sorted(set(segment.damaged) | set(ranges))
        self.save_damaged_ranges(fsync=False)

    def save_damaged_ranges(self, *, fsync: bool = True) -> None:
        """Write ``damaged-ranges`` from the segments' ranges (removed when there are none)."""
        ranges = {s.base_offset: [(d.start, d.end, d.first_offset, d.last_offset) for d in s.damaged]
                  for s in self._segments if s.damaged}
        path = os.path.join(self.dir, DAMAGED_RANGES)
        if not ranges and not os.path.exists(path):
            return
        try:
            write_damaged_ranges(path, ranges, fsync=fsync, space=self.space, files=self.files)
        except OSError as e:
            log.warn("cannot write {path}: {e}", path=path, e=e)

    def segments_to_check(self) -> list[tuple[LogSegment, int]]:
        """(segment, next segment's base) of every finished segment wholly below the
        recovery point whose batches were not CRC-checked when the log was loaded."""
        return [(s, following.base_offset) for s, following in pairwise(self._segments)
                if following.base_offset <= self.recovery_point and not s.verified]

    def fetch_offset_by_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets by time: the first record (at or after log start) with a timestamp
        >= ``timestamp``: its (offset, timestamp, leader epoch), or None if there is none.

        The time index finds where to start in the first segment that can
        hold such a record; batch headers are walked from there, and the
        records of the first batch whose max timestamp qualifies are decoded.
        """
        start = self.log_start_offset
        segments = self._segments
        for i, segment in enumerate(segments):
            if segment.max_timestamp < timestamp:
                continue
            if i + 1 < len(segments) and segments[i + 1].base_offset <= start:
                continue
            _, indexed = segment.time_index.lookup(timestamp)
            _, position = segment.offset_index.lookup(max(indexed, start))
            for pos, header in segment.iter_headers(position):
                if header.max_timestamp < timestamp or header.last_offset < start:
                    continue
                data = segment.read(pos, header.size)
                for offset, ts in record_offsets_and_timestamps(data, 0, header):
                    if ts >= timestamp and offset >= start:
                        return TimestampAndOffset(offset, ts, header.partition_leader_epoch)
        return None

    def fetch_offset_of_max_timestamp(self) -> TimestampAndOffset | None:
        """ListOffsets MAX_TIMESTAMP (KIP-734): the first record with the largest timestamp."""
        best = None
        for segment in self._segments:
            if segment.max_timestamp >= 0 and (best is None or segment.max_timestamp > best.max_timestamp):
                best = segment
        if best is None:
            return None
        found = best.find_batch(best.offset_of_max_timestamp)
        if found is None:
            return None
        pos, header = found
        data = best.read(pos, header.size)
        for offset, ts in record_offsets_and_timestamps(data, 0, header):
            if ts == header.max_timestamp:
                return TimestampAndOffset(offset, ts, header.partition_leader_epoch)
        return TimestampAndOffset(header.last_offset, header.max_timestamp,
                                  header.partition_leader_epoch)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: see ``LeaderEpochCache.end_offset_for``."""
        return self.epoch_cache.end_offset_for(epoch, self._leo)

    # -- removing data ------------------------------------------------------

    def _delete_segments(self, should_delete: Callable[[LogSegment, LogSegment], bool]) -> int:
        """Delete the longest prefix of non-active segments for which
        ``should_delete(segment, next_segment)`` holds, never data above the
        high watermark.  Moves log start up to the first remaining segment.
        """
        count = 0
        segments = self._segments
        while count < len(segments) - 1:
            segment, following = segments[count], segments[count + 1]
            if following.base_offset > self._high_watermark or not should_delete(segment, following):
                break
            count += 1
        if not count:
            return 0
        doomed = segments[:count]
        self._segments = segments[count:]
        self._bases = self._bases[count:]
        self.producer_state.remove_snapshots(s.base_offset for s in doomed)
        if any(s.damaged for s in doomed):
            self.save_damaged_ranges(fsync=False)
        new_start = self._segments[0].base_offset
        if new_start > self.log_start_offset:
            self._log_start_moved(new_start)
        self._dir_generation += 1
        self.segment_deleter(self, doomed)
        log.info("deleted {n} segment(s) of {topic}-{partition}; log start is {start}",
                 n=count, topic=self.topic, partition=self.partition, start=self.log_start_offset)
        return count

    def replace_segments(self, new: LogSegment, old: list[LogSegment], *,
                         from_suffix: str = CLEANED_SUFFIX) -> bool:
        """Swap ``new`` (compaction output, its files named ``<name><from_suffix>``,
        written and fsynced) in for ``old``, a run of consecutive finished segments.

        Kafka's protocol (``LocalLog.replaceSegments``), every rename on this thread
        in one go so nothing else sees the log half-swapped:

        1. ``new``'s files: ``.cleaned`` -> ``.swap`` (indexes, then the ``.log``:
           the commit point -- from here a crash completes the swap at the next
           start, before it aborts it: ``recovery``);
        2. ``old``'s files go to the segment deleter (renamed ``.deleted`` at once,
           removed later; readers holding them keep reading);
        3. ``new``'s files: ``.swap`` -> final names.

        Returns False, with nothing changed, when ``old`` is no longer a run of
        this log's finished segments (retention, DeleteRecords or a truncation
        removed some meanwhile): the caller discards ``new``.  Runs on the
        reactor; the directory is made durable by the next flush (``_dir_generation``).
        """
        segments = self._segments
        if not old or self.closed or self.deleted:
            return False
        try:
            i = next(n for n, s in enumerate(segments) if s is old[0])
        except StopIteration:
            return False
        if i + len(old) >= len(segments) or new.base_offset != old[0].base_offset \
                or any(a is not b for a, b in zip(segments[i:i + len(old)], old, strict=True)):
            return False
        new.change_suffix(from_suffix, SWAP_SUFFIX)        # raises OSError with nothing changed
        # Past the commit point: whatever happens to the files now, the new segment is
        # the data (a restart would complete the swap the same way).
        try:
            self.segment_deleter(self, list(old))
            # As Kafka's UnifiedLog.replaceSegments: the producer state snapshots named after the
            # replaced segments go with them (the one at the new segment's base stays).
            self.producer_state.remove_snapshots(s.base_offset for s in old if s.base_offset != new.base_offset)
        except OSError as e:
            log.error("cannot remove the segments {old} replaced by {new}: {e}; they are removed "
                      "at the next start", old=[s.log_path for s in old], new=new.log_path, e=e)
        try:
            new.change_suffix(SWAP_SUFFIX, "")
        except OSError as e:
            log.error("cannot rename {path} to its final name: {e}; the swap is completed at the "
                      "next start", path=new.log_path, e=e)
        self._segments = segments[:i] + [new] + segments[i + len(old):]
        self._bases = [s.base_offset for s in self._segments]
        self._dir_generation += 1
        if any(s.damaged for s in old):
            self.save_damaged_ranges(fsync=False)
        return True

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move log start to ``offset`` (-1: the high watermark).

        Whole segments below the new start are deleted at once; the rest of
        the segment holding it stays on disk but is no longer readable.
        Returns the new log start offset (the "low watermark").  Raises
        OFFSET_OUT_OF_RANGE above the high watermark.
        """
        if offset == -1:
            offset = self._high_watermark
        if offset < 0 or offset > self._high_watermark:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"cannot delete records before {offset}: the high watermark of "
                             f"{self.topic}-{self.partition} is {self._high_watermark}")
        if offset > self.log_start_offset:
            self._log_start_moved(offset)
            self._delete_segments(lambda seg, following: following.base_offset <= offset)
        return self.log_start_offset

    def _log_start_moved(self, offset: int) -> None:
        """The log start moved forward to ``offset`` (Kafka's ``maybeIncrementLogStartOffset``):
        leader epochs and completed transactions below it go; the last stable offset is at
        least the log start."""
        self.log_start_offset = offset
        self.epoch_cache.truncate_from_start(offset)
        self.producer_state.on_log_start_offset_incremented(offset)
        self._offsets_changed()

    def truncate_to(self, offset: int, now_ms: int | None = None) -> bool:
        """Remove everything from ``offset`` on (replication; recovery).

        A batch straddling ``offset`` is removed whole, so the log may end a
        little below ``offset``.  Returns True if anything was removed.
        """
        if offset < 0:
            raise ValueError(f"cannot truncate to a negative offset {offset}")
        if self._pending:
            raise RuntimeError("cannot truncate a log with writes in flight")
        if offset >= self._leo:
            return False
        if offset <= self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset, now_ms)
            return True
        keep = bisect_right(self._bases, offset - 1)  # segments starting below offset
        doomed = self._segments[keep:]
        self._segments = self._segments[:keep]
        self._bases = self._bases[:keep]
        had_damage = any(s.damaged for s in self._segments[-1:] + doomed)
        if doomed:
            self._dir_generation += 1
            self.segment_deleter(self, doomed)
        last = self._segments[-1]
        last.truncate_to(offset)
        if had_damage:
            last.damaged = [d for d in last.damaged if d.end <= last.size]
            self.save_damaged_ranges(fsync=False)
        self._leo = self._committed_leo = last.next_offset
        self.epoch_cache.truncate_from_end(self._leo)
        self.recovery_point = min(self.recovery_point, self._leo)
        self._high_watermark = min(self._high_watermark, self._leo)
        self.log_start_offset = min(self.log_start_offset, self._leo)
        # Kafka's rebuildProducerState: the newest snapshot left, then the batches after it
        # (open transactions and the last stable offset included).
        producers = self.producer_state
        producers.delete_snapshots_above(self._leo)
        producers.write_snapshots()
        producers.rebuild(self._segments, self.log_start_offset, self._leo,
                          wall_clock_ms() if now_ms is None else now_ms, had_clean_shutdown=False)
        producers.on_high_watermark_updated(self._high_watermark)
        self._offsets_changed()
        return True

    def truncate_fully_and_start_at(self, offset: int, now_ms: int | None = None) -> None:
        """Drop every segment and start empty at ``offset``."""
        if self._pending:
            raise RuntimeError("cannot truncate a log with writes in flight")
        now_ms = wall_clock_ms() if now_ms is None else now_ms
        doomed = self._segments
        had_damage = any(s.damaged for s in doomed)
        for segment in doomed:
            if segment.base_offset == offset:
                segment.rename_for_delete()   # free the name for the new segment
        self.segment_deleter(self, doomed)
        segment = LogSegment.create(self.dir, offset, self.config, now_ms, files=self.files)
        self._segments = [segment]
        self._bases = [offset]
        self._dir_generation += 1
        self._leo = self._committed_leo = offset
        self.log_start_offset = offset
        self.recovery_point = offset
        self._high_watermark = offset
        self.epoch_cache.clear()
        self.producer_state.truncate_fully()
        if had_damage:
            self.save_damaged_ranges(fsync=False)
        self._offsets_changed()

    # -- durability and lifecycle -------------------------------------------

    def flush(self, up_to_offset: int | None = None, now_ms: int | None = None) -> int:
        """fsync segments holding offsets below ``up_to_offset`` (default: the log end).

        BLOCKING — run it in the thread pool.  Also makes new/removed file
        names (directory fsync) and the leader-epoch checkpoint durable.
        Advances and returns ``recovery_point``.
        """
        with self._flush_lock:
            self.producer_state.write_snapshots()
            committed = self._committed_leo
            target = committed if up_to_offset is None else min(up_to_offset, committed)
            segments = list(self._segments)
            start = self.recovery_point
            generation = self._dir_generation
            if target > start:
                for i, segment in enumerate(segments):
                    next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
                    if segment.base_offset >= target:
                        break
                    if next_base is not None and next_base <= start:
                        continue
                    segment.flush()
            # The epoch checkpoint lives in this directory: writing it durably fsyncs the
            # directory (after every name ``generation`` counts), so one fsync does for both.
            if self.epoch_cache.flush() and os.path.dirname(self.epoch_cache.path or "") == self.dir:
                self._dir_flushed_generation = generation
            elif generation != self._dir_flushed_generation and os.path.isdir(self.dir):
                fsync_dir(self.dir)
                self._dir_flushed_generation = generation
            if target > self.recovery_point:
                self.recovery_point = min(target, self._committed_leo)
            self.last_flush_ms = wall_clock_ms() if now_ms is None else now_ms
            return self.recovery_point

    def snapshot_for_shutdown(self) -> bool:
        """Capture the producer state at the log end for the clean shutdown's flush to
        write (Kafka writes one at close).  Only logs with producers or snapshots get
        one: a log no idempotent producer ever wrote to needs none.  On the reactor,
        with no write in flight.  True if one was captured."""
        producers = self.producer_state
        if not producers.producers and not producers.snapshot_offsets:
            return False
        return producers.take_snapshot(self._leo)

    def close(self) -> None:
        """Close every file (no flush: callers flush first when they want durability)."""
        if self.closed:
            return
        self.closed = True
        for segment in self._segments:
            segment.close(finalize=not self.deleted)

    def delete(self) -> None:
        """Close and remove the whole partition directory (BLOCKING)."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)

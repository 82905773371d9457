"""``UnifiedLog``: one partition's log as the broker uses it — asynchronous.

Named after Kafka's ``UnifiedLog``, the per-partition API the rest of the
broker calls, layered over ``LocalLog`` (the segments on this broker's
disk); here the synchronous ``Log`` plays ``LocalLog``.  Kafka's name also
covers tiered storage (KIP-405), which would join here as well: callers
keep one object per partition whatever is behind it.

``Log`` never waits on anything but the disk and never decides where its
work runs; this class does, once per partition, so that nothing above it
needs to know what is blocking:

* append: validation and offset assignment on the reactor (arrival order is
  offset order), the segment write on the reactor up to
  ``INLINE_WRITE_MAX_BYTES`` and in the I/O thread pool above, completion
  back on the reactor in offset order; then the flush policy — once
  ``flush.messages`` unflushed records are reached the append waits for an
  fsync, which runs in the pool and is coalesced with its neighbours
  (``LogFlusher``);
* read: tried on the reactor with ``RWF_NOWAIT`` (page cache only), redone
  in the pool if the data or an index would have to come from the disk;
* ListOffsets by timestamp and max timestamp: in the pool (index files,
  batch decompression);
* flush: through the same ``LogFlusher``, so at most one fsync per log runs
  at a time.

Every method that may wait returns a Deferred, and the common case — a
small append without an fsync, a read from the page cache — returns one
that has already fired, with no callback chain behind it: produce runs at
about a microsecond per record, so each Deferred layer on this path shows.

See ``twisted_kafka.log`` for the measurements behind these choices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from twisted.internet import threads
from twisted.internet.defer import Deferred, fail, gatherResults, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.log.disk_space import LogDirSpace, is_out_of_space
from twisted_kafka.log.epoch_cache import LeaderEpochCache
from twisted_kafka.log.file_handles import out_of_descriptors
from twisted_kafka.log.flusher import LogFlusher
from twisted_kafka.log.log import Log, PendingAppend
from twisted_kafka.log.log_config import LogConfig
from twisted_kafka.log.partition_log import (
    AbortedTransaction,
    AppendOrigin,
    FetchDataInfo,
    FetchIsolation,
    LogAppendInfo,
    OffsetsListener,
    PartitionLog,
    ProducerStateEntry,
)
from twisted_kafka.log.segment import WouldBlock
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

log = Logger()

#: Appends up to this size are written on the reactor (a page-cache write of
#: 64 KiB costs ~0.05-0.1 ms even under writeback pressure); larger ones are
#: written in the thread pool.  See ``twisted_kafka.log`` for the figures.
INLINE_WRITE_MAX_BYTES = 64 * 1024


class UnifiedLog(PartitionLog):
    """The file log's ``PartitionLog``: the asynchronous per-partition API over one ``Log``
    (see the module docstring).

    ``LogManager`` builds one per partition and hands it out from its
    registry; everything else in the broker reads and writes the partition
    through the ``PartitionLog`` methods.  ``local_log`` is the synchronous
    ``Log`` underneath, for the log's own machinery in ``twisted_kafka.log``
    (loading, retention, checkpoints, deletion, the cleaner); nothing outside
    that package touches it.
    """

    __slots__ = ("local_log", "inline_write_max_bytes", "space", "on_flushed_roll", "_reactor",
                 "_blocking", "_flusher", "_writes")

    def __init__(self, local_log: Log, *, reactor, threadpool, space: LogDirSpace | None = None):
        """``threadpool`` runs the blocking work (writes above the inline
        limit, fsyncs, reads that would wait for the disk); ``space`` is the
        log dir's ``LogDirSpace``: while it is full, appends are refused."""
        self.local_log = local_log
        self.space = space
        #: Called (no arguments) when the fsync of a finished segment is done:
        #: ``LogManager`` then checkpoints the recovery point.
        self.on_flushed_roll: Callable[[], None] | None = None
        #: Per log so that tests (and a future dynamic setting) can move the split.
        self.inline_write_max_bytes = INLINE_WRITE_MAX_BYTES
        self._reactor = reactor
        self._blocking: Callable[..., Deferred] = partial(threads.deferToThreadPool, reactor, threadpool)
        self._flusher = LogFlusher(local_log, self._blocking, self._now_ms)
        self._writes: set[Deferred] = set()       # writes running in the pool
        local_log.on_roll = self._on_roll
        local_log.last_flush_ms = self._now_ms()

    def _now_ms(self) -> int:
        return int(self._reactor.seconds() * 1000)

    def __repr__(self) -> str:
        return f"<UnifiedLog of {self.local_log!r}>"

    # -- what callers read -------------------------------------------------

    @property
    def topic(self) -> str:
        return self.local_log.topic

    @property
    def partition(self) -> int:
        return self.local_log.partition

    @property
    def topic_id(self):
        return self.local_log.topic_id

    @property
    def dir(self) -> str:
        return self.local_log.dir

    @property
    def config(self) -> LogConfig:
        return self.local_log.config

    def update_config(self, config: LogConfig) -> None:
        """New effective settings (AlterConfigs); they apply from the next append/check."""
        self.local_log.update_config(config)

    @property
    def deleted(self) -> bool:
        """True once ``LogManager.delete_log`` removed the partition (appends are refused)."""
        return self.local_log.deleted

    @property
    def high_watermark(self) -> int:
        return self.local_log.high_watermark

    def update_high_watermark(self, offset: int) -> int:
        local = self.local_log
        local.high_watermark = offset            # clamped to [log start, committed end]
        return local.high_watermark

    def maybe_increment_high_watermark(self, offset: int) -> bool:
        local = self.local_log
        old = local.high_watermark
        offset = min(offset, local.committed_end_offset)
        if offset <= old:
            return False
        local.high_watermark = offset
        return local.high_watermark > old

    def high_watermark_follows_log_end(self, follows: bool) -> None:
        local = self.local_log
        local.hw_follows_leo = follows
        if follows:
            local.high_watermark = local.committed_end_offset

    @property
    def last_stable_offset(self) -> int:
        return self.local_log.last_stable_offset

    def aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTransaction]:
        if upper_bound_offset <= start_offset:
            return []
        return [AbortedTransaction(t.producer_id, t.first_offset)
                for t in self.local_log.collect_aborted_txns(start_offset, upper_bound_offset)]

    def set_offsets_listener(self, listener: OffsetsListener | None) -> None:
        self.local_log.set_offsets_listener(listener)

    def _with_aborted(self, info: FetchDataInfo) -> FetchDataInfo:
        """A read_committed read's answer: the transactions aborted in what it returned (the
        range up to the offset after its last batch), as Kafka's ``addAbortedTransactions``."""
        return replace(info, aborted_transactions=self.aborted_transactions(info.fetch_offset, info.next_offset)
                       if info.size else [])

    @property
    def log_start_offset(self) -> int:
        return self.local_log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        """Next offset to assign (moves as soon as an append is prepared)."""
        return self.local_log.log_end_offset

    @property
    def committed_end_offset(self) -> int:
        """End of what is written and visible (below ``log_end_offset`` while writes run)."""
        return self.local_log.committed_end_offset

    @property
    def recovery_point(self) -> int:
        return self.local_log.recovery_point

    @property
    def unflushed_messages(self) -> int:
        return self.local_log.unflushed_messages

    @property
    def last_flush_ms(self) -> int:
        return self.local_log.last_flush_ms

    @property
    def epoch_cache(self) -> LeaderEpochCache:
        """The leader-epoch file of the log, for ``twisted_kafka.log``'s own machinery."""
        return self.local_log.epoch_cache

    @property
    def latest_epoch(self) -> int:
        return self.local_log.latest_epoch

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> bool:
        return self.local_log.epoch_cache.assign(epoch, start_offset)

    def epoch_for_offset(self, offset: int) -> int:
        return self.local_log.epoch_cache.epoch_for_offset(offset)

    def epoch_entries(self) -> list[tuple[int, int]]:
        return self.local_log.epoch_cache.entries

    def producer_state_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.local_log.producer_state.entry(producer_id)

    def active_producers(self) -> list[ProducerStateEntry]:
        producers = self.local_log.producer_state.producers
        return [producers[pid] for pid in sorted(producers)]

    def remove_expired_producers(self, now_ms: int) -> int:
        return self.local_log.producer_state.remove_expired(now_ms)

    @property
    def size(self) -> int:
        return self.local_log.size

    @property
    def num_segments(self) -> int:
        return self.local_log.num_segments

    @property
    def recovery_stats(self) -> Any:
        return self.local_log.recovery_stats

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch (KIP-101, KIP-279): see ``LeaderEpochCache.end_offset_for``."""
        return self.local_log.end_offset_for_epoch(epoch)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: see ``Log.delete_records_before`` (on the reactor: it only
        renames whole segments; their files go later, in the pool)."""
        return self.local_log.delete_records_before(offset)

    # -- appends -----------------------------------------------------------

    def append_as_leader(self, records, leader_epoch: int, now_ms: int | None = None, *,
                         origin: AppendOrigin = AppendOrigin.CLIENT,
                         produce_version: int | None = None) -> Deferred:
        """Append as leader; fires with the ``LogAppendInfo`` once the append is
        written, visible, and — when the topic's ``flush.messages`` is reached —
        fsynced.  Fails with ``KafkaError`` as ``Log.append_as_leader`` does.

        Appends become visible, and their Deferreds fire, in arrival order,
        whichever of them were written in the pool.  A write that fails
        fails its append and the appends queued behind it with
        KAFKA_STORAGE_ERROR, never an earlier append or another partition;
        the log then drops the partial write and the next append is the
        retry.  A write that ran out of space marks the log dir full: its
        appends fail at once until ``LogManager`` finds space again.
        """
        local = self.local_log
        space = self.space
        if space is not None and space.full:
            return fail(KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                                   f"the log dir {space.path} is full ({space.reason}); appends "
                                   f"resume once space is freed"))
        try:
            pending = local.prepare_append_as_leader(
                records, leader_epoch, self._now_ms() if now_ms is None else now_ms, origin=origin,
                produce_version=produce_version)
        except Exception as e:
            self._check_space(e)
            return fail()
        if pending.segment is None:                 # no batches, or a duplicate: nothing to write
            original = pending.duplicate_of
            if original is None:
                answer = self._as_durable_as_original(pending.info)
                return answer if isinstance(answer, Deferred) else succeed(answer)
            answered: Deferred[LogAppendInfo] = Deferred()
            duplicate = pending.info
            original.on_commit(lambda error: answered.errback(error) if error is not None
                               else answered.callback(duplicate))
            answered.addCallback(self._as_durable_as_original)
            return answered
        if pending.nbytes <= self.inline_write_max_bytes:
            try:
                pending.write()
            except Exception as e:
                self._check_space(e)
                local.complete_append(pending, e)
            else:
                local.complete_append(pending)
            if pending.done:
                # The common case: nothing was in flight before it, so it is
                # committed now — answer without a callback chain.
                if pending.error is not None:
                    return fail(pending.error)
                if local.unflushed_messages < local.config.flush_interval_messages:
                    return succeed(pending.info)
                return self._flushed(pending.info)
        else:
            self._write_in_pool(pending)
        committed: Deferred[LogAppendInfo] = Deferred()
        info = pending.info
        pending.on_commit(
            lambda error: committed.errback(error) if error is not None else committed.callback(info))
        committed.addCallback(self._after_commit)
        return committed

    def append_as_follower(self, records) -> LogAppendInfo:
        """Append a leader's batches as they are (offsets, epochs and timestamps kept), on the reactor.

        A follower appends what one fetch returned for the partition --
        ``replica.fetch.max.bytes`` at most -- so the write is done inline;
        raises ``KafkaError`` as ``Log.append_as_follower`` does.
        """
        space = self.space
        if space is not None and space.full:
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"the log dir {space.path} is full ({space.reason}); replication resumes once "
                             f"space is freed")
        try:
            return self.local_log.append_as_follower(records, self._now_ms())
        except Exception as e:
            self._check_space(e)
            raise

    @property
    def has_writes_in_flight(self) -> bool:
        return self.local_log.has_writes_in_flight

    def truncate_to(self, offset: int) -> bool:
        """Follower truncation (KIP-101): drop everything from ``offset`` on; True if anything went."""
        return self.local_log.truncate_to(offset, self._now_ms())

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """A follower behind the leader's log start: drop the whole log and continue at ``offset``."""
        self.local_log.truncate_fully_and_start_at(offset, self._now_ms())

    def _check_space(self, error: BaseException | None) -> None:
        if self.space is not None and is_out_of_space(error):
            self.space.mark_full(f"writing {self.topic}-{self.partition}: {error}")

    def _write_in_pool(self, pending: PendingAppend) -> None:
        d = self._blocking(pending.write)
        self._writes.add(d)

        def written(result):
            self._writes.discard(d)
            if isinstance(result, Failure):
                self._check_space(result.value)
                self.local_log.complete_append(pending, result.value)
            else:
                self.local_log.complete_append(pending)
            return None

        d.addBoth(written)

    def _after_commit(self, info: LogAppendInfo):
        """The flush policy: ``flush.messages`` unflushed records wait for an fsync."""
        local = self.local_log
        if local.unflushed_messages >= local.config.flush_interval_messages:
            return self._flushed(info)
        return info

    def _as_durable_as_original(self, info: LogAppendInfo):
        """A duplicate is acknowledged as its original is: once committed, and fsynced
        when the flush policy asks for it and the original is not yet below the recovery point."""
        local = self.local_log
        if info.last_offset < local.recovery_point or \
                local.unflushed_messages < local.config.flush_interval_messages:
            return info
        return self._flushed(info)

    def _flushed(self, info: LogAppendInfo) -> Deferred:
        d = self._flusher.flush(info.last_offset + 1)
        d.addCallback(lambda _: info)
        return d

    # -- flushes -----------------------------------------------------------

    def flush(self, up_to_offset: int | None = None) -> Deferred:
        """fsync up to ``up_to_offset`` (default: the committed end) in the pool;
        fires with the recovery point.  Coalesced with the other fsyncs of this
        log; fails with ``KafkaError(KAFKA_STORAGE_ERROR)``."""
        return self._flusher.flush(up_to_offset)

    def _on_roll(self, local_log: Log, new_base: int) -> None:
        """A segment was finished: flush it in the background (Kafka does the same),
        then let the manager checkpoint the recovery point, so that after a crash
        recovery starts past every finished segment."""
        d = self._flusher.flush(new_base)
        nothing_to_fsync = d.called
        d.addCallback(lambda _: self.on_flushed_roll() if self.on_flushed_roll is not None else None)
        d.addErrback(lambda f: None)   # logged by the flusher
        # The producer state snapshot taken at the roll is written by that flush
        # (``Log.flush``) -- or now, when the finished segment was durable already.
        if nothing_to_fsync and local_log.producer_state.has_unwritten_snapshots:
            self._in_pool(local_log.producer_state.write_snapshots)

    def _in_pool(self, f: Callable[[], Any]) -> None:
        """Run ``f`` in the pool as one of this log's writes (``when_idle`` waits for it)."""
        d = self._blocking(f)
        self._writes.add(d)

        def done(result):
            self._writes.discard(d)
            if isinstance(result, Failure):
                log.failure("{f} of {log} failed", failure=result, f=getattr(f, "__name__", f), log=self)
            return None

        d.addBoth(done)

    @property
    def fsyncs(self) -> int:
        """Completed fsync rounds (for metrics and tests)."""
        return self._flusher.fsyncs

    def when_idle(self) -> Deferred:
        """Fires when no write of this log runs in the pool and no fsync is running
        or queued (the fsyncs those writes' appends asked for included)."""
        if not self._writes:
            return self._flusher.when_idle()
        d = gatherResults(list(self._writes), consumeErrors=True)
        d.addCallback(lambda _: self._flusher.when_idle())
        return d

    # -- reads -------------------------------------------------------------

    def read(self, fetch_offset: int, max_bytes: int, *, isolation: FetchIsolation = FetchIsolation.LOG_END,
             max_offset: int | None = None, min_one_message: bool = True) -> Deferred:
        """``Log.read`` without stalling the reactor on the disk.

        The bound of ``isolation`` is taken now: the high watermark, the last
        stable offset, or for ``LOG_END`` the log's own end (nothing past the
        committed end is readable).  A ``TXN_COMMITTED`` read also answers
        the aborted transactions of what it returns (from the in-memory
        transaction indexes, on the reactor).

        The read is tried on the reactor with ``nowait`` (page cache only:
        ~0.1 ms for 1 MiB); if data or index would have to come from the
        disk it is redone in the thread pool.  Fires with a ``FetchDataInfo``;
        fails with ``KafkaError(OFFSET_OUT_OF_RANGE)`` like ``Log.read``, and with
        ``KafkaError(KAFKA_STORAGE_ERROR)`` when no descriptor can be had to
        open a segment file (the process is out of them).
        """
        local = self.local_log
        committed = isolation is FetchIsolation.TXN_COMMITTED
        if isolation is not FetchIsolation.LOG_END:
            bound = local.last_stable_offset if committed else local.high_watermark
            max_offset = bound if max_offset is None else min(bound, max_offset)
        try:
            info = local.read(fetch_offset, max_bytes, max_offset=max_offset, min_one_message=min_one_message,
                              nowait=True)
            return succeed(self._with_aborted(info) if committed else info)
        except WouldBlock:
            d = self._blocking(local.read, fetch_offset, max_bytes, max_offset=max_offset,
                               min_one_message=min_one_message)
            d.addErrback(self._no_descriptor)
            if committed:
                d.addCallback(self._with_aborted)
            return d
        except Exception as e:
            if out_of_descriptors(e):
                return fail(self._storage_error(e))
            return fail()

    def _storage_error(self, error: BaseException) -> KafkaError:
        return KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                          f"cannot open a segment file of {self.topic}-{self.partition}: "
                          f"{getattr(error, 'strerror', None) or error}")

    def _no_descriptor(self, failure: Failure):
        error = failure.value
        if error is not None and out_of_descriptors(error):
            raise self._storage_error(error)
        return failure

    def fetch_offset_by_timestamp(self, timestamp: int) -> Deferred:
        """ListOffsets by time (KIP-79): ``Log.fetch_offset_by_timestamp`` in the
        pool (it may read index files and decompress a batch).  Fires with a
        ``TimestampAndOffset`` or None."""
        return self._blocking(self.local_log.fetch_offset_by_timestamp, timestamp)

    def fetch_offset_of_max_timestamp(self) -> Deferred:
        """ListOffsets MAX_TIMESTAMP (KIP-734): ``Log.fetch_offset_of_max_timestamp``
        in the pool (it reads a batch from a segment file)."""
        return self._blocking(self.local_log.fetch_offset_of_max_timestamp)

"""``LogCleaner``: which compacted logs are cleaned, when, and where the work runs.

Kafka runs ``log.cleaner.threads`` threads, each picking the filthiest
compacted log, cleaning it and sleeping ``log.cleaner.backoff.ms`` when none
needs it.  Here:

* a ``LoopingCall`` on the reactor clock, every ``log.cleaner.backoff.ms``,
  starts cleanings while fewer than ``log.cleaner.threads`` run (and a
  cleaning that ends starts the next at once);
* a cleaning is a coroutine on the reactor driving ``CleanTask``'s blocking
  steps in the broker's I/O thread pool, one at a time -- at most
  ``log.cleaner.threads`` pool threads ever work for the cleaner, the
  writes, reads and fsyncs of the partitions keep the others;
* ``log.cleaner.io.max.bytes.per.second`` is a ``Throttler`` shared by all
  cleanings: between two steps a cleaning waits on the reactor clock, never
  in a pool thread;
* the swap of a cleaned segment is done on the reactor
  (``Log.replace_segments``): renames only, so no append, read or retention
  pass ever sees the log half-swapped;
* ``cleaner-offset-checkpoint`` in each log dir (Kafka's format, the same as
  ``recovery-point-offset-checkpoint``) records each log's first dirty
  offset, written after every cleaning.

A cleaning stops between two steps when its log is deleted or closed, stops
being compacted, or the broker shuts down; its unfinished output is removed.
A group whose segments retention (``compact,delete``) or DeleteRecords
removed meanwhile is not swapped in.  A cleaning that runs out of space
(ENOSPC) removes its output -- the log keeps its segments -- and the log is
tried again after ``log.cleaner.backoff.ms``; logs in a full log dir are not
cleaned until the dir has space again.  A log whose data fails its CRC
check is set aside (logged once) until the broker restarts, as Kafka marks
a partition uncleanable.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from twisted.internet import task
from twisted.internet.defer import CancelledError, Deferred, DeferredLock, gatherResults, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.log.checkpoints import CheckpointError, read_offset_checkpoint, write_offset_checkpoint
from twisted_kafka.log.disk_space import LogDirSpace, is_out_of_space
from twisted_kafka.log.file_handles import FileHandleCache
from twisted_kafka.log.log import Log

from .cleaner import CleanerError, CleanerStats, CleanTask
from .config import CleanerConfig
from .offset_map import OffsetMap
from .selection import LogToClean, log_to_clean
from .throttler import Throttler

log = Logger(namespace="twisted_kafka.log.cleaner")

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"

TopicPartition = tuple[str, int]


class CleaningAborted(Exception):
    """The cleaning stopped between two steps (its log went away, or the broker is stopping)."""


@dataclass
class _Cleaning:
    key: TopicPartition
    log_dir: str
    target: LogToClean
    task: CleanTask | None = None
    aborted: str | None = None          # why, once asked to stop
    waiting: Deferred | None = None     # the throttle's wait, cancelled on abort
    wait_call: Any = None               # its timer, cut short when the rate changes
    done: Deferred | None = None


class LogCleaner:
    """The cleaner of every compacted log of one ``LogManager``; see the module docstring."""

    reconfigurable_keys = frozenset({
        "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size",
        "log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
    })

    def __init__(self, config: CleanerConfig, *, reactor, blocking: Callable[..., Deferred],
                 log_dirs: list[str], logs: Callable[[], Iterable[tuple[TopicPartition, Log, str]]],
                 space_of: Callable[[str], LogDirSpace | None] = lambda _: None,
                 files: FileHandleCache | None = None):
        """``logs()`` lists (key, log, log dir) of every log now; ``blocking(f, *args)``
        runs ``f`` in the I/O thread pool; ``files`` is the log manager's descriptor cache."""
        self.config = config
        self._reactor = reactor
        self._blocking = blocking
        self.log_dirs = list(log_dirs)
        self._logs = logs
        self._space_of = space_of
        self._files = files
        self.throttler = Throttler(config.io_max_bytes_per_second, reactor)
        self._checkpoints: dict[str, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
        self._checkpoint_lock = DeferredLock()
        self._in_progress: dict[TopicPartition, _Cleaning] = {}
        self._uncleanable: set[TopicPartition] = set()
        self._retry_after: dict[TopicPartition, int] = {}
        self._maps: list[OffsetMap] = []
        self._loop: task.LoopingCall | None = None
        self._started: Deferred | None = None
        self.running = False
        #: The periodic selection raised (``DeadThreadCount``).
        self.schedule_died = False
        #: The last cleaning's statistics per log, and how many cleanings finished (tests, metrics).
        self.last_stats: dict[TopicPartition, CleanerStats] = {}
        self.cleanings = 0
        #: The statistics and max.compaction.lag.ms delay of the last ``log.cleaner.threads``
        #: cleanings (what Kafka's gauges read from each cleaner thread's last cleaning).
        self.recent: list[tuple[CleanerStats, int]] = []
        #: When the last selection ran (ms) and the highest dirty ratio it saw.
        self.last_run_ms = self._now_ms()
        self.max_dirty_ratio = 0.0

    def __repr__(self) -> str:
        return f"<LogCleaner {len(self._in_progress)}/{self.config.threads} running>"

    def _now_ms(self) -> int:
        return int(self._reactor.seconds() * 1000)

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> Deferred:
        """Read the checkpoints and start the periodic selection (no-op unless enabled)."""
        if not self.config.enable or self.running:
            return succeed(None)
        self.running = True
        d = self._blocking(self._read_checkpoints)

        def loaded(checkpoints):
            self._checkpoints = checkpoints
            if self.running:
                self._start_loop()

        d.addCallback(loaded)
        self._started = d
        return d

    def _start_loop(self) -> None:
        self._loop = task.LoopingCall(self.wake)
        self._loop.clock = self._reactor
        self._loop.start(max(self.config.backoff_ms, 1) / 1000.0, now=True).addErrback(self._schedule_died)

    def _schedule_died(self, failure: Failure) -> None:
        self.schedule_died = True
        log.failure("the log cleaner's schedule died", failure=failure)

    def _read_checkpoints(self) -> dict[str, dict[TopicPartition, int]]:
        out = {}
        for d in self.log_dirs:
            path = os.path.join(d, CLEANER_CHECKPOINT)
            try:
                out[d] = read_offset_checkpoint(path)
            except (CheckpointError, OSError) as e:
                log.warn("discarding the damaged {e}: compacted logs there are cleaned from their start",
                         e=e)
                out[d] = {}
        return out

    def stop(self) -> Deferred:
        """Stop selecting, stop every cleaning at its next step; fires once they have."""
        self.running = False
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        for cleaning in list(self._in_progress.values()):
            self._abort(cleaning, "the broker is stopping")
        pending = [c.done for c in self._in_progress.values() if c.done is not None]
        if self._started is not None and not self._started.called:
            pending.append(self._started)
        return gatherResults(pending, consumeErrors=True).addBoth(lambda _: None)

    def reconfigure(self, config: Any) -> None:
        """New ``log.cleaner.*`` values (dynamic broker configs); running cleanings keep
        their map, the rest applies at once."""
        old = self.config
        new = CleanerConfig.from_broker_config(config)
        self.config = new
        if new.io_max_bytes_per_second != old.io_max_bytes_per_second:
            self.throttler.set_rate(new.io_max_bytes_per_second)
            for cleaning in self._in_progress.values():
                self._end_wait(cleaning)        # waits computed at the old rate end now
        if new.map_memory != old.map_memory or new.io_buffer_load_factor != old.io_buffer_load_factor:
            self._maps = []
        if self.running and new.backoff_ms != old.backoff_ms and self._loop is not None:
            self._loop.stop()
            self._start_loop()
        self.wake()

    def validate_reconfiguration(self, config: Any) -> None:
        """Every key is validated by its ConfigKey; ``config.checks`` checks the map size."""

    # -- per log ---------------------------------------------------------------------------

    def abort(self, topic: str, partition: int, why: str = "its log was deleted") -> None:
        cleaning = self._in_progress.get((topic, partition))
        if cleaning is not None:
            self._abort(cleaning, why)

    def forget(self, topic: str, partition: int, log_dir: str | None) -> None:
        """The log is gone (deleted): stop cleaning it and drop its checkpoint entry."""
        key = (topic, partition)
        self.abort(topic, partition)
        self._uncleanable.discard(key)
        self._retry_after.pop(key, None)
        if log_dir is not None and self._checkpoints.get(log_dir, {}).pop(key, None) is not None \
                and self.running:
            self._write_checkpoint(log_dir)

    def checkpoint(self, topic: str, partition: int, log_dir: str) -> int | None:
        """The log's first dirty offset as checkpointed (None: never cleaned)."""
        return self._checkpoints.get(log_dir, {}).get((topic, partition))

    @property
    def in_progress(self) -> frozenset[TopicPartition]:
        return frozenset(self._in_progress)

    @property
    def uncleanable(self) -> frozenset[TopicPartition]:
        return frozenset(self._uncleanable)

    def _abort(self, cleaning: _Cleaning, why: str) -> None:
        if cleaning.aborted is None:
            cleaning.aborted = why
        waiting = cleaning.waiting
        if waiting is not None and not waiting.called:
            waiting.cancel()

    @staticmethod
    def _end_wait(cleaning: _Cleaning) -> None:
        call, waiting = cleaning.wait_call, cleaning.waiting
        if call is not None and call.active() and waiting is not None and not waiting.called:
            call.cancel()
            waiting.callback(None)

    # -- selection -----------------------------------------------------------------------

    def wake(self) -> None:
        """Start cleanings while fewer than ``log.cleaner.threads`` run and a log needs one."""
        while self.running and len(self._in_progress) < self.config.threads:
            target = self._grab_filthiest()
            if target is None:
                return
            self._launch(*target)

    def uncleanable_in(self, log_dir: str) -> list[Log]:
        """The logs of ``log_dir`` set aside as uncleanable (metrics)."""
        return [log_ for key, log_, d in self._logs() if d == log_dir and key in self._uncleanable]

    def _grab_filthiest(self) -> tuple[TopicPartition, str, LogToClean] | None:
        now = self._now_ms()
        self.last_run_ms = now
        best: tuple[TopicPartition, str, LogToClean] | None = None
        max_ratio = 0.0
        for key, log_, log_dir in self._logs():
            if not log_.config.compact_enabled or key in self._in_progress or key in self._uncleanable \
                    or log_.deleted or log_.closed or log_.failed is not None:
                continue
            if self._retry_after.get(key, 0) > now:
                continue
            space = self._space_of(log_dir)
            if space is not None and space.full:
                continue
            try:
                target = log_to_clean(log_, self.checkpoint(key[0], key[1], log_dir), now)
            except Exception:
                log.failure("cannot tell how dirty {topic}-{partition} is; it is not cleaned until the "
                            "broker restarts", topic=key[0], partition=key[1])
                self._uncleanable.add(key)
                continue
            if target.checkpoint_reset:
                log.info("resetting the first dirty offset of {topic}-{partition} to its log start "
                         "{start}: the checkpointed one was outside the log", topic=key[0],
                         partition=key[1], start=target.first_dirty_offset)
                self._checkpoints.setdefault(log_dir, {})[key] = target.first_dirty_offset
            max_ratio = max(max_ratio, target.cleanable_ratio)
            if target.total_bytes <= 0 or not target.needs_cleaning:
                continue
            if best is None or target.cleanable_ratio > best[2].cleanable_ratio:
                best = (key, log_dir, target)
        self.max_dirty_ratio = max_ratio
        return best

    # -- one cleaning --------------------------------------------------------------------

    def _launch(self, key: TopicPartition, log_dir: str, target: LogToClean) -> None:
        cleaning = _Cleaning(key, log_dir, target)
        self._in_progress[key] = cleaning
        d = Deferred.fromCoroutine(self._clean(cleaning))
        cleaning.done = d
        d.addBoth(self._cleaning_ended, cleaning)

    def _cleaning_ended(self, result, cleaning: _Cleaning) -> None:
        self._in_progress.pop(cleaning.key, None)
        if isinstance(result, Failure):
            log.failure("cleaning {topic}-{partition} failed", failure=result, topic=cleaning.key[0],
                        partition=cleaning.key[1])
        if self.running:
            self._reactor.callLater(0, self.wake)

    def _offset_map(self) -> OffsetMap:
        if self._maps:
            return self._maps.pop()
        return OffsetMap(self.config.map_memory, self.config.io_buffer_load_factor)

    def _check(self, cleaning: _Cleaning) -> None:
        log_ = cleaning.target.log
        if cleaning.aborted is None:
            if not self.running:
                cleaning.aborted = "the broker is stopping"
            elif log_.deleted or log_.closed:
                cleaning.aborted = "its log was deleted"
            elif not log_.config.compact_enabled:
                cleaning.aborted = "its topic is no longer compacted"
        if cleaning.aborted is not None:
            raise CleaningAborted(cleaning.aborted)

    async def _run(self, cleaning: _Cleaning, f: Callable, *args) -> Any:
        self._check(cleaning)
        return await self._blocking(f, *args)

    async def _io(self, cleaning: _Cleaning, f: Callable[[int], int]) -> None:
        """One step reading about a buffer's worth, then the throttle's wait."""
        self._check(cleaning)
        nbytes = await self._blocking(f, self.throttler.chunk_size(self.config.read_buffer))
        delay = self.throttler.delay(nbytes)
        if delay > 0:
            self._check(cleaning)
            def cancel(_d: Deferred) -> None:
                if call.active():
                    call.cancel()

            waiting: Deferred = Deferred(cancel)
            call = self._reactor.callLater(delay, waiting.callback, None)
            cleaning.waiting, cleaning.wait_call = waiting, call
            try:
                await waiting
            finally:
                cleaning.waiting = cleaning.wait_call = None

    async def _clean(self, cleaning: _Cleaning) -> None:
        key, target = cleaning.key, cleaning.target
        log_ = target.log
        name = f"{key[0]}-{key[1]}"
        offset_map = self._offset_map()
        clean = CleanTask(log_, target.first_dirty_offset, target.first_uncleanable_offset, offset_map,
                          now_ms=self._now_ms())
        cleaning.task = clean
        log.info("Cleaner: beginning cleaning of {name}: dirty section [{first}, {end}) of {dirty} bytes, "
                 "dirty ratio {ratio:.2f}{overdue}", name=name, first=target.first_dirty_offset,
                 end=target.first_uncleanable_offset, dirty=target.cleanable_bytes,
                 ratio=target.cleanable_ratio,
                 overdue=(f", max.compaction.lag.ms overdue by {target.compaction_delay_ms} ms"
                          if target.compaction_delay_ms else ""))
        try:
            while not clean.map_done:
                await self._io(cleaning, clean.build_map_step)
            groups = await self._run(cleaning, clean.plan)
            skipped = 0
            for group in groups:
                await self._run(cleaning, clean.start_group, group)
                while not clean.group_done:
                    await self._io(cleaning, clean.clean_step)
                cleaned = await self._run(cleaning, clean.finish_group)
                self._check(cleaning)
                if log_.replace_segments(cleaned, group):
                    clean.swapped()
                else:
                    skipped += 1
                    await self._blocking(clean.discard_group)
            clean.stats.ended = time.monotonic()
            if clean.end_offset <= target.first_dirty_offset:
                self._retry_after[key] = self._now_ms() + self.config.backoff_ms
            self._checkpoints.setdefault(cleaning.log_dir, {})[key] = clean.end_offset
            self.last_stats[key] = clean.stats
            self.recent = (self.recent + [(clean.stats, target.compaction_delay_ms)])[-max(1, self.config.threads):]
            self.cleanings += 1
            log.info("Cleaner: {summary}{skipped}", summary=clean.stats.summary(
                name, target.first_dirty_offset, clean.end_offset),
                skipped=f"; {skipped} group(s) not swapped in: retention or DeleteRecords removed "
                        f"their segments meanwhile" if skipped else "")
            await self._write_checkpoint(cleaning.log_dir)
        except (CleaningAborted, CancelledError):
            log.info("Cleaner: stopped cleaning {name}: {why}", name=name, why=cleaning.aborted or "cancelled")
            await self._discard(clean)
        except CleanerError as e:
            log.error("Cleaner: {name} cannot be cleaned: {e}; it is not cleaned again until the broker "
                      "restarts", name=name, e=e)
            self._uncleanable.add(key)
            await self._discard(clean)
        except OSError as e:
            await self._discard(clean)
            if log_.deleted or log_.closed or cleaning.aborted is not None:
                log.info("Cleaner: stopped cleaning {name}: its log was deleted", name=name)
            elif is_out_of_space(e):
                log.warn("Cleaner: not enough space to clean {name} ({e}); its segments are left as they "
                         "were, another try in {ms} ms", name=name, e=e, ms=self.config.backoff_ms)
                self._retry_after[key] = self._now_ms() + self.config.backoff_ms
            else:
                log.warn("Cleaner: cleaning {name} failed: {e}; its segments are left as they were, "
                         "another try in {ms} ms", name=name, e=e, ms=self.config.backoff_ms)
                self._retry_after[key] = self._now_ms() + self.config.backoff_ms
        except Exception:
            log.failure("Cleaner: cleaning {name} failed; it is not cleaned again until the broker restarts",
                        name=name)
            self._uncleanable.add(key)
            await self._discard(clean)
        finally:
            offset_map.clear()
            if len(self._maps) < self.config.threads and offset_map.memory == self.config.map_memory:
                self._maps.append(offset_map)

    async def _discard(self, clean: CleanTask) -> None:
        if clean.cleaned is None:
            return
        try:
            await self._blocking(clean.discard_group)
        except OSError as e:
            log.warn("Cleaner: cannot remove the unfinished {path}: {e}; it is removed at the next start",
                     path=getattr(clean.cleaned, "log_path", "?"), e=e)

    # -- checkpoints ---------------------------------------------------------------------

    def _write_checkpoint(self, log_dir: str) -> Deferred:
        offsets = dict(self._checkpoints.get(log_dir, {}))
        path = os.path.join(log_dir, CLEANER_CHECKPOINT)

        def write():
            if os.path.isdir(log_dir):
                write_offset_checkpoint(path, offsets, files=self._files)

        d = self._checkpoint_lock.run(self._blocking, write)

        def failed(f):
            log.warn("Cleaner: cannot write {path}: {e}; the logs there are cleaned again from the previous "
                     "checkpoint after a restart", path=path, e=f.value)

        d.addErrback(failed)
        return d

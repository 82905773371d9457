"""``LogManager``: every partition log under ``log.dirs``, as one Twisted service.

It is the file ``LogStore`` (``partition_log``): the broker asks it for a
partition's ``PartitionLog`` (a ``UnifiedLog``), creates, configures and
deletes logs through it, and starts and stops it as a service.  It composes
one part per job:

* loading and recovery -- ``log_loader.LogLoader``;
* the registry of logs, one per partition, and the dir of each --
  ``log_registry.LogRegistry``;
* scheduling: periodic tasks and delayed deletion -- ``log_scheduler.LogScheduler``;
* disk space: each dir's reserve and full state -- ``disk_space.LogDirSpaces``;

and owns the descriptor cache its logs open their files through
(``files``, a ``file_handles.FileHandleCache``), the dir checkpoints, and
the log cleaner.

Start (``startService``, returns a Deferred that fires when every log is
loaded): each log dir is scanned and its logs are loaded in the thread pool,
at most ``num.recovery.threads.per.data.dir`` at a time per dir.  If the dir
holds ``.kafka_cleanshutdown`` the logs are trusted (no recovery scan) and
the marker is removed once they are loaded, so a crash from then on is seen
as unclean.  Leftover ``*-delete`` dirs are removed.  Then the periodic
tasks start:

* retention, every ``log.retention.check.interval.ms``;
* the flusher check, every ``log.flush.scheduler.interval.ms`` — or, as that
  defaults to "never", every min(1 s, ``log.flush.interval.ms``): Kafka would
  never honour a ``flush.ms`` unless the scheduler interval were also set;
  here setting ``flush.ms`` alone is enough;
* ``recovery-point-offset-checkpoint`` every
  ``log.flush.offset.checkpoint.interval.ms``,
  ``log-start-offset-checkpoint`` every
  ``log.flush.start.offset.checkpoint.interval.ms`` and the high watermarks'
  ``replication-offset-checkpoint`` every
  ``replica.high.watermark.checkpoint.interval.ms`` (loaded at start-up, so
  a restarted replica does not take its log end for committed; a partition
  with one replica moves it back to its log end when it becomes leader);
* full log dirs are checked for space to resume appends every
  ``disk_space.CHECK_INTERVAL_SECONDS``;
* idempotent producers idle for ``producer.id.expiration.ms`` are forgotten
  every ``producer.id.expiration.check.interval.ms`` (``producer_state``).

Stop (``stopService``): periodic tasks stop, running fsyncs finish, every log
is flushed (with a producer state snapshot at its end, for logs idempotent
producers wrote to), the checkpoints are written, files are closed, delayed deletions
are done now, and — only if all of that succeeded — the clean-shutdown
marker is written in each dir.

Descriptors: segment files are opened when used and closed when idle, at
most ``max_open_files`` at a time (``file_handles``), so loading and
serving more partitions than the process has descriptors works; a log that
cannot be created for want of descriptors (or any other I/O error) fails
alone with KAFKA_STORAGE_ERROR.

Appends, reads, ListOffsets lookups and flushes go through each partition's
``UnifiedLog`` (it decides what runs on the reactor and what in the thread
pool).  The manager only drives what spans logs: loading, the periodic
tasks, checkpoints, deletion and configuration.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Callable, Mapping
from typing import Any

from twisted.application.service import Service
from twisted.internet import threads
from twisted.internet.defer import Deferred, DeferredLock, DeferredSemaphore, fail, gatherResults, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.config import StartupError
from twisted_kafka.log.checkpoints import (
    write_clean_shutdown_marker,
    write_offset_checkpoint,
    write_partition_metadata,
)
from twisted_kafka.log.cleaner import CleanerConfig, LogCleaner
from twisted_kafka.log.disk_space import CHECK_INTERVAL_SECONDS, LogDirSpace, LogDirSpaces, is_out_of_space
from twisted_kafka.log.file_handles import FileHandleCache, default_capacity
from twisted_kafka.log.layout import (
    CLEAN_SHUTDOWN_FILE,
    INDEX_SUFFIX,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    LOG_SUFFIX,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    delete_dir_name,
    partition_dir_name,
    segment_file_name,
)
from twisted_kafka.log.log import Log
from twisted_kafka.log.log_config import LONG_MAX, LogConfig, config_value
from twisted_kafka.log.log_loader import DirScan, LogLoader, in_chunks
from twisted_kafka.log.log_registry import LogRegistry, TopicPartition
from twisted_kafka.log.log_scheduler import LogScheduler, unwrap
from twisted_kafka.log.partition_log import LogStore
from twisted_kafka.log.producer_state import (
    DEFAULT_EXPIRATION_CHECK_INTERVAL_MS,
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    ProducerStateConfig,
)
from twisted_kafka.log.retention import delete_old_segments
from twisted_kafka.log.segment import LogSegment
from twisted_kafka.log.unified_log import UnifiedLog
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

log = Logger()

def _log_dirs(config: Any) -> list[str]:
    dirs = getattr(config, "log_dirs", None)
    if dirs:
        return list(dirs)
    text = config_value(config, "log.dirs") or config_value(config, "log.dir", "/tmp/kafka-logs")
    if isinstance(text, (list, tuple)):
        return [str(d) for d in text]
    return [d.strip() for d in str(text).split(",") if d.strip()]


def _remove_new_dir(path: str) -> None:
    """Remove a partition directory whose creation failed half-way -- also when the process is out of
    descriptors, which ``rmtree`` needs: the names ``Log.create`` writes are known."""
    shutil.rmtree(path, ignore_errors=True)
    if not os.path.isdir(path):
        return
    names = [PARTITION_METADATA, LEADER_EPOCH_CHECKPOINT] + [segment_file_name(0, suffix) for suffix in
                                                              (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)]
    for name in names:
        for leftover in (name, name + TMP_SUFFIX):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(path, leftover))
    with contextlib.suppress(OSError):
        os.rmdir(path)


#: What each offset checkpoint of a log dir holds, per log.
CHECKPOINTED: dict[str, Callable[[Any], int]] = {
    RECOVERY_POINT_CHECKPOINT: lambda log_: log_.recovery_point,
    LOG_START_OFFSET_CHECKPOINT: lambda log_: log_.log_start_offset,
    REPLICATION_OFFSET_CHECKPOINT: lambda log_: log_.high_watermark,
}


class LogManager(Service, LogStore):
    """The file ``LogStore``: owns every partition's log (a ``UnifiedLog`` each); see the module docstring."""

    name = "log-manager"

    def __init__(self, config: Any, *, reactor=None, threadpool=None,
                 topic_configs: Callable[[str], Mapping[str, Any] | None] | None = None,
                 broker_epoch: Callable[[], int] = lambda: -1, max_open_files: int | None = None):
        """``config`` is the broker's ``KafkaConfig``; ``topic_configs(topic)``
        returns a topic's stored overrides (topic key names) for logs loaded
        at start-up; ``threadpool`` runs blocking disk work (defaults to the
        reactor's); ``broker_epoch()`` is the broker's epoch in force, read
        when the clean-shutdown marker is written (a cluster member learns
        its epoch once registered); ``max_open_files`` bounds the segment
        files open at once (the broker's descriptor budget; default: half
        the open-file limit)."""
        #: The descriptors of this manager's logs (``file_handles``): every log it creates or
        #: loads opens its files through this cache, and no other.
        self.files = FileHandleCache(default_capacity() if max_open_files is None else max_open_files)
        if reactor is None:
            from twisted.internet import reactor
        self.config = config
        self.log_dirs = [os.path.abspath(d) for d in _log_dirs(config)]
        self._reactor = reactor
        self._threadpool = threadpool if threadpool is not None else reactor.getThreadPool()
        self._topic_configs = topic_configs
        self._topic_overrides: dict[str, dict[str, Any]] = {}
        self._configs: dict[str, LogConfig] = {}
        #: The registry part: one ``UnifiedLog`` per partition, and its dir.
        self.registry = LogRegistry(self.log_dirs)
        #: The disk-space part: each dir's reserve and full state.
        self.spaces = LogDirSpaces(self.log_dirs)
        #: The scheduling part: periodic tasks and delayed deletions.
        self.scheduler = LogScheduler(self._reactor, self._blocking)
        self._recovery_checkpoints_wanted: set[str] = set()
        self._checkpoint_lock = DeferredLock()
        #: Deleted logs whose writes or fsyncs still run: shutdown waits for them too.
        self._settling: set[Deferred] = set()
        self._broker_epoch = broker_epoch
        self._loaded: Deferred | None = None
        self._load_ok = False
        self.recovery_threads = max(1, int(config_value(config, "num.recovery.threads.per.data.dir", 1)))
        #: Compaction of the logs whose cleanup.policy has compact (``twisted_kafka.log.cleaner``).
        self.cleaner = LogCleaner(CleanerConfig.from_broker_config(config), reactor=self._reactor,
                                  blocking=self._blocking, log_dirs=self.log_dirs, logs=self._logs_and_dirs,
                                  space_of=self.spaces.get, files=self.files)
        #: Shared by every log's producer state; ``update_producer_state_config`` changes it at runtime.
        self.producer_state_config = ProducerStateConfig(int(config_value(
            config, "producer.id.expiration.ms", DEFAULT_PRODUCER_ID_EXPIRATION_MS)))
        #: The loading and recovery part.
        self.loader = LogLoader(reactor=self._reactor, blocking=self._blocking, files=self.files,
                                spaces=self.spaces, recovery_threads=self.recovery_threads,
                                log_config=self.log_config, producer_state_config=self.producer_state_config)

    # -- helpers ------------------------------------------------------------

    def _now_ms(self) -> int:
        return int(self._reactor.seconds() * 1000)

    def _blocking(self, f: Callable, *args, **kwargs) -> Deferred:
        return threads.deferToThreadPool(self._reactor, self._threadpool, f, *args, **kwargs)

    def log_config(self, topic: str) -> LogConfig:
        """The effective ``LogConfig`` of ``topic`` (broker defaults + its overrides)."""
        cfg = self._configs.get(topic)
        if cfg is None:
            overrides = self._topic_overrides.get(topic)
            if overrides is None and self._topic_configs is not None:
                overrides = dict(self._topic_configs(topic) or {})
                self._topic_overrides[topic] = overrides
            cfg = LogConfig.from_broker_config(self.config, overrides or {})
            self._configs[topic] = cfg
        return cfg

    def dir_space(self, log_dir: str) -> LogDirSpace:
        """The ``LogDirSpace`` (full state, space reserve) of one of ``log_dirs``."""
        return self.spaces[os.path.abspath(log_dir)]

    def _register(self, local_log: Log, log_dir: str) -> UnifiedLog:
        """Wire a loaded or new ``Log`` to this manager (its dir's space, delayed segment
        deletion, recovery-point checkpoints after a roll) and enter it in the registry."""
        key = (local_log.topic, local_log.partition)
        space = self.spaces[log_dir]
        local_log.segment_deleter = self._delete_segments_later
        local_log.space = space
        local_log.epoch_cache.space = space
        unified = UnifiedLog(local_log, reactor=self._reactor, threadpool=self._threadpool, space=space)
        unified.on_flushed_roll = lambda: self._checkpoint_recovery_point_of(log_dir)
        self.registry.add(key, unified, log_dir)
        return unified

    # -- start --------------------------------------------------------------

    def startService(self) -> Deferred:
        Service.startService(self)
        d = gatherResults([self._load_dir(path) for path in self.log_dirs], consumeErrors=True)

        def loaded(_):
            self._load_ok = True
            self._start_tasks()
            log.info("loaded {n} log(s) from {dirs}", n=len(self.registry), dirs=self.log_dirs)
            return None

        def failed(f):
            # Reported by whoever started this service (KafkaServer: one line, then exit 1).
            return unwrap(f)

        d.addCallbacks(loaded, failed)
        self._loaded = d
        return d

    def when_loaded(self) -> Deferred:
        """A new Deferred firing when start-up loading is done (or failing like it)."""
        if self._loaded is None:
            return fail(RuntimeError("the log manager has not been started"))
        d: Deferred[Any] = Deferred()

        def relay(result):
            if isinstance(result, Failure):
                d.errback(result)
            else:
                d.callback(result)
            return result

        self._loaded.addBoth(relay)
        return d

    def _load_dir(self, path: str) -> Deferred:
        os.makedirs(path, exist_ok=True)
        d = self._blocking(self.loader.scan, path)
        d.addCallback(self._load_partitions)
        return d

    def _load_partitions(self, scan: DirScan) -> Deferred:
        d = self.loader.load(scan, self._now_ms())

        def register(logs: list[Log]):
            for loaded in logs:
                key = (loaded.topic, loaded.partition)
                if key in self.registry:
                    raise StartupError("log.dirs", scan.path,
                                       f"partition {key[0]}-{key[1]} is also in {self.registry.dir_of(key)}; "
                                       f"move the stale copy out of log.dirs and start again")
                self._register(loaded, scan.path)
                if key in scan.high_watermarks:
                    loaded.high_watermark = scan.high_watermarks[key]     # clamped to the log
            rewritten = gatherResults([self._write_checkpoints(name, CHECKPOINTED[name], [scan.path])
                                       for name in scan.damaged], consumeErrors=True)
            if scan.clean:
                rewritten.addCallback(lambda _: self._blocking(self.loader.remove_marker, scan.path))
            elif scan.partitions:
                log.info("{dir} had no clean shutdown: recovered {n} log(s)", dir=scan.path,
                         n=len(scan.partitions))
                self._reactor.callLater(0, self._check_below_recovery_points, scan.path)
            return rewritten

        d.addCallback(register)
        return d

    def _check_below_recovery_points(self, path: str) -> None:
        """After an unclean shutdown, CRC-check the finished segments below each log's
        recovery point in the background (``LogLoader.check_below_recovery_points``)."""
        self.loader.check_below_recovery_points(path, self.registry.in_dir(path), self.registry.get,
                                                lambda: bool(self.running))

    def _start_tasks(self) -> None:
        if not self.running:
            return
        broker_defaults = LogConfig.from_broker_config(self.config)
        scheduler_ms = int(config_value(self.config, "log.flush.scheduler.interval.ms", LONG_MAX))
        if scheduler_ms >= LONG_MAX:
            scheduler_ms = max(10, min(1000, broker_defaults.flush_interval_ms))
        self.scheduler.start([
            (self.cleanup_logs, config_value(self.config, "log.retention.check.interval.ms", 300000)),
            (self.flush_dirty_logs, scheduler_ms),
            (self.checkpoint_recovery_points,
             config_value(self.config, "log.flush.offset.checkpoint.interval.ms", 60000)),
            (self.checkpoint_log_start_offsets,
             config_value(self.config, "log.flush.start.offset.checkpoint.interval.ms", 60000)),
            (self.checkpoint_high_watermarks,
             config_value(self.config, "replica.high.watermark.checkpoint.interval.ms", 5000)),
            (self.check_full_dirs, CHECK_INTERVAL_SECONDS * 1000),
            (self.remove_expired_producers,
             config_value(self.config, "producer.id.expiration.check.interval.ms",
                          DEFAULT_EXPIRATION_CHECK_INTERVAL_MS)),
        ])
        self.cleaner.start().addErrback(
            lambda f: log.failure("the log cleaner did not start", failure=unwrap(f)))

    # -- lookup -------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> UnifiedLog | None:
        return self.registry.get((topic, partition))

    def all_logs(self) -> list[UnifiedLog]:
        return self.registry.logs()

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self.registry.dir_of((topic, partition))

    def _logs_and_dirs(self) -> list[tuple[TopicPartition, Log, str]]:
        return [(key, unified.local_log, log_dir) for key, unified, log_dir in self.registry.entries()]

    # -- create / delete / configure ---------------------------------------

    def create_log(self, topic: str, partition: int, topic_id=None,
                   topic_config: Mapping[str, Any] | None = None) -> UnifiedLog:
        """The log of ``topic``-``partition``, created (empty, offset 0) if needed.

        Idempotent.  ``topic_config`` (topic key overrides) replaces the
        topic's stored overrides when given.  Raises
        ``KafkaError(INCONSISTENT_TOPIC_ID)`` if the log exists under another
        topic id, ``KafkaError(KAFKA_STORAGE_ERROR)`` if its files cannot be
        made or opened (out of descriptors, a full disk): nothing is left
        behind then, and another try may succeed.  Runs on the reactor:
        creating a directory and three empty files takes well under a
        millisecond.
        """
        if topic_config is not None and dict(topic_config) != self._topic_overrides.get(topic):
            # (Only on a change: applying it visits every log, and a LeaderAndIsr
            # naming 25,000 partitions of one topic would do that 25,000 times.)
            self.update_topic_config(topic, topic_config)
        key = (topic, partition)
        existing = self.registry.get(key)
        if existing is not None:
            if topic_id is not None and existing.topic_id is not None and existing.topic_id != topic_id:
                raise KafkaError(ErrorCode.INCONSISTENT_TOPIC_ID,
                                 f"{topic}-{partition} exists with topic id {existing.topic_id}")
            if topic_id is not None and existing.topic_id is None:
                write_partition_metadata(os.path.join(existing.dir, PARTITION_METADATA), topic_id,
                                         fsync=False, space=existing.space, files=self.files)
                log.warn("{topic}-{partition}: partition.metadata rewritten with the topic id "
                         "{id} from the controller", topic=topic, partition=partition, id=topic_id)
                existing.local_log.topic_id = topic_id
            return existing
        log_dir = self.registry.dir_for_new_log()
        path = os.path.join(log_dir, partition_dir_name(topic, partition))
        existed = os.path.isdir(path)
        try:
            new = self.loader.open_or_create(path, topic, partition, topic_id, self._now_ms())
        except OSError as e:
            if not existed:
                _remove_new_dir(path)
            reason = errno.errorcode.get(e.errno, "") if e.errno else ""
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                             f"cannot create the log of {topic}-{partition} in {log_dir}: "
                             f"{reason} {e.strerror or e}".strip()) from e
        unified = self._register(new, log_dir)
        log.info("created log {log} in {dir}", log=new, dir=log_dir)
        return unified

    def update_topic_config(self, topic: str, overrides: Mapping[str, Any]) -> LogConfig:
        """Replace a topic's overrides (AlterConfigs) and apply them to its logs."""
        self._topic_overrides[topic] = dict(overrides)
        self._configs.pop(topic, None)
        cfg = self.log_config(topic)
        for (t, _), log_ in self.registry.items():
            if t == topic:
                log_.update_config(cfg)
        return cfg

    def delete_log(self, topic: str, partition: int) -> Deferred:
        """Remove a partition: gone from ``get_log`` and renamed
        ``<topic>-<partition>.<uuid>-delete`` at once (so the same partition
        can be created again right away); its files are closed when in-flight
        writes and fsyncs finish, and removed in the thread pool
        ``file.delete.delay.ms`` later.  The Deferred fires (True) when the
        files are gone; False if there was no such log.
        """
        key = (topic, partition)
        removed = self.registry.remove(key)
        if removed is None:
            return succeed(False)
        unified, log_dir = removed
        self.cleaner.forget(topic, partition, log_dir)
        local_log = unified.local_log
        delay_ms = local_log.config.file_delete_delay_ms
        local_log.deleted = True                  # refuses appends from now on
        target = os.path.join(log_dir, delete_dir_name(topic, partition))
        os.rename(local_log.dir, target)
        local_log.dir = local_log.producer_state.dir = target
        log.info("deleted log {topic}-{partition}; files go in {s} s", topic=topic,
                 partition=partition, s=delay_ms / 1000)
        done: Deferred[None] = Deferred()

        def settled(_):
            self._settling.discard(d)
            local_log.close()
            self.scheduler.delete_later(delay_ms, lambda: shutil.rmtree(target, ignore_errors=True),
                                        done, True)

        d = unified.when_idle()
        self._settling.add(d)
        d.addCallback(settled).addErrback(done.errback)
        return done

    def _delete_segments_later(self, log_: Log, segments: list[LogSegment]) -> None:
        """Segment deleter handed to every log: rename now, unlink after the delay."""
        for segment in segments:
            segment.rename_for_delete()

        def remove():
            for segment in segments:
                segment.delete()

        done: Deferred[None] = Deferred()
        done.addErrback(lambda f: log.failure("deleting segments failed", failure=f))
        self.scheduler.delete_later(log_.config.file_delete_delay_ms, remove, done, None)

    # -- periodic work ------------------------------------------------------

    def flush_dirty_logs(self) -> None:
        """Periodic: flush logs whose unflushed data is older than their ``flush.ms``."""
        now = self._now_ms()
        for log_ in self.registry.logs():
            flush_ms = log_.config.flush_interval_ms
            if flush_ms >= LONG_MAX or log_.unflushed_messages <= 0:
                continue
            if now - log_.last_flush_ms >= flush_ms:
                log_.flush().addErrback(lambda f: None)   # logged by the flusher

    def remove_expired_producers(self) -> int:
        """Periodic: forget idempotent producers idle for ``producer.id.expiration.ms``
        (Kafka's per-log PeriodicProducerExpirationCheck); how many were forgotten."""
        now = self._now_ms()
        return sum(log_.remove_expired_producers(now) for log_ in self.registry.logs())

    def update_producer_state_config(self, config: Any) -> None:
        """A new ``producer.id.expiration.ms`` (dynamic, cluster-wide): every log's next
        expiry check uses it."""
        self.producer_state_config.producer_id_expiration_ms = int(config_value(
            config, "producer.id.expiration.ms", DEFAULT_PRODUCER_ID_EXPIRATION_MS))

    def check_full_dirs(self) -> Deferred | None:
        """Periodic: let appends resume in full dirs that have space again (see ``disk_space``)."""
        return self.spaces.resume_full(self._blocking)

    def cleanup_logs(self) -> int:
        """Periodic: apply retention to every log; returns segments deleted."""
        now = self._now_ms()
        total = 0
        for log_ in self.registry.logs():
            try:
                total += delete_old_segments(log_.local_log, now)
            except Exception:
                log.failure("retention of {log} failed", log=log_)
        return total

    # -- checkpoints --------------------------------------------------------

    def _write_checkpoints(self, name: str, value: Callable[[UnifiedLog], int],
                           dirs: list[str] | None = None) -> Deferred:
        dirs = self.log_dirs if dirs is None else dirs
        by_dir: dict[str, dict] = {d: {} for d in dirs}
        for key, log_, log_dir in self.registry.entries():
            offsets = by_dir.get(log_dir)
            if offsets is not None:
                offsets[key] = value(log_)

        # The space reserve is for the writes that let space be freed on a full disk
        # (DeleteRecords needs the log start offsets on disk before it answers).  A
        # recovery-point checkpoint that cannot be written costs nothing but a longer
        # recovery after a crash: it must not use up the reserve those writes need.
        use_reserve = name != RECOVERY_POINT_CHECKPOINT

        def write_all():
            for d, offsets in by_dir.items():
                if os.path.isdir(d):
                    write_offset_checkpoint(os.path.join(d, name), offsets,
                                            space=self.spaces[d] if use_reserve else None, files=self.files)

        return self._checkpoint_lock.run(self._blocking, write_all)

    def checkpoint_recovery_points(self) -> Deferred:
        return self._write_checkpoints(RECOVERY_POINT_CHECKPOINT, lambda log_: log_.recovery_point)

    def checkpoint_log_start_offsets(self) -> Deferred:
        return self._write_checkpoints(LOG_START_OFFSET_CHECKPOINT, lambda log_: log_.log_start_offset)

    def checkpoint_high_watermarks(self) -> Deferred:
        return self._write_checkpoints(REPLICATION_OFFSET_CHECKPOINT, lambda log_: log_.high_watermark)

    def _checkpoint_recovery_point_of(self, log_dir: str) -> None:
        """A finished segment of a log in ``log_dir`` is on disk: checkpoint the dir's
        recovery points, so a crash does not make recovery re-read it.  Requests
        arriving while one waits are served by it."""
        if log_dir in self._recovery_checkpoints_wanted or not self.running:
            return
        self._recovery_checkpoints_wanted.add(log_dir)

        def write(_=None):
            self._recovery_checkpoints_wanted.discard(log_dir)
            return self._write_checkpoints(RECOVERY_POINT_CHECKPOINT,
                                           lambda log_: log_.recovery_point, [log_dir])

        d = self._checkpoint_lock.acquire()
        d.addCallback(lambda lock: lock.release())
        d.addCallback(write)
        d.addErrback(self._recovery_checkpoint_failed, log_dir)

    @staticmethod
    def _recovery_checkpoint_failed(failure: Failure, log_dir: str) -> None:
        failure = unwrap(failure)
        if is_out_of_space(failure.value):
            log.warn("cannot checkpoint the recovery points of {dir}: {e}; the previous checkpoint "
                     "stays (a crash now only makes recovery re-read more)", dir=log_dir, e=failure.value)
        else:
            log.failure("checkpointing the recovery points of {dir} failed", failure=failure, dir=log_dir)

    # -- stop ---------------------------------------------------------------

    def stopService(self) -> Deferred:
        Service.stopService(self)
        self.scheduler.stop()
        d: Deferred[None] = Deferred()
        if self._loaded is None:
            d.callback(None)
        else:
            self._loaded.addBoth(lambda _: d.callback(None))

        def shut_down(_):
            if not self._load_ok:
                # Never fully loaded: writing checkpoints or the marker now
                # would claim state we do not know.
                self._close_all()
                return None
            steps = gatherResults([self.cleaner.stop()] + [log_.when_idle() for log_ in self.registry.logs()]
                                  + list(self._settling) + self.loader.checks_running())
            steps.addCallback(lambda _: self._snapshot_producer_state())
            steps.addCallback(lambda _: self._flush_all())
            steps.addCallback(lambda _: self.checkpoint_recovery_points())
            steps.addCallback(lambda _: self.checkpoint_log_start_offsets())
            steps.addCallback(lambda _: self.checkpoint_high_watermarks())
            steps.addCallback(lambda _: self.scheduler.finish_deletes())
            steps.addCallback(lambda _: self._close_all())
            steps.addCallback(lambda _: self._blocking(self._write_markers))
            return steps

        def failed(f):
            log.failure("the log manager did not shut down cleanly; logs are recovered at "
                        "the next start", failure=unwrap(f))
            self.cleaner.stop()
            self._close_all()

        d.addCallback(shut_down)
        d.addErrback(failed)
        return d

    def _snapshot_producer_state(self) -> None:
        """Capture each log's producer state at its end (Kafka snapshots at close); the
        flush below writes the files.  Nothing appends any more at this point."""
        for log_ in self.registry.logs():
            log_.local_log.snapshot_for_shutdown()

    def _flush_all(self) -> Deferred:
        threads = max(1, self.recovery_threads * len(self.log_dirs))
        semaphore = DeferredSemaphore(threads)
        now = self._now_ms()

        def flush_all(chunk: list[UnifiedLog]) -> None:
            # Log.flush itself, not the flusher: it also makes the epoch checkpoint
            # and the directory durable when no record is left unflushed.
            # Every log is flushed even when one fails: the first failure is raised after.
            error: Exception | None = None
            for log_ in chunk:
                try:
                    log_.local_log.flush(None, now)
                except Exception as e:
                    error = error or e
            if error is not None:
                raise error

        return gatherResults([semaphore.run(self._blocking, flush_all, chunk)
                              for chunk in in_chunks(self.registry.logs(), threads)], consumeErrors=True)

    def _close_all(self) -> None:
        for log_ in self.registry.logs():
            try:
                log_.local_log.close()
            except OSError:
                log.failure("closing {log} failed", log=log_)

    def _write_markers(self) -> None:
        for d in self.log_dirs:
            if os.path.isdir(d):
                write_clean_shutdown_marker(os.path.join(d, CLEAN_SHUTDOWN_FILE), self._broker_epoch(),
                                            space=self.spaces[d], files=self.files)

"""``LogManager``: every partition log under ``log.dirs``, as one Twisted service.

Start (``startService``, returns a Deferred that fires when every log is
loaded): each log dir is scanned for ``<topic>-<partition>`` directories
(anything else — ``meta.properties``, the metadata store, checkpoints,
``__cluster_metadata-0``, ``-future``/``-stray`` dirs — is left alone) and
the logs are loaded in the thread pool, at most
``num.recovery.threads.per.data.dir`` at a time per dir.  If the dir holds
``.kafka_cleanshutdown`` the logs are trusted (no recovery scan) and the
marker is removed once they are loaded, so a crash from then on is seen as
unclean.  Leftover ``*-delete`` dirs are removed.  Then the periodic tasks
start:

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

The registry hands out one ``UnifiedLog`` per partition: appends, reads,
ListOffsets lookups and flushes go through it (it decides what runs on the
reactor and what in the thread pool).  The manager only drives what spans
logs: loading, the periodic tasks, checkpoints, deletion and configuration.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from typing import Any
from collections.abc import Callable, Mapping

from twisted.application.service import Service
from twisted.internet import task, threads
from twisted.internet.defer import (
    Deferred,
    DeferredLock,
    DeferredSemaphore,
    FirstError,
    fail,
    gatherResults,
    succeed,
)
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.config import StartupError
from twisted_kafka.log.disk_space import CHECK_INTERVAL_SECONDS, LogDirSpace, is_out_of_space
from twisted_kafka.log.checkpoints import (
    CheckpointError,
    read_offset_checkpoint,
    write_clean_shutdown_marker,
    write_offset_checkpoint,
    write_partition_metadata,
)
from twisted_kafka.log.file_handles import FileHandleCache, default_capacity, out_of_descriptors
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
    fsync_dir,
    is_delete_dir,
    parse_partition_dir,
    partition_dir_name,
    segment_file_name,
)
from twisted_kafka.log.cleaner import CleanerConfig, LogCleaner
from twisted_kafka.log.log import Log
from twisted_kafka.log.log_config import LONG_MAX, LogConfig, config_value
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

TopicPartition = tuple[str, int]


def _unwrap(failure: Failure) -> Failure:
    while failure.check(FirstError):
        error = failure.value
        assert isinstance(error, FirstError)
        failure = error.subFailure
    return failure


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


class _DirScan:
    """What a log dir holds at start-up (read in the thread pool)."""

    def __init__(self, path: str):
        self.path = path
        self.clean = os.path.exists(os.path.join(path, CLEAN_SHUTDOWN_FILE))
        self.damaged: list[str] = []        # checkpoints discarded: written again once loaded
        self.recovery_points = self._read(RECOVERY_POINT_CHECKPOINT,
                                          "its logs are recovered from their first segment")
        self.log_start_offsets = self._read(LOG_START_OFFSET_CHECKPOINT,
                                            "its logs start at their first segment")
        self.high_watermarks = self._read(REPLICATION_OFFSET_CHECKPOINT,
                                          "its high watermarks start at their log ends")
        self.partitions: list[tuple[str, int, str]] = []
        self.delete_dirs: list[str] = []
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            if not os.path.isdir(full):
                continue
            if is_delete_dir(name):
                self.delete_dirs.append(full)
                continue
            parsed = parse_partition_dir(name)
            if parsed is not None:
                self.partitions.append((parsed[0], parsed[1], full))

    def _read(self, name: str, consequence: str) -> dict:
        """A checkpoint of the dir; a damaged one is discarded (it is written again
        from the loaded logs at the next checkpoint)."""
        path = os.path.join(self.path, name)
        try:
            return read_offset_checkpoint(path)
        except (CheckpointError, OSError) as e:
            log.warn("discarding the damaged {e}: {consequence}; it is written again from the "
                     "loaded logs", e=e, consequence=consequence)
            self.damaged.append(name)
            return {}


class LogManager(Service, LogStore):
    """The file ``LogStore``: owns every partition's log (a ``UnifiedLog`` each); see the module docstring."""

    name = "log-manager"

    def __init__(self, config: Any, *, reactor=None, threadpool=None,
                 topic_configs: Callable[[str], Mapping[str, Any] | None] | None = None,
                 broker_epoch: int = -1, max_open_files: int | None = None):
        """``config`` is the broker's ``KafkaConfig``; ``topic_configs(topic)``
        returns a topic's stored overrides (topic key names) for logs loaded
        at start-up; ``threadpool`` runs blocking disk work (defaults to the
        reactor's); ``max_open_files`` bounds the segment files open at once
        (the broker's descriptor budget; default: half the open-file limit)."""
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
        self._logs: dict[TopicPartition, UnifiedLog] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        self._spaces = {d: LogDirSpace(d) for d in self.log_dirs}
        self._recovery_checkpoints_wanted: set[str] = set()
        self._checking: dict[str, Deferred] = {}     # background damage check running, per dir
        self._loops: list[task.LoopingCall] = []
        self._pending_deletes: dict[object, tuple[Any, Callable[[], Deferred]]] = {}
        self._running_deletes: set[Deferred] = set()
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
                                  space_of=self._spaces.get, files=self.files)
        #: Shared by every log's producer state; ``update_producer_state_config`` changes it at runtime.
        self.producer_state_config = ProducerStateConfig(int(config_value(
            config, "producer.id.expiration.ms", DEFAULT_PRODUCER_ID_EXPIRATION_MS)))

    # -- helpers ------------------------------------------------------------

    @property
    def broker_epoch(self) -> int:
        """The epoch written into the clean-shutdown marker (a cluster learns it once registered)."""
        return self._broker_epoch

    @broker_epoch.setter
    def broker_epoch(self, epoch: int) -> None:
        self._broker_epoch = epoch

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
        return self._spaces[os.path.abspath(log_dir)]

    def _register(self, local_log: Log, log_dir: str) -> UnifiedLog:
        key = (local_log.topic, local_log.partition)
        space = self._spaces[log_dir]
        local_log.segment_deleter = self._delete_segments_later
        local_log.space = space
        local_log.epoch_cache.space = space
        unified = UnifiedLog(local_log, reactor=self._reactor, threadpool=self._threadpool, space=space)
        unified.on_flushed_roll = lambda: self._checkpoint_recovery_point_of(log_dir)
        self._logs[key] = unified
        self._dir_of[key] = log_dir
        return unified

    # -- start --------------------------------------------------------------

    def startService(self) -> Deferred:
        Service.startService(self)
        d = gatherResults([self._load_dir(path) for path in self.log_dirs], consumeErrors=True)

        def loaded(_):
            self._load_ok = True
            self._start_tasks()
            log.info("loaded {n} log(s) from {dirs}", n=len(self._logs), dirs=self.log_dirs)
            return None

        def failed(f):
            # Reported by whoever started this service (KafkaServer: one line, then exit 1).
            return _unwrap(f)

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
        d = self._blocking(self._scan_dir, path)
        d.addCallback(self._load_partitions)
        return d

    def _scan_dir(self, path: str) -> _DirScan:
        """Preallocate the dir's space reserve — without room for it the dir starts
        full: appends are refused until space is freed — and scan it (BLOCKING)."""
        space = self._spaces[path]
        if not space.ensure_reserve():
            space.mark_full("no room for the space reserve at start-up")
        return _DirScan(path)

    def _load_partitions(self, scan: _DirScan) -> Deferred:
        for doomed in scan.delete_dirs:
            log.info("removing deleted partition dir {dir}", dir=doomed)
            self._blocking(shutil.rmtree, doomed, True)
        semaphore = DeferredSemaphore(self.recovery_threads)
        now_ms = self._now_ms()
        loads = []
        for topic, partition, part_dir in scan.partitions:
            key = (topic, partition)
            loads.append(semaphore.run(
                self._blocking, Log.open, part_dir, self.log_config(topic), topic=topic,
                partition=partition, recovery_point=scan.recovery_points.get(key, 0),
                log_start_offset=scan.log_start_offsets.get(key, 0),
                had_clean_shutdown=scan.clean, now_ms=now_ms,
                producer_state_config=self.producer_state_config, files=self.files))

        def register(logs: list[Log]):
            for loaded in logs:
                key = (loaded.topic, loaded.partition)
                if key in self._logs:
                    raise StartupError("log.dirs", scan.path,
                                       f"partition {key[0]}-{key[1]} is also in {self._dir_of[key]}; move the "
                                       f"stale copy out of log.dirs and start again")
                self._register(loaded, scan.path)
                if key in scan.high_watermarks:
                    loaded.high_watermark = scan.high_watermarks[key]     # clamped to the log
            rewritten = gatherResults([self._write_checkpoints(name, CHECKPOINTED[name], [scan.path])
                                       for name in scan.damaged], consumeErrors=True)
            if scan.clean:
                rewritten.addCallback(lambda _: self._blocking(self._remove_marker, scan.path))
            elif scan.partitions:
                log.info("{dir} had no clean shutdown: recovered {n} log(s)", dir=scan.path,
                         n=len(scan.partitions))
                self._reactor.callLater(0, self._check_below_recovery_points, scan.path)
            return rewritten

        d = gatherResults(loads, consumeErrors=True)
        d.addCallback(register)
        return d

    def _check_below_recovery_points(self, path: str) -> None:
        """After an unclean shutdown, CRC-check in the background the finished segments
        below each log's recovery point — recovery only checks from the recovery point
        on — so damage that came from outside is found and reported (fetches of it
        fail with CORRUPT_MESSAGE) rather than served.  One segment at a time."""
        work = [(key, segment, end) for key, log_ in self._logs.items() if self._dir_of[key] == path
                for segment, end in log_.local_log.segments_to_check()]
        if work:
            log.info("checking {n} segment(s) of {dir} below the recovery point for damage, in the "
                     "background", n=len(work), dir=path)
            self._check_next(work, path)

    def _check_next(self, work: list, path: str) -> None:
        self._checking.pop(path, None)
        while work and self.running:
            key, segment, end = work.pop(0)
            unified = self._logs.get(key)
            if unified is None or segment.deleted or segment.closed:
                continue
            d = self._blocking(segment.scan_for_damage, end, unified.recovery_point)
            self._checking[path] = d

            def found(ranges, unified=unified, segment=segment):
                segment.verified = True
                if ranges:
                    unified.local_log.mark_damaged(segment, ranges)

            def failed(f, segment=segment):
                if segment.deleted or segment.closed:
                    return
                if out_of_descriptors(f.value):
                    # Checked again after the next unclean shutdown; nothing else depends on it.
                    log.warn("cannot check {path} for damage: {e}", path=segment.log_path, e=f.value)
                else:
                    log.failure("checking {path} failed", failure=f, path=segment.log_path)

            d.addCallbacks(found, failed)
            d.addBoth(lambda _: self._check_next(work, path))
            return

    @staticmethod
    def _remove_marker(path: str) -> None:
        try:
            os.unlink(os.path.join(path, CLEAN_SHUTDOWN_FILE))
        except FileNotFoundError:
            return
        fsync_dir(path)

    def _start_tasks(self) -> None:
        if not self.running:
            return
        broker_defaults = LogConfig.from_broker_config(self.config)
        scheduler_ms = int(config_value(self.config, "log.flush.scheduler.interval.ms", LONG_MAX))
        if scheduler_ms >= LONG_MAX:
            scheduler_ms = max(10, min(1000, broker_defaults.flush_interval_ms))
        tasks = [
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
        ]
        for f, interval_ms in tasks:
            if not interval_ms or interval_ms <= 0:
                continue
            loop = task.LoopingCall(self._periodic, f)
            loop.clock = self._reactor
            loop.start(interval_ms / 1000.0, now=False).addErrback(self._task_died, f.__name__)
            self._loops.append(loop)
        self.cleaner.start().addErrback(
            lambda f: log.failure("the log cleaner did not start", failure=_unwrap(f)))

    @staticmethod
    def _task_died(failure: Failure, name: str) -> None:
        log.failure("periodic task {name} died", failure=failure, name=name)

    @staticmethod
    def _periodic(f: Callable[[], Any]) -> Any:
        """Run a periodic task; a failure is logged and the task keeps its schedule."""
        try:
            result = f()
        except Exception:
            log.failure("periodic task {name} failed", name=f.__name__)
            return None
        if isinstance(result, Deferred):
            result.addErrback(LogManager._periodic_failed, f.__name__)
        return result

    @staticmethod
    def _periodic_failed(failure: Failure, name: str) -> None:
        failure = _unwrap(failure)
        if is_out_of_space(failure.value):
            # A full disk is reported where it is found (``disk_space``): one line here.
            log.warn("periodic task {name} failed: {e}", name=name, e=failure.value)
        else:
            log.failure("periodic task {name} failed", failure=failure, name=name)

    # -- lookup -------------------------------------------------------------

    def get_log(self, topic: str, partition: int) -> UnifiedLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[UnifiedLog]:
        return list(self._logs.values())

    def log_dir_of(self, topic: str, partition: int) -> str | None:
        return self._dir_of.get((topic, partition))

    def _logs_and_dirs(self) -> list[tuple[TopicPartition, Log, str]]:
        return [(key, unified.local_log, self._dir_of[key]) for key, unified in self._logs.items()]

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
        existing = self._logs.get(key)
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
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] = counts.get(d, 0) + 1
        log_dir = min(self.log_dirs, key=lambda d: (counts[d], self.log_dirs.index(d)))
        path = os.path.join(log_dir, partition_dir_name(topic, partition))
        cfg = self.log_config(topic)
        existed = os.path.isdir(path)
        try:
            if existed and os.listdir(path):
                new = Log.open(path, cfg, topic=topic, partition=partition, topic_id=topic_id,
                               now_ms=self._now_ms(), producer_state_config=self.producer_state_config,
                               files=self.files)
            else:
                new = Log.create(path, topic, partition, cfg, files=self.files, topic_id=topic_id,
                                 now_ms=self._now_ms(),
                                 space=self._spaces[log_dir], producer_state_config=self.producer_state_config)
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
        for (t, _), log_ in self._logs.items():
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
        unified = self._logs.pop(key, None)
        if unified is None:
            return succeed(False)
        log_dir = self._dir_of.pop(key)
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
            self._schedule_delete(delay_ms, lambda: shutil.rmtree(target, ignore_errors=True),
                                  done, True)

        d = unified.when_idle()
        self._settling.add(d)
        d.addCallback(settled).addErrback(done.errback)
        return done

    def _schedule_delete(self, delay_ms: int, remove: Callable[[], None], done: Deferred,
                         result: Any) -> None:
        """Run ``remove`` in the thread pool after ``delay_ms``; then fire ``done``."""
        token = object()

        def run() -> Deferred:
            self._pending_deletes.pop(token, None)
            d = self._blocking(remove)
            self._running_deletes.add(d)

            def finished(outcome):
                self._running_deletes.discard(d)
                if isinstance(outcome, Failure):
                    done.errback(outcome)
                else:
                    done.callback(result)
                return None

            d.addBoth(finished)
            return d

        call = self._reactor.callLater(delay_ms / 1000.0, run)
        self._pending_deletes[token] = (call, run)

    def _delete_segments_later(self, log_: Log, segments: list[LogSegment]) -> None:
        """Segment deleter handed to every log: rename now, unlink after the delay."""
        for segment in segments:
            segment.rename_for_delete()

        def remove():
            for segment in segments:
                segment.delete()

        done: Deferred[None] = Deferred()
        done.addErrback(lambda f: log.failure("deleting segments failed", failure=f))
        self._schedule_delete(log_.config.file_delete_delay_ms, remove, done, None)

    # -- periodic work ------------------------------------------------------

    def flush_dirty_logs(self) -> None:
        """Periodic: flush logs whose unflushed data is older than their ``flush.ms``."""
        now = self._now_ms()
        for log_ in list(self._logs.values()):
            flush_ms = log_.config.flush_interval_ms
            if flush_ms >= LONG_MAX or log_.unflushed_messages <= 0:
                continue
            if now - log_.last_flush_ms >= flush_ms:
                log_.flush().addErrback(lambda f: None)   # logged by the flusher

    def remove_expired_producers(self) -> int:
        """Periodic: forget idempotent producers idle for ``producer.id.expiration.ms``
        (Kafka's per-log PeriodicProducerExpirationCheck); how many were forgotten."""
        now = self._now_ms()
        return sum(log_.remove_expired_producers(now) for log_ in list(self._logs.values()))

    def update_producer_state_config(self, config: Any) -> None:
        """A new ``producer.id.expiration.ms`` (dynamic, cluster-wide): every log's next
        expiry check uses it."""
        self.producer_state_config.producer_id_expiration_ms = int(config_value(
            config, "producer.id.expiration.ms", DEFAULT_PRODUCER_ID_EXPIRATION_MS))

    def check_full_dirs(self) -> Deferred | None:
        """Periodic: let appends resume in full dirs that have space again (see ``disk_space``)."""
        full = [space for space in self._spaces.values() if space.full]
        if not full:
            return None
        return gatherResults([self._blocking(space.try_resume) for space in full], consumeErrors=True)

    def cleanup_logs(self) -> int:
        """Periodic: apply retention to every log; returns segments deleted."""
        now = self._now_ms()
        total = 0
        for log_ in list(self._logs.values()):
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
        for key, log_ in self._logs.items():
            offsets = by_dir.get(self._dir_of[key])
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
                                            space=self._spaces[d] if use_reserve else None, files=self.files)

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
        failure = _unwrap(failure)
        if is_out_of_space(failure.value):
            log.warn("cannot checkpoint the recovery points of {dir}: {e}; the previous checkpoint "
                     "stays (a crash now only makes recovery re-read more)", dir=log_dir, e=failure.value)
        else:
            log.failure("checkpointing the recovery points of {dir} failed", failure=failure, dir=log_dir)

    # -- stop ---------------------------------------------------------------

    def stopService(self) -> Deferred:
        Service.stopService(self)
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops = []
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
            steps = gatherResults([self.cleaner.stop()] + [log_.when_idle() for log_ in self._logs.values()]
                                  + list(self._settling) + list(self._checking.values()))
            steps.addCallback(lambda _: self._snapshot_producer_state())
            steps.addCallback(lambda _: self._flush_all())
            steps.addCallback(lambda _: self.checkpoint_recovery_points())
            steps.addCallback(lambda _: self.checkpoint_log_start_offsets())
            steps.addCallback(lambda _: self.checkpoint_high_watermarks())
            steps.addCallback(lambda _: self._finish_deletes())
            steps.addCallback(lambda _: self._close_all())
            steps.addCallback(lambda _: self._blocking(self._write_markers))
            return steps

        def failed(f):
            log.failure("the log manager did not shut down cleanly; logs are recovered at "
                        "the next start", failure=_unwrap(f))
            self.cleaner.stop()
            self._close_all()

        d.addCallback(shut_down)
        d.addErrback(failed)
        return d

    def _snapshot_producer_state(self) -> None:
        """Capture each log's producer state at its end (Kafka snapshots at close); the
        flush below writes the files.  Nothing appends any more at this point."""
        for log_ in self._logs.values():
            log_.local_log.snapshot_for_shutdown()

    def _flush_all(self) -> Deferred:
        semaphore = DeferredSemaphore(max(1, self.recovery_threads * len(self.log_dirs)))
        now = self._now_ms()
        # Log.flush itself, not the flusher: it also makes the epoch checkpoint
        # and the directory durable when no record is left unflushed.
        return gatherResults([semaphore.run(self._blocking, log_.local_log.flush, None, now)
                              for log_ in self._logs.values()], consumeErrors=True)

    def _finish_deletes(self) -> Deferred:
        """Do every delayed deletion now (shutdown must not leave timers behind)."""
        for call, run in list(self._pending_deletes.values()):
            if call.active():
                call.cancel()
            run()
        return gatherResults(list(self._running_deletes), consumeErrors=True)

    def _close_all(self) -> None:
        for log_ in self._logs.values():
            try:
                log_.local_log.close()
            except OSError:
                log.failure("closing {log} failed", log=log_)

    def _write_markers(self) -> None:
        for d in self.log_dirs:
            if os.path.isdir(d):
                write_clean_shutdown_marker(os.path.join(d, CLEAN_SHUTDOWN_FILE), self._broker_epoch,
                                            space=self._spaces[d], files=self.files)

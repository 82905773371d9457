"""``LogLoader``: a log manager's loading and recovery part.

At start-up each log dir is scanned (``DirScan``: its checkpoints, its
``<topic>-<partition>`` directories -- anything else, such as
``meta.properties``, the metadata store, ``__cluster_metadata-0`` or
``-future``/``-stray`` dirs, is left alone -- and leftover ``*-delete``
dirs, which are removed), and its logs are opened in the thread pool, at
most ``num.recovery.threads.per.data.dir`` at a time per dir
(``recovery.load_log``: a dir without ``.kafka_cleanshutdown`` has its logs
recovered from their recovery points).  After an unclean shutdown the
finished segments below each log's recovery point are CRC-checked in the
background, one at a time, so damage that came from outside is found and
reported (fetches of it fail with CORRUPT_MESSAGE) rather than served.

Every log it opens or creates opens its files through the manager's
descriptor cache (``file_handles``).  Registering the loaded logs is the
manager's.
"""

from __future__ import annotations

import os
import shutil
from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, DeferredSemaphore, gatherResults
from twisted.logger import Logger

from twisted_kafka.log.checkpoints import CheckpointError, read_offset_checkpoint
from twisted_kafka.log.disk_space import LogDirSpaces
from twisted_kafka.log.file_handles import FileHandleCache, out_of_descriptors
from twisted_kafka.log.layout import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    fsync_dir,
    is_delete_dir,
    parse_partition_dir,
)
from twisted_kafka.log.log import Log
from twisted_kafka.log.log_config import LogConfig
from twisted_kafka.log.producer_state import ProducerStateConfig
from twisted_kafka.log.unified_log import UnifiedLog

# The manager's namespace: operators filter the loading lines by it.
log = Logger(namespace="twisted_kafka.log.log_manager")

TopicPartition = tuple[str, int]


#: Logs opened (or flushed) by one job of the thread pool at most.  Kafka's recovery threads each
#: take logs one after the other; a job per log would pay a hand-off between the reactor and a
#: pool thread per partition, which at tens of thousands of partitions is most of a restart.
LOGS_PER_JOB = 256


def in_chunks(items: list, threads: int, most: int = LOGS_PER_JOB) -> list[list]:
    """``items`` in consecutive chunks of at most ``most``, at least ``threads`` chunks when there
    are that many items (so every recovery thread gets work)."""
    if not items:
        return []
    size = max(1, min(most, -(-len(items) // max(1, threads))))
    return [items[i:i + size] for i in range(0, len(items), size)]


class DirScan:
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


class LogLoader:
    """Opens, creates and recovers the logs of a manager's dirs (see the module docstring)."""

    def __init__(self, *, reactor, blocking: Callable[..., Deferred], files: FileHandleCache,
                 spaces: LogDirSpaces, recovery_threads: int, log_config: Callable[[str], LogConfig],
                 producer_state_config: ProducerStateConfig):
        self._reactor = reactor
        self._blocking = blocking
        self._files = files
        self._spaces = spaces
        self.recovery_threads = recovery_threads
        self._log_config = log_config
        self._producer_state_config = producer_state_config
        self._checking: dict[str, Deferred] = {}     # background damage check running, per dir

    # -- start-up -------------------------------------------------------------

    def scan(self, path: str) -> DirScan:
        """Prepare the dir's space reserve and scan it (BLOCKING)."""
        self._spaces.prepare(path)
        return DirScan(path)

    def load(self, scan: DirScan, now_ms: int) -> Deferred:
        """Remove the dir's leftover deleted partitions and open its logs in the thread pool,
        ``recovery_threads`` at a time; fires with the ``Log``s."""
        for doomed in scan.delete_dirs:
            log.info("removing deleted partition dir {dir}", dir=doomed)
            self._blocking(shutil.rmtree, doomed, True)
        semaphore = DeferredSemaphore(self.recovery_threads)
        jobs = [(topic, partition, part_dir, self._log_config(topic))
                for topic, partition, part_dir in scan.partitions]

        def open_all(chunk: list) -> list[Log]:
            return [Log.open(part_dir, cfg, topic=topic, partition=partition,
                             recovery_point=scan.recovery_points.get((topic, partition), 0),
                             log_start_offset=scan.log_start_offsets.get((topic, partition), 0),
                             had_clean_shutdown=scan.clean, now_ms=now_ms,
                             producer_state_config=self._producer_state_config, files=self._files)
                    for topic, partition, part_dir, cfg in chunk]

        d = gatherResults([semaphore.run(self._blocking, open_all, chunk)
                           for chunk in in_chunks(jobs, self.recovery_threads)], consumeErrors=True)
        d.addCallback(lambda chunks: [opened for chunk in chunks for opened in chunk])
        return d

    @staticmethod
    def remove_marker(path: str) -> None:
        """The dir's logs are loaded: a crash from now on is an unclean shutdown (BLOCKING)."""
        try:
            os.unlink(os.path.join(path, CLEAN_SHUTDOWN_FILE))
        except FileNotFoundError:
            return
        fsync_dir(path)

    # -- a partition this broker is given ----------------------------------------

    def open_or_create(self, path: str, topic: str, partition: int, topic_id: Any, now_ms: int) -> Log:
        """The log in ``path``: opened if the directory holds files, else created empty at offset 0
        (on the reactor: a few small files).  Raises OSError."""
        cfg = self._log_config(topic)
        if os.path.isdir(path) and os.listdir(path):
            return Log.open(path, cfg, topic=topic, partition=partition, topic_id=topic_id,
                            now_ms=now_ms, producer_state_config=self._producer_state_config,
                            files=self._files)
        return Log.create(path, topic, partition, cfg, files=self._files, topic_id=topic_id, now_ms=now_ms,
                          space=self._spaces[os.path.dirname(path)],
                          producer_state_config=self._producer_state_config)

    # -- after an unclean shutdown ---------------------------------------------------

    def check_below_recovery_points(self, path: str, logs: list[tuple[TopicPartition, UnifiedLog]],
                                    hosted: Callable[[TopicPartition], UnifiedLog | None],
                                    running: Callable[[], bool]) -> None:
        """CRC-check in the background the finished segments below the recovery point of each of
        ``logs`` (the logs of ``path``), one segment at a time, while ``running()``; a log no
        longer ``hosted`` is skipped."""
        work = deque((key, segment, end) for key, unified in logs
                     for segment, end in unified.local_log.segments_to_check())
        if work:
            log.info("checking {n} segment(s) of {dir} below the recovery point for damage, in the "
                     "background", n=len(work), dir=path)
            self._check_next(work, path, hosted, running)

    def checks_running(self) -> list[Deferred]:
        return list(self._checking.values())

    def _check_next(self, work: deque, path: str, hosted: Callable[[TopicPartition], UnifiedLog | None],
                    running: Callable[[], bool]) -> None:
        self._checking.pop(path, None)
        while work and running():
            key, segment, end = work.popleft()       # (a list's pop(0) is quadratic in the segments)
            unified = hosted(key)
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
            d.addBoth(lambda _: self._check_next(work, path, hosted, running))
            return

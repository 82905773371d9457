"""``LogFlusher``: ordered, coalescing fsyncs of one log in the thread pool.

An acks=all producer on a topic with ``flush.messages=1`` must not be
answered before its batch is on disk, and the fsync (milliseconds) must not
run on the reactor.  Appends stay on the reactor — so their order in the
file is the order they arrived in — and each one that needs durability asks
its log's flusher for "durable up to offset N".

At most one fsync per log runs at a time.  Requests arriving meanwhile
queue up; when the running fsync finishes, one new fsync covers all of them
(group commit: under load a single fsync acknowledges many appends).  Waiters
are answered strictly in request order, so acknowledgements for a partition
go out in offset order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.log.disk_space import is_out_of_space
from twisted_kafka.log.log import Log
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

log = Logger()


class LogFlusher:
    """Serialises ``Log.flush`` calls for one log and answers waiters in order."""

    def __init__(self, log_: Log, run_blocking: Callable[..., Deferred],
                 now_ms: Callable[[], int]):
        self.log = log_
        self._run_blocking = run_blocking
        self._now_ms = now_ms
        self._waiters: deque[tuple[int, Deferred]] = deque()
        self._running = False
        self._idle_waiters: list[Deferred] = []
        self.fsyncs = 0            # completed Log.flush calls (for metrics and tests)

    @property
    def running(self) -> bool:
        return self._running

    def flush(self, up_to_offset: int | None = None) -> Deferred:
        """A Deferred firing with the recovery point once ``up_to_offset`` is durable.

        The target is capped at what is committed now (an offset still being
        written cannot be asked for).  Fails with
        ``KafkaError(KAFKA_STORAGE_ERROR)`` if the fsync failed.
        """
        committed = self.log.committed_end_offset
        target = committed if up_to_offset is None else min(up_to_offset, committed)
        if not self._running and not self._waiters and target <= self.log.recovery_point:
            return succeed(self.log.recovery_point)
        d: Deferred[int] = Deferred()
        self._waiters.append((target, d))
        if not self._running:
            self._start()
        return d

    def when_idle(self) -> Deferred:
        """Fires when no fsync is running or queued."""
        if not self._running and not self._waiters:
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._idle_waiters.append(d)
        return d

    def _start(self) -> None:
        target = max(offset for offset, _ in self._waiters)
        self._running = True
        d = self._run_blocking(self.log.flush, target, self._now_ms())
        d.addBoth(self._done, target)

    def _done(self, result, target: int) -> None:
        self._running = False
        self.fsyncs += 1
        if isinstance(result, Failure):
            if is_out_of_space(result.value):
                # A full disk (index entries could not be written): said once per flush,
                # without a traceback; the next flush tries again (``index``).
                log.warn("fsync of {log} failed: {e}; the recovery point stays at {point}",
                         log=self.log, e=result.value, point=self.log.recovery_point)
            else:
                log.failure("fsync of {log} failed", failure=result, log=self.log)
            error = KafkaError(ErrorCode.KAFKA_STORAGE_ERROR,
                               f"flush of {self.log.topic}-{self.log.partition} failed: "
                               f"{result.getErrorMessage()}")
            ready = self._take(lambda offset: offset <= target)
            for d in ready:
                d.errback(Failure(error))
        else:
            # Only what this fsync covered: an append committed while it ran
            # may lie beyond the recovery point it reached, and waits for the
            # next round.  An offset beyond the committed end was truncated
            # away (replication): nothing is left to make durable.
            achieved = result
            committed = self.log.committed_end_offset
            ready = self._take(lambda offset: offset <= achieved or offset > committed)
            for d in ready:
                d.callback(achieved)
        if self._waiters:
            self._start()
        elif self._idle_waiters:
            idle, self._idle_waiters = self._idle_waiters, []
            for d in idle:
                d.callback(None)

    def _take(self, satisfied) -> list[Deferred]:
        """Remove and return, in request order, the waiters whose offset is ``satisfied``."""
        ready: list[Deferred] = []
        keep: deque[tuple[int, Deferred]] = deque()
        for offset, d in self._waiters:
            if satisfied(offset):
                ready.append(d)
            else:
                keep.append((offset, d))
        self._waiters = keep
        return ready

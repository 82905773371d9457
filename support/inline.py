"""A reactor and thread pools that run "threaded" work on the test's own thread.

The log, the controller's metadata store and the server hand blocking work to a
thread pool and get results back with ``reactor.callFromThread``.  Unit tests
swap both for these, so that timing is driven by ``task.Clock`` alone and the
test decides when (and whether) a piece of pool work runs.
"""

from __future__ import annotations

from collections import deque

from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure


class InlineReactor(MemoryReactorClock):
    """``MemoryReactorClock`` whose ``callFromThread`` runs at once (the pools below are synchronous)."""

    def callFromThread(self, f, *args, **kwargs):
        f(*args, **kwargs)


class SyncThreadPool:
    """Runs pool work immediately, on the calling thread; remembers what ran."""

    def __init__(self):
        self.calls: list[str] = []

    def callInThreadWithCallback(self, on_result, f, *args, **kwargs):
        self.calls.append(getattr(f, "__name__", repr(f)))
        try:
            result = f(*args, **kwargs)
        except BaseException:
            on_result(False, Failure())
        else:
            on_result(True, result)


class ManualThreadPool(SyncThreadPool):
    """Queues pool work while holding; the test decides when each item "runs in its thread"."""

    def __init__(self, *, holding: bool = True):
        super().__init__()
        self.queue: deque = deque()
        self.holding = holding

    def hold(self) -> None:
        self.holding = True

    def callInThreadWithCallback(self, on_result, f, *args, **kwargs):
        if self.holding:
            self.queue.append((on_result, f, args, kwargs))
        else:
            super().callInThreadWithCallback(on_result, f, *args, **kwargs)

    def run_one(self) -> None:
        on_result, f, args, kwargs = self.queue.popleft()
        SyncThreadPool.callInThreadWithCallback(self, on_result, f, *args, **kwargs)

    def run_all(self) -> int:
        """Run everything queued, including work queued meanwhile; how many items ran."""
        ran = 0
        while self.queue:
            self.run_one()
            ran += 1
        return ran

    def release(self) -> int:
        """Stop holding (later work runs at once) and run everything queued."""
        self.holding = False
        return self.run_all()

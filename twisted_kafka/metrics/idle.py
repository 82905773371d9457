"""Idle ratio of a pool of workers, as Kafka's *AvgIdlePercent metrics report it.

Kafka's handler threads mark their idle time on a meter after every poll of
the request queue.  Our handlers wait on a Deferred without polling, so idle
time is accounted as intervals (``begin``/``end``) and sampled once a second
into a one-minute window; the gauge reads the window's average, 0.0–1.0, the
scale of Kafka's OneMinuteRate for these meters.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable


class IdleRatio:
    def __init__(self, workers: int, clock: Callable[[], float], window_samples: int = 60):
        self.workers = workers
        self._clock = clock
        self._idle_since: dict[int, float] = {}
        self._idle_accumulated = 0.0
        self._last_sample = clock()
        self._samples: deque[float] = deque(maxlen=window_samples)

    def begin(self, worker: int) -> None:
        self._idle_since[worker] = self._clock()

    def end(self, worker: int) -> None:
        started = self._idle_since.pop(worker, None)
        if started is not None:
            self._idle_accumulated += max(0.0, self._clock() - max(started, self._last_sample))

    def sample(self) -> None:
        """Close the current interval: called periodically (once a second)."""
        now = self._clock()
        elapsed = now - self._last_sample
        if elapsed <= 0:
            return
        idle = self._idle_accumulated
        for started in self._idle_since.values():
            idle += now - max(started, self._last_sample)
        self._samples.append(min(1.0, idle / (elapsed * self.workers)))
        self._idle_accumulated = 0.0
        self._last_sample = now

    @property
    def value(self) -> float:
        if not self._samples:
            return 1.0 if len(self._idle_since) == self.workers else 0.0
        return sum(self._samples) / len(self._samples)

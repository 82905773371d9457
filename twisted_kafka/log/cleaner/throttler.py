"""``Throttler``: ``log.cleaner.io.max.bytes.per.second`` for every cleaning at once.

Kafka's cleaner threads call ``Throttler.maybeThrottle(bytes)`` after each
read and write and sleep when the rate since the last check is above the
limit.  Here nothing sleeps: a cleaning is a chain of steps in the I/O
thread pool, and after each step the cleaner asks ``delay(bytes)`` how long
to wait before the next one, and waits on the reactor's clock -- no pool
thread is held while the cleaner is throttled, and a ``task.Clock`` drives it
in tests.  Every byte reserves ``1 / rate`` seconds of a shared schedule,
so the combined rate of all cleanings stays at the limit.  The schedule
starts at most one report's worth in the past -- the time the I/O being
reported took -- so idle time earns no burst.
"""

from __future__ import annotations

#: Kafka's default (Double.MAX_VALUE) and anything this large: no throttle.
UNLIMITED = 1e300


class Throttler:
    def __init__(self, bytes_per_second: float, clock):
        self.clock = clock
        self.rate = bytes_per_second
        #: When the I/O done so far is paid for at ``rate``.
        self._free_at = clock.seconds()

    @property
    def unlimited(self) -> bool:
        return not self.rate > 0 or self.rate >= UNLIMITED

    def set_rate(self, bytes_per_second: float) -> None:
        self.rate = bytes_per_second
        self._free_at = self.clock.seconds()

    def delay(self, nbytes: int) -> float:
        """Seconds to wait before more I/O, ``nbytes`` having just been read or written."""
        if self.unlimited:
            return 0.0
        now = self.clock.seconds()
        cost = nbytes / self.rate
        self._free_at = max(self._free_at, now - cost) + cost
        return max(0.0, self._free_at - now)

    def chunk_size(self, io_buffer_size: int) -> int:
        """Bytes a step should read: the I/O buffer, or a tenth of a second's worth when
        throttled below that (so the throttle is smooth), at least 16 KiB."""
        if self.unlimited:
            return io_buffer_size
        return max(16 * 1024, min(io_buffer_size, int(self.rate / 10)))

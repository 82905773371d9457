"""Which of a plane's connections have bytes waiting to be read, without reading them.

The data plane's handler pool asks, between two requests of a slice, whether
a control-plane connection has something to read; if so it ends its slice, so
the reactor's next poll reads and handles that request rather than after the
rest of the slice (see ``server.request_handler``).  A ``select.poll`` object
holds the descriptors of the plane's connections that are being read (a
muted connection is not watched: its unread bytes are not waiting for the
reactor), and ``ready()`` polls it without waiting: one system call.
"""

from __future__ import annotations

import select


class ReadinessWatch:
    def __init__(self) -> None:
        self._poller = select.poll()
        self._watched: set[int] = set()

    def watch(self, fd: int) -> None:
        if fd not in self._watched:
            self._watched.add(fd)
            self._poller.register(fd, select.POLLIN)

    def unwatch(self, fd: int) -> None:
        if fd in self._watched:
            self._watched.discard(fd)
            self._poller.unregister(fd)

    def ready(self) -> bool:
        """Whether a watched connection has bytes (or an end of stream) waiting to be read."""
        return bool(self._watched) and bool(self._poller.poll(0))

    def __len__(self) -> int:
        return len(self._watched)


def readiness_watch() -> ReadinessWatch | None:
    """A ReadinessWatch, or None where ``select.poll`` does not exist (Windows)."""
    return ReadinessWatch() if hasattr(select, "poll") else None


__all__ = ["ReadinessWatch", "readiness_watch"]

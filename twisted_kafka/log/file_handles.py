"""Descriptors of segment files: opened on demand, bounded, least recently used closed first.

A partition's ``.log`` files are opened only when an append, a read, an
fsync or recovery needs them, through a ``FileHandleCache`` holding at most
``capacity`` of them: opening one more
closes the least recently used descriptor that nobody is using.  So a
broker holds one descriptor per partition it is actually serving, not one
per segment on disk, and a broker with more partitions than descriptors
still loads and serves every one of them (descriptors of idle partitions
are closed and reopened as their partitions are used).  Index files hold no
descriptor at all between writes (``twisted_kafka.log.index``).

The cache belongs to the ``LogManager`` that made it, which sizes it from
the broker's descriptor budget (``twisted_kafka.server.descriptor_budget``)
and hands it down to every log it creates or loads: their segments, indexes
and checkpoint writes open files through it.  There is no process-wide
cache: two managers (two brokers in one process, a tool next to a broker)
each keep to their own budget.  When the process runs out
of descriptors anyway (EMFILE/ENFILE: connections took them), opening a
file first closes idle cached descriptors and retries once; if that does
not help the ``OSError`` reaches the one operation that needed the file,
which fails with KAFKA_STORAGE_ERROR -- never the broker.

Threading: appends, reads, fsyncs and loading run on the reactor and in the
I/O thread pool at once.  A descriptor is *pinned* while an operation uses
it (``acquire``/``release``), and a pinned descriptor is never closed:
closing a descriptor another thread is about to use could make it read or
write whichever file reuses that number next.  All bookkeeping is O(1)
under one lock (an ordered dict gives the LRU order).
"""

from __future__ import annotations

import errno
import os
import resource
import threading
from collections import OrderedDict

__all__ = ["CachedFile", "FileHandleCache", "default_capacity", "os_open", "out_of_descriptors"]

_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)


def out_of_descriptors(error: BaseException | None) -> bool:
    """Whether ``error`` says the process (EMFILE) or the system (ENFILE) has no descriptor left."""
    return isinstance(error, OSError) and error.errno in _OUT_OF_DESCRIPTORS


class FileHandleCache:
    """At most ``capacity`` open descriptors of ``CachedFile``s, least recently used closed first."""

    def __init__(self, capacity: int):
        self.capacity = max(1, capacity)
        self._lock = threading.Lock()
        self._open: OrderedDict[CachedFile, None] = OrderedDict()   # least recently used first
        self.opened = 0        # descriptors opened (statistics, tests)
        self.evicted = 0       # descriptors closed to make room

    def __len__(self) -> int:
        """How many descriptors are open now."""
        return len(self._open)

    def __repr__(self) -> str:
        return f"<FileHandleCache {len(self._open)}/{self.capacity} open>"

    def resize(self, capacity: int) -> None:
        """Hold at most ``capacity`` descriptors from now on (idle ones over it are closed now)."""
        with self._lock:
            self.capacity = max(1, capacity)
            excess = len(self._open) - self.capacity
            if excess > 0:
                self._evict_locked(excess)

    def file(self, path: str, flags: int = os.O_RDWR, *, fd: int | None = None) -> CachedFile:
        """A ``CachedFile`` for ``path`` (``fd``: a descriptor already open on it, adopted)."""
        handle = CachedFile(self, path, flags)
        if fd is not None:
            with self._lock:
                self._make_room_locked()
                handle.fd = fd
                self._open[handle] = None
                self.opened += 1
        return handle

    def os_open(self, path: str, flags: int, mode: int = 0o644) -> int:
        """``os.open`` for a short-lived descriptor the caller closes itself.

        Out of descriptors, idle cached ones are closed to make room and the
        open is tried once more.
        """
        try:
            return os.open(path, flags, mode)
        except OSError as e:
            if not out_of_descriptors(e) or not self.shed():
                raise
        return os.open(path, flags, mode)

    def shed(self) -> int:
        """Close some idle descriptors (an eighth of them, at least 8) to give the process room;
        returns how many were closed."""
        with self._lock:
            return self._evict_locked(max(8, len(self._open) // 8))

    def close_idle(self) -> int:
        """Close every descriptor nobody is using (they reopen on their next use); returns how
        many were closed.  The cache holds its files strongly, so a ``Log`` dropped without
        ``close()`` keeps its descriptors here until they are evicted or closed by this."""
        with self._lock:
            return self._evict_locked(len(self._open))

    # -- with the lock held --------------------------------------------------

    def _make_room_locked(self) -> None:
        excess = len(self._open) + 1 - self.capacity
        if excess > 0:
            self._evict_locked(excess)

    def _open_locked(self, handle: CachedFile) -> int:
        self._make_room_locked()
        try:
            fd = os.open(handle.path, handle.flags)
        except OSError as e:
            if not out_of_descriptors(e) or not self._evict_locked(max(8, len(self._open) // 8)):
                raise
            fd = os.open(handle.path, handle.flags)
        self._open[handle] = None
        self.opened += 1
        return fd

    def _evict_locked(self, count: int) -> int:
        """Close up to ``count`` unpinned descriptors, least recently used first."""
        closed = 0
        for _ in range(len(self._open)):
            if closed >= count:
                break
            handle, _ = self._open.popitem(last=False)
            if handle.pins:
                self._open[handle] = None      # in use: it counts as recently used
                continue
            fd, handle.fd = handle.fd, None
            if fd is not None:
                os.close(fd)
            closed += 1
        self.evicted += closed
        return closed


class CachedFile:
    """One file whose descriptor a ``FileHandleCache`` opens when needed and may close when idle.

    ``acquire()`` returns the descriptor, opening it if needed, and pins it
    until ``release()``; ``close()`` closes it for good (at once, or when
    the last user releases it).  ``fd`` is the descriptor if open right now,
    else None (a hint: it may be closed the moment after, unless pinned).
    """

    __slots__ = ("cache", "path", "flags", "fd", "pins", "closed")

    def __init__(self, cache: FileHandleCache, path: str, flags: int):
        self.cache = cache
        self.path = path
        self.flags = flags & ~(os.O_CREAT | os.O_TRUNC | os.O_EXCL)   # reopening never creates or empties
        self.fd: int | None = None
        self.pins = 0
        self.closed = False

    def __repr__(self) -> str:
        return f"<CachedFile {self.path} fd={self.fd} pins={self.pins}{' closed' if self.closed else ''}>"

    def acquire(self) -> int:
        """The descriptor, opened if needed, pinned until ``release()``.  Raises OSError."""
        cache = self.cache
        with cache._lock:
            if self.closed:
                raise OSError(errno.EBADF, f"{self.path} is closed")
            fd = self.fd
            if fd is None:
                fd = self.fd = cache._open_locked(self)
            else:
                cache._open.move_to_end(self)
            self.pins += 1
            return fd

    def release(self) -> None:
        """Unpin (one ``acquire``); a ``close()`` waiting for this user happens now."""
        with self.cache._lock:
            self.pins -= 1
            if not self.pins and self.closed:
                self._close_locked()

    def rename(self, path: str) -> None:
        """The file was renamed: reopen it under ``path`` (an open descriptor is unaffected)."""
        self.path = path

    def close(self) -> None:
        """Close the descriptor (once its users release it); the file is not opened again."""
        with self.cache._lock:
            self.closed = True
            if not self.pins:
                self._close_locked()

    def _close_locked(self) -> None:
        fd, self.fd = self.fd, None
        self.cache._open.pop(self, None)
        if fd is not None:
            os.close(fd)


def default_capacity() -> int:
    """Half the process's open-file limit: a cache's size when no descriptor budget is given."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 16
    return max(16, soft // 2)


def os_open(files: FileHandleCache | None, path: str, flags: int, mode: int = 0o644) -> int:
    """``files.os_open`` (idle cached descriptors are closed when the process is out of them), or
    a plain ``os.open`` for a writer that has no cache (a store outside the logs)."""
    if files is None:
        return os.open(path, flags, mode)
    return files.os_open(path, flags, mode)

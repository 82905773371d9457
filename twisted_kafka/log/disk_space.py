"""``LogDirSpace``: what the broker does when a log directory's filesystem is full.

Appends stop, everything else keeps working:

* An append whose write fails for lack of space (ENOSPC, EDQUOT) fails with
  KAFKA_STORAGE_ERROR, with the appends queued behind it; the log drops the
  partial write and stays consistent (``Log.complete_append``).  The
  directory is then *full*: further appends to any of its logs fail at once
  with KAFKA_STORAGE_ERROR instead of writing into whatever space frees up
  (which the writes below need).
* Reads never need space.
* The broker's own small files (the controller's metadata, the checkpoints,
  leader-epoch and partition metadata files) are replaced through a
  temporary file, which needs space.  So that deleting topics and records —
  the way to free space through Kafka's API — works on a full disk, each
  log dir keeps a **reserve**: a preallocated file (``RESERVE_FILE``), at
  least ``RESERVE_MIN_BYTES`` and twice the size of the broker's own files
  in the directory.  A write of those files that runs out of space marks the
  directory full, deletes the reserve, and tries again
  (``write_atomically`` in ``checkpoints``).  Recovery-point checkpoints do
  not use the reserve (``LogManager``): one that cannot be written only
  makes recovery after a crash re-read more.
* Index entries reach their files at flush/close (``index``): while they
  cannot be written they stay in memory and the flush that needed them
  fails, so the recovery point never passes a segment whose index is not on
  disk.
* ``LogManager`` checks full directories every
  ``CHECK_INTERVAL_SECONDS``: once the reserve can be preallocated again and
  ``RESUME_MIN_FREE_BYTES`` are free besides it, appends resume — no restart
  is needed.  Space comes back when deleted topics and segments are removed
  (after ``file.delete.delay.ms``), by retention, or by the operator.

Space taken by other programs on the same filesystem is outside the
broker's control: the reserve only helps if nothing else fills it first.

Every method here may run on any thread; ``full`` is a plain attribute read
on the reactor before each append.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable, Iterable

from twisted.internet.defer import Deferred, gatherResults
from twisted.logger import Logger

log = Logger()

#: The reserve's file name in each log dir (not a partition directory, so never loaded as one).
RESERVE_FILE = ".space-reserve"
RESERVE_MIN_BYTES = 1024 * 1024
#: Free bytes needed, besides the reserve, before appends resume.
RESUME_MIN_FREE_BYTES = 512 * 1024
CHECK_INTERVAL_SECONDS = 1.0

_OUT_OF_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_out_of_space(error: BaseException | None) -> bool:
    """Whether ``error`` (or what caused it) is "no space left" / "quota exceeded"."""
    seen = 0
    while error is not None and seen < 5:
        if isinstance(error, OSError) and error.errno in _OUT_OF_SPACE:
            return True
        error = error.__cause__
        seen += 1
    return False


def free_bytes(path: str) -> int:
    """Bytes an unprivileged writer may still use on ``path``'s filesystem."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


class LogDirSpace:
    """The full/not-full state and the space reserve of one log directory."""

    def __init__(self, path: str):
        self.path = path
        self.reserve_path = os.path.join(path, RESERVE_FILE)
        self.full = False
        self.reason: str | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<LogDirSpace {self.path} {'full' if self.full else 'ok'}>"

    # -- state ------------------------------------------------------------------------

    def mark_full(self, reason: str) -> None:
        """Appends to this directory's logs fail from now on, until ``try_resume``."""
        with self._lock:
            if self.full:
                return
            self.full = True
            self.reason = reason
        log.warn("log dir {dir} is full ({reason}): appends to its logs fail with "
                 "KAFKA_STORAGE_ERROR until space is freed; reads, DeleteRecords and "
                 "DeleteTopics keep working", dir=self.path, reason=reason)

    def try_resume(self) -> bool:
        """If space is back, re-create the reserve and let appends resume (BLOCKING).

        Returns True when the directory is (now) not full.
        """
        if not self.full:
            return True
        if not os.path.isdir(self.path):
            return False
        if not self.ensure_reserve():
            return False
        free = free_bytes(self.path)
        if free < RESUME_MIN_FREE_BYTES:
            return False
        with self._lock:
            self.full = False
            self.reason = None
        log.info("log dir {dir} has space again ({free} bytes free, reserve in place): "
                 "appends resume", dir=self.path, free=free)
        return True

    # -- the reserve ------------------------------------------------------------------

    def reserve_size(self) -> int:
        """How big the reserve should be: twice the broker's own files here, at least the minimum."""
        own = 0
        try:
            with os.scandir(self.path) as entries:
                for entry in entries:
                    if entry.name != RESERVE_FILE and entry.is_file(follow_symlinks=False):
                        own += entry.stat(follow_symlinks=False).st_size
        except OSError:
            pass
        return max(RESERVE_MIN_BYTES, 2 * own)

    def has_reserve(self) -> bool:
        try:
            return os.path.getsize(self.reserve_path) >= RESERVE_MIN_BYTES
        except OSError:
            return False

    def ensure_reserve(self) -> bool:
        """Preallocate the reserve if it is missing or too small (BLOCKING); False if
        there is no room for it (nothing is left behind then)."""
        size = self.reserve_size()
        try:
            if os.path.getsize(self.reserve_path) >= size:
                return True
        except OSError:
            pass
        tmp = self.reserve_path + ".tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.posix_fallocate(fd, 0, size)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.reserve_path)
            return True
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if not is_out_of_space(e):
                log.warn("cannot create the space reserve {path}: {e}", path=self.reserve_path, e=e)
            return False

    def release_reserve(self, why: str) -> bool:
        """A write of the broker's own files ran out of space: mark the directory full
        (so appends do not take what is freed) and delete the reserve (BLOCKING).
        Returns True if there was a reserve to release."""
        self.mark_full(why)
        try:
            os.unlink(self.reserve_path)
        except FileNotFoundError:
            return False
        except OSError as e:
            log.warn("cannot release the space reserve {path}: {e}", path=self.reserve_path, e=e)
            return False
        log.warn("released the space reserve of {dir} to write {why}", dir=self.path, why=why)
        return True


class LogDirSpaces:
    """The ``LogDirSpace`` of each of a log manager's dirs: the manager's disk-space part.

    At start-up each dir gets its reserve (``prepare``); every
    ``CHECK_INTERVAL_SECONDS`` the full ones are checked for room to resume
    appends (``resume_full``).  The rest happens where space runs out: the
    logs of a dir refuse appends while it is full, and its small files'
    writes release its reserve (``checkpoints.write_atomically``).
    """

    def __init__(self, log_dirs: Iterable[str]):
        self._spaces = {d: LogDirSpace(d) for d in log_dirs}

    def __getitem__(self, log_dir: str) -> LogDirSpace:
        return self._spaces[log_dir]

    def get(self, log_dir: str) -> LogDirSpace | None:
        return self._spaces.get(log_dir)

    def prepare(self, log_dir: str) -> None:
        """Preallocate the dir's reserve; without room for it the dir starts full: appends
        are refused until space is freed (BLOCKING)."""
        space = self._spaces[log_dir]
        if not space.ensure_reserve():
            space.mark_full("no room for the space reserve at start-up")

    def resume_full(self, blocking: Callable[..., Deferred]) -> Deferred | None:
        """Let appends resume in full dirs that have space again (``try_resume`` of each, run
        through ``blocking``); None when no dir is full."""
        full = [space for space in self._spaces.values() if space.full]
        if not full:
            return None
        return gatherResults([blocking(space.try_resume) for space in full], consumeErrors=True)

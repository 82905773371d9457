"""``LeaderEpochCache``: the first offset written under each leader epoch.

KIP-101/KIP-279: a replica that becomes follower asks the leader "where did
my latest epoch end?" (OffsetForLeaderEpoch) and truncates there, instead of
trusting a high watermark that may be stale.  The answer comes from this
cache: an ordered list of (epoch, start offset), persisted as
``leader-epoch-checkpoint`` in the partition directory.

Epochs never go backwards: an assignment with an epoch lower than the latest
is refused (the log raises FENCED_LEADER_EPOCH for leader appends before it
gets here); equal epochs are a no-op.  Entries are only removed when the log
itself is cut: ``truncate_from_end`` (the log was truncated — replication)
and ``truncate_from_start`` (log start moved — retention, DeleteRecords).

Writes of the checkpoint happen on the caller's thread without fsync (a new
epoch is rare: once per leader change), through an atomic rename;
``flush()`` makes it durable together with the log, and recovery re-derives
the epochs of every batch it re-reads, so an unflushed checkpoint loses
nothing that recovery cannot restore.  For the same reason a write that
fails (a full disk) is only logged: the cache stays right in memory and the
next ``flush()`` writes it again — and fails, so the recovery point does not
move past epochs the file does not hold.  Content the file already holds is
not written again, and loading trims the cache without writing (the file may
keep entries the log no longer has; loading trims them again): an atomic
rename costs milliseconds, and a restart with tens of thousands of
partitions would otherwise write every checkpoint twice -- the loader drops
the entry an empty log's epoch has at its end, and becoming leader adds it
back.
"""

from __future__ import annotations

import os
import threading
from bisect import bisect_right

from twisted.logger import Logger

from twisted_kafka.log.checkpoints import (
    CheckpointError,
    read_epoch_checkpoint,
    write_epoch_checkpoint,
)
from twisted_kafka.log.disk_space import LogDirSpace
from twisted_kafka.log.file_handles import FileHandleCache

log = Logger()

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    """Ordered (epoch, start_offset) pairs with Kafka's ``endOffsetFor`` semantics."""

    def __init__(self, path: str | None, entries: list[tuple[int, int]] | None = None):
        self.path = path
        #: The log dir's ``LogDirSpace`` (set by ``LogManager``): writes may use its reserve.
        self.space: LogDirSpace | None = None
        #: The log manager's descriptor cache (set by ``Log``): the checkpoint is opened through it.
        self.files: FileHandleCache | None = None
        #: The checkpoint file could not be read (see ``load``).
        self.damaged = False
        self._lock = threading.RLock()   # flush() runs in the thread pool
        self._epochs: list[int] = []
        self._starts: list[int] = []
        for epoch, start in entries or ():
            self._assign(epoch, start)
        self._dirty = False
        self._on_disk: list[tuple[int, int]] | None = None    # what the file holds, when known
        self._durable: list[tuple[int, int]] | None = None    # what it holds fsynced, when known

    @classmethod
    def load(cls, path: str, *, durable: bool = False) -> LeaderEpochCache:
        """Read the checkpoint.  An unreadable one is discarded and the cache comes
        back with ``damaged`` set: the loader then rebuilds it from the batches.

        ``durable``: the file is known to be on disk (the last shutdown flushed
        it); else the next ``flush()`` makes it so.
        """
        try:
            entries = read_epoch_checkpoint(path)
        except (CheckpointError, OSError) as e:
            log.warn("discarding the damaged leader epoch checkpoint {e}; rebuilding it from the "
                     "batches' leader epochs", e=e)
            cache = cls(path, [])
            cache.damaged = True
            return cache
        cache = cls(path, entries)
        cache._on_disk = entries
        if durable:
            cache._durable = entries
        else:
            cache._dirty = bool(entries)
        return cache

    # -- queries ------------------------------------------------------------

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._starts[0]) if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch under which ``offset`` was written (largest start <= offset)."""
        i = bisect_right(self._starts, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset) for a requested epoch.

        * the latest epoch: it is still open, so it ends at the log end;
        * an older known epoch: it ends where the next higher epoch starts;
        * an epoch between known ones: answer with the largest known epoch
          below it, ending where the next higher one starts;
        * below every known epoch: (requested epoch, first known start);
        * above the latest, undefined (-1), or an empty cache: (-1, -1).
        """
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        higher = bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    # -- updates ------------------------------------------------------------

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0:
            return False
        if self._epochs:
            latest = self._epochs[-1]
            if epoch == latest:
                return False
            if epoch < latest:
                # Refused quietly: recovery replays old segments' epochs into a
                # cache that already knows later ones; leader appends with an
                # old epoch were already rejected (FENCED_LEADER_EPOCH) by the log.
                return False
            # A higher epoch cannot start before an earlier one: drop those it overlaps.
            while self._starts and self._starts[-1] >= start_offset:
                self._epochs.pop()
                self._starts.pop()
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed."""
        with self._lock:
            changed = self._assign(epoch, start_offset)
            if changed:
                self._dirty = True
                self.write()
            return changed

    def truncate_from_end(self, end_offset: int, *, write: bool = True) -> None:
        """The log now ends at ``end_offset``: forget epochs starting at or after it
        (``write=False``: in memory only, until the next write or flush)."""
        with self._lock:
            if self._starts and self._starts[-1] >= end_offset:
                keep = bisect_right(self._starts, end_offset - 1)
                del self._epochs[keep:]
                del self._starts[keep:]
                self._dirty = True
                if write:
                    self.write()

    def truncate_from_start(self, start_offset: int, *, write: bool = True) -> None:
        """The log now starts at ``start_offset``: drop epochs wholly before it and
        move the start of the one it falls in up to it (``write``: as above)."""
        with self._lock:
            i = bisect_right(self._starts, start_offset) - 1
            if i < 0 or (i == 0 and self._starts[0] == start_offset):
                return
            del self._epochs[:i]
            del self._starts[:i]
            self._starts[0] = start_offset
            self._dirty = True
            if write:
                self.write()

    def clear(self) -> None:
        with self._lock:
            if self._epochs:
                self._epochs.clear()
                self._starts.clear()
                self._dirty = True
                self.write()

    # -- persistence --------------------------------------------------------

    def write(self, *, fsync: bool = False) -> None:
        """Write the checkpoint; with ``fsync`` durably (BLOCKING), raising on failure.
        Without, a failure is logged and left to the next ``flush()``."""
        if self.path is None:
            return
        with self._lock:
            entries = self.entries
            if not fsync and entries == self._on_disk:
                return
            try:
                write_epoch_checkpoint(self.path, entries, fsync=fsync, space=self.space, files=self.files)
            except OSError as e:
                if fsync:
                    raise
                log.warn("cannot write {path}: {e}; it is written again at the next flush",
                         path=self.path, e=e)
                return
            self._on_disk = entries
            if fsync:
                self._durable = entries
                self._dirty = False

    def flush(self) -> bool:
        """Make the checkpoint durable if it changed since the last flush (BLOCKING).  True when
        it was written, which fsyncs its directory too (the log's own: ``Log.flush`` then needs
        no directory fsync of its own)."""
        with self._lock:
            if self._dirty and self.entries == self._durable == self._on_disk:
                self._dirty = False            # changed in memory only and back: the disk has it
            elif self._dirty and self.path is not None and os.path.isdir(os.path.dirname(self.path)):
                self.write(fsync=True)
                return True
            return False

"""The aborted-transaction index of a segment: ``<base offset>.txnindex`` (Kafka's ``TransactionIndex``).

A read_committed consumer (KIP-98) receives, with the records of a fetch,
the transactions aborted in the range it read: (producer id, first offset)
pairs, so it drops those producers' records from each first offset until it
meets the producer's ABORT marker.  The broker keeps them per segment, in
the segment whose batches hold the ABORT marker, as a flat file of 34-byte
big-endian entries in Kafka's format (``AbortedTxn``)::

    version           int16   0
    producerId        int64
    firstOffset       int64   the transaction's first offset (it may lie in an earlier segment)
    lastOffset        int64   the offset of its ABORT marker
    lastStableOffset  int64   the last stable offset once it was aborted

Entries are appended in marker order (``lastOffset`` strictly increasing).
``lastStableOffset`` lets a search stop early: every transaction aborted
later started at or after it, so once an entry's ``lastStableOffset`` reaches
the end of the fetched range no later entry can overlap it
(``collect``, Kafka's ``collectAbortedTxns``).

As Kafka does, the file is created with its first entry (most segments have
none and have no file).  The entries are held in memory, encoded as in the
file (34 bytes each; aborted transactions are rare), so a fetch never waits
for the disk to learn them; new ones reach the file as the other indexes'
do, when the segment is flushed or closed (``write_pending``/``flush``).
After a crash the segments recovery checks are recovered, which rebuilds
their transaction indexes by replaying the producer state
(``recovery``); a file that fails its check when opened (a partial entry,
an unknown version, entries out of order or below the segment) is rebuilt
the same way.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
from array import array
from bisect import bisect_left
from typing import NamedTuple

from twisted.logger import Logger

from twisted_kafka.log.file_handles import FileHandleCache, os_open
from twisted_kafka.log.index import CorruptIndexError

log = Logger()

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size            # 34
VERSION = 0
assert ENTRY_SIZE == 34


class AbortedTxn(NamedTuple):
    """One entry of a transaction index (Kafka's ``AbortedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


def decode_entries(data: bytes, base_offset: int, path: str = "?") -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file's bytes; ``CorruptIndexError`` unless they are whole
    entries of version 0, each ending at or after ``base_offset`` and after the one before it."""
    if len(data) % ENTRY_SIZE:
        raise CorruptIndexError(f"{path}: size {len(data)} is not a multiple of {ENTRY_SIZE}")
    entries = []
    previous = -1
    for version, pid, first, last, lso in ENTRY.iter_unpack(data):
        if version != VERSION:
            raise CorruptIndexError(f"{path}: unknown aborted transaction version {version}")
        if last < base_offset or last <= previous or first > last or pid < 0:
            raise CorruptIndexError(f"{path}: entry (producer {pid}, offsets {first}-{last}) is out of order or "
                                    f"below the segment's base offset {base_offset}")
        previous = last
        entries.append(AbortedTxn(pid, first, last, lso))
    return entries


class TransactionIndex:
    """A segment's aborted transactions (module docstring).

    Threading: appends, truncation and resets come from the reactor (or the
    loader before the log is shared); ``collect`` also runs on pool threads
    (the log cleaner) and ``flush``/``write_pending`` in the pool.  One lock
    orders them all; nothing under it waits for a disk flush.
    """

    __slots__ = ("path", "base_offset", "files", "_data", "_last", "_written", "_lock", "_write_failed", "_file")

    def __init__(self, path: str, base_offset: int, entries: list[AbortedTxn] | None = None, *,
                 files: FileHandleCache | None = None):
        self.path = path
        self.base_offset = base_offset
        self.files = files
        entries = entries or []
        #: Every entry, encoded as in the file; the first ``_written`` are in the file.
        self._data = bytearray(b"".join(e.encode() for e in entries))
        self._last = array("q", [e.last_offset for e in entries])
        self._written = len(entries)
        self._lock = threading.Lock()
        self._write_failed = False
        #: Whether the file exists (as far as this index knows: it creates, renames and deletes it).
        self._file = False

    @classmethod
    def create(cls, path: str, base_offset: int, *, files: FileHandleCache | None = None) -> TransactionIndex:
        """A new, empty index: no file until its first entry (a stale file at ``path`` is removed)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return cls(path, base_offset, files=files)

    @classmethod
    def open(cls, path: str, base_offset: int, *, files: FileHandleCache | None = None) -> TransactionIndex:
        """The index of an existing segment (empty when there is no file).  BLOCKING (reads the
        file).  Raises ``CorruptIndexError``."""
        try:
            fd = os_open(files, path, os.O_RDONLY)
        except FileNotFoundError:
            return cls(path, base_offset, files=files)
        try:
            size = os.fstat(fd).st_size
            parts = []
            got = 0
            while got < size:
                chunk = os.pread(fd, size - got, got)
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
        finally:
            os.close(fd)
        index = cls(path, base_offset, decode_entries(b"".join(parts), base_offset, path), files=files)
        index._file = True
        return index

    # -- content --------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._last)

    def __repr__(self) -> str:
        return f"<TransactionIndex {self.path} entries={len(self._last)}>"

    @property
    def last_offset(self) -> int:
        """The last offset (ABORT marker) of the newest entry, -1 when there is none."""
        last = self._last
        return last[-1] if last else -1

    def _entry(self, i: int) -> AbortedTxn:
        _, pid, first, last, lso = ENTRY.unpack_from(self._data, i * ENTRY_SIZE)
        return AbortedTxn(pid, first, last, lso)

    def entries(self) -> list[AbortedTxn]:
        """Every entry, oldest first (Kafka's ``allAbortedTxns``)."""
        with self._lock:
            return [AbortedTxn(pid, first, last, lso) for _, pid, first, last, lso in ENTRY.iter_unpack(self._data)]

    def append(self, txn: AbortedTxn) -> None:
        """Add the entry of a transaction aborted by a marker in this segment (written later)."""
        with self._lock:
            if self._last and txn.last_offset <= self._last[-1]:
                raise ValueError(f"the last offset of appended transactions must increase: {txn.last_offset} is "
                                 f"not greater than {self._last[-1]} in {self.path}")
            if txn.last_offset < self.base_offset:
                raise ValueError(f"aborted transaction ending at {txn.last_offset} is below the base offset "
                                 f"{self.base_offset} of {self.path}")
            self._data += txn.encode()
            self._last.append(txn.last_offset)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """(the transactions overlapping [``fetch_offset``, ``upper_bound_offset``), whether the search
        is complete): Kafka's ``collectAbortedTxns`` -- an entry overlaps when its last offset is at
        or after the fetch offset and its first offset before the upper bound; the search of the
        following segments is not needed once an entry's last stable offset reaches the upper bound."""
        found: list[AbortedTxn] = []
        with self._lock:
            # Entries ending before the fetch offset cannot overlap it, nor end the search: their last
            # stable offset is at most their marker's offset + 1.
            for i in range(bisect_left(self._last, fetch_offset), len(self._last)):
                txn = self._entry(i)
                if txn.first_offset < upper_bound_offset:
                    found.append(txn)
                if txn.last_stable_offset >= upper_bound_offset:
                    return found, True
        return found, False

    # -- the file -------------------------------------------------------------------------

    @property
    def pending_entries(self) -> int:
        return len(self._last) - self._written

    def write_pending(self) -> bool:
        """Write the entries not in the file yet, creating it with the first (no fsync).  BLOCKING
        (a page-cache write).  Whether the file holds every entry now; a failure (a full disk) is
        logged once and leaves them pending (``flush`` raises it)."""
        with self._lock:
            if self._written == len(self._last):
                return True
            try:
                fd = self._write_pending_locked()
            except OSError as e:
                self._warn(e)
                return False
        if fd is not None:
            os.close(fd)
        return True

    def _write_pending_locked(self) -> int | None:
        """Open the file and write the pending entries after the written ones; the descriptor
        (the caller closes it), or None when there is no file and nothing to write."""
        pending = len(self._last) - self._written
        if not pending:
            if not self._file:
                return None
            try:
                return os_open(self.files, self.path, os.O_WRONLY)
            except FileNotFoundError:
                return None
        fd = os_open(self.files, self.path, os.O_WRONLY | os.O_CREAT)
        self._file = True
        end = self._written * ENTRY_SIZE
        try:
            view = memoryview(bytes(self._data[end:]))
            written = 0
            while written < len(view):
                written += os.pwrite(fd, view[written:], end + written)
            os.ftruncate(fd, len(self._data))      # nothing of an earlier failed write after them
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, end)              # whole entries only (shrinking needs no space)
            os.close(fd)
            raise
        self._written = len(self._last)
        self._write_failed = False
        return fd

    def _warn(self, error: OSError) -> None:
        if not self._write_failed:
            self._write_failed = True
            log.warn("cannot write aborted transactions to {path}: {e}; they are kept in memory and written "
                     "at the next flush", path=self.path, e=error)

    def flush(self) -> None:
        """Write the pending entries and fsync the file, if there is one (BLOCKING).  Raises
        OSError when they cannot be written (they stay pending)."""
        with self._lock:
            try:
                fd = self._write_pending_locked()
            except OSError as e:
                self._warn(e)
                raise
        if fd is None:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def discard_pending(self) -> None:
        """Forget the entries not written yet (the files are going away)."""
        with self._lock:
            del self._data[self._written * ENTRY_SIZE:]
            del self._last[self._written:]

    def truncate_to(self, offset: int) -> None:
        """Remove the entries of transactions whose marker is at or after ``offset`` (the log was
        cut there; Kafka's ``truncateTo``)."""
        with self._lock:
            keep = bisect_left(self._last, offset)
            self._cut_locked(keep)

    def reset(self) -> None:
        """Remove every entry (before the segment's index is rebuilt)."""
        with self._lock:
            self._cut_locked(0)

    def _cut_locked(self, keep: int) -> None:
        if keep >= len(self._last):
            return
        del self._data[keep * ENTRY_SIZE:]
        del self._last[keep:]
        if self._written > keep:
            self._written = keep
            if self._file:
                with contextlib.suppress(FileNotFoundError):
                    os.truncate(self.path, keep * ENTRY_SIZE)

    def rename(self, path: str) -> None:
        """Rename the file (if there is one) and remember the new name."""
        with self._lock:
            if self._file:
                with contextlib.suppress(FileNotFoundError):
                    os.rename(self.path, path)
            self.path = path

    def delete(self) -> None:
        with self._lock:
            self._written = 0
            if self._file:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
                self._file = False
            del self._data[:]
            del self._last[:]


__all__ = ["AbortedTxn", "ENTRY_SIZE", "TransactionIndex", "decode_entries"]

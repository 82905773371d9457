"""Sparse segment indexes: the offset index and the time index.

Both are flat files of fixed-size big-endian entries, as in Kafka, with
offsets stored relative to the segment's base offset (int32):

* ``<base>.index`` — (relative offset int32, file position int32), 8 bytes.
  An entry means "the batch whose *base* offset is this starts at this
  position".  (Kafka writes the batch's last offset; the base offset makes
  "largest entry <= target, then scan forward" exact for a target inside a
  batch.  Either way a lookup lands at or before the batch wanted.)
* ``<base>.timeindex`` — (timestamp int64, relative offset int32), 12 bytes.
  An entry means "up to this offset the largest timestamp seen is this",
  where the offset is the base offset of the batch that first carried it.
  Timestamps only increase from entry to entry.

Entries are added at most once per ``index.interval.bytes`` of log, so an
index is small (a full 1 GiB segment with the 4 KiB default: 2 MiB).  Unlike
Kafka the files are not preallocated and memory-mapped: the content is read
into two ``array``s the first time a lookup needs it — most old segments are
never looked up — and new entries go to those arrays at once but reach the
file later, all together: when the segment is flushed (fsync: a roll, the
flush policy, shutdown), closed, or when ``PENDING_WRITE_BYTES`` of them are
waiting.  An index therefore holds no descriptor between writes (a broker
with thousands of partitions would otherwise hold two more per active
segment), and appending an entry is no system call.  Losing entries not yet
written is harmless: an index is sparse (a lookup lands at or before the
batch wanted and scans forward), and a segment that was not flushed is
recovered after a crash, which rebuilds its indexes anyway.  A write of
them that fails (a full disk) leaves the file with its whole entries and the
entries pending: the flush that needed them fails, so the recovery point
never passes a segment whose index is not on disk, and the next flush writes
them.  An index is full at ``segment.index.bytes``, which makes the segment
roll.

An index that fails its sanity check raises ``CorruptIndexError``; recovery
then rebuilds it from the segment's batches.
"""

from __future__ import annotations

import contextlib
import os
import struct
import sys
import threading
from abc import ABC, abstractmethod
from array import array
from bisect import bisect_right

from twisted.logger import Logger

from twisted_kafka.log.file_handles import FileHandleCache, os_open

log = Logger()

#: Entries waiting for the file are written once this many bytes of them pile up.
PENDING_WRITE_BYTES = 64 * 1024


class CorruptIndexError(Exception):
    """An index file whose content cannot be right; rebuild it from the log."""


class _SparseIndex(ABC):
    """Common file handling: lazy load, append (written later), truncate, flush, rename, delete.

    ``_written`` entries are in the file; the ``_count - _written`` after
    them are in ``_pending`` (encoded), and only while the arrays are loaded.
    ``_write_lock`` orders writers of the file (the reactor appending and
    truncating, a pool thread flushing).
    """

    ENTRY: struct.Struct
    KEY_TYPECODE: str     # array typecode of the key column
    VALUE_TYPECODE: str   # array typecode of the value column

    def __init__(self, path: str, base_offset: int, max_index_size: int,
                 *, entries: int, loaded: bool = False, files: FileHandleCache | None = None):
        self.path = path
        #: The log manager's descriptor cache: opening an index file when the process is
        #: out of descriptors closes idle segment files first (None: a plain open).
        self.files = files
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.ENTRY.size)
        self._count = entries
        self._keys: array | None = array(self.KEY_TYPECODE) if loaded else None
        self._values: array | None = array(self.VALUE_TYPECODE) if loaded else None
        self._written = entries                # entries in the file
        self._pending = bytearray()            # entries after those, not written yet
        self._write_lock = threading.Lock()
        self._last_raw: tuple | None = None    # last file entry, known without loading
        self._write_failed = False             # warned about a failed write of pending entries
        self._torn = False                     # a failed write may have left a partial entry
        self._load_lock = threading.Lock()

    # -- construction -------------------------------------------------------

    @classmethod
    def create(cls, path: str, base_offset: int, max_index_size: int, *, files: FileHandleCache | None = None):
        """A new, empty index (an existing file at ``path`` is emptied)."""
        fd = os_open(files, path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.close(fd)
        return cls(path, base_offset, max_index_size, entries=0, loaded=True, files=files)

    @classmethod
    def open(cls, path: str, base_offset: int, max_index_size: int, segment_size: int,
             *, full_check: bool = False, files: FileHandleCache | None = None):
        """An existing index, sanity-checked cheaply (first and last entries).

        ``full_check`` also loads it and checks every entry is in order; the
        loader asks for it on the segments recovery would otherwise trust
        most (the active one).  Raises ``FileNotFoundError`` or
        ``CorruptIndexError``.
        """
        size = os.path.getsize(path)
        if size % cls.ENTRY.size:
            raise CorruptIndexError(f"{path}: size {size} is not a multiple of {cls.ENTRY.size}")
        index = cls(path, base_offset, max_index_size, entries=size // cls.ENTRY.size, files=files)
        if index._count:
            fd = os_open(files, path, os.O_RDONLY)
            try:
                first = cls.ENTRY.unpack(os.pread(fd, cls.ENTRY.size, 0))
                last = cls.ENTRY.unpack(os.pread(fd, cls.ENTRY.size, size - cls.ENTRY.size))
            except struct.error:
                raise CorruptIndexError(f"{path}: shorter than {size} bytes") from None
            finally:
                os.close(fd)
            index._check_ends(first, last, segment_size)
            index._last_raw = last
        if full_check:
            index._ensure_loaded()
            index._check_order(segment_size)
        return index

    # -- subclass hooks -----------------------------------------------------

    @abstractmethod
    def _check_ends(self, first: tuple, last: tuple, segment_size: int) -> None:
        """Raise CorruptIndexError if the first/last entries cannot belong to the segment."""

    @abstractmethod
    def _check_order(self, segment_size: int) -> None:
        """Raise CorruptIndexError if the entries are not in order."""

    @abstractmethod
    def _decode(self, data: bytes) -> tuple[array, array]:
        """(key column, value column) of the file content."""

    # -- content ------------------------------------------------------------

    def _ensure_loaded(self) -> tuple[array, array]:
        keys, values = self._keys, self._values
        if keys is not None and values is not None:
            return keys, values
        with self._load_lock:
            keys, values = self._keys, self._values
            if keys is None or values is None:
                if not self._count:
                    data = b""
                else:
                    fd = os_open(self.files, self.path, os.O_RDONLY)
                    try:
                        data = _read_fully(fd, self._count * self.ENTRY.size)
                    finally:
                        os.close(fd)
                if len(data) != self._count * self.ENTRY.size:
                    raise CorruptIndexError(f"{self.path}: shorter than when opened")
                keys, values = self._decode(data)
                self._values = values
                self._keys = keys
        return keys, values

    def __len__(self) -> int:
        return self._count

    @property
    def loaded(self) -> bool:
        """Whether the entries are in memory (a lookup will not touch the disk)."""
        return self._keys is not None or self._count == 0

    @property
    def is_full(self) -> bool:
        return self._count >= self.max_entries

    @property
    def size_bytes(self) -> int:
        return self._count * self.ENTRY.size

    def _append(self, key: int, value: int, entry: bytes) -> None:
        keys, values = self._ensure_loaded()
        with self._write_lock:
            self._pending += entry
        # Value first: a reader on a pool thread that finds a key by bisection
        # (lookups run there too) must find its value in place.
        values.append(value)
        keys.append(key)
        self._count += 1
        if len(self._pending) >= PENDING_WRITE_BYTES:
            self.write_pending()      # a failure (a full disk, say) leaves them pending for the next try

    def write_pending(self) -> bool:
        """Write the entries not in the file yet (no fsync).  BLOCKING, but only a page-cache write.

        Returns whether the file holds every entry now.  A write that fails (a
        full disk, no descriptor left) is logged and changes nothing: the file
        keeps whole entries only, and the entries stay in memory (lookups use
        them) and pending for the next write or ``flush`` -- which raises, so a
        segment whose index is not on disk is never counted as flushed.
        """
        with self._write_lock:
            if not self._pending:
                return True
            try:
                fd = self._write_pending_locked()
            except OSError as e:
                self._write_failed_warning(e)
                return False
        if fd is not None:
            os.close(fd)
        return True

    def _write_pending_locked(self) -> int | None:
        """Open the file, write the pending entries after the written ones; the descriptor
        (the caller closes it), or None if the file is gone.  Raises OSError with the
        file cut back to its whole entries (or marked to be cut at the next write)."""
        try:
            fd = os_open(self.files, self.path, os.O_WRONLY)
        except FileNotFoundError:
            return None       # deleted (its segment or partition): never recreate it
        end = self._written * self.ENTRY.size
        pending = self._pending
        try:
            if pending:
                # A copy: a view of ``pending`` that outlives a failed write (in a traceback)
                # would stop it from being cleared or grown.
                view = memoryview(bytes(pending))
                try:
                    written = 0
                    while written < len(view):
                        written += os.pwrite(fd, view[written:], end + written)
                finally:
                    view.release()
                self._written += len(pending) // self.ENTRY.size
                end = self._written * self.ENTRY.size
                pending.clear()
            if self._torn:
                os.ftruncate(fd, end)     # what an earlier failed write left after the entries
                self._torn = False
        except BaseException:
            try:
                os.ftruncate(fd, end)     # shrinking needs no space
                self._torn = False
            except OSError:
                self._torn = True
            os.close(fd)
            raise
        self._write_failed = False
        return fd

    def _write_failed_warning(self, error: OSError) -> None:
        if not self._write_failed:
            self._write_failed = True
            log.warn("cannot write index entries to {path}: {e}; they are kept in memory and "
                     "written at the next flush", path=self.path, e=error)

    @property
    def pending_entries(self) -> int:
        """Entries appended but not written to the file yet."""
        return len(self._pending) // self.ENTRY.size

    def _floor(self, key: int) -> tuple[int, array, array]:
        """(position in the arrays of the largest key <= ``key`` or -1, the key and value
        columns it is a position in -- the ones loaded now, even if ``unload`` runs meanwhile)."""
        keys, values = self._ensure_loaded()
        return bisect_right(keys, key) - 1, keys, values

    def _truncate_entries(self, count: int) -> None:
        keys, values = self._ensure_loaded()
        if count >= self._count:
            return
        with self._write_lock:
            del keys[count:]
            del values[count:]
            self._count = count
            if count >= self._written:
                del self._pending[(count - self._written) * self.ENTRY.size:]
            else:
                self._pending.clear()
                os.truncate(self.path, count * self.ENTRY.size)
                self._written = count
                self._torn = False

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._ensure_loaded()
        with self._write_lock:
            self._keys = array(self.KEY_TYPECODE)
            self._values = array(self.VALUE_TYPECODE)
            self._count = 0
            self._pending.clear()
            os.truncate(self.path, 0)
            self._written = 0
            self._torn = False

    # -- file lifecycle -----------------------------------------------------

    def flush(self) -> None:
        """Write pending entries and fsync the file (BLOCKING).  A deleted file is skipped.

        Raises OSError when the entries cannot be written (they stay pending).
        """
        with self._write_lock:
            try:
                fd = self._write_pending_locked()
            except OSError as e:
                self._write_failed_warning(e)
                raise
        if fd is None:
            return
        try:
            os.fsync(fd)      # outside the lock: appends on the reactor never wait for a disk flush
        finally:
            os.close(fd)

    def discard_pending(self) -> None:
        """Forget the entries not written yet (what a crash loses; the files are going away)."""
        with self._write_lock:
            if self._pending:
                self._count = self._written
                keys, values = self._keys, self._values
                if keys is not None and values is not None:
                    del keys[self._written:]
                    del values[self._written:]
                self._pending.clear()

    def unload(self) -> None:
        """Forget the in-memory copy (it is read again on the next lookup); not while
        entries wait to be written."""
        with self._write_lock:
            if not self._pending:
                self._keys = self._values = None

    def rename(self, path: str) -> None:
        with self._write_lock:
            os.rename(self.path, path)
            self.path = path

    def delete(self) -> None:
        with self._write_lock:
            self._pending.clear()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)


class OffsetIndex(_SparseIndex):
    """(relative base offset of a batch, its position in the ``.log`` file)."""

    ENTRY = struct.Struct(">ii")
    KEY_TYPECODE = "i"     # relative offsets
    VALUE_TYPECODE = "i"   # positions

    def _decode(self, data):
        both = array("i")
        both.frombytes(data)
        if _LITTLE:
            both.byteswap()
        return both[0::2], both[1::2]

    def _check_ends(self, first, last, segment_size):
        if first[0] < 0 or first[1] < 0 or last[0] < first[0] or last[1] < first[1]:
            raise CorruptIndexError(f"{self.path}: entries out of order")
        if last[1] >= max(segment_size, 1):
            raise CorruptIndexError(f"{self.path}: position {last[1]} beyond the segment "
                                    f"({segment_size} bytes)")

    def _check_order(self, segment_size):
        keys, values = self._ensure_loaded()
        for arr in (keys, values):
            if list(arr) != sorted(arr) or len(set(arr)) != len(arr):
                raise CorruptIndexError(f"{self.path}: entries out of order")
        if (keys and keys[0] < 0) or (values and values[-1] >= max(segment_size, 1)):
            raise CorruptIndexError(f"{self.path}: entry outside the segment")

    def append(self, offset: int, position: int) -> None:
        """Add an entry for the batch with base ``offset`` starting at ``position``."""
        rel = offset - self.base_offset
        self._append(rel, position, self.ENTRY.pack(rel, position))

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the largest entry at or before ``offset``, else (base, 0)."""
        i, keys, values = self._floor(offset - self.base_offset)
        if i < 0:
            return self.base_offset, 0
        return keys[i] + self.base_offset, values[i]

    def floor_entry(self, max_offset: int, max_position: int) -> tuple[int, int] | None:
        """(offset, position) of the last entry with offset <= ``max_offset`` and position
        <= ``max_position`` (both grow together), or None."""
        keys, values = self._ensure_loaded()
        n = min(len(keys), len(values))
        i = min(bisect_right(keys, max_offset - self.base_offset, 0, n),
                bisect_right(values, max_position, 0, n)) - 1
        if i < 0:
            return None
        return keys[i] + self.base_offset, values[i]

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self._count:
            return self.base_offset, 0
        if self._keys is None and self._last_raw is not None:
            return self._last_raw[0] + self.base_offset, self._last_raw[1]
        keys, values = self._ensure_loaded()
        return keys[-1] + self.base_offset, values[-1]

    def truncate_to_position(self, position: int) -> None:
        """Remove entries for batches at or after ``position`` (the log was cut there)."""
        _, values = self._ensure_loaded()
        self._truncate_entries(bisect_right(values, position - 1))


class TimeIndex(_SparseIndex):
    """(largest timestamp so far, relative base offset of the batch that carried it)."""

    ENTRY = struct.Struct(">qi")
    KEY_TYPECODE = "q"     # timestamps
    VALUE_TYPECODE = "i"   # relative offsets

    def _decode(self, data):
        entries = list(self.ENTRY.iter_unpack(data))
        return array("q", [e[0] for e in entries]), array("i", [e[1] for e in entries])

    def _check_ends(self, first, last, segment_size):
        if first[1] < 0 or last[0] < first[0] or last[1] < first[1]:
            raise CorruptIndexError(f"{self.path}: entries out of order")

    def _check_order(self, segment_size):
        keys, values = self._ensure_loaded()
        if list(keys) != sorted(keys) or len(set(keys)) != len(keys) \
                or list(values) != sorted(values) or (values and values[0] < 0):
            raise CorruptIndexError(f"{self.path}: entries out of order")

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> bool:
        """Add an entry if ``timestamp`` is larger than the last one's (and room is left)."""
        if timestamp < 0 or (self.is_full and not skip_full_check):
            return False
        keys, _ = self._ensure_loaded()
        if keys and timestamp <= keys[-1]:
            return False
        rel = offset - self.base_offset
        self._append(timestamp, rel, self.ENTRY.pack(timestamp, rel))
        return True

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the largest entry with timestamp <= ``timestamp``.

        (-1, base offset) when every entry is larger (scan from the segment start).
        """
        i, keys, values = self._floor(timestamp)
        if i < 0:
            return -1, self.base_offset
        return keys[i], values[i] + self.base_offset

    @property
    def last_entry(self) -> tuple[int, int]:
        if not self._count:
            return -1, self.base_offset
        if self._keys is None and self._last_raw is not None:
            return self._last_raw[0], self._last_raw[1] + self.base_offset
        keys, values = self._ensure_loaded()
        return keys[-1], values[-1] + self.base_offset

    def truncate_to_offset(self, offset: int) -> None:
        """Remove entries pointing at ``offset`` or later."""
        _, values = self._ensure_loaded()
        self._truncate_entries(bisect_right(values, offset - self.base_offset - 1))


_LITTLE = sys.byteorder == "little"


def _read_fully(fd: int, size: int) -> bytes:
    """Up to ``size`` bytes from the start of ``fd`` (fewer only at the end of the file)."""
    parts = []
    got = 0
    while got < size:
        chunk = os.pread(fd, size - got, got)
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)

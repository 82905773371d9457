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
Kafka the files are not preallocated and memory-mapped: entries are appended
with ``write`` (page cache) and the content is read into two ``array``s the
first time a lookup needs it — most old segments are never looked up.  An
index is full at ``segment.index.bytes``, which makes the segment roll.

An index that fails its sanity check raises ``CorruptIndexError``; recovery
then rebuilds it from the segment's batches.
"""

from __future__ import annotations

import errno
import os
from abc import ABC, abstractmethod
import struct
import sys
import threading
from array import array
from bisect import bisect_right
import contextlib

from twisted.logger import Logger

log = Logger()


class CorruptIndexError(Exception):
    """An index file whose content cannot be right; rebuild it from the log."""


class _SparseIndex(ABC):
    """Common file handling: lazy load, append, truncate, flush, rename, delete."""

    ENTRY: struct.Struct
    KEY_TYPECODE: str     # array typecode of the key column
    VALUE_TYPECODE: str   # array typecode of the value column

    def __init__(self, path: str, base_offset: int, max_index_size: int,
                 *, entries: int, loaded: bool = False):
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.ENTRY.size)
        self._count = entries
        self._keys: array | None = array(self.KEY_TYPECODE) if loaded else None
        self._values: array | None = array(self.VALUE_TYPECODE) if loaded else None
        self._fd: int | None = None
        self._last_raw: tuple | None = None    # last file entry, known without loading
        self._write_failed = False             # warned about a failed entry write
        self._load_lock = threading.Lock()

    # -- construction -------------------------------------------------------

    @classmethod
    def create(cls, path: str, base_offset: int, max_index_size: int):
        """A new, empty index (an existing file at ``path`` is emptied)."""
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.close(fd)
        return cls(path, base_offset, max_index_size, entries=0, loaded=True)

    @classmethod
    def open(cls, path: str, base_offset: int, max_index_size: int, segment_size: int,
             *, full_check: bool = False):
        """An existing index, sanity-checked cheaply (first and last entries).

        ``full_check`` also loads it and checks every entry is in order; the
        loader asks for it on the segments recovery would otherwise trust
        most (the active one).  Raises ``FileNotFoundError`` or
        ``CorruptIndexError``.
        """
        size = os.path.getsize(path)
        if size % cls.ENTRY.size:
            raise CorruptIndexError(f"{path}: size {size} is not a multiple of {cls.ENTRY.size}")
        index = cls(path, base_offset, max_index_size, entries=size // cls.ENTRY.size)
        if index._count:
            with open(path, "rb") as f:
                first = cls.ENTRY.unpack(f.read(cls.ENTRY.size))
                f.seek(size - cls.ENTRY.size)
                last = cls.ENTRY.unpack(f.read(cls.ENTRY.size))
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
        if keys is not None:
            return keys, values
        with self._load_lock:
            if self._keys is None:
                if not self._count:
                    data = b""
                else:
                    with open(self.path, "rb") as f:
                        data = f.read(self._count * self.ENTRY.size)
                if len(data) != self._count * self.ENTRY.size:
                    raise CorruptIndexError(f"{self.path}: shorter than when opened")
                keys, values = self._decode(data)
                self._values = values
                self._keys = keys
        return self._keys, self._values

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
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            if os.write(self._fd, entry) != len(entry):
                raise OSError(errno.ENOSPC, "short write")
        except OSError as e:
            # The index is sparse: an entry that cannot be written (a full disk)
            # is skipped — lookups land a little earlier and scan forward.  The
            # file must keep whole entries only.
            if self._fd is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(self._fd, self._count * self.ENTRY.size)
            if not self._write_failed:
                self._write_failed = True
                log.warn("cannot add to {path}: {e}; entries are skipped while writes fail",
                         path=self.path, e=e)
            return
        # Value first: a reader on a pool thread that finds a key by bisection
        # (lookups run there too) must find its value in place.
        values.append(value)
        keys.append(key)
        self._count += 1

    def _floor(self, key: int) -> int:
        """Position in the arrays of the largest key <= ``key``, or -1."""
        keys, _ = self._ensure_loaded()
        return bisect_right(keys, key) - 1

    def _truncate_entries(self, count: int) -> None:
        keys, values = self._ensure_loaded()
        if count >= self._count:
            return
        del keys[count:]
        del values[count:]
        self._count = count
        os.truncate(self.path, count * self.ENTRY.size)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self._ensure_loaded()
        self._keys = array(self.KEY_TYPECODE)
        self._values = array(self.VALUE_TYPECODE)
        self._count = 0
        os.truncate(self.path, 0)

    # -- file lifecycle -----------------------------------------------------

    def flush(self) -> None:
        """fsync the file (BLOCKING).  A file renamed or deleted meanwhile is skipped."""
        fd = self._fd
        if fd is not None:
            try:
                os.fsync(fd)
                return
            except OSError:
                pass  # closed concurrently: fall through to the path
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def release(self) -> None:
        """Close the append descriptor (the segment became inactive); content stays."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def unload(self) -> None:
        """Forget the in-memory copy (it is read again on the next lookup)."""
        if self._fd is None:
            self._keys = self._values = None

    def rename(self, path: str) -> None:
        os.rename(self.path, path)
        self.path = path

    def delete(self) -> None:
        self.release()
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
        i = self._floor(offset - self.base_offset)
        if i < 0:
            return self.base_offset, 0
        return self._keys[i] + self.base_offset, self._values[i]

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
        i = self._floor(timestamp)
        if i < 0:
            return -1, self.base_offset
        return self._keys[i], self._values[i] + self.base_offset

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

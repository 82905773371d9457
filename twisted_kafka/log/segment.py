"""``LogSegment``: one ``.log`` file of whole record batches plus its indexes.

A segment is named by its base offset (``00000000000000000000.log``): every
batch in it has a base offset at or above that, and below the next segment's.
Batches are stored byte for byte as the log accepted them (offsets and leader
epoch already assigned), back to back, with no framing of our own: the file
*is* a Kafka records blob, which is what lets a fetch hand out file bytes
unchanged.

I/O is plain ``pread``/``pwrite`` on a raw descriptor: no Python buffering
(nothing is held back from the page cache, so a process crash loses nothing
written), and positional calls so readers on other threads never race a
shared file position.  Only ``flush`` (fsync) and ``recover`` (reads the whole
segment) are slow; the log calls them in the thread pool.

The descriptor is opened when first needed and may be closed while the
segment is idle (the log manager's ``file_handles.FileHandleCache``, bounded by the broker's
descriptor budget); every use pins it (``acquire``/``release``).  An append
pins it from ``pin()`` -- before anything is reserved, so running out of
descriptors fails that append cleanly -- to its commit.
"""

from __future__ import annotations

import contextlib
import errno
import os
import random
import struct
from collections.abc import Iterator
from typing import Any, NamedTuple

from twisted.logger import Logger

from twisted_kafka.log.batches import (
    BATCH_HEADER_SIZE,
    InvalidRecordBatch,
    RecordBatchHeader,
    iter_batch_headers,
    parse_batch_header,
    validate_batch,
)
from twisted_kafka.log.file_handles import CachedFile, FileHandleCache
from twisted_kafka.log.index import CorruptIndexError, OffsetIndex, TimeIndex
from twisted_kafka.log.layout import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file_name,
)
from twisted_kafka.log.log_config import LogConfig
from twisted_kafka.log.txn_index import TransactionIndex
from twisted_kafka.protocol.records.file_region import FileRegion

log = Logger()

SCAN_CHUNK = 16 * 1024          # header walks read this much at a time (spans the 4 KiB index interval)
RECOVERY_CHUNK = 1024 * 1024    # recovery reads and CRC-checks the log in chunks of this size
MAX_RELATIVE_OFFSET = 2**31 - 1
_MAGIC_OFFSET = 16              # a v2 batch's magic byte (2) sits here: what a resync looks for


class WouldBlock(Exception):
    """A ``nowait`` read would have waited for the disk: retry it in the thread pool."""


_RWF_NOWAIT = getattr(os, "RWF_NOWAIT", None)


def _read_nowait(fd: int, position: int, size: int, visible: int):
    """pread that refuses to wait for the disk (Linux >= 4.14); WouldBlock if it would."""
    global _RWF_NOWAIT
    if _RWF_NOWAIT is None:
        raise WouldBlock("non-blocking reads are not available here")
    size = max(0, min(size, visible - position))
    buf = bytearray(size)
    got = 0
    view = memoryview(buf)
    try:
        while got < size:
            try:
                n = os.preadv(fd, [view[got:]], position + got, _RWF_NOWAIT)
            except BlockingIOError:
                raise WouldBlock("data not in the page cache") from None
            except OSError as e:
                if e.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    _RWF_NOWAIT = None      # this kernel/filesystem cannot: stop trying
                    raise WouldBlock(str(e)) from None
                raise
            if n == 0:
                break
            got += n
    finally:
        view.release()
    if got < size:
        del buf[got:]
    return buf


class DamagedRange(NamedTuple):
    """Bytes of a segment below the recovery point that are not intact batches.

    Kept on disk (never cut off: later data is intact), skipped by every
    header walk, and reported to readers: a fetch of ``first_offset`` ..
    ``last_offset`` fails with CORRUPT_MESSAGE.  ``last_offset`` is
    ``first_offset - 1`` when the bytes held no offsets (garbage after the
    last batch).
    """

    start: int          # file position of the first damaged byte (where a batch should start)
    end: int            # file position of the next intact batch (or the end of the file)
    first_offset: int
    last_offset: int    # inclusive


class BatchInfo(NamedTuple):
    """One batch of an append: where it sits in the appended buffer and what it holds."""

    position: int       # relative to the start of the appended buffer
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int


class LogSegment:
    """A ``.log`` file with its offset, time and transaction index."""

    def __init__(self, dir: str, base_offset: int, *, file: CachedFile, size: int,
                 offset_index: OffsetIndex, time_index: TimeIndex, config: LogConfig,
                 created_ms: int, next_offset: int | None,
                 max_timestamp: int = -1, offset_of_max_timestamp: int | None = None,
                 preallocated: bool = False, suffix: str = "", txn_index: TransactionIndex | None = None):
        self.dir = dir
        self.base_offset = base_offset
        self.file = file                # the .log file's descriptor, opened on demand
        self.size = size                # bytes committed: what readers may see
        self._reserved = size           # end of the file including writes in flight
        self._outstanding = 0           # reservations not yet committed
        self._inactive_pending = False  # rolled while writes were in flight
        self.offset_index = offset_index
        self.time_index = time_index
        #: The transactions aborted by markers in this segment (``txn_index``).
        self.txn_index = txn_index if txn_index is not None else TransactionIndex(
            os.path.join(dir, segment_file_name(base_offset, TXN_INDEX_SUFFIX)) + suffix, base_offset)
        #: The transaction index must be rebuilt from the producer state (the segment was
        #: recovered, or its file failed its check): the loader's replay does it (``recovery``).
        self.txn_index_stale = False
        self.index_interval_bytes = config.index_interval_bytes
        self.created_ms = created_ms
        self._next_offset = next_offset
        self.max_timestamp = max_timestamp
        self.offset_of_max_timestamp = base_offset if offset_of_max_timestamp is None \
            else offset_of_max_timestamp
        self._bytes_since_last_index_entry = 0
        self._rolling_base_timestamp: int | None = None
        self.preallocated = preallocated
        jitter = min(config.segment_jitter_ms, config.segment_ms)
        self.roll_jitter_ms = random.randrange(jitter) if jitter > 0 else 0
        self.log_path = os.path.join(dir, segment_file_name(base_offset, LOG_SUFFIX)) + suffix
        self.deleted = False
        #: Damaged bytes below the recovery point (sorted by position); see ``DamagedRange``.
        self.damaged: list[DamagedRange] = []
        #: Every batch was CRC-checked since the segment was opened (``recover``).
        self.verified = False
        #: {producer id: its last batches here (``cleaner.producers.ProducerLast``)}, once the log
        #: cleaner has walked (or written) this finished segment; see ``cleaner.producers``.
        self.producer_last_offsets: dict[int, Any] | None = None
        #: (position, summary) of the cleaner's last header walk of this segment while active.
        self.producer_scan: tuple[int, dict[int, Any]] | None = None

    # -- construction -------------------------------------------------------

    @classmethod
    def create(cls, dir: str, base_offset: int, config: LogConfig, now_ms: int, *,
               files: FileHandleCache, suffix: str = "") -> LogSegment:
        """A new empty segment (existing files of that name are emptied).

        ``suffix`` is appended to the three file names (the log cleaner writes
        ``.cleaned`` segments; ``change_suffix`` renames them later).  Raises
        OSError (a full disk, out of descriptors, ...) with nothing left
        behind: no file, no descriptor.
        """
        path = os.path.join(dir, segment_file_name(base_offset, LOG_SUFFIX)) + suffix
        index_path = os.path.join(dir, segment_file_name(base_offset, INDEX_SUFFIX)) + suffix
        time_path = os.path.join(dir, segment_file_name(base_offset, TIME_INDEX_SUFFIX)) + suffix
        txn_path = os.path.join(dir, segment_file_name(base_offset, TXN_INDEX_SUFFIX)) + suffix
        fd = files.os_open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
        try:
            offset_index = OffsetIndex.create(index_path, base_offset, config.max_index_size, files=files)
            time_index = TimeIndex.create(time_path, base_offset, config.max_index_size, files=files)
            txn_index = TransactionIndex.create(txn_path, base_offset, files=files)
        except OSError:
            os.close(fd)
            for leftover in (path, index_path, time_path):
                with contextlib.suppress(OSError):
                    os.unlink(leftover)
            raise
        preallocated = False
        if config.preallocate and not suffix:
            try:
                os.posix_fallocate(fd, 0, config.segment_bytes)
                preallocated = True
            except OSError as e:
                log.warn("preallocating {path} failed: {e}", path=path, e=e)
        # The new segment is about to be appended to: its descriptor stays open (in the cache).
        return cls(
            dir, base_offset, file=files.file(path, os.O_RDWR, fd=fd), size=0,
            offset_index=offset_index, time_index=time_index,
            config=config, created_ms=now_ms, next_offset=base_offset,
            preallocated=preallocated, suffix=suffix, txn_index=txn_index)

    @classmethod
    def open(cls, dir: str, base_offset: int, config: LogConfig, now_ms: int, *,
             files: FileHandleCache, full_index_check: bool = False) -> tuple[LogSegment, bool]:
        """Open an existing segment; returns (segment, indexes_ok).

        A missing or insane index is replaced by an empty one and
        ``indexes_ok`` is False: the caller must ``recover()`` the segment,
        which rebuilds both indexes from the batches.  A transaction index
        that fails its check is emptied and marked ``txn_index_stale``: the
        loader rebuilds it from the producer state.
        """
        path = os.path.join(dir, segment_file_name(base_offset, LOG_SUFFIX))
        size = os.stat(path).st_size    # the descriptor is opened when first used
        ok = True
        index_path = os.path.join(dir, segment_file_name(base_offset, INDEX_SUFFIX))
        time_path = os.path.join(dir, segment_file_name(base_offset, TIME_INDEX_SUFFIX))
        try:
            offset_index = OffsetIndex.open(index_path, base_offset, config.max_index_size, size,
                                            full_check=full_index_check, files=files)
            time_index = TimeIndex.open(time_path, base_offset, config.max_index_size, size,
                                        full_check=full_index_check, files=files)
        except (FileNotFoundError, CorruptIndexError) as e:
            log.warn("rebuilding the indexes of {path}: {e}", path=path, e=e)
            ok = False
            offset_index = OffsetIndex.create(index_path, base_offset, config.max_index_size, files=files)
            time_index = TimeIndex.create(time_path, base_offset, config.max_index_size, files=files)
        txn_path = os.path.join(dir, segment_file_name(base_offset, TXN_INDEX_SUFFIX))
        txn_stale = False
        try:
            txn_index = TransactionIndex.open(txn_path, base_offset, files=files)
        except CorruptIndexError as e:
            log.warn("rebuilding the transaction index {path}: {e}", path=txn_path, e=e)
            txn_index = TransactionIndex.create(txn_path, base_offset, files=files)
            txn_stale = True
        max_ts, offset_of_max = time_index.last_entry
        segment = cls(dir, base_offset, file=files.file(path, os.O_RDWR), size=size,
                      offset_index=offset_index,
                      time_index=time_index, config=config, created_ms=now_ms, next_offset=None,
                      max_timestamp=max_ts, offset_of_max_timestamp=offset_of_max, txn_index=txn_index)
        segment.txn_index_stale = txn_stale
        return segment, ok

    # -- reading ------------------------------------------------------------

    def read(self, position: int, size: int, *, nowait: bool = False):
        """Up to ``size`` bytes from ``position`` (fewer at the end of the file).

        ``nowait``: only what the page cache holds — raises ``WouldBlock``
        instead of waiting for the disk (Linux ``RWF_NOWAIT``), so a caller
        on the reactor can retry in the thread pool.
        """
        file = self.file
        if nowait:
            if file.fd is None:          # opening it could wait for the disk
                raise WouldBlock(f"{self.log_path} is not open")
            fd = file.acquire()
            try:
                return _read_nowait(fd, position, size, self.size)
            finally:
                file.release()
        fd = file.acquire()
        try:
            data = os.pread(fd, size, position)
            if len(data) == size or not data:
                return data
            parts = [data]
            got = len(data)
            while got < size:
                more = os.pread(fd, size - got, position + got)
                if not more:
                    break
                parts.append(more)
                got += len(more)
            return b"".join(parts)
        finally:
            file.release()

    def region(self, position: int, size: int) -> FileRegion:
        """``size`` bytes from ``position`` left in the file, for ``sendfile`` (zero-copy Fetch): the
        descriptor stays pinned until the region is closed."""
        file = self.file
        fd = file.acquire()
        return FileRegion(fd, position, size, file.release)

    def iter_headers(self, position: int = 0, end: int | None = None, *,
                     nowait: bool = False) -> Iterator[tuple[int, RecordBatchHeader]]:
        """(position, header) of each batch from ``position``; stops at a partial tail.

        Reads ``SCAN_CHUNK`` bytes at a time, or only a header when batches
        are larger than that.  Damaged ranges are skipped.  Raises
        InvalidRecordBatch on bytes that are not a batch header.
        """
        end = self.size if end is None else end
        buf = b""
        buf_pos = position
        pos = position
        last_size = 0
        damaged = self.damaged
        while pos + BATCH_HEADER_SIZE <= end:
            if damaged:
                skip = next((d for d in damaged if d.start <= pos < d.end), None)
                if skip is not None:
                    pos = buf_pos = skip.end
                    buf = b""
                    continue
            off = pos - buf_pos
            if off + BATCH_HEADER_SIZE > len(buf):
                want = BATCH_HEADER_SIZE if last_size > SCAN_CHUNK else SCAN_CHUNK
                buf = self.read(pos, min(want, end - pos), nowait=nowait)
                buf_pos, off = pos, 0
                if len(buf) < BATCH_HEADER_SIZE:
                    return
            header = parse_batch_header(buf, off)
            if pos + header.size > end:
                return
            yield pos, header
            last_size = header.size
            pos += header.size

    def damaged_range_of(self, offset: int) -> DamagedRange | None:
        """The damaged range holding ``offset``, if any."""
        for d in self.damaged:
            if d.first_offset <= offset <= d.last_offset:
                return d
        return None

    def readable_end(self, position: int) -> int:
        """Where a read from ``position`` must stop: the next damaged range, or the end."""
        return min((d.start for d in self.damaged if d.start >= position), default=self.size)

    def find_batch(self, offset: int, *, nowait: bool = False) -> tuple[int, RecordBatchHeader] | None:
        """The first batch whose last offset is >= ``offset`` (the one holding it, if any)."""
        if nowait and not self.offset_index.loaded:
            raise WouldBlock(f"the offset index of {self.log_path} is not in memory")
        _, position = self.offset_index.lookup(offset)
        for pos, header in self.iter_headers(position, nowait=nowait):
            if header.last_offset >= offset:
                return pos, header
        return None

    def find_by_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, RecordBatchHeader] | None:
        """The first batch at or after ``min_offset`` with a timestamp >= ``timestamp``."""
        _, indexed_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(indexed_offset, min_offset))
        for pos, header in self.iter_headers(position):
            if header.max_timestamp >= timestamp and header.last_offset >= min_offset:
                return pos, header
        return None

    @property
    def next_offset(self) -> int:
        """The offset after the segment's last batch (its base offset when empty)."""
        next_offset = self._next_offset
        if next_offset is None:
            self.scan_tail()
            next_offset = self._next_offset
            assert next_offset is not None      # scan_tail sets it (or raises)
        return next_offset

    def scan_tail(self) -> None:
        """Learn the end of a segment opened from disk: walk headers from the last index entry.

        Also completes the max timestamp (the time index is sparse).  Raises
        InvalidRecordBatch if the walk does not end exactly at the file's end;
        the loader then recovers the segment.
        """
        _, position = self.offset_index.last_entry
        next_offset = self.base_offset
        end = position
        bytes_since = 0
        for pos, header in self.iter_headers(position):
            next_offset = header.next_offset
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.base_offset
            bytes_since += header.size
            end = pos + header.size
        for d in self.damaged:
            # A damaged range the walk skipped at its end: the offsets it held count.
            if d.start <= end < d.end:
                end = d.end
                next_offset = max(next_offset, d.last_offset + 1)
        if end != self.size:
            raise InvalidRecordBatch(f"{self.log_path}: {self.size - end} bytes after the last "
                                     "whole batch", position=end)
        self._next_offset = next_offset
        self._bytes_since_last_index_entry = bytes_since

    def first_batch_timestamp(self) -> int | None:
        """Max timestamp of the segment's first batch: what time-based rolling counts from."""
        if self._rolling_base_timestamp is None and self.size >= BATCH_HEADER_SIZE:
            try:
                self._rolling_base_timestamp = parse_batch_header(
                    self.read(0, BATCH_HEADER_SIZE)).max_timestamp
            except InvalidRecordBatch:
                return None
        return self._rolling_base_timestamp

    @property
    def largest_timestamp(self) -> int:
        """Largest record timestamp, or the file's mtime when none is known (retention)."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    # -- rolling ------------------------------------------------------------

    def should_roll(self, config: LogConfig, append_size: int, max_timestamp: int,
                    max_offset: int, now_ms: int) -> bool:
        """Kafka's roll rule: size, age, a full index, or an offset beyond int32 range."""
        if self._reserved > config.segment_bytes - append_size:
            return True
        if self._reserved > 0:
            first = self.first_batch_timestamp()
            waited = (max_timestamp - first) if first is not None and first >= 0 \
                else (now_ms - self.created_ms)
            if waited > config.max_segment_ms - self.roll_jitter_ms:
                return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        return max_offset - self.base_offset > MAX_RELATIVE_OFFSET

    @property
    def reserved_size(self) -> int:
        """Size including writes in flight (what the next append is placed after)."""
        return self._reserved

    @property
    def has_writes_in_flight(self) -> bool:
        return self._outstanding > 0

    def on_become_inactive(self) -> None:
        """The segment stops being the active one: final time-index entry, trim, release.

        With writes still in flight this happens when the last one commits.
        """
        if self._outstanding:
            self._inactive_pending = True
            return
        self._inactive_pending = False
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp,
                                     skip_full_check=True)
        if self.preallocated and not self.file.closed:
            try:
                fd = self.file.acquire()
                try:
                    os.ftruncate(fd, self.size)
                finally:
                    self.file.release()
            except OSError as e:
                # Out of descriptors, say: the trim is tried again when the segment is closed.
                log.warn("cannot trim {path} to {size} bytes: {e}", path=self.log_path,
                         size=self.size, e=e)
            else:
                self.preallocated = False

    # -- writing ------------------------------------------------------------

    def reserve(self, nbytes: int) -> int:
        """Claim the next ``nbytes`` of the file for an append; returns its position."""
        position = self._reserved
        self._reserved += nbytes
        self._outstanding += 1
        return position

    def pin(self) -> int:
        """The descriptor, open and pinned until ``unpin()`` (an append holds it from
        reserve to commit).  Raises OSError when it cannot be opened."""
        return self.file.acquire()

    def unpin(self) -> None:
        self.file.release()

    @property
    def closed(self) -> bool:
        """Closed for good (the log was closed, or the segment deleted): never reopened."""
        return self.file.closed

    @property
    def fd(self) -> int | None:
        """The descriptor if it is open right now (None when closed or not opened yet)."""
        return self.file.fd

    def write_at(self, position: int, data, fd: int | None = None) -> None:
        """Write ``data`` at a reserved ``position`` (``fd``: the descriptor pinned for it).
        BLOCKING, safe on any thread (positional write: concurrent writes to other
        positions do not interfere)."""
        if fd is None:
            fd = self.file.acquire()
            try:
                self.write_at(position, data, fd)
            finally:
                self.file.release()
            return
        view = memoryview(data)
        written = 0
        try:
            while written < len(view):
                written += os.pwrite(fd, view[written:], position + written)
        finally:
            view.release()

    def commit(self, position: int, nbytes: int, batches: list[BatchInfo]) -> None:
        """Make a written append visible: indexes, max timestamp, size, next offset.

        Commits must come in reservation order (the log guarantees it).
        """
        for batch in batches:
            if batch.max_timestamp > self.max_timestamp:
                self.max_timestamp = batch.max_timestamp
                self.offset_of_max_timestamp = batch.base_offset
            if self._bytes_since_last_index_entry > self.index_interval_bytes:
                if not self.offset_index.is_full:
                    self.offset_index.append(batch.base_offset, position + batch.position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self._bytes_since_last_index_entry = 0
            self._bytes_since_last_index_entry += batch.size
        if position == 0 and batches:
            self._rolling_base_timestamp = batches[0].max_timestamp
        self.size = position + nbytes
        self._next_offset = batches[-1].last_offset + 1
        self._outstanding -= 1
        if self._inactive_pending and not self._outstanding:
            self.on_become_inactive()

    def abort_write(self) -> None:
        """A reserved write will never be committed (it, or one before it, failed).

        The reservation stays until ``discard_uncommitted``, which the log
        calls once no write of the segment is in flight any more.
        """
        self._outstanding -= 1

    def discard_uncommitted(self) -> None:
        """Forget reservations past the committed size and cut the file back to it
        (a shrinking truncate needs no space).  No write may be in flight."""
        if self._outstanding:
            raise RuntimeError(f"cannot roll back {self.log_path} with writes in flight")
        if self._reserved != self.size:
            self._reserved = self.size
            if not self.preallocated and not self.file.closed:
                try:
                    # The descriptor may have been closed while idle (the LRU): reopened here.
                    fd = self.file.acquire()
                    try:
                        os.ftruncate(fd, self.size)
                    finally:
                        self.file.release()
                except OSError as e:
                    # The next append overwrites the bytes; should the broker stop
                    # first, recovery cuts them (they follow the last whole batch).
                    log.warn("cannot cut {path} back to {size} bytes: {e}", path=self.log_path,
                             size=self.size, e=e)
        if self._inactive_pending:
            self.on_become_inactive()

    def reactivate(self) -> None:
        """Become the active segment again (the segment rolled after it was dropped)."""
        self._inactive_pending = False

    def append(self, data, batches: list[BatchInfo]) -> None:
        """Reserve, write and commit in one go (recovery tests, simple callers)."""
        position = self.reserve(len(data))
        self.write_at(position, data)
        self.commit(position, len(data), batches)

    def _index_batch(self, pos: int, header: RecordBatchHeader) -> None:
        """Index bookkeeping for a batch found on disk (recovery), same rule as ``append``."""
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.base_offset
        if self._bytes_since_last_index_entry > self.index_interval_bytes:
            if not self.offset_index.is_full:
                self.offset_index.append(header.base_offset, pos)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += header.size

    def recover(self, on_batch=None, *, recovery_point: int | None = None,
                end_offset: int | None = None) -> int:
        """Re-validate every batch, rebuild both indexes, cut the file after the last good batch.

        A batch is good when its framing, CRC, codec and counts check out and
        its offsets follow the previous batch's.  ``on_batch(header)`` is
        called for each good batch (the leader-epoch cache listens).  Returns
        the number of bytes truncated.  BLOCKING: reads the whole segment.

        Only damage at or above ``recovery_point`` (None: anywhere) is cut
        off — that is what a crash can leave.  Offsets below it were flushed,
        so damage there came later, from outside: the bytes are kept and
        recorded in ``damaged`` (reads of those offsets fail with
        CORRUPT_MESSAGE), and the walk goes on at the next good batch, so
        nothing intact after the damage is lost.  ``end_offset`` is the next
        segment's base offset (None for the last segment), which bounds a
        damaged range reaching the end of the file.

        The transaction index is emptied and marked ``txn_index_stale``: its
        entries follow from the producer state at the segment's start, which
        the loader's replay has (``recovery``, as Kafka's ``LogSegment.recover``
        with ``updateProducerState``).
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        self.txn_index_stale = True
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self._bytes_since_last_index_entry = 0
        self._rolling_base_timestamp = None
        fd = self.file.acquire()        # pinned for the whole walk (reads and the cut)
        try:
            return self._recover(fd, on_batch, recovery_point, end_offset)
        finally:
            self.file.release()

    def _recover(self, fd: int, on_batch, recovery_point: int | None, end_offset: int | None) -> int:

        def good(position: int, header: RecordBatchHeader, first_after_damage: bool) -> None:
            if first_after_damage and not self.offset_index.is_full:
                # Lookups past the damage start here, never inside it.
                self.offset_index.append(header.base_offset, position)
                self._bytes_since_last_index_entry = 0
            self._index_batch(position, header)
            if on_batch is not None:
                on_batch(header)

        file_size = os.fstat(fd).st_size
        pos, expected, damaged = self._walk(good, file_size, recovery_point, end_offset)
        self.damaged = damaged
        truncated = file_size - pos
        if truncated:
            log.warn("{path}: truncating {n} bytes after the last valid batch (position {pos})",
                     path=self.log_path, n=truncated, pos=pos)
            os.ftruncate(fd, pos)
        self.size = self._reserved = pos
        self._next_offset = expected
        self.preallocated = False
        self.verified = True
        return truncated

    def scan_for_damage(self, end_offset: int, recovery_point: int) -> list[DamagedRange]:
        """CRC-check a finished segment wholly below ``recovery_point`` (BLOCKING,
        read-only): the damaged ranges found besides those already known.
        ``end_offset`` is the next segment's base offset."""
        known = set(self.damaged)
        _, _, damaged = self._walk(None, self.size, max(recovery_point, end_offset), end_offset)
        return [d for d in damaged if d not in known]

    def _walk(self, on_good, file_size: int, recovery_point: int | None,
              end_offset: int | None) -> tuple[int, int, list[DamagedRange]]:
        """Walk and check every batch: (where the good data ends, the next offset,
        damaged ranges).  Known ranges in ``damaged`` are kept and skipped."""
        known = sorted(d for d in self.damaged if d.end <= file_size)
        damaged: list[DamagedRange] = []
        pos = 0
        expected = self.base_offset
        want = RECOVERY_CHUNK
        first_after_damage = False
        while pos < file_size:
            skip = next((d for d in known if d.start <= pos < d.end), None)
            if skip is not None:
                damaged.append(skip)
                pos, expected = skip.end, max(expected, skip.last_offset + 1)
                first_after_damage = True
                continue
            stop = min((d.start for d in known if d.start > pos), default=file_size)
            chunk = self.read(pos, min(want, stop - pos))
            consumed = 0
            error: InvalidRecordBatch | None = None
            try:
                for p, header in iter_batch_headers(chunk, 0, allow_partial_tail=True):
                    validate_batch(chunk, p, header)
                    if header.base_offset < expected or \
                            header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                        raise InvalidRecordBatch(
                            f"batch at {pos + p} has base offset {header.base_offset}, "
                            f"expected at least {expected}", position=p)
                    if on_good is not None:
                        on_good(pos + p, header, first_after_damage)
                    first_after_damage = False
                    expected = header.next_offset
                    consumed = p + header.size
            except InvalidRecordBatch as e:
                error = e
            pos += consumed
            if error is None:
                if consumed:
                    want = RECOVERY_CHUNK
                    continue
                # The batch at pos did not fit in the chunk: a big batch, or a torn one.
                try:
                    header = parse_batch_header(chunk, 0)
                except InvalidRecordBatch as e:
                    error = e
                else:
                    if header.size <= len(chunk) or header.size > stop - pos:
                        error = InvalidRecordBatch(f"a batch of {header.size} bytes does not fit in "
                                                   f"the {stop - pos} bytes left", position=0)
                    else:
                        want = header.size
                        continue
            if (recovery_point is None or expected >= recovery_point) and stop == file_size:
                log.warn("{path}: invalid batch at position {pos}: {e}", path=self.log_path,
                         pos=pos, e=error)
                break                              # what a crash leaves: cut here
            # Below the recovery point (or just before a known damaged range):
            # keep the bytes, mark them, go on at the next intact batch.
            found = self._next_good_batch(pos + 1, stop, expected, end_offset)
            if found is not None:
                end, last = found[0], found[1] - 1
            elif stop < file_size:
                end = stop
                last = next(d.first_offset for d in known if d.start == stop) - 1
            else:
                end = file_size
                last = (end_offset if end_offset is not None else max(recovery_point or 0, expected)) - 1
            region = DamagedRange(pos, end, expected, last)
            damaged.append(region)
            log.warn("{path}: damaged data at bytes {start}-{end} (offsets {first}-{last}, below the "
                     "recovery point {rp}): {e}; kept on disk, fetches of those offsets fail with "
                     "CORRUPT_MESSAGE, the data after it is intact", path=self.log_path,
                     start=region.start, end=region.end, first=region.first_offset,
                     last=region.last_offset, rp=recovery_point, e=error)
            pos, expected = end, max(expected, last + 1)
            first_after_damage = True
            want = RECOVERY_CHUNK
        return pos, expected, damaged

    def _next_good_batch(self, start: int, stop: int, min_offset: int,
                         end_offset: int | None) -> tuple[int, int] | None:
        """(position, base offset) of the first intact batch at or after ``start`` and
        wholly before ``stop`` whose offsets are at least ``min_offset`` (and below
        ``end_offset``): where reading can go on after damaged bytes."""
        window = RECOVERY_CHUNK
        pos = start
        while pos + BATCH_HEADER_SIZE <= stop:
            chunk = self.read(pos, min(window + BATCH_HEADER_SIZE, stop - pos))
            i = _MAGIC_OFFSET
            limit = min(len(chunk), window + _MAGIC_OFFSET)
            while True:
                i = chunk.find(b"\x02", i, limit)
                if i < 0:
                    break
                q = i - _MAGIC_OFFSET
                i += 1
                if q + BATCH_HEADER_SIZE > len(chunk):
                    continue
                base, length = struct.unpack_from(">qi", chunk, q)
                size = length + 12
                if base < min_offset or (end_offset is not None and base >= end_offset) \
                        or length < BATCH_HEADER_SIZE - 12 or pos + q + size > stop:
                    continue
                data = self.read(pos + q, size)
                try:
                    header = parse_batch_header(data, 0)
                    validate_batch(data, 0, header)
                except InvalidRecordBatch:
                    continue
                if end_offset is not None and header.last_offset >= end_offset:
                    continue
                return pos + q, base
            pos += window
        return None

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        position, header = found
        removed = self.size - position
        if self._outstanding:
            raise RuntimeError(f"cannot truncate {self.log_path} with writes in flight")
        fd = self.file.acquire()
        try:
            os.ftruncate(fd, position)
        finally:
            self.file.release()
        self.size = self._reserved = position
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        self._rolling_base_timestamp = None
        self._next_offset = None
        self.scan_tail()
        return removed

    # -- files --------------------------------------------------------------

    def flush(self) -> None:
        """fsync the log file, and write and fsync both indexes (BLOCKING).

        A segment closed meanwhile (deleted, or the log closed) is skipped.
        """
        file = self.file
        try:
            fd = file.acquire()
        except OSError:
            if file.closed:
                return
            raise
        try:
            os.fdatasync(fd)
        finally:
            file.release()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def write_indexes(self) -> bool:
        """Write the index entries not in the files yet (no fsync).  BLOCKING (page cache).

        Whether both files hold every entry now: a write that fails (a full disk)
        is logged, never raised, and leaves the entries pending (``index``).
        """
        written = self.offset_index.write_pending()
        written = self.txn_index.write_pending() and written
        return self.time_index.write_pending() and written

    def close(self, *, finalize: bool = True) -> None:
        """Close the files; an active segment gets its final time-index entry first,
        and index entries not yet written are written (no fsync: callers flush first
        when they want durability).  ``finalize=False``: just let go — the files are
        going away."""
        if self.file.closed:
            return
        if not finalize:
            self.offset_index.discard_pending()
            self.time_index.discard_pending()
            self.txn_index.discard_pending()
        else:
            if self.size or len(self.time_index):
                self.on_become_inactive()
            self.write_indexes()
        self.file.close()

    def change_suffix(self, old: str, new: str) -> None:
        """Rename the three files from ``<name><old>`` to ``<name><new>`` (the log
        cleaner's ``.cleaned`` -> ``.swap`` -> final names).  The indexes go first and
        the ``.log`` last: recovery judges an interrupted swap by the ``.log`` file's
        name (``recovery``).  An open descriptor is unaffected."""
        for index in (self.offset_index, self.time_index, self.txn_index):
            path = index.path
            if path.endswith(old):
                with contextlib.suppress(FileNotFoundError):
                    index.rename(path[:len(path) - len(old)] + new)
        path = self.log_path
        if not path.endswith(old):
            raise ValueError(f"{path} does not end with {old!r}")
        renamed = path[:len(path) - len(old)] + new
        os.rename(path, renamed)
        self.log_path = renamed
        self.file.rename(renamed)

    def rename_for_delete(self) -> None:
        """Mark the files ``.deleted`` (readers holding the descriptor keep reading)."""
        if self.log_path.endswith(DELETED_SUFFIX):
            return
        self.deleted = True
        for index in (self.offset_index, self.time_index, self.txn_index):
            with contextlib.suppress(FileNotFoundError):
                index.rename(index.path + DELETED_SUFFIX)
        try:
            os.rename(self.log_path, self.log_path + DELETED_SUFFIX)
            self.log_path += DELETED_SUFFIX
            self.file.rename(self.log_path)
        except FileNotFoundError:
            pass

    def delete(self) -> None:
        """Close and remove the files (BLOCKING only in the sense of a few unlinks)."""
        self.deleted = True
        self.file.close()          # at once, or when the last reader lets go
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.log_path)

    def __repr__(self) -> str:
        return f"<LogSegment {self.log_path} size={self.size}>"

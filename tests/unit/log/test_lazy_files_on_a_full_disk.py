"""A full disk and damaged data with lazily opened segment files and deferred index writes.

Segment descriptors are opened on demand and closed by the LRU of
``file_handles`` when idle; index entries reach their files at flush/close
(``index``).  These tests check the full-disk and damaged-data rules hold
with both: a write that fails is cut back even when the LRU closed the
segment's descriptor meanwhile, index entries that cannot be written never
let the recovery point pass them, and damage is found and reported in
segments whose descriptors are closed.
"""

from __future__ import annotations

import contextlib
import errno
import os

import pytest

from support.inline import InlineReactor, SyncThreadPool
from twisted_kafka.config import KafkaConfig
from twisted_kafka.log.file_handles import FileHandleCache, default_capacity
from twisted_kafka.log.layout import CLEAN_SHUTDOWN_FILE, segment_file_name
from twisted_kafka.log.log import Log
from twisted_kafka.log.log_manager import LogManager
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.records.batch import iter_batch_headers

from .helpers import NOW, batch, config, new_log, records_of

ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def open_files():
    """A descriptor cache (as a ``LogManager`` makes) with no idle descriptor, for one test's log."""
    files = FileHandleCache(default_capacity())
    yield files
    files.close_idle()


@contextlib.contextmanager
def index_disk_full(monkeypatch):
    """Writes to index files write half of what they are given, then fail with ENOSPC."""
    real = os.pwrite

    def pwrite(fd, data, position):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(("index", "timeindex")):
            half = len(data) // 2
            if half:
                real(fd, bytes(data[:half]), position)
            raise ENOSPC
        return real(fd, data, position)

    with monkeypatch.context() as patch:
        patch.setattr(os, "pwrite", pwrite)
        yield


def _index_sizes(segment) -> tuple[int, int]:
    return os.path.getsize(segment.offset_index.path), os.path.getsize(segment.time_index.path)


def test_a_failed_write_is_cut_back_even_after_the_lru_closed_the_segment_file(tmp_path, open_files):
    log = new_log(tmp_path, files=open_files)
    log.append_as_leader(batch(1), 0, NOW)
    committed_size = log.active_segment.size
    other = open_files.file(str(tmp_path / "other"), os.O_RDWR | os.O_CREAT)
    open(other.path, "wb").close()
    open_files.resize(1)
    pending = log.prepare_append_as_leader(batch(2, value_size=200), 0, NOW)
    log.active_segment.write_at(pending.position, pending.data[:100], pending.fd)   # then the disk was full

    def someone_else_opens_a_file(error):
        # Between this append letting go of the segment file and the log cutting it back,
        # another partition's operation takes the only descriptor: the segment's is closed.
        other.acquire()
        other.release()
        assert log.active_segment.fd is None

    pending.on_commit(someone_else_opens_a_file)
    log.complete_append(pending, ENOSPC)
    assert pending.error.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert log.failed is None and log.log_end_offset == 1
    assert os.path.getsize(log.active_segment.log_path) == committed_size
    assert log.append_as_leader(batch(1), 0, NOW).first_offset == 1
    assert [o for o, _ in records_of(log.read(0, 1 << 20))] == [0, 1]
    other.close()
    log.close()


def test_index_entries_that_cannot_be_written_keep_the_recovery_point_and_are_written_later(
        tmp_path, monkeypatch):
    log = new_log(tmp_path, index_interval_bytes=1)
    segment = log.active_segment
    for i in range(4):
        log.append_as_leader(batch(1, value_size=50, prefix=b"a%d." % i, ts=NOW + i), 0, NOW)
    log.flush()
    assert log.recovery_point == 4
    on_disk = _index_sizes(segment)
    for i in range(4, 10):
        log.append_as_leader(batch(1, value_size=50, prefix=b"a%d." % i, ts=NOW + i), 0, NOW)
    assert segment.offset_index.pending_entries and segment.time_index.pending_entries

    with index_disk_full(monkeypatch):
        with pytest.raises(OSError) as raised:
            log.flush()
        assert raised.value.errno == errno.ENOSPC
        assert segment.write_indexes() is False          # a close or a pending-bytes write: no raise
    # The flush failed: the recovery point stays; the files keep their whole entries only;
    # the entries are still there for lookups, and still pending.
    assert log.recovery_point == 4
    assert _index_sizes(segment) == on_disk
    assert segment.offset_index.pending_entries == 6
    assert [o for o, _ in records_of(log.read(7, 1 << 20))][0] == 7

    # Space is back: the next flush writes them and moves the recovery point.
    assert log.flush() == 10
    assert segment.offset_index.pending_entries == segment.time_index.pending_entries == 0
    assert _index_sizes(segment)[0] == segment.offset_index.size_bytes == on_disk[0] + 6 * 8
    log.close()
    again = Log.open(log.dir, config(index_interval_bytes=1), recovery_point=10, had_clean_shutdown=True,
                     now_ms=NOW, files=log.files)
    assert again.recovery_stats.indexes_rebuilt == 0 and again.recovery_stats.segments_recovered == 0
    assert again.active_segment.offset_index.lookup(8) == segment.offset_index.lookup(8)
    assert [o for o, _ in records_of(again.read(0, 1 << 20))] == list(range(10))
    again.close()


def _manager(tmp_path, reactor=None) -> LogManager:
    if reactor is None:
        reactor = InlineReactor()
        reactor.advance(NOW / 1000)
    props = {"log.dirs": str(tmp_path / "data"), "log.segment.bytes": "500", "log.index.interval.bytes": "1"}
    manager = LogManager(KafkaConfig.from_props(props), reactor=reactor, threadpool=SyncThreadPool())
    d = manager.startService()
    assert d.called and d.result is None
    return manager


def test_a_stop_that_cannot_write_index_entries_is_unclean_and_the_restart_loses_nothing(
        tmp_path, monkeypatch):
    manager = _manager(tmp_path)
    log = manager.create_log("t", 0)
    for i in range(12):
        log.local_log.append_as_leader(batch(1, value_size=60, prefix=b"r%d." % i), 0, NOW)
    with index_disk_full(monkeypatch):
        manager.stopService()
    marker = os.path.join(manager.log_dirs[0], CLEAN_SHUTDOWN_FILE)
    assert not os.path.exists(marker)          # its indexes are not whole: never trusted as clean

    manager = _manager(tmp_path)
    restarted = manager.get_log("t", 0).local_log
    assert restarted.recovery_stats.segments_recovered >= 1
    values = [v for _, v in records_of(restarted.read(0, 1 << 20))]
    assert len(values) == 12 and all(v.startswith(b"r%d." % i) for i, v in enumerate(values))
    for segment in restarted.segments:
        sizes = _index_sizes(segment)
        assert sizes[0] % 8 == 0 and sizes[1] % 12 == 0
    manager.stopService()
    assert os.path.exists(marker)


def _flip(path: str, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x40]))


def test_damage_is_found_in_segments_whose_files_are_not_open(tmp_path):
    reactor = InlineReactor()
    reactor.advance(NOW / 1000)
    manager = _manager(tmp_path, reactor)
    log = manager.create_log("t", 0)
    for i in range(12):
        log.local_log.append_as_leader(batch(3, value_size=40, prefix=b"b%d." % i), 0, NOW)
    manager.stopService()
    first = os.path.join(log.local_log.dir, segment_file_name(0, ".log"))
    with open(first, "rb") as f:
        pos, damaged = list(iter_batch_headers(f.read()))[1]
    _flip(first, pos + damaged.size - 3)
    os.unlink(os.path.join(manager.log_dirs[0], CLEAN_SHUTDOWN_FILE))     # as after a crash

    manager = _manager(tmp_path, reactor)
    log = manager.get_log("t", 0)
    manager.files.resize(1)                    # every idle descriptor of its logs goes
    assert log.local_log.recovery_point == 36 and log.local_log.segments[0].fd is None
    reactor.advance(0)                         # the background check reads them through the cache
    with pytest.raises(KafkaError) as raised:
        log.local_log.read(4, 1 << 20)
    assert raised.value.code == ErrorCode.CORRUPT_MESSAGE
    assert [o for o, _ in records_of(log.local_log.read(6, 1 << 20))][0] == 6
    assert len(manager.files) <= 1
    manager.stopService()


def test_a_recovery_point_checkpoint_never_takes_the_space_reserve(tmp_path, monkeypatch):
    """The reserve is for the writes that free space (DeleteRecords, DeleteTopics); the
    checkpoint written after a roll came first on a disk filling up, and took it."""
    from twisted_kafka.log import checkpoints

    manager = _manager(tmp_path)
    space = manager.dir_space(manager.log_dirs[0])
    assert os.path.exists(space.reserve_path)
    log = manager.create_log("t", 0)
    for i in range(3):
        log.local_log.append_as_leader(batch(3, value_size=40, prefix=b"b%d." % i), 0, NOW)
    real = checkpoints._write_atomically

    def full(path, data, fsync, **kwargs):
        if os.path.exists(space.reserve_path):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data, fsync, **kwargs)

    monkeypatch.setattr(checkpoints, "_write_atomically", full)
    log.local_log.roll()                       # its flush is followed by a recovery-point checkpoint
    failures = []
    manager.checkpoint_recovery_points().addErrback(failures.append)
    assert failures and failures[0].check(OSError)
    assert os.path.exists(space.reserve_path) and not space.full
    # DeleteRecords' checkpoint does take it.
    log.local_log.delete_records_before(3)
    manager.checkpoint_log_start_offsets()
    assert not os.path.exists(space.reserve_path) and space.full
    monkeypatch.undo()
    manager.stopService()

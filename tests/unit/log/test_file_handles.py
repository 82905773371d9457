"""Segment files' descriptors on real files: opened on demand, bounded, least recently used closed
first, never closed while in use, and running out of them (a real EMFILE) fails one operation only."""

from __future__ import annotations

import contextlib
import errno
import os
import resource

import pytest

from support.inline import InlineReactor, SyncThreadPool
from twisted_kafka.config import KafkaConfig
from twisted_kafka.log.file_handles import FileHandleCache, default_capacity
from twisted_kafka.log.log_manager import LogManager
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .helpers import NOW, batch, new_log, records_of


def fds_under(path) -> int:
    """Descriptors this process has open on files under ``path``."""
    path = str(path)
    count = 0
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/self/fd/{name}").startswith(path):
                count += 1
    return count


@contextlib.contextmanager
def no_descriptor_left():
    """Lower the soft open-file limit to what is open now and fill every gap: the next
    ``open`` fails with EMFILE, as in a broker whose connections took every descriptor."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max(int(name) for name in os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, hard))
    fillers = []
    try:
        while True:
            try:
                fillers.append(os.open(os.devnull, os.O_RDONLY))
            except OSError as e:
                assert e.errno == errno.EMFILE
                break
        yield
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


@pytest.fixture
def open_files():
    """A descriptor cache of the size a ``LogManager`` makes without a budget, with no idle
    descriptor (so running out cannot be helped by closing some), for the logs of one test."""
    files = FileHandleCache(default_capacity())
    yield files
    files.close_idle()


def _files(tmp_path, n: int) -> list[str]:
    paths = []
    for i in range(n):
        path = tmp_path / f"f{i}"
        path.write_bytes(b"file %d" % i)
        paths.append(str(path))
    return paths


def _read(handle) -> bytes:
    fd = handle.acquire()
    try:
        return os.pread(fd, 100, 0)
    finally:
        handle.release()


def test_descriptors_are_opened_on_demand_bounded_and_least_recently_used_closed_first(tmp_path):
    cache = FileHandleCache(3)
    handles = [cache.file(p, os.O_RDONLY) for p in _files(tmp_path, 10)]
    assert fds_under(tmp_path) == 0 and len(cache) == 0
    for i, handle in enumerate(handles):
        assert _read(handle) == b"file %d" % i
    assert len(cache) == 3 and fds_under(tmp_path) == 3 and cache.evicted == 7
    assert [h.fd is not None for h in handles] == [False] * 7 + [True] * 3
    _read(handles[7])                                   # used again: now the most recent
    assert _read(handles[0]) == b"file 0"               # reopened; the least recent (8) was closed
    assert {i for i, h in enumerate(handles) if h.fd is not None} == {0, 7, 9}
    cache.resize(1)
    assert {i for i, h in enumerate(handles) if h.fd is not None} == {0} and fds_under(tmp_path) == 1


def test_a_descriptor_in_use_is_never_closed(tmp_path):
    cache = FileHandleCache(2)
    a, b, c, d = (cache.file(p, os.O_RDONLY) for p in _files(tmp_path, 4))
    fa, fb = a.acquire(), b.acquire()
    c.acquire()                                         # nothing idle to close: over capacity for now
    assert (a.fd, b.fd, len(cache)) == (fa, fb, 3)
    for handle in (a, b, c):
        handle.release()
    _read(d)                                            # back within capacity: idle ones closed
    assert len(cache) == 2 and fds_under(tmp_path) == 2
    # Closing a descriptor in use waits for its user: it must not be reused under it.
    fd = c.acquire()
    c.close()
    assert c.fd == fd and os.pread(fd, 6, 0) == b"file 2"
    c.release()
    assert c.fd is None and fds_under(tmp_path) == 1
    with pytest.raises(OSError):
        c.acquire()


def test_close_idle_closes_all_but_the_pinned_and_they_reopen(tmp_path):
    cache = FileHandleCache(10)
    handles = [cache.file(p, os.O_RDONLY) for p in _files(tmp_path, 4)]
    for handle in handles:
        _read(handle)
    pinned = handles[2].acquire()
    assert cache.close_idle() == 3
    assert [h.fd for h in handles] == [None, None, pinned, None] and fds_under(tmp_path) == 1
    handles[2].release()
    assert _read(handles[0]) == b"file 0" and fds_under(tmp_path) == 2


def test_a_renamed_file_is_reopened_under_its_new_name(tmp_path):
    cache = FileHandleCache(1)
    first, second = (cache.file(p, os.O_RDONLY) for p in _files(tmp_path, 2))
    _read(first)
    os.rename(first.path, first.path + ".deleted")
    first.rename(first.path + ".deleted")
    _read(second)                                       # closes first's descriptor
    assert first.fd is None and _read(first) == b"file 0"


def test_out_of_descriptors_idle_ones_are_closed_to_make_room(tmp_path):
    cache = FileHandleCache(100)
    paths = _files(tmp_path, 21)
    handles = [cache.file(p, os.O_RDONLY) for p in paths[:20]]
    for handle in handles:
        _read(handle)
    with no_descriptor_left():
        with pytest.raises(OSError) as raised:
            os.close(os.open(paths[20], os.O_RDONLY))
        assert raised.value.errno == errno.EMFILE
        os.close(cache.os_open(paths[20], os.O_RDONLY))   # closed 8 idle ones, then opened
        assert len(cache) == 12
        for handle in handles:                              # the 8 reopen in the room made
            handle.acquire()
        # Every descriptor in use and none free: the operation fails, nothing else.
        late = cache.file(paths[20], os.O_RDONLY)
        with pytest.raises(OSError) as raised:
            late.acquire()
        assert raised.value.errno == errno.EMFILE and late.fd is None
        handles[0].release()
        assert _read(late) == b"file 20"                    # one idle again: closed for it
        assert handles[0].fd is None and all(h.fd is not None for h in handles[1:])
        for handle in handles[1:]:
            handle.release()


def test_a_log_with_more_segments_than_descriptors(tmp_path, open_files):
    open_files.resize(3)
    log = new_log(tmp_path, files=open_files, segment_bytes=400)
    for i in range(40):
        log.append_as_leader(batch(2, value_size=40, prefix=b"b%d." % i), 0, NOW)
    assert len(log.segments) > 10 and fds_under(tmp_path) <= 3
    values = [v for _, v in records_of(log.read(0, 1 << 20))]
    assert len(values) == 80 and values[0].startswith(b"b0.") and values[-1].startswith(b"b39.")
    assert fds_under(tmp_path) <= 3
    log.flush()
    log.close()
    assert fds_under(tmp_path) == 0
    again = log.open(log.dir, log.config, files=log.files, recovery_point=0, had_clean_shutdown=False, now_ms=NOW)
    assert again.recovery_stats.segments_recovered == len(log.segments)
    assert [v for _, v in records_of(again.read(0, 1 << 20))] == values and fds_under(tmp_path) <= 3
    again.close()


def test_an_append_without_a_descriptor_fails_alone(tmp_path, open_files):
    log = new_log(tmp_path, files=open_files)
    log.append_as_leader(batch(1), 0, NOW)
    open_files.close_idle()
    assert log.active_segment.fd is None
    with no_descriptor_left(), pytest.raises(KafkaError) as raised:
        log.append_as_leader(batch(1), 0, NOW)
    assert raised.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "Too many open files" in raised.value.message
    # Nothing was reserved or failed: the next append, with a descriptor to be had, works.
    assert log.failed is None and log.log_end_offset == 1
    assert log.append_as_leader(batch(1), 0, NOW).first_offset == 1
    assert [o for o, _ in records_of(log.read(0, 1 << 20))] == [0, 1]
    log.close()


def _manager(tmp_path, max_open_files: int) -> LogManager:
    reactor = InlineReactor()
    reactor.advance(NOW / 1000)
    manager = LogManager(KafkaConfig.from_props({"log.dirs": str(tmp_path / "data")}), reactor=reactor,
                         threadpool=SyncThreadPool(), max_open_files=max_open_files)
    d = manager.startService()
    assert d.called and d.result is None
    return manager


def test_a_log_manager_loads_and_serves_more_partitions_than_descriptors(tmp_path, open_files):
    manager = _manager(tmp_path, 20)
    for p in range(60):
        manager.create_log("t", p).local_log.append_as_leader(batch(1, prefix=b"p%d." % p), 0, NOW)
    assert fds_under(tmp_path) <= 20
    manager.stopService()
    assert fds_under(tmp_path) == 0
    manager = _manager(tmp_path, 20)
    assert len(manager.all_logs()) == 60 and fds_under(tmp_path) <= 20
    for p in range(60):
        [(offset, value)] = records_of(manager.get_log("t", p).local_log.read(0, 1 << 20))
        assert offset == 0 and value.startswith(b"p%d." % p)
    assert fds_under(tmp_path) <= 20
    manager.stopService()


def test_a_log_that_cannot_be_created_leaves_nothing_behind(tmp_path, open_files):
    manager = _manager(tmp_path, 20)
    with no_descriptor_left(), pytest.raises(KafkaError) as raised:
        manager.create_log("t", 0)
    assert raised.value.code == ErrorCode.KAFKA_STORAGE_ERROR and "EMFILE" in raised.value.message
    assert manager.get_log("t", 0) is None and not (tmp_path / "data" / "t-0").exists()
    assert manager.create_log("t", 0).local_log.append_as_leader(batch(1), 0, NOW).first_offset == 0
    manager.stopService()


def test_a_read_without_a_descriptor_fails_alone(tmp_path, open_files):
    from twisted_kafka.log.unified_log import UnifiedLog

    clock = InlineReactor()
    unified = UnifiedLog(new_log(tmp_path, files=open_files), reactor=clock, threadpool=SyncThreadPool())
    unified.local_log.append_as_leader(batch(1), 0, NOW)
    open_files.close_idle()
    failures = []
    with no_descriptor_left():
        unified.read(0, 1 << 20).addErrback(failures.append)      # not open: goes to the pool, fails there
    [failure] = failures
    assert failure.check(KafkaError) and failure.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "Too many open files" in failure.value.message
    assert [o for o, _ in records_of(unified.read(0, 1 << 20).result)] == [0]
    unified.local_log.close()


def test_an_index_append_never_waits_for_an_index_fsync(tmp_path, monkeypatch):
    """Entries are written at flush time; the fsync runs outside the index's lock, so the reactor
    appending the next entry is not held up by a pool thread flushing (a disk flush takes ms)."""
    import threading

    from twisted_kafka.log import index as index_module
    from twisted_kafka.log.index import OffsetIndex

    index = OffsetIndex.create(str(tmp_path / "x.index"), 0, 1 << 20)
    index.append(0, 0)
    in_fsync, release = threading.Event(), threading.Event()
    real_fsync = os.fsync

    def slow_fsync(fd):
        in_fsync.set()
        release.wait(30)
        real_fsync(fd)

    monkeypatch.setattr(index_module.os, "fsync", slow_fsync)
    appended = threading.Event()

    def append():
        index.append(10, 100)
        appended.set()

    flusher = threading.Thread(target=index.flush)
    flusher.start()
    try:
        assert in_fsync.wait(10)
        appender = threading.Thread(target=append)
        appender.start()
        not_held_up = appended.wait(5)       # the fsync is still running
    finally:
        release.set()
        flusher.join(10)
    appender.join(10)
    assert not_held_up, "an index append waited for an fsync"
    index.write_pending()
    assert len(index) == 2 and index.pending_entries == 0
    assert (tmp_path / "x.index").read_bytes() == b"\0\0\0\0\0\0\0\0\0\0\0\x0a\0\0\0\x64"


def test_each_log_manager_keeps_its_logs_descriptors_in_its_own_cache(tmp_path, open_files):
    """No process-wide cache: the budget of one manager bounds its own logs only."""
    small = _manager(tmp_path / "small", 2)
    large = _manager(tmp_path / "large", 50)
    assert small.files is not large.files and small.files.capacity == 2 and large.files.capacity == 50
    for p in range(6):
        for manager in (small, large):
            log = manager.create_log("t", p)
            log.local_log.append_as_leader(batch(1), 0, NOW)
            assert log.local_log.files is manager.files
            assert all(s.file.cache is manager.files for s in log.local_log.segments)
    assert fds_under(tmp_path / "small") <= 2 and len(small.files) <= 2
    assert fds_under(tmp_path / "large") == len(large.files) == 6
    small.stopService()
    large.stopService()
    assert fds_under(tmp_path) == 0

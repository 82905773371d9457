"""A full log dir: the space reserve, refused appends, and resuming without a restart.

The filesystem running out of space is simulated by making ``os.pwrite`` /
the checkpoint writer raise ENOSPC; the real thing (a tmpfs filled up) is
tests/integration/data/test_disk_full.py.
"""

from __future__ import annotations

import errno
import os

import pytest

from support.inline import InlineReactor, SyncThreadPool
from twisted_kafka.config import KafkaConfig
from twisted_kafka.log import checkpoints, disk_space
from twisted_kafka.log import segment as segment_module
from twisted_kafka.log.checkpoints import read_offset_checkpoint, write_atomically
from twisted_kafka.log.disk_space import RESERVE_FILE, LogDirSpace, is_out_of_space
from twisted_kafka.log.log_manager import LogManager
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .helpers import NOW, batch, records_of


def _result(d):
    assert d.called, "Deferred has not fired"
    results = []
    d.addBoth(results.append)
    return results[0]


def _read(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


@pytest.fixture
def manager(tmp_path):
    reactor = InlineReactor()
    reactor.advance(NOW / 1000)
    config = KafkaConfig.from_props({"log.dirs": str(tmp_path / "data")})
    manager = LogManager(config, reactor=reactor, threadpool=SyncThreadPool())
    assert _result(manager.startService()) is None
    manager.reactor = reactor
    yield manager
    manager.stopService()


def test_out_of_space_is_recognised_through_causes():
    assert is_out_of_space(OSError(errno.ENOSPC, "full"))
    assert is_out_of_space(OSError(errno.EDQUOT, "quota"))
    wrapped = KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, "x")
    wrapped.__cause__ = OSError(errno.ENOSPC, "full")
    assert is_out_of_space(wrapped)
    assert not is_out_of_space(OSError(errno.EIO, "I/O error"))
    assert not is_out_of_space(None)


def test_every_log_dir_gets_a_preallocated_reserve_at_start(manager):
    space = manager.dir_space(manager.log_dirs[0])
    path = os.path.join(manager.log_dirs[0], RESERVE_FILE)
    assert os.path.getsize(path) >= disk_space.RESERVE_MIN_BYTES
    assert os.stat(path).st_blocks * 512 >= disk_space.RESERVE_MIN_BYTES     # allocated, not sparse
    assert not space.full


def test_a_write_out_of_space_releases_the_reserve_marks_the_dir_full_and_retries(tmp_path, monkeypatch):
    space = LogDirSpace(str(tmp_path))
    assert space.ensure_reserve()
    real = checkpoints._write_atomically
    calls = []

    def full_once(path, data, fsync, **kwargs):
        calls.append(path)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data, fsync, **kwargs)

    monkeypatch.setattr(checkpoints, "_write_atomically", full_once)
    target = str(tmp_path / "checkpoint")
    write_atomically(target, b"new", space=space)
    assert _read(target) == b"new" and len(calls) == 2
    assert not os.path.exists(space.reserve_path) and space.full
    # No reserve left: the next write that finds no space fails.
    with pytest.raises(OSError):
        calls.clear()
        write_atomically(target, b"newer", space=space)
    assert _read(target) == b"new"
    assert not os.path.exists(target + ".tmp")


def test_a_failed_temporary_write_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints.os, "fsync", _enospc)
    with pytest.raises(OSError):
        write_atomically(str(tmp_path / "f"), b"data")
    assert os.listdir(tmp_path) == []


def test_appends_fail_while_the_dir_is_full_and_resume_by_themselves(manager, monkeypatch):
    log = manager.create_log("t", 0)
    other = manager.create_log("u", 0)
    assert _result(log.append_as_leader(batch(2), 0)).first_offset == 0
    space = manager.dir_space(manager.log_dirs[0])

    monkeypatch.setattr(segment_module.os, "pwrite", _enospc)
    failed = _result(log.append_as_leader(batch(1), 0))
    assert failed.value.code == ErrorCode.KAFKA_STORAGE_ERROR and space.full
    monkeypatch.undo()
    # Full: appends to every log of the dir fail at once, without writing.
    for each in (log, other):
        refused = _result(each.append_as_leader(batch(1), 0))
        assert refused.value.code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "full" in refused.value.message
    # Reads work; the failed append left nothing behind.
    assert [o for o, _ in records_of(_result(log.read(0, 1 << 20)))] == [0, 1]
    assert log.log_end_offset == 2

    # Still no space: the periodic check keeps the dir full.
    monkeypatch.setattr(disk_space, "free_bytes", lambda path: 0)
    manager.reactor.advance(disk_space.CHECK_INTERVAL_SECONDS)
    assert space.full
    # Space is back: the next check resumes appends, no restart needed.
    monkeypatch.setattr(disk_space, "free_bytes", lambda path: 1 << 30)
    manager.reactor.advance(disk_space.CHECK_INTERVAL_SECONDS)
    assert not space.full
    assert _result(log.append_as_leader(batch(1), 0)).first_offset == 2
    assert _result(other.append_as_leader(batch(1), 0)).first_offset == 0


def test_resuming_waits_until_the_reserve_can_be_made_again(manager, monkeypatch):
    space = manager.dir_space(manager.log_dirs[0])
    os.unlink(space.reserve_path)
    space.mark_full("test")
    monkeypatch.setattr(disk_space.os, "posix_fallocate", _enospc)
    manager.reactor.advance(disk_space.CHECK_INTERVAL_SECONDS)
    assert space.full and not os.path.exists(space.reserve_path)
    assert not os.path.exists(space.reserve_path + ".tmp")
    monkeypatch.undo()
    manager.reactor.advance(disk_space.CHECK_INTERVAL_SECONDS)
    assert not space.full and os.path.getsize(space.reserve_path) >= disk_space.RESERVE_MIN_BYTES


def test_checkpoints_use_the_reserve(manager, monkeypatch):
    log = manager.create_log("t", 0)
    _result(log.append_as_leader(batch(3), 0))
    log.delete_records_before(2)
    space = manager.dir_space(manager.log_dirs[0])
    real = checkpoints._write_atomically
    state = {"full": True}

    def full_until_reserve_released(path, data, fsync, **kwargs):
        if state["full"] and os.path.exists(space.reserve_path):
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data, fsync, **kwargs)

    monkeypatch.setattr(checkpoints, "_write_atomically", full_until_reserve_released)
    _result(manager.checkpoint_log_start_offsets())
    assert read_offset_checkpoint(os.path.join(manager.log_dirs[0], "log-start-offset-checkpoint")) \
        == {("t", 0): 2}
    assert space.full and not os.path.exists(space.reserve_path)

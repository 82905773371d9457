"""The leader-epoch cache: monotonic epochs and OffsetForLeaderEpoch answers."""

from __future__ import annotations

import os

import pytest

from twisted_kafka.log.checkpoints import read_epoch_checkpoint
from twisted_kafka.log.epoch_cache import LeaderEpochCache
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .helpers import NOW, batch, new_log, reopen


def test_epochs_never_go_backwards(tmp_path):
    cache = LeaderEpochCache(str(tmp_path / "leader-epoch-checkpoint"))
    assert cache.assign(1, 0)
    assert not cache.assign(1, 5)           # same epoch: keeps its first offset
    assert cache.assign(3, 10)
    assert not cache.assign(2, 20)          # lower epoch refused
    assert cache.entries == [(1, 0), (3, 10)]
    assert read_epoch_checkpoint(cache.path) == [(1, 0), (3, 10)]


def test_end_offset_for_epoch_semantics():
    cache = LeaderEpochCache(None, [(1, 0), (3, 10), (6, 25)])
    leo = 40
    assert cache.end_offset_for(6, leo) == (6, 40)          # latest: the log end
    assert cache.end_offset_for(3, leo) == (3, 25)          # ends where 6 starts
    assert cache.end_offset_for(1, leo) == (1, 10)
    assert cache.end_offset_for(4, leo) == (3, 25)          # unknown, between: largest below
    assert cache.end_offset_for(0, leo) == (0, 0)           # below all: first start
    assert cache.end_offset_for(7, leo) == (-1, -1)         # above the latest
    assert cache.end_offset_for(-1, leo) == (-1, -1)
    assert LeaderEpochCache(None).end_offset_for(0, leo) == (-1, -1)
    assert cache.epoch_for_offset(12) == 3 and cache.epoch_for_offset(9) == 1


def test_truncation_of_the_cache():
    cache = LeaderEpochCache(None, [(1, 0), (3, 10), (6, 25)])
    cache.truncate_from_end(25)
    assert cache.entries == [(1, 0), (3, 10)]
    cache.truncate_from_start(12)
    assert cache.entries == [(3, 12)]


def test_log_records_epochs_and_fences_older_leaders(tmp_path):
    log = new_log(tmp_path)
    log.append_as_leader(batch(3), 0, NOW)
    log.append_as_leader(batch(3), 0, NOW)
    log.append_as_leader(batch(2), 2, NOW)
    assert log.latest_epoch == 2
    assert log.epoch_cache.entries == [(0, 0), (2, 6)]
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(batch(1), 1, NOW)
    assert e.value.code == ErrorCode.FENCED_LEADER_EPOCH
    assert log.end_offset_for_epoch(0) == (0, 6)
    assert log.end_offset_for_epoch(1) == (0, 6)
    assert log.end_offset_for_epoch(2) == (2, 8)


def test_epochs_survive_restart_and_are_rebuilt_by_recovery(tmp_path):
    log = new_log(tmp_path)
    log.append_as_leader(batch(3), 1, NOW)
    log.append_as_leader(batch(3), 4, NOW)
    path = os.path.join(log.dir, "leader-epoch-checkpoint")
    log.flush()
    log = reopen(log, clean=True)
    assert log.epoch_cache.entries == [(1, 0), (4, 3)]
    # Lose the checkpoint; an unclean start re-derives epochs from the batches.
    log.close()
    os.unlink(path)
    from twisted_kafka.log.log import Log

    from .helpers import config
    log = Log.open(log.dir, config(), files=log.files, recovery_point=0, now_ms=NOW)
    assert log.epoch_cache.entries == [(1, 0), (4, 3)]


def test_truncate_to_cuts_the_epoch_cache(tmp_path):
    log = new_log(tmp_path)
    log.append_as_leader(batch(3), 1, NOW)
    log.append_as_leader(batch(3), 4, NOW)
    log.append_as_leader(batch(3), 5, NOW)
    assert log.truncate_to(3)
    assert log.log_end_offset == 3 and log.latest_epoch == 1
    assert log.high_watermark == 3
    info = log.append_as_leader(batch(1), 6, NOW)
    assert info.first_offset == 3
    assert log.epoch_cache.entries == [(1, 0), (6, 3)]


def test_restarting_an_empty_leader_writes_no_checkpoint(tmp_path):
    """Loading drops the entry an empty log's epoch has at its end; becoming leader adds it back:
    neither rewrites the file (an atomic rename each, twice per partition at every restart)."""
    log = new_log(tmp_path)
    log.epoch_cache.assign(0, 0)                       # as Partition.make_leader does
    log.flush()
    path = log.epoch_cache.path
    before = os.stat(path)
    log = reopen(log, clean=True)
    assert log.epoch_cache.entries == []               # trimmed in memory...
    assert read_epoch_checkpoint(path) == [(0, 0)]     # ...the file untouched
    assert not log.epoch_cache.assign(0, 0) or log.epoch_cache.entries == [(0, 0)]
    log.flush()
    assert read_epoch_checkpoint(path) == [(0, 0)]
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    # A real change is written at once, as before.
    log.epoch_cache.assign(1, 0)
    assert read_epoch_checkpoint(path) == [(1, 0)]

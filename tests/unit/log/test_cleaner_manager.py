"""``LogCleaner`` inside ``LogManager`` on a ``task.Clock``: the schedule, tombstone timing,
the throttle, ``log.cleaner.threads``, the checkpoint file, aborts, a full disk, corrupt data."""

from __future__ import annotations

import errno
import os

import pytest

from support.inline import InlineReactor, ManualThreadPool, SyncThreadPool
from twisted_kafka.config import KafkaConfig
from twisted_kafka.log.checkpoints import read_offset_checkpoint
from twisted_kafka.log.cleaner import CLEANER_CHECKPOINT
from twisted_kafka.log.log_manager import LogManager
from twisted_kafka.log.segment import LogSegment

from .helpers import NOW, all_records, keyed_batch, latest_by_key

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "4096", "delete.retention.ms": "1000"}


def _started(tmp_path, pool=None, **props):
    values = {"log.dirs": str(tmp_path / "data"), "log.cleaner.backoff.ms": "1000"}
    values.update({k.replace("_", "."): str(v) for k, v in props.items()})
    reactor = InlineReactor()
    reactor.advance(NOW / 1000)
    manager = LogManager(KafkaConfig.from_props(values), reactor=reactor, threadpool=pool or SyncThreadPool())
    manager.startService()
    if isinstance(pool, ManualThreadPool):
        pool.run_all()
    return manager, reactor


def _write(log, pairs, reactor, ts=None):
    ts = int(reactor.seconds() * 1000) if ts is None else ts
    d = log.append_as_leader(keyed_batch(pairs, ts=ts), 0)
    assert d.called
    return d.result


def _fill(log, reactor, n=400, keys=20, start=0):
    for i in range(start, start + n):
        _write(log, [(b"k%d" % (i % keys), b"v%d" % i)], reactor)


def _checkpoint_file(manager):
    return read_offset_checkpoint(os.path.join(manager.log_dirs[0], CLEANER_CHECKPOINT))


def test_compacted_logs_are_cleaned_on_the_schedule_and_checkpointed(tmp_path):
    manager, reactor = _started(tmp_path)
    log = manager.create_log("c", 0, topic_config=COMPACT)
    other = manager.create_log("d", 0, topic_config={"segment.bytes": "4096"})
    _fill(log, reactor)
    _fill(other, reactor)
    expected = latest_by_key(all_records(log.local_log))
    size, other_size = log.size, other.size
    assert manager.cleaner.cleanings == 0
    reactor.advance(1.0)
    assert manager.cleaner.cleanings == 1
    assert log.size < size / 3 and other.size == other_size       # only the compacted log
    assert latest_by_key(all_records(log.local_log)) == expected
    active = log.local_log.active_segment.base_offset
    assert _checkpoint_file(manager) == {("c", 0): active}
    stats = manager.cleaner.last_stats[("c", 0)]
    assert stats.filter.records_kept < stats.filter.records_read
    reactor.advance(5.0)
    assert manager.cleaner.cleanings == 1                         # nothing dirty since


def test_log_cleaner_enable_false_cleans_nothing(tmp_path):
    manager, reactor = _started(tmp_path, log_cleaner_enable="false")
    log = manager.create_log("c", 0, topic_config=COMPACT)
    _fill(log, reactor)
    size = log.size
    reactor.advance(10)
    assert log.size == size and not os.path.exists(os.path.join(manager.log_dirs[0], CLEANER_CHECKPOINT))


def test_tombstone_stays_delete_retention_ms_after_its_first_cleaning(tmp_path):
    """delete.retention.ms = 1.5 s; the cleaner looks every second (log.cleaner.backoff.ms)."""
    manager, reactor = _started(tmp_path)
    log = manager.create_log("c", 0, topic_config={**COMPACT, "delete.retention.ms": "1500",
                                                   "min.cleanable.dirty.ratio": "0.01"})
    _fill(log, reactor, n=100)
    _write(log, [(b"k3", None)], reactor)          # delete k3
    tombstone_offset = log.log_end_offset - 1

    def tombstone():
        return [(r.offset, r.value) for r in all_records(log.local_log) if r.key == b"k3"]

    def more_dirt(i):                              # never k3: the tombstone stays k3's latest record
        for j in range(150):
            _write(log, [(b"x%d" % (j % 20), b"%d-%d" % (i, j))], reactor)

    more_dirt(0)
    reactor.advance(1.0)                           # first cleaning: the horizon is now + 1.5 s
    assert manager.cleaner.cleanings == 1
    assert tombstone() == [(tombstone_offset, None)]
    more_dirt(1)
    reactor.advance(1.0)                           # 1 s after: kept
    assert manager.cleaner.cleanings == 2
    assert tombstone() == [(tombstone_offset, None)]
    more_dirt(2)
    reactor.advance(1.0)                           # 2 s after: removed
    assert manager.cleaner.cleanings == 3
    assert tombstone() == []


def test_the_throttle_waits_on_the_clock_between_steps(tmp_path):
    manager, reactor = _started(tmp_path, log_cleaner_io_max_bytes_per_second=20_000)
    log = manager.create_log("c", 0, topic_config=COMPACT)
    _fill(log, reactor, n=1500, keys=30)
    started = reactor.seconds()
    reactor.advance(1.0)
    assert ("c", 0) in manager.cleaner.in_progress and manager.cleaner.cleanings == 0
    for _ in range(200):
        if manager.cleaner.cleanings:
            break
        reactor.advance(0.5)
    stats = manager.cleaner.last_stats[("c", 0)]
    took = reactor.seconds() - started - 1.0
    assert took >= (stats.bytes_read + stats.bytes_written) / 20_000 * 0.8
    assert not [n for n in os.listdir(log.dir) if n.endswith(".cleaned")]


def test_log_cleaner_threads_bounds_the_cleanings_at_once(tmp_path):
    pool = ManualThreadPool()
    manager, reactor = _started(tmp_path, pool=pool, log_cleaner_threads=1)
    logs = [manager.create_log("c", p, topic_config=COMPACT) for p in range(3)]
    for log in logs:
        _fill(log, reactor)
    pool.run_all()                                 # the flushes of the rolls

    def cleaner_steps():
        return [f for _, f, _, _ in pool.queue if type(getattr(f, "__self__", None)).__name__ == "CleanTask"]

    reactor.advance(1.0)
    assert len(manager.cleaner.in_progress) == 1 and len(cleaner_steps()) == 1
    while pool.queue:
        pool.run_one()
        reactor.advance(0)
        assert len(manager.cleaner.in_progress) <= 1 and len(cleaner_steps()) <= 1
    assert manager.cleaner.cleanings == 3


def test_deleting_a_log_mid_cleaning_stops_it(tmp_path):
    pool = ManualThreadPool()
    manager, reactor = _started(tmp_path, pool=pool)
    log = manager.create_log("c", 0, topic_config=COMPACT)
    _fill(log, reactor, n=1500, keys=30)
    reactor.advance(1.0)
    for _ in range(20):                  # into the rewrite: a .cleaned segment exists
        pool.run_one()
        if any(n.endswith(".cleaned") for n in os.listdir(log.dir)):
            break
    manager.delete_log("c", 0)
    pool.run_all()
    reactor.advance(0)
    pool.run_all()
    assert manager.cleaner.in_progress == frozenset() and manager.cleaner.cleanings == 0
    assert ("c", 0) not in manager.cleaner.uncleanable


def test_stopping_mid_cleaning_leaves_no_output_and_a_clean_shutdown(tmp_path):
    manager, reactor = _started(tmp_path, log_cleaner_io_max_bytes_per_second=20_000)
    log = manager.create_log("c", 0, topic_config=COMPACT)
    _fill(log, reactor, n=1500, keys=30)
    records = all_records(log.local_log)
    reactor.advance(1.0)
    for _ in range(100):
        if any(n.endswith(".cleaned") for n in os.listdir(log.dir)):
            break
        reactor.advance(0.2)
    assert ("c", 0) in manager.cleaner.in_progress
    d = manager.stopService()
    assert d.called
    assert not [n for n in os.listdir(log.dir) if n.endswith(".cleaned")]
    assert os.path.exists(os.path.join(manager.log_dirs[0], ".kafka_cleanshutdown"))
    again, _ = _started(tmp_path)
    reloaded = again.get_log("c", 0).local_log
    assert latest_by_key(all_records(reloaded)) == latest_by_key(records)


@pytest.mark.parametrize("where", ["create", "write_at", "flush"])
def test_out_of_space_leaves_the_segments_and_tries_again_later(tmp_path, monkeypatch, where):
    manager, reactor = _started(tmp_path)
    log = manager.create_log("c", 0, topic_config=COMPACT)
    _fill(log, reactor)
    _write(log, [(b"k%d" % i, b"last") for i in range(20)], reactor)   # what the cleaning must write
    log.local_log.roll()
    segments = list(log.local_log.segments)
    records = all_records(log.local_log)
    real = getattr(LogSegment, where)

    def full(*args, **kwargs):
        if where == "create" and kwargs.get("suffix") or \
                where != "create" and args[0].log_path.endswith(".cleaned"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(LogSegment, where, classmethod(lambda cls, *a, **k: full(*a, **k))
                        if where == "create" else full)
    reactor.advance(1.0)
    assert manager.cleaner.cleanings == 0
    if where == "write_at":
        # Groups whose records are all obsolete write nothing: they were swapped in (empty).
        assert segments[-2] in log.local_log.segments
        assert latest_by_key(all_records(log.local_log)) == latest_by_key(records)
    else:
        assert log.local_log.segments == segments and all_records(log.local_log) == records
    assert not [n for n in os.listdir(log.dir) if n.endswith(".cleaned")]
    assert ("c", 0) not in manager.cleaner.uncleanable and not manager.dir_space(manager.log_dirs[0]).full
    monkeypatch.setattr(LogSegment, where, real if where != "create" else classmethod(real.__func__))
    reactor.advance(1.0)
    assert manager.cleaner.cleanings == 1


def test_corrupt_data_sets_the_log_aside_and_the_others_are_cleaned(tmp_path):
    manager, reactor = _started(tmp_path)
    bad = manager.create_log("c", 0, topic_config=COMPACT)
    good = manager.create_log("c", 1, topic_config=COMPACT)
    _fill(bad, reactor)
    _fill(good, reactor)
    victim = bad.local_log.segments[1]
    with open(victim.log_path, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    reactor.advance(1.0)
    reactor.advance(0)
    assert ("c", 0) in manager.cleaner.uncleanable
    assert manager.cleaner.checkpoint("c", 1, manager.log_dirs[0]) is not None
    assert manager.cleaner.checkpoint("c", 0, manager.log_dirs[0]) is None


def test_compact_delete_applies_retention_too(tmp_path):
    manager, reactor = _started(tmp_path, log_retention_check_interval_ms=1000, log_cleaner_backoff_ms=5000)
    log = manager.create_log("c", 0, topic_config={**COMPACT, "cleanup.policy": "compact,delete",
                                                    "retention.ms": "60000"})
    old = int(reactor.seconds() * 1000) - 120_000
    for i in range(200):
        _write(log, [(b"old%d" % (i % 10), b"x" * 20)], reactor, ts=old)
    log.local_log.roll()
    _fill(log, reactor)
    reactor.advance(1.0)                          # retention: the old segments go
    assert not any(r.key.startswith(b"old") for r in all_records(log.local_log))
    size = log.size
    reactor.advance(4.0)                          # compaction
    assert manager.cleaner.cleanings == 1 and log.size < size


def test_the_checkpoint_survives_a_restart(tmp_path):
    manager, reactor = _started(tmp_path)
    log = manager.create_log("c", 0, topic_config=COMPACT)
    _fill(log, reactor)
    reactor.advance(1.0)
    checkpoint = manager.cleaner.checkpoint("c", 0, manager.log_dirs[0])
    manager.stopService()
    again, reactor2 = _started(tmp_path)
    assert again.cleaner.checkpoint("c", 0, again.log_dirs[0]) == checkpoint
    reactor2.advance(1.0)
    assert again.cleaner.cleanings == 0        # nothing dirty: the clean section is not redone


@pytest.mark.parametrize("damaged", [b"garbage", b"0\n1\nc 0 x\n"])
def test_a_damaged_checkpoint_is_discarded(tmp_path, damaged):
    os.makedirs(tmp_path / "data")
    (tmp_path / "data" / CLEANER_CHECKPOINT).write_bytes(damaged)
    manager, reactor = _started(tmp_path)
    log = manager.create_log("c", 0, topic_config=COMPACT)
    _fill(log, reactor)
    reactor.advance(1.0)
    assert manager.cleaner.cleanings == 1

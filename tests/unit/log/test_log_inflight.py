"""Appends whose writes run in the thread pool; reads that avoid waiting for the disk."""

from __future__ import annotations

import os

import pytest

from support.inline import InlineReactor, ManualThreadPool
from twisted_kafka.config import KafkaConfig
from twisted_kafka.log.log_manager import LogManager
from twisted_kafka.log.segment import WouldBlock
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .helpers import NOW, batch, new_log, records_of, reopen


def test_prepared_appends_are_ordered_and_visible_only_when_committed(tmp_path):
    log = new_log(tmp_path)
    first = log.prepare_append_as_leader(batch(2), 0, NOW)
    second = log.prepare_append_as_leader(batch(3), 0, NOW)
    assert (first.info.first_offset, second.info.first_offset) == (0, 2)
    assert log.log_end_offset == 5 and log.high_watermark == 0 and log.committed_end_offset == 0
    assert log.read(0, 1 << 20).empty                 # nothing visible yet
    order = []
    first.on_commit(lambda e: order.append(("first", e)))
    second.on_commit(lambda e: order.append(("second", e)))
    second.write()
    log.complete_append(second)                       # finished first, must wait
    assert order == [] and log.high_watermark == 0
    first.write()
    log.complete_append(first)
    assert order == [("first", None), ("second", None)]
    assert log.high_watermark == log.committed_end_offset == 5
    assert [o for o, _ in records_of(log.read(0, 1 << 20))] == list(range(5))


def test_roll_while_a_write_is_in_flight(tmp_path):
    log = new_log(tmp_path, segment_bytes=600)
    pendings = [log.prepare_append_as_leader(batch(3, value_size=40), 0, NOW) for _ in range(6)]
    assert len(log.segments) > 1
    for p in reversed(pendings):
        p.write()
        log.complete_append(p)
    assert [o for o, _ in records_of(log.read(0, 1 << 20))] == list(range(18))
    log.flush()
    log = reopen(log, clean=True, segment_bytes=600)
    assert log.log_end_offset == 18 and log.recovery_stats.segments_recovered == 0


def test_a_failed_write_fails_it_and_those_behind_it_then_the_next_append_retries(tmp_path):
    log = new_log(tmp_path)
    log.append_as_leader(batch(1), 0, NOW)
    committed_size = log.active_segment.size
    first = log.prepare_append_as_leader(batch(1), 0, NOW)
    second = log.prepare_append_as_leader(batch(2), 0, NOW)
    errors = []
    first.on_commit(errors.append)
    second.on_commit(errors.append)
    # Half of the first append reached the file before the disk was full.
    log.active_segment.write_at(first.position, first.data[:len(first.data) // 2])
    log.complete_append(first, OSError(28, "No space left on device"))
    assert [e.code for e in errors] == [ErrorCode.KAFKA_STORAGE_ERROR]
    with pytest.raises(KafkaError) as e:            # the second one's write is still running
        log.append_as_leader(batch(1), 0, NOW)
    assert e.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    second.write()
    log.complete_append(second)                     # written, but behind the failed one
    assert [e.code for e in errors] == [ErrorCode.KAFKA_STORAGE_ERROR] * 2
    # Rolled back to the committed end: the partial and the orphaned bytes are gone.
    assert log.log_end_offset == log.committed_end_offset == 1
    assert os.path.getsize(log.active_segment.log_path) == committed_size
    assert log.append_as_leader(batch(2), 0, NOW).first_offset == 1
    assert [o for o, _ in records_of(log.read(0, 1 << 20))] == [0, 1, 2]
    log.flush()
    log = reopen(log)                               # recovery finds exactly that
    assert log.recovery_stats.bytes_truncated == 0
    assert [o for o, _ in records_of(log.read(0, 1 << 20))] == [0, 1, 2]


def test_a_failed_write_after_a_roll_rolls_back_to_the_earlier_segment(tmp_path):
    log = new_log(tmp_path, segment_bytes=600)
    log.append_as_leader(batch(3, value_size=40), 0, NOW)
    first = log.prepare_append_as_leader(batch(3, value_size=40), 0, NOW)
    rolled = [log.prepare_append_as_leader(batch(3, value_size=40), 0, NOW) for _ in range(4)]
    assert len(log.segments) > 1 and log.segments[1].base_offset > first.info.first_offset
    for p in rolled:
        p.write()
        log.complete_append(p)
    log.complete_append(first, OSError(28, "No space left on device"))
    assert log.log_end_offset == 3 and [s.base_offset for s in log.segments] == [0]
    assert log.append_as_leader(batch(3, value_size=40), 0, NOW).first_offset == 3
    for _ in range(4):
        log.append_as_leader(batch(3, value_size=40), 0, NOW)
    assert [o for o, _ in records_of(log.read(0, 1 << 20))] == list(range(18))
    log.flush()
    log = reopen(log, segment_bytes=600)
    assert log.log_end_offset == 18 and log.recovery_stats.bytes_truncated == 0


def _manager(tmp_path, pool, **props):
    reactor = InlineReactor()
    reactor.advance(NOW / 1000)
    base = {"log.dirs": str(tmp_path / "data")}
    base.update(props)
    manager = LogManager(KafkaConfig.from_props(base), reactor=reactor, threadpool=pool)
    manager.startService()
    pool.run_all()
    return manager


def test_large_appends_are_written_in_the_pool_and_acked_in_order(tmp_path):
    pool = ManualThreadPool()
    manager = _manager(tmp_path, pool)
    log = manager.create_log("t", 0)
    log.inline_write_max_bytes = 1000
    acked = []
    big = log.append_as_leader(batch(20, value_size=100), 0)        # > 1000 bytes: pool
    small = log.append_as_leader(batch(1), 0)                        # inline write
    big.addCallback(lambda info: acked.append(info.first_offset))
    small.addCallback(lambda info: acked.append(info.first_offset))
    assert acked == [] and len(pool.queue) == 1
    assert log.high_watermark == 0                                  # small waits for big
    pool.run_all()
    assert acked == [0, 20] and log.high_watermark == 21


def test_stop_waits_for_writes_in_flight(tmp_path):
    pool = ManualThreadPool()
    manager = _manager(tmp_path, pool)
    log = manager.create_log("t", 0)
    log.inline_write_max_bytes = 0
    log.append_as_leader(batch(3), 0)
    done = []
    manager.stopService().addCallback(done.append)
    assert done == [] and not (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    pool.run_all()
    assert done == [None]
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()
    assert log.committed_end_offset == 3


def test_stop_waits_for_writes_of_a_deleted_log_then_removes_its_files(tmp_path):
    pool = ManualThreadPool()
    manager = _manager(tmp_path, pool, **{"log.segment.delete.delay.ms": "60000"})
    log = manager.create_log("t", 0)
    log.inline_write_max_bytes = 0
    log.append_as_leader(batch(3), 0)
    deleted = []
    manager.delete_log("t", 0).addCallback(deleted.append)
    done = []
    manager.stopService().addCallback(done.append)
    assert done == [] and deleted == []
    assert len(pool.queue) == 1                        # the write: shutdown waits for it
    pool.run_all()
    assert done == [None] and deleted == [True]        # removed at shutdown, not 60 s later
    assert log.committed_end_offset == 3
    assert not [n for n in os.listdir(tmp_path / "data") if n.startswith("t-0")]
    assert (tmp_path / "data" / ".kafka_cleanshutdown").exists()


def test_reads_stay_inline_when_cached_and_move_to_the_pool_otherwise(tmp_path):
    pool = ManualThreadPool()
    manager = _manager(tmp_path, pool, **{"log.segment.bytes": "500", "log.index.interval.bytes": "50"})
    log = manager.create_log("t", 0)
    for _ in range(10):
        log.local_log.append_as_leader(batch(3), 0, NOW)
    pool.run_all()                                            # background flushes after rolls
    d = log.read(27, 1 << 20)
    assert d.called and not pool.queue                        # hot data: answered inline
    assert [o for o, _ in records_of(d.result)] == [27, 28, 29]
    # An old segment whose index was never loaded would touch the disk:
    old = log.local_log.segments[0]
    old.write_indexes()
    old.offset_index.unload()
    with pytest.raises(WouldBlock):
        log.local_log.read(0, 100, nowait=True)
    d = log.read(0, 1 << 20)
    assert not d.called and len(pool.queue) == 1
    pool.run_all()
    assert [o for o, _ in records_of(d.result)][:3] == [0, 1, 2]
    failure = []
    log.read(99, 10).addErrback(failure.append)
    assert failure[0].value.code == ErrorCode.OFFSET_OUT_OF_RANGE

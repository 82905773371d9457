"""UnifiedLog: the per-partition async API — where each step runs, in what order.

Real segment files under ``tmp_path``; the "thread pool" is either the
manual one from ``helpers`` (the test decides when each job runs, and in
which order) or a real ``ThreadPool`` on the real reactor.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from twisted.internet import defer, reactor
from twisted.python.threadpool import ThreadPool
from twisted.trial import unittest

from support.inline import InlineReactor, ManualThreadPool
from twisted_kafka.log.unified_log import INLINE_WRITE_MAX_BYTES, UnifiedLog
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .helpers import NOW, batch, new_log, records_of


def _unified(tmp_path, name: str = "t-0", pool=None, **changes):
    pool = pool if pool is not None else ManualThreadPool()
    clock = InlineReactor()
    clock.advance(NOW / 1000)
    return UnifiedLog(new_log(tmp_path, name, **changes), reactor=clock, threadpool=pool), pool


def _result(d):
    assert d.called, "Deferred has not fired"
    results = []
    d.addBoth(results.append)
    return results[0]


def _offsets(info) -> list[int]:
    return [o for o, _ in records_of(info)]


def test_a_small_append_is_answered_at_once_without_the_pool(tmp_path):
    log, pool = _unified(tmp_path)
    assert log.inline_write_max_bytes == INLINE_WRITE_MAX_BYTES
    d = log.append_as_leader(batch(3), 0)
    info = _result(d)
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert not pool.queue and pool.calls == []
    assert log.high_watermark == log.log_end_offset == log.committed_end_offset == 3
    assert _offsets(_result(log.read(0, 1 << 20))) == [0, 1, 2]


def test_an_empty_append_changes_nothing(tmp_path):
    log, pool = _unified(tmp_path)
    info = _result(log.append_as_leader(b"", 0))
    assert info.num_records == 0 and info.first_offset == -1
    assert log.log_end_offset == 0 and not pool.queue


def test_inline_writes_behind_a_pool_write_wait_for_it_and_acks_keep_offset_order(tmp_path):
    log, pool = _unified(tmp_path)
    log.inline_write_max_bytes = 1000
    acked = []
    sizes = [1, 20, 1, 20, 1]                  # 20 records of 100 B: > 1000 bytes, pool
    for n in sizes:
        log.append_as_leader(batch(n, value_size=100), 0).addCallback(
            lambda info: acked.append(info.first_offset))
    assert acked == [0]                        # nothing before it: answered at once
    assert len(pool.queue) == 2                # the two large writes
    assert log.log_end_offset == 43 and log.committed_end_offset == log.high_watermark == 1
    assert _offsets(_result(log.read(0, 1 << 20))) == [0]      # only what is committed
    pool.queue.reverse()                       # the later write finishes first ...
    pool.run_one()
    assert acked == [0] and log.high_watermark == 1            # ... and waits for the earlier
    pool.run_one()
    assert acked == [0, 1, 21, 22, 42]
    assert log.high_watermark == 43
    assert _offsets(_result(log.read(0, 1 << 20))) == list(range(43))


def test_reaching_flush_messages_waits_for_an_fsync_in_the_pool(tmp_path):
    log, pool = _unified(tmp_path, flush_interval_messages=3)
    first = log.append_as_leader(batch(1), 0)
    second = log.append_as_leader(batch(1), 0)
    assert _result(first).first_offset == 0 and _result(second).first_offset == 1
    assert not pool.queue and log.recovery_point == 0
    third = log.append_as_leader(batch(1), 0)          # 3 unflushed records: fsync first
    assert not third.called and len(pool.queue) == 1
    assert log.high_watermark == 3                      # visible already, not yet durable
    pool.run_one()
    assert pool.calls == ["flush"]
    assert _result(third).first_offset == 2 and log.recovery_point == 3
    assert _result(log.append_as_leader(batch(1), 0)).first_offset == 3   # count starts again


def test_a_pool_write_with_the_flush_policy_is_written_then_fsynced_then_acked(tmp_path):
    log, pool = _unified(tmp_path, flush_interval_messages=1)
    log.inline_write_max_bytes = 0
    acked = []
    log.append_as_leader(batch(2), 0).addCallback(acked.append)
    assert acked == [] and len(pool.queue) == 1
    pool.run_one()
    assert acked == [] and pool.calls == ["write"] and len(pool.queue) == 1
    assert log.high_watermark == 2 and log.recovery_point == 0
    pool.run_one()
    assert pool.calls == ["write", "flush"]
    assert acked[0].last_offset == 1 and log.recovery_point == 2


def test_fsyncs_asked_for_while_one_runs_are_coalesced(tmp_path):
    log, pool = _unified(tmp_path, flush_interval_messages=1)
    acked = []
    for _ in range(4):
        log.append_as_leader(batch(1), 0).addCallback(lambda info: acked.append(info.first_offset))
    assert len(pool.queue) == 1                 # the first fsync; the others wait for it
    pool.run_one()
    assert acked == [0] and len(pool.queue) == 1
    pool.run_one()                              # one fsync for the three others
    assert acked == [0, 1, 2, 3] and not pool.queue and log.fsyncs == 2


class _ReadOnlyDescriptor:
    """Swap a segment's descriptor for a read-only one on the same file: its
    next write fails with EBADF, a real I/O error from the kernel."""

    def __init__(self, segment):
        self.fd = segment.fd
        self.saved = os.dup(self.fd)
        read_only = os.open(segment.log_path, os.O_RDONLY)
        os.dup2(read_only, self.fd)
        os.close(read_only)

    def restore(self):
        os.dup2(self.saved, self.fd)
        os.close(self.saved)


def test_a_failed_pool_write_fails_its_append_but_not_earlier_ones_or_other_partitions(tmp_path):
    pool = ManualThreadPool()
    log, _ = _unified(tmp_path, "t-0", pool)
    other, _ = _unified(tmp_path, "t-1", pool)
    log.inline_write_max_bytes = other.inline_write_max_bytes = 1000
    early = log.append_as_leader(batch(2), 0)
    assert _result(early).first_offset == 0
    failing = log.append_as_leader(batch(20, value_size=100), 0)      # pool
    behind = log.append_as_leader(batch(1), 0)                         # written, waits for it
    elsewhere = other.append_as_leader(batch(20, value_size=100), 0)  # pool, other log
    assert not failing.called and not behind.called and len(pool.queue) == 2
    broken = _ReadOnlyDescriptor(log.local_log.active_segment)
    try:
        pool.run_all()
    finally:
        broken.restore()
    assert _result(failing).value.code == ErrorCode.KAFKA_STORAGE_ERROR
    # The append queued behind it cannot become visible before it (offsets are
    # contiguous); the log is back at its committed end and the next append
    # is the retry.
    assert _result(behind).value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert _offsets(_result(log.read(0, 1 << 20))) == [0, 1]
    assert log.high_watermark == 2 and log.log_end_offset == 2
    assert _result(log.append_as_leader(batch(1), 0)).first_offset == 2
    assert _offsets(_result(log.read(0, 1 << 20))) == [0, 1, 2]
    assert _result(elsewhere).first_offset == 0
    assert _offsets(_result(other.read(0, 1 << 20))) == list(range(20))
    assert _result(other.append_as_leader(batch(1), 0)).first_offset == 20


def test_validation_errors_come_back_as_failed_deferreds(tmp_path):
    log, pool = _unified(tmp_path)
    broken = bytearray(batch(2))
    broken[-1] ^= 1
    failure = _result(log.append_as_leader(bytes(broken), 0))
    assert failure.check(KafkaError) and failure.value.code == ErrorCode.CORRUPT_MESSAGE
    log.append_as_leader(batch(1), 5)
    failure = _result(log.append_as_leader(batch(1), 4))
    assert failure.value.code == ErrorCode.FENCED_LEADER_EPOCH
    assert log.log_end_offset == 1 and not pool.queue


def test_reads_are_inline_from_the_page_cache_and_in_the_pool_otherwise(tmp_path):
    log, pool = _unified(tmp_path, segment_bytes=500, index_interval_bytes=50)
    for _ in range(10):
        _result(log.append_as_leader(batch(3), 0))
    pool.run_all()                                     # background flushes after rolls
    assert len(log.local_log.segments) > 1
    d = log.read(27, 1 << 20)
    assert d.called and not pool.queue
    assert _offsets(d.result) == [27, 28, 29]
    assert _offsets(_result(log.read(0, 1 << 20, max_offset=6))) == list(range(6))
    old = log.local_log.segments[0]
    old.write_indexes()
    old.offset_index.unload()                          # reading it would touch the disk
    d = log.read(0, 1 << 20)
    assert not d.called and len(pool.queue) == 1
    pool.run_one()
    assert pool.calls[-1] == "read"
    assert _offsets(_result(d)) == list(range(30))
    failure = _result(log.read(31, 10))
    assert failure.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_offset_lookups_by_timestamp_run_in_the_pool(tmp_path):
    log, pool = _unified(tmp_path, segment_bytes=300)
    for i in range(6):
        _result(log.append_as_leader(batch(2, ts=NOW + 1000 * i, step=10), 0))
    pool.run_all()
    pool.calls.clear()
    d = log.fetch_offset_by_timestamp(NOW + 2005)
    assert not d.called and len(pool.queue) == 1
    pool.run_one()
    found = _result(d)
    assert (found.offset, found.timestamp, found.leader_epoch) == (5, NOW + 2010, 0)
    d = log.fetch_offset_by_timestamp(NOW + 10_000)
    pool.run_one()
    assert _result(d) is None
    d = log.fetch_offset_of_max_timestamp()
    assert not d.called
    pool.run_one()
    assert pool.calls == ["fetch_offset_by_timestamp", "fetch_offset_by_timestamp",
                          "fetch_offset_of_max_timestamp"]
    found = _result(d)
    assert (found.offset, found.timestamp) == (11, NOW + 5010)


def test_a_roll_flushes_the_finished_segment_in_the_background(tmp_path):
    log, pool = _unified(tmp_path, segment_bytes=300)
    while len(log.local_log.segments) < 2:
        _result(log.append_as_leader(batch(2), 0))        # never waits for the fsync
    assert len(pool.queue) == 1 and log.recovery_point == 0
    pool.run_one()
    assert log.recovery_point == log.local_log.segments[1].base_offset


def test_flush_and_when_idle(tmp_path):
    log, pool = _unified(tmp_path)
    log.inline_write_max_bytes = 0
    log.append_as_leader(batch(3), 0)
    idle = log.when_idle()
    assert not idle.called                             # the write is in the pool
    pool.run_one()
    assert idle.called
    flushed = log.flush()
    idle = log.when_idle()
    assert not flushed.called and not idle.called
    pool.run_one()
    assert _result(flushed) == 3 and idle.called and log.recovery_point == 3
    assert _result(log.flush()) == 3 and not pool.queue   # already durable: no fsync


def test_what_callers_read_is_the_local_logs_state(tmp_path):
    log, _ = _unified(tmp_path, retention_ms=1234)
    local = log.local_log
    _result(log.append_as_leader(batch(4), 3))
    assert (log.topic, log.partition, log.dir, log.topic_id) == ("t", 0, local.dir, None)
    assert log.config is local.config and log.config.retention_ms == 1234
    assert log.epoch_cache is local.epoch_cache and log.latest_epoch == 3
    assert log.end_offset_for_epoch(3) == (3, 4)
    assert log.delete_records_before(2) == 2 == log.log_start_offset
    with pytest.raises(KafkaError) as e:
        log.delete_records_before(5)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.size == local.size and log.unflushed_messages == 4 and not log.deleted
    log.update_config(local.config.with_changes(retention_ms=99))
    assert local.config.retention_ms == 99


class RealThreadPoolTests(unittest.TestCase):
    """The same paths with real threads: reads that overlap pool writes never see
    an append before it is complete, and acks keep offset order."""

    def setUp(self):
        self.pool = ThreadPool(minthreads=1, maxthreads=4, name="unified-log-test")
        self.pool.start()
        self.addCleanup(self.pool.stop)
        self.dir = tempfile.mkdtemp(prefix="unified-log-")
        self.addCleanup(shutil.rmtree, self.dir, True)

    @defer.inlineCallbacks
    def test_reads_during_pool_writes_see_only_committed_prefixes(self):
        log = UnifiedLog(new_log(self.dir, flush_interval_messages=50, segment_bytes=40_000),
                         reactor=reactor, threadpool=self.pool)
        log.inline_write_max_bytes = 2048
        acked, reads, appends = [], [], []
        expected = 0
        for i in range(40):
            n = 30 if i % 3 == 0 else 1            # ~3 KiB (pool) or one small record (inline)
            d = log.append_as_leader(batch(n, value_size=100), 0)
            d.addCallback(lambda info: acked.append((info.first_offset, info.last_offset)))
            appends.append(d)
            expected += n
            committed = log.committed_end_offset
            r = log.read(0, 1 << 24)
            r.addCallback(lambda info, c=committed: reads.append((c, _offsets(info))))
            appends.append(r)
        yield defer.gatherResults(appends)
        self.assertEqual([first for first, _ in acked], sorted(first for first, _ in acked))
        self.assertEqual(acked[-1][1], expected - 1)
        for committed, offsets in reads:
            self.assertEqual(offsets, list(range(len(offsets))))       # a prefix, no gaps
            self.assertGreaterEqual(len(offsets), committed)            # nothing committed lost
        info = yield log.read(0, 1 << 24)
        self.assertEqual(_offsets(info), list(range(expected)))
        yield log.when_idle()
        log.local_log.close()

"""The ``PartitionLog`` interface as the file log answers it: the high watermark's moves,
read isolation, epochs and producer state in partition terms, and what a log without
transactions says of its last stable offset and aborted transactions."""

from __future__ import annotations

from support.inline import InlineReactor, ManualThreadPool
from twisted_kafka.log import FetchIsolation, PartitionLog
from twisted_kafka.log.unified_log import UnifiedLog

from .helpers import NOW, batch, new_log, records_of


def _log(tmp_path) -> UnifiedLog:
    clock = InlineReactor()
    clock.advance(NOW / 1000)
    return UnifiedLog(new_log(tmp_path), reactor=clock, threadpool=ManualThreadPool())


def _result(d):
    assert d.called, "Deferred has not fired"
    results: list = []
    d.addBoth(results.append)
    return results[0]


def _offsets(d) -> list[int]:
    return [o for o, _ in records_of(_result(d))]


def test_the_file_log_is_a_partition_log(tmp_path):
    log = _log(tmp_path)
    assert isinstance(log, PartitionLog)
    assert not PartitionLog.__abstractmethods__ - set(vars(UnifiedLog))


def test_with_followers_only_the_leader_moves_the_high_watermark_and_only_forward(tmp_path):
    log = _log(tmp_path)
    log.high_watermark_follows_log_end(False)
    _result(log.append_as_leader(batch(5), 0))
    assert log.high_watermark == 0 and log.committed_end_offset == 5
    assert log.maybe_increment_high_watermark(3) is True and log.high_watermark == 3
    assert log.maybe_increment_high_watermark(2) is False and log.high_watermark == 3
    assert log.maybe_increment_high_watermark(3) is False
    assert log.maybe_increment_high_watermark(99) is True and log.high_watermark == 5   # not past what it has
    assert log.update_high_watermark(1) == 1 == log.high_watermark                       # a set may go back
    assert log.update_high_watermark(99) == 5
    log.high_watermark_follows_log_end(True)
    _result(log.append_as_leader(batch(2), 0))
    assert log.high_watermark == 7


def test_following_the_log_end_moves_the_high_watermark_there_at_once(tmp_path):
    log = _log(tmp_path)
    log.high_watermark_follows_log_end(False)
    _result(log.append_as_leader(batch(4), 0))
    assert log.high_watermark == 0
    log.high_watermark_follows_log_end(True)
    assert log.high_watermark == 4


def test_a_log_without_transactions_is_stable_up_to_its_high_watermark(tmp_path):
    log = _log(tmp_path)
    log.high_watermark_follows_log_end(False)
    _result(log.append_as_leader(batch(6), 0))
    log.maybe_increment_high_watermark(4)
    assert log.last_stable_offset == log.high_watermark == 4
    assert log.aborted_transactions(0, 6) == []


def test_reads_stop_at_the_bound_of_their_isolation(tmp_path):
    log = _log(tmp_path)
    log.high_watermark_follows_log_end(False)
    for _ in range(6):
        _result(log.append_as_leader(batch(1), 0))
    log.maybe_increment_high_watermark(4)
    assert _offsets(log.read(0, 1 << 20, isolation=FetchIsolation.LOG_END)) == list(range(6))
    assert _offsets(log.read(0, 1 << 20, isolation=FetchIsolation.HIGH_WATERMARK)) == list(range(4))
    assert _offsets(log.read(0, 1 << 20, isolation=FetchIsolation.TXN_COMMITTED)) == list(range(4))
    assert _offsets(log.read(0, 1 << 20, isolation=FetchIsolation.HIGH_WATERMARK, max_offset=2)) == [0, 1]
    assert _offsets(log.read(0, 1 << 20, max_offset=5)) == list(range(5))


def test_a_fetch_isolation_follows_who_fetches():
    assert FetchIsolation.of(follower=True, read_committed=True) is FetchIsolation.LOG_END
    assert FetchIsolation.of(follower=False, read_committed=False) is FetchIsolation.HIGH_WATERMARK
    assert FetchIsolation.of(follower=False, read_committed=True) is FetchIsolation.TXN_COMMITTED


def test_epochs_in_partition_terms(tmp_path):
    log = _log(tmp_path)
    assert log.latest_epoch == -1 and log.epoch_entries() == []
    assert log.assign_epoch_start_offset(3, 0) is True
    assert log.assign_epoch_start_offset(3, 0) is False
    _result(log.append_as_leader(batch(2), 3))
    assert log.assign_epoch_start_offset(5, log.log_end_offset) is True
    _result(log.append_as_leader(batch(1), 5))
    assert log.epoch_entries() == [(3, 0), (5, 2)]
    assert log.latest_epoch == 5
    assert (log.epoch_for_offset(1), log.epoch_for_offset(2)) == (3, 5)
    assert log.end_offset_for_epoch(3) == (3, 2)


def test_producer_state_in_partition_terms(tmp_path):
    log = _log(tmp_path)
    _result(log.append_as_leader(batch(2, producer_id=7, producer_epoch=1, base_sequence=0), 0))
    entry = log.producer_state_entry(7)
    assert entry is not None and (entry.producer_epoch, entry.last_seq) == (1, 1)
    assert log.producer_state_entry(8) is None
    assert log.remove_expired_producers(NOW) == 0
    assert log.remove_expired_producers(NOW + log.local_log.producer_state.config.producer_id_expiration_ms) == 1
    assert log.producer_state_entry(7) is None

"""Retention by time and size, log-start breaches and DeleteRecords."""

from __future__ import annotations

import os

import pytest

from twisted_kafka.log.retention import delete_old_segments
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .helpers import NOW, batch, new_log, records_of

HOUR = 3_600_000


def _segments_with_ages(tmp_path, ages_hours, **changes):
    """One segment per entry (timestamps NOW - age), plus an active one."""
    log = new_log(tmp_path, **changes)
    for age in ages_hours:
        log.append_as_leader(batch(2, ts=NOW - age * HOUR), 0, NOW)
        log.roll(NOW)
    return log


def test_retention_by_time_deletes_whole_expired_segments_only(tmp_path):
    log = _segments_with_ages(tmp_path, [50, 40, 30, 5], retention_ms=24 * HOUR)
    log.append_as_leader(batch(2, ts=NOW - 100 * HOUR), 0, NOW)   # old data in the active segment
    files_before = set(os.listdir(log.dir))
    assert delete_old_segments(log, NOW) == 3
    assert [s.base_offset for s in log.segments] == [6, 8]
    assert log.log_start_offset == 6
    assert [o for o, _ in records_of(log.read(6, 1 << 20))] == [6, 7, 8, 9]
    gone = files_before - set(os.listdir(log.dir))
    assert {"00000000000000000000.log", "00000000000000000002.index",
            "00000000000000000004.timeindex"} <= gone
    # The active segment is never deleted, however old its records.
    assert delete_old_segments(log, NOW + 1000 * HOUR) == 1
    assert [s.base_offset for s in log.segments] == [8]


def test_retention_by_time_stops_at_the_first_young_segment(tmp_path):
    log = _segments_with_ages(tmp_path, [50, 1, 50], retention_ms=24 * HOUR)
    assert delete_old_segments(log, NOW) == 1
    assert [s.base_offset for s in log.segments] == [2, 4, 6]


def test_unlimited_retention_and_compact_policy_keep_everything(tmp_path):
    log = _segments_with_ages(tmp_path, [500, 400], retention_ms=-1)
    assert delete_old_segments(log, NOW) == 0
    log = _segments_with_ages(tmp_path / "c", [500, 400], retention_ms=HOUR,
                              cleanup_policy=("compact",))
    assert delete_old_segments(log, NOW) == 0


def test_retention_by_size_deletes_oldest_segments_while_over_the_limit(tmp_path):
    log = new_log(tmp_path)
    for _ in range(5):
        log.append_as_leader(batch(3, value_size=100), 0, NOW)
        log.roll(NOW)
    seg_size = log.segments[0].size       # five equal segments + an empty active one
    # Kafka's rule: drop a segment only if the log stays at or above the limit
    # without it, so the log may stay up to one segment over the limit.
    log.config = log.config.with_changes(retention_bytes=2 * seg_size + 10)
    assert delete_old_segments(log, NOW) == 2
    assert log.size == 3 * seg_size
    log.config = log.config.with_changes(retention_bytes=2 * seg_size)
    assert delete_old_segments(log, NOW) == 1
    assert log.size == 2 * seg_size
    assert log.log_start_offset == 9


def test_retention_never_deletes_above_the_high_watermark(tmp_path):
    log = _segments_with_ages(tmp_path, [50, 40, 30], retention_ms=HOUR)
    log.hw_follows_leo = False
    log.high_watermark = 3
    assert delete_old_segments(log, NOW) == 1           # only segment 0 (next base 2 <= 3)
    assert log.log_start_offset == 2


def test_delete_records_before_moves_log_start_and_drops_whole_segments(tmp_path):
    log = new_log(tmp_path, segment_bytes=400)
    for _ in range(12):
        log.append_as_leader(batch(2), 0, NOW)
    bases = [s.base_offset for s in log.segments]
    target = bases[2] + 1
    assert log.delete_records_before(target) == target
    assert log.log_start_offset == target
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert log.read(target, 1 << 20).first_offset <= target
    with pytest.raises(KafkaError):
        log.read(target - 1, 100)
    assert log.delete_records_before(1) == target         # never backwards
    with pytest.raises(KafkaError) as e:
        log.delete_records_before(log.high_watermark + 1)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.delete_records_before(-1) == log.high_watermark   # -1: up to the high watermark
    assert [s.base_offset for s in log.segments] == [bases[-1]]


def test_delete_records_survives_a_restart_via_the_checkpointed_start(tmp_path):
    from .helpers import reopen

    log = new_log(tmp_path)
    log.append_as_leader(batch(5), 0, NOW)
    log.delete_records_before(3)
    log.flush()
    log = reopen(log, clean=True)
    assert log.log_start_offset == 3
    with pytest.raises(KafkaError):
        log.read(2, 100)

"""Cleaning real segment files: selection, the rewrite, groups, several passes, reloading."""

from __future__ import annotations

import os

import pytest

from twisted_kafka.log.cleaner import CleanTask, OffsetMap, log_to_clean
from twisted_kafka.log.cleaner.offset_map import ENTRY_BYTES
from twisted_kafka.log.segment import DamagedRange
from twisted_kafka.protocol.records.compression import CompressionType

from .helpers import (
    NOW,
    all_headers,
    all_records,
    append_keyed,
    clean_now,
    compacted_log,
    keyed_batch,
    latest_by_key,
    reopen,
)


def _updates(log, n: int, keys: int, per_batch: int = 50, *, ts=NOW, **kwargs) -> dict:
    """``n`` updates cycling over ``keys`` keys; returns {key: (offset, value)} of the last ones."""
    expected = {}
    for start in range(0, n, per_batch):
        pairs = [(b"key-%d" % (i % keys), b"value-%d" % i) for i in range(start, min(n, start + per_batch))]
        info = append_keyed(log, pairs, ts=ts, **kwargs)
        for i, (k, v) in enumerate(pairs):
            expected[k] = (info.first_offset + i, v)
    return expected


def test_100k_updates_over_1k_keys_read_back_to_the_last_value_per_key(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=64 * 1024)
    expected = _updates(log, 100_000, 1000)
    end, active = log.log_end_offset, log.active_segment.base_offset
    before = log.size
    task = clean_now(log)
    assert task.end_offset == active
    records = all_records(log)
    assert latest_by_key(records) == expected          # same offsets, same values
    cleaned = [r for r in records if r.offset < active]
    assert len({r.key for r in cleaned}) == len(cleaned)   # one record per key below the active segment
    assert log.log_end_offset == end and log.size < before / 10
    assert [r.offset for r in records] == sorted(r.offset for r in records)
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]


def test_cleaning_again_merges_small_segments_and_changes_nothing_else(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=16 * 1024)
    expected = _updates(log, 20_000, 300)
    first = clean_now(log)
    segments = len(log.segments)
    append_keyed(log, [(b"key-1", b"new")])       # a little more dirt
    log.roll()
    again = clean_now(log, checkpoint=first.end_offset)
    assert len(log.segments) < segments
    expected[b"key-1"] = (log.log_end_offset - 1, b"new")
    records = all_records(log)
    assert latest_by_key(records) == expected
    assert len(records) == 300                    # the active segment's duplicates are cleaned now
    assert again.stats.filter.records_read > again.stats.map_records_read


@pytest.mark.parametrize("codec", [c for c in CompressionType if c])
def test_compressed_batches_are_recompressed_with_their_codec(tmp_path, codec):
    log = compacted_log(tmp_path, segment_bytes=8 * 1024)
    expected = _updates(log, 3000, 40, per_batch=25, compression=codec)
    clean_now(log)
    assert latest_by_key(all_records(log)) == expected
    assert {h.compression for h in all_headers(log) if h.records_count} == {codec}


def test_a_small_map_cleans_in_several_passes(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=16 * 1024)
    expected = _updates(log, 12_000, 2000, per_batch=20)
    checkpoint = None
    ends = []
    while True:
        target = log_to_clean(log, checkpoint, NOW)
        if target.cleanable_bytes == 0:
            break
        task = clean_now(log, checkpoint=checkpoint, memory=ENTRY_BYTES * 600)
        assert task.map.capacity < 600
        checkpoint = task.end_offset
        ends.append(checkpoint)
    assert len(ends) > 3 and ends == sorted(ends)
    assert latest_by_key(all_records(log)) == expected


def test_selection_dirty_ratio_lags_and_bounds(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=4096)
    _updates(log, 2000, 100, per_batch=10)
    active = log.active_segment.base_offset
    target = log_to_clean(log, None, NOW)
    assert (target.first_dirty_offset, target.first_uncleanable_offset) == (0, active)
    assert target.cleanable_ratio == 1.0 and target.needs_cleaning
    # min.compaction.lag.ms: segments with records younger than the lag are not cleanable.
    log.update_config(log.config.with_changes(min_compaction_lag_ms=60_000))
    young = log_to_clean(log, None, NOW + 30_000)
    assert young.first_uncleanable_offset == 0 and young.cleanable_bytes == 0
    assert log_to_clean(log, None, NOW + 61_000).first_uncleanable_offset == active
    log.update_config(log.config.with_changes(min_compaction_lag_ms=0))
    task = clean_now(log)
    after = log_to_clean(log, task.end_offset, NOW)
    assert after.first_dirty_offset == active and after.cleanable_bytes == 0 and not after.needs_cleaning
    # Checkpoint beyond the log end: reset to the log start.
    reset = log_to_clean(log, log.log_end_offset + 5, NOW)
    assert reset.checkpoint_reset and reset.first_dirty_offset == 0


def test_selection_max_compaction_lag_forces_a_cleaning(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=4096, min_cleanable_dirty_ratio=0.99)
    _updates(log, 2000, 100, per_batch=10)
    task = clean_now(log)
    append_keyed(log, [(b"key-1", b"x")] * 10)
    log.roll()
    target = log_to_clean(log, task.end_offset, NOW + 1000)
    assert not target.needs_cleaning               # ratio below 0.99
    log.update_config(log.config.with_changes(max_compaction_lag_ms=500))
    overdue = log_to_clean(log, task.end_offset, NOW + 1000)
    assert overdue.compaction_delay_ms == 500 and overdue.needs_cleaning


def test_max_compaction_lag_rolls_the_active_segment(tmp_path):
    log = compacted_log(tmp_path, max_compaction_lag_ms=1000)
    append_keyed(log, [(b"a", b"1")], ts=NOW)
    append_keyed(log, [(b"a", b"2")], ts=NOW + 1001)
    assert len(log.segments) == 2


def test_selection_stops_at_the_high_watermark_and_damaged_segments(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=4096)
    _updates(log, 2000, 100, per_batch=10)
    segments = log.segments
    log.hw_follows_leo = False
    log.high_watermark = segments[3].base_offset + 1
    assert log_to_clean(log, None, NOW).first_uncleanable_offset == segments[3].base_offset
    log.high_watermark = log.log_end_offset
    segments[5].damaged = [DamagedRange(0, 100, segments[5].base_offset, segments[5].base_offset + 2)]
    assert log_to_clean(log, None, NOW).first_uncleanable_offset == segments[5].base_offset


def test_damaged_segments_are_left_alone(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=4096)
    _updates(log, 2000, 100, per_batch=10)
    clean_now(log)
    victim = log.segments[1]
    victim.damaged = [DamagedRange(0, 10, victim.base_offset, victim.base_offset)]
    _updates(log, 500, 100, per_batch=10)
    log.roll()
    clean_now(log, checkpoint=log.segments[2].base_offset)
    assert victim in log.segments


def test_the_last_batch_of_each_producer_survives(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=4096)
    append_keyed(log, [(b"a", b"1"), (b"b", b"1")], producer_id=7, producer_epoch=1, base_sequence=0)
    append_keyed(log, [(b"a", b"2"), (b"b", b"2")], producer_id=7, producer_epoch=1, base_sequence=2)
    append_keyed(log, [(b"a", b"1")], producer_id=8, producer_epoch=0, base_sequence=0)
    append_keyed(log, [(b"a", b"3"), (b"b", b"3")])        # no producer id: supersedes all of the above
    log.roll()
    clean_now(log)
    kept = [(h.producer_id, h.base_offset, h.last_offset, h.base_sequence, h.records_count)
            for h in all_headers(log)]
    assert kept == [(7, 2, 3, 2, 0), (8, 4, 4, 0, 0), (-1, 5, 6, -1, 2)]


def test_cleaned_log_reloads_the_same_after_a_clean_or_unclean_shutdown(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=16 * 1024)
    expected = _updates(log, 10_000, 200)
    clean_now(log)
    records = [(r.offset, r.key, r.value) for r in all_records(log)]
    log.flush()
    reopened = reopen(log, clean=True, cleanup_policy=("compact",))
    assert [(r.offset, r.key, r.value) for r in all_records(reopened)] == records
    recovered = reopen(reopened, clean=False, cleanup_policy=("compact",))
    assert [(r.offset, r.key, r.value) for r in all_records(recovered)] == records
    assert latest_by_key(all_records(recovered)) == expected


def test_timestamps_and_indexes_of_cleaned_segments(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=16 * 1024, index_interval_bytes=256)
    for i in range(200):
        append_keyed(log, [(b"k%d" % (i % 20), b"v%d" % i)], ts=NOW + i * 10)
    log.roll()
    clean_now(log)
    found = log.fetch_offset_by_timestamp(NOW + 1805)
    assert found is not None and found.offset == 181 and found.timestamp == NOW + 1810
    assert log.fetch_offset_of_max_timestamp().offset == 199
    assert len(log.segments[0].offset_index) > 0


def test_nothing_dirty_means_nothing_to_do(tmp_path):
    log = compacted_log(tmp_path)
    append_keyed(log, [(b"a", b"1")])
    target = log_to_clean(log, None, NOW)
    task = CleanTask(log, target.first_dirty_offset, target.first_uncleanable_offset, OffsetMap(1 << 20),
                     now_ms=NOW)
    assert task.map_done and task.plan() == []


def test_producer_state_and_snapshots_after_cleaning(tmp_path):
    """The cleaner keeps each producer's last batch header, so the producer state rebuilt from a
    cleaned log after a crash is the same; the snapshots named after replaced segments go with
    them (Kafka's ``UnifiedLog.replaceSegments``)."""
    from twisted_kafka.log.layout import PRODUCER_SNAPSHOT_SUFFIX

    log = compacted_log(tmp_path, segment_bytes=300)
    for i in range(30):
        log.append_as_leader(keyed_batch([(b"k%d" % (i % 3), b"v%d" % i)], producer_id=7, producer_epoch=2,
                                         base_sequence=i), 0, NOW)
    log.append_as_leader(keyed_batch([(b"k%d" % i, b"last") for i in range(3)]), 0, NOW)   # supersedes them all
    log.roll()
    log.flush()
    before = log.producer_state.entry(7)
    assert before is not None and before.last_seq == 29
    snapshots = lambda: sorted(n for n in os.listdir(log.dir) if n.endswith(PRODUCER_SNAPSHOT_SUFFIX))  # noqa: E731
    assert len(snapshots()) > 2
    clean_now(log)
    segments = len(log.segments)
    clean_now(log)                                  # the small cleaned segments are merged
    assert len(log.segments) < segments
    bases = {s.base_offset for s in log.segments}
    assert all(int(name[:20]) in bases for name in snapshots())
    kept = [h for h in all_headers(log) if h.producer_id == 7]
    assert [(h.records_count, h.producer_epoch, h.base_sequence, h.last_offset) for h in kept] == \
        [(0, 2, 29, 29)]
    log = reopen(log)                               # as after a crash: rebuilt from snapshots and batches
    after = log.producer_state.entry(7)
    assert after is not None and (after.producer_epoch, after.last_seq, after.last_data_offset) == (2, 29, 29)

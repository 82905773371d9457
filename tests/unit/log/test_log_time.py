"""Time index, ListOffsets by timestamp, and rolling segments by time."""

from __future__ import annotations

from twisted_kafka.log.index import TimeIndex

from .helpers import NOW, batch, new_log, reopen


def test_time_index_lookup_finds_largest_entry_at_or_before(tmp_path):
    index = TimeIndex.create(str(tmp_path / "0.timeindex"), 100, 1200)
    assert index.maybe_append(NOW, 100)
    assert not index.maybe_append(NOW, 105)          # not larger: skipped
    assert index.maybe_append(NOW + 10, 110)
    assert index.maybe_append(NOW + 20, 130)
    assert index.lookup(NOW - 1) == (-1, 100)
    assert index.lookup(NOW + 15) == (NOW + 10, 110)
    assert index.lookup(NOW + 99) == (NOW + 20, 130)
    index.truncate_to_offset(120)
    assert index.last_entry == (NOW + 10, 110)
    index.write_pending()                              # entries reach the file on flush/close
    again = TimeIndex.open(index.path, 100, 1200, 1000, full_check=True)
    assert again.lookup(NOW + 99) == (NOW + 10, 110)


def test_fetch_offset_by_timestamp_goes_to_the_first_record_at_or_after(tmp_path):
    log = new_log(tmp_path, index_interval_bytes=100, segment_bytes=2000)
    # 30 batches of 4 records, timestamps NOW + 10*offset.
    for i in range(30):
        log.append_as_leader(batch(4, ts=NOW + 40 * i, step=10), 0, NOW)
    assert len(log.segments) > 2
    for offset in (0, 1, 5, 37, 118, 119):
        found = log.fetch_offset_by_timestamp(NOW + 10 * offset)
        assert (found.offset, found.timestamp) == (offset, NOW + 10 * offset)
        found = log.fetch_offset_by_timestamp(NOW + 10 * offset - 3)
        assert found.offset == offset
    assert log.fetch_offset_by_timestamp(NOW + 10 * 120) is None
    assert log.fetch_offset_by_timestamp(0).offset == 0


def test_fetch_offset_by_timestamp_with_out_of_order_timestamps(tmp_path):
    log = new_log(tmp_path, index_interval_bytes=0)
    log.append_as_leader(batch(2, ts=NOW + 100), 3, NOW)      # offsets 0-1 @ +100
    log.append_as_leader(batch(2, ts=NOW + 50), 4, NOW)       # offsets 2-3 @ +50
    log.append_as_leader(batch(2, ts=NOW + 200), 4, NOW)      # offsets 4-5 @ +200
    assert log.fetch_offset_by_timestamp(NOW + 60) == (0, NOW + 100, 3)
    assert log.fetch_offset_by_timestamp(NOW + 150) == (4, NOW + 200, 4)
    assert log.fetch_offset_of_max_timestamp() == (4, NOW + 200, 4)


def test_fetch_offset_by_timestamp_respects_log_start(tmp_path):
    log = new_log(tmp_path)
    log.append_as_leader(batch(5, ts=NOW, step=1), 0, NOW)
    log.delete_records_before(3)
    assert log.fetch_offset_by_timestamp(NOW).offset == 3


def test_timestamp_lookup_after_a_clean_restart_uses_the_time_index(tmp_path):
    log = new_log(tmp_path, index_interval_bytes=50, segment_bytes=700)
    for i in range(20):
        log.append_as_leader(batch(2, ts=NOW + i * 1000, step=1), 0, NOW)
    log.flush()
    maxima = [s.max_timestamp for s in log.segments]
    log = reopen(log, clean=True, index_interval_bytes=50, segment_bytes=700)
    assert [s.max_timestamp for s in log.segments] == maxima
    assert log.fetch_offset_by_timestamp(NOW + 7000).offset == 14
    assert log.fetch_offset_of_max_timestamp().offset == 39


def test_roll_by_time_uses_record_timestamps(tmp_path):
    log = new_log(tmp_path, segment_ms=60_000)
    log.append_as_leader(batch(1, ts=NOW), 0, NOW)
    log.append_as_leader(batch(1, ts=NOW + 59_000), 0, NOW + 59_000)
    assert len(log.segments) == 1
    log.append_as_leader(batch(1, ts=NOW + 61_000), 0, NOW + 61_000)
    assert [s.base_offset for s in log.segments] == [0, 2]
    # The finished segment got its final time-index entry.
    assert log.segments[0].time_index.last_entry == (NOW + 59_000, 1)


def test_roll_by_time_without_timestamps_uses_segment_age(tmp_path):
    log = new_log(tmp_path, segment_ms=60_000)          # created at NOW
    log.append_as_leader(batch(1, ts=-1), 0, NOW + 1000)
    log.append_as_leader(batch(1, ts=-1), 0, NOW + 59_000)
    assert len(log.segments) == 1
    log.append_as_leader(batch(1, ts=-1), 0, NOW + 60_001)
    assert len(log.segments) == 2


def test_empty_segment_never_rolls_by_time(tmp_path):
    log = new_log(tmp_path, segment_ms=1)
    log.append_as_leader(batch(1, ts=NOW + 10_000), 0, NOW + 10_000)
    assert len(log.segments) == 1


def test_full_index_rolls_the_segment(tmp_path):
    log = new_log(tmp_path, index_interval_bytes=0, max_index_size=8 * 4)
    for _ in range(12):
        log.append_as_leader(batch(1), 0, NOW)
    assert len(log.segments) >= 2
    assert all(len(s.offset_index) <= 4 for s in log.segments)

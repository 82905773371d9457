"""Appends and reads: offsets, segment rolls, index lookups, max_bytes, validation."""

from __future__ import annotations

import struct
from itertools import pairwise
from pathlib import Path

import pytest

from twisted_kafka.log.layout import segment_file_name
from twisted_kafka.log.log import AppendOrigin
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.records.batch import iter_batch_headers, parse_batch_header, verify_crc
from twisted_kafka.protocol.records.builder import build_batch

from .helpers import NOW, batch, first_header, headers_of, new_log, records_of


def test_append_assigns_offsets_and_epoch_in_the_stored_batch(tmp_path):
    log = new_log(tmp_path)
    first = log.append_as_leader(batch(3), leader_epoch=7, now_ms=NOW)
    second = log.append_as_leader(batch(2), leader_epoch=7, now_ms=NOW)
    assert (first.first_offset, first.last_offset, first.num_records) == (0, 2, 3)
    assert (second.first_offset, second.last_offset) == (3, 4)
    assert first.log_append_time == -1 and first.log_start_offset == 0
    assert log.log_end_offset == log.high_watermark == 5
    stored = Path(log.dir, segment_file_name(0, ".log")).read_bytes()
    headers = [(pos, h) for pos, h in iter_batch_headers(stored)]
    assert [(h.base_offset, h.partition_leader_epoch) for _, h in headers] == [(0, 7), (3, 7)]
    for pos, h in headers:
        verify_crc(stored, pos, h)      # offsets/epoch live outside the CRC


def test_records_are_stored_byte_for_byte_apart_from_offset_and_epoch(tmp_path):
    log = new_log(tmp_path)
    log.append_as_leader(batch(1), 0, NOW)
    original = batch(4, value_size=100)
    log.append_as_leader(original, 3, NOW)
    data = bytes(log.read(1, 10_000).records[0])
    assert data[16:] == original[16:] and data[8:12] == original[8:12]
    assert struct.unpack(">qi", data[:8] + data[12:16]) == (1, 3)


def test_offsets_continue_across_segment_rolls(tmp_path):
    log = new_log(tmp_path, segment_bytes=600)
    expected = []
    for i in range(20):
        info = log.append_as_leader(batch(3, prefix=b"b%d." % i), 0, NOW)
        assert info.first_offset == 3 * i
        expected += [(3 * i + j, None) for j in range(3)]
    assert len(log.segments) > 3
    bases = [s.base_offset for s in log.segments]
    assert bases == sorted(bases) and bases[0] == 0
    for prev, nxt in pairwise(log.segments):
        assert prev.next_offset == nxt.base_offset        # contiguous
        assert prev.size <= 600
    got = records_of(log.read(0, 1 << 20))
    assert [o for o, _ in got] == list(range(60))
    assert got[30][1].startswith(b"b10.0-")


def test_read_honours_max_bytes_with_whole_batches(tmp_path):
    log = new_log(tmp_path)
    size = len(batch(5, value_size=50))
    for _ in range(10):
        log.append_as_leader(batch(5, value_size=50), 0, NOW)
    info = log.read(0, 3 * size + size // 2)
    assert info.size == 3 * size
    assert [h.base_offset for h in headers_of(info)] == [0, 5, 10]
    assert info.first_offset == 0 and info.next_offset == 15


def test_read_returns_the_first_batch_even_if_larger_than_max_bytes(tmp_path):
    log = new_log(tmp_path)
    log.append_as_leader(batch(5, value_size=500), 0, NOW)
    log.append_as_leader(batch(1), 0, NOW)
    info = log.read(0, 10)
    assert [h.base_offset for h in headers_of(info)] == [0]
    assert info.size > 10
    assert log.read(0, 10, min_one_message=False).empty


def test_fetch_offset_inside_a_batch_returns_that_batch(tmp_path):
    log = new_log(tmp_path)
    log.append_as_leader(batch(10), 0, NOW)
    log.append_as_leader(batch(10), 0, NOW)
    info = log.read(13, 1 << 20)
    assert info.fetch_offset == 13 and info.first_offset == 10
    assert [o for o, _ in records_of(info)][0] == 10


def test_read_at_log_end_is_empty_and_outside_range_is_offset_out_of_range(tmp_path):
    log = new_log(tmp_path)
    log.append_as_leader(batch(3), 0, NOW)
    assert log.read(3, 100).empty
    with pytest.raises(KafkaError) as e:
        log.read(4, 100)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    log.append_as_leader(batch(3), 0, NOW)
    log.delete_records_before(2)
    with pytest.raises(KafkaError) as e:
        log.read(1, 100)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert log.read(2, 1000).first_offset == 0     # the batch holding offset 2


def test_read_stops_before_max_offset(tmp_path):
    log = new_log(tmp_path)
    for _ in range(4):
        log.append_as_leader(batch(2), 0, NOW)
    info = log.read(0, 1 << 20, max_offset=4)
    assert [h.base_offset for h in headers_of(info)] == [0, 2]
    assert log.read(4, 1 << 20, max_offset=4).empty


def test_read_spans_segments(tmp_path):
    log = new_log(tmp_path, segment_bytes=300)
    for _ in range(12):
        log.append_as_leader(batch(2), 0, NOW)
    assert len(log.segments) >= 4
    info = log.read(0, 1 << 20)
    assert len(info.records) == len(log.segments)
    assert [o for o, _ in records_of(info)] == list(range(24))


def test_sparse_offset_index_finds_every_batch(tmp_path):
    log = new_log(tmp_path, index_interval_bytes=200)
    positions = {}
    for i in range(50):
        pos = log.active_segment.size
        info = log.append_as_leader(batch(1 + i % 4, value_size=30), 0, NOW)
        positions[info.first_offset] = (pos, info.last_offset)
    segment = log.active_segment
    assert 5 < len(segment.offset_index) < 50          # sparse
    for base, (pos, last) in positions.items():
        for offset in range(base, last + 1):
            found = segment.find_batch(offset)
            assert found is not None and found[0] == pos and found[1].base_offset == base
    # Every entry points at a batch start and never past the target.
    for offset in range(log.log_end_offset):
        entry_offset, entry_pos = segment.offset_index.lookup(offset)
        assert entry_offset <= offset
        assert parse_batch_header(segment.read(entry_pos, 61)).base_offset == entry_offset


def test_corrupt_batch_is_rejected_with_corrupt_message(tmp_path):
    log = new_log(tmp_path)
    data = bytearray(batch(3))
    data[-1] ^= 0xFF
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(bytes(data), 0, NOW)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(batch(3)[:-5], 0, NOW)       # truncated
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    assert log.log_end_offset == 0 and log.active_segment.size == 0


def test_batch_over_max_message_bytes_is_message_too_large(tmp_path):
    log = new_log(tmp_path, max_message_bytes=200)
    log.append_as_leader(batch(1), 0, NOW)
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(batch(10, value_size=100), 0, NOW)
    assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE


def test_records_larger_than_a_segment_are_record_list_too_large(tmp_path):
    log = new_log(tmp_path, segment_bytes=300)
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(batch(1) + batch(10, value_size=50), 0, NOW)
    assert e.value.code == ErrorCode.RECORD_LIST_TOO_LARGE


def test_timestamps_outside_the_allowed_window_are_invalid_timestamp(tmp_path):
    log = new_log(tmp_path, message_timestamp_before_max_ms=1000,
                  message_timestamp_after_max_ms=1000)
    log.append_as_leader(batch(2, ts=NOW - 900), 0, NOW)
    for ts in (NOW - 5000, NOW + 5000):
        with pytest.raises(KafkaError) as e:
            log.append_as_leader(batch(2, ts=ts), 0, NOW)
        assert e.value.code == ErrorCode.INVALID_TIMESTAMP
    assert log.log_end_offset == 2


def test_control_batches_from_clients_are_invalid_record(tmp_path):
    log = new_log(tmp_path)
    control = build_batch([(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00")], control=True,
                          transactional=True, producer_id=5, producer_epoch=0)
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(control, 0, NOW)
    assert e.value.code == ErrorCode.INVALID_RECORD
    assert log.append_as_leader(control, 0, NOW, origin=AppendOrigin.COORDINATOR).first_offset == 0


def test_log_append_time_stamps_batches_and_keeps_them_valid(tmp_path):
    log = new_log(tmp_path, message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(batch(3, ts=1), 0, now_ms=NOW + 42)
    assert info.log_append_time == NOW + 42
    data = bytes(log.read(0, 10_000).records[0])
    header = first_header(data)
    assert header.timestamp_type == 1 and header.max_timestamp == NOW + 42
    verify_crc(data, 0, header)


def test_empty_records_append_nothing(tmp_path):
    log = new_log(tmp_path)
    info = log.append_as_leader(b"", 0, NOW)
    assert info.first_offset == -1 and info.num_records == 0 and log.log_end_offset == 0


def test_several_batches_in_one_append(tmp_path):
    log = new_log(tmp_path)
    info = log.append_as_leader(batch(2) + batch(3) + batch(1), 4, NOW)
    assert (info.first_offset, info.last_offset, info.num_batches, info.num_records) == (0, 5, 3, 6)
    assert [h.base_offset for h in headers_of(log.read(0, 10_000))] == [0, 2, 5]


def test_append_as_follower_keeps_offsets_and_epochs(tmp_path):
    log = new_log(tmp_path)
    leader_batches = build_batch([(b"k", b"v")] * 3, base_offset=0, partition_leader_epoch=2) + \
        build_batch([(b"k", b"v")] * 2, base_offset=3, partition_leader_epoch=5)
    info = log.append_as_follower(leader_batches, NOW)
    assert (info.first_offset, info.last_offset) == (0, 4)
    assert log.epoch_cache.entries == [(2, 0), (5, 3)]
    with pytest.raises(KafkaError) as e:
        log.append_as_follower(build_batch([(b"k", b"v")], base_offset=2), NOW)
    assert e.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_client_rules_of_the_produce_path(tmp_path):
    log = new_log(tmp_path)
    cases = [
        (dict(records=batch(2, base_offset=5)), ErrorCode.INVALID_RECORD),        # base offset
        (dict(records=batch(2, timestamp_type=1)), ErrorCode.INVALID_TIMESTAMP),  # LogAppendTime
        (dict(records=batch(1) + batch(1), produce_version=3), ErrorCode.INVALID_RECORD),
        (dict(records=b"", produce_version=9), ErrorCode.INVALID_RECORD),
    ]
    for kwargs, code in cases:
        with pytest.raises(KafkaError) as e:
            log.append_as_leader(leader_epoch=0, now_ms=NOW, **kwargs)
        assert e.value.code == code, kwargs
    assert log.log_end_offset == 0
    compressed = batch(50, value_size=100, compression=4)           # zstd
    assert log.append_as_leader(compressed, 0, NOW, produce_version=9).last_offset == 49
    assert [o for o, _ in records_of(log.read(0, 1 << 20))] == list(range(50))

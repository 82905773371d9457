"""The cleaner's batch filter and offset map: which records stay, and the batches that hold them."""

from __future__ import annotations

import pytest

from twisted_kafka.log.cleaner.offset_map import ENTRY_BYTES, OffsetMap, map_key
from twisted_kafka.log.cleaner.producers import ProducerLast
from twisted_kafka.log.cleaner.records import BatchFilter, empty_batch, record_spans
from twisted_kafka.protocol.records.batch import parse_batch_header, validate_batch
from twisted_kafka.protocol.records.builder import build_batch, control_record
from twisted_kafka.protocol.records.compression import CompressionType
from twisted_kafka.protocol.records.record import iter_records

NOW = 1_700_000_000_000


def _batch(pairs, base_offset=100, ts=NOW, **kwargs):
    return build_batch([(k, v, [("h", b"x")], ts + i) for i, (k, v) in enumerate(pairs)],
                       base_offset=base_offset, partition_leader_epoch=7, **kwargs)


def _filter(latest: dict[bytes, int], *, latest_offset=10_000, now=NOW, retention=1000, producers=None,
            round_end=1_000_000):
    offset_map = OffsetMap(1 << 20)
    for key, offset in latest.items():
        offset_map.put(key, offset)
    offset_map.latest_offset = latest_offset
    return BatchFilter(offset_map, now_ms=now, delete_retention_ms=retention,
                       producers=producers or {}, round_end_offset=round_end)


def _run(f, batch):
    out = f.filter(batch, 0, parse_batch_header(batch))
    if out is None:
        return None, []
    out = bytes(out)
    header = parse_batch_header(out)
    validate_batch(out, 0, header)             # size, CRC, codec, counts: a valid stored batch
    return header, list(iter_records(out, 0, header))


def test_offset_map_keys_and_capacity():
    assert map_key(b"short") == b"short"
    long_key = b"k" * 40
    assert len(map_key(long_key)) == 16 and map_key(long_key) != map_key(b"k" * 41)
    m = OffsetMap(ENTRY_BYTES * 10, load_factor=0.5)
    assert m.capacity == 5
    m.put(b"a", 1)
    m.put(b"a", 7)
    m.put(long_key, 9)
    assert (m.get(b"a"), m.get(long_key), m.get(b"zz"), len(m)) == (7, 9, -1, 2)
    assert m.has_room_for(3) and not m.has_room_for(4)
    m.clear()
    assert len(m) == 0 and m.latest_offset == -1


def test_record_spans_read_what_the_cleaner_needs():
    batch = _batch([(b"a", b"1"), (None, b"2"), (b"c", None)])
    header = parse_batch_header(batch)
    spans = record_spans(batch, 61, header.size, 3)
    assert [(s.offset_delta, s.key, s.tombstone) for s in spans] == [(0, b"a", False), (1, None, False),
                                                                    (2, b"c", True)]
    assert [s.timestamp_delta for s in spans] == [0, 1, 2]


def test_batch_whose_records_all_stay_is_copied_byte_for_byte():
    batch = _batch([(b"a", b"1"), (b"b", b"2")])
    f = _filter({b"a": 100, b"b": 101})
    out = f.filter(batch, 0, parse_batch_header(batch))
    assert bytes(out) == batch
    assert f.stats.records_kept == 2 and f.stats.batches_rebuilt == 0


@pytest.mark.parametrize("codec", list(CompressionType))
def test_partly_obsolete_batch_is_rebuilt_keeping_offsets_codec_and_producer_fields(codec):
    batch = _batch([(b"a", b"1"), (b"b", b"2"), (b"a", b"3"), (b"c", b"4")], compression=codec,
                   producer_id=42, producer_epoch=3, base_sequence=17)
    original = parse_batch_header(batch)
    f = _filter({b"a": 102, b"b": 500, b"c": 103})
    header, records = _run(f, batch)
    assert [(r.offset, r.key, r.value) for r in records] == [(102, b"a", b"3"), (103, b"c", b"4")]
    assert [r.timestamp for r in records] == [NOW + 2, NOW + 3]
    assert all(r.headers == [("h", b"x")] for r in records)
    assert (header.base_offset, header.last_offset_delta, header.records_count) == (100, 3, 2)
    assert header.compression == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 17)
    assert header.partition_leader_epoch == 7 and header.base_timestamp == original.base_timestamp
    assert header.max_timestamp == NOW + 3 and not header.has_delete_horizon


def test_records_past_the_map_stay_and_keyless_records_go():
    batch = _batch([(b"a", b"1"), (None, b"2"), (b"a", b"3")], base_offset=100)
    f = _filter({b"a": 500}, latest_offset=101)
    header, records = _run(f, batch)
    assert [(r.offset, r.value) for r in records] == [(102, b"3")]
    assert f.stats.keyless_dropped == 1


def test_tombstone_gets_a_delete_horizon_and_keeps_its_timestamp():
    batch = _batch([(b"a", b"1"), (b"b", None)], ts=NOW - 5000)
    f = _filter({b"a": 500, b"b": 101}, now=NOW, retention=1000)
    header, records = _run(f, batch)
    assert header.has_delete_horizon and header.base_timestamp == NOW + 1000
    assert [(r.offset, r.key, r.value, r.timestamp) for r in records] == [(101, b"b", None, NOW - 4999)]
    assert header.max_timestamp == NOW - 4999
    # A later cleaning before the horizon keeps it as it is...
    again = bytes(f.filter(batch, 0, parse_batch_header(batch)))
    f2 = _filter({b"b": 101}, now=NOW + 999)
    assert bytes(f2.filter(again, 0, parse_batch_header(again))) == again
    # ... and one at the horizon removes it (and the batch with it).
    f3 = _filter({b"b": 101}, now=NOW + 1000)
    assert f3.filter(again, 0, parse_batch_header(again)) is None
    assert f3.stats.tombstones_dropped == 1


def test_obsolete_tombstone_goes_at_once():
    batch = _batch([(b"a", None)])
    assert _filter({b"a": 200}).filter(batch, 0, parse_batch_header(batch)) is None


def test_last_batch_of_a_producer_stays_empty():
    batch = _batch([(b"a", b"1"), (b"b", b"2")], producer_id=9, producer_epoch=2, base_sequence=40)
    f = _filter({b"a": 500, b"b": 500}, producers={9: ProducerLast(101, 2, 2)})
    header, records = _run(f, batch)
    assert records == []
    assert (header.base_offset, header.last_offset, header.records_count) == (100, 101, 0)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 2, 40)
    assert header.size == 61 and header.compression == CompressionType.NONE
    # Not the producer's last batch: it goes.
    assert _filter({b"a": 500, b"b": 500}, producers={9: ProducerLast(900, 2, 2)}).filter(
        batch, 0, parse_batch_header(batch)) is None


def test_last_batch_of_the_round_stays_empty():
    batch = _batch([(b"a", b"1")], base_offset=100)
    header, records = _run(_filter({b"a": 500}, round_end=101), batch)
    assert records == [] and header.last_offset == 100


def test_a_marker_whose_transaction_has_batches_left_is_copied():
    data = _batch([(b"a", b"1")], base_offset=99, producer_id=5, producer_epoch=0, base_sequence=0,
                  transactional=True)
    key, value = control_record(1)
    batch = build_batch([(key, value, (), NOW)], base_offset=100, control=True, transactional=True,
                        producer_id=5, producer_epoch=0)
    f = _filter({key: 500, b"a": 99})
    assert bytes(f.filter(data, 0, parse_batch_header(data))) == data      # its committed batch: seen
    assert bytes(f.filter(batch, 0, parse_batch_header(batch))) == batch


def test_empty_batch_keeps_the_header_fields():
    batch = _batch([(b"a", b"1")], producer_id=1, producer_epoch=1, base_sequence=0, compression=CompressionType.ZSTD)
    out = empty_batch(parse_batch_header(batch))
    header = parse_batch_header(out)
    validate_batch(out, 0, header)
    assert header.base_timestamp == -1 and header.max_timestamp == NOW


def _marker(pid=5, epoch=0, base_offset=100, control=0):
    from twisted_kafka.protocol.records.control import build_end_txn_marker

    return build_end_txn_marker(pid, epoch, 0, control, NOW, base_offset=base_offset)


def test_a_marker_alone_gets_a_delete_horizon_then_goes():
    marker = _marker()
    f = _filter({}, now=NOW, retention=1000)
    header, records = _run(f, marker)
    assert header.has_delete_horizon and header.base_timestamp == NOW + 1000
    assert header.is_control and header.is_transactional and len(records) == 1
    assert records[0].timestamp == NOW                      # the marker keeps its timestamp
    later = bytes(f.filter(marker, 0, parse_batch_header(marker)))
    assert _filter({}, now=NOW + 999).filter(later, 0, parse_batch_header(later)) is not None
    gone = _filter({}, now=NOW + 1000)
    assert gone.filter(later, 0, parse_batch_header(later)) is None and gone.stats.markers_dropped == 1


def test_the_marker_carrying_its_producers_epoch_stays_empty():
    """The coordinator bumped the epoch with this marker: no data batch carries it (Kafka keeps the
    marker for fencing)."""
    marker = _marker(epoch=1)
    once = bytes(_filter({}, now=NOW).filter(marker, 0, parse_batch_header(marker)))
    bumped = _filter({}, now=NOW + 1000, producers={5: ProducerLast(99, 0, 1)})
    header, records = _run(bumped, once)
    assert (header.base_offset, header.producer_epoch, header.records_count, header.is_control) == (100, 1, 0, True)
    same = _filter({}, now=NOW + 1000, producers={5: ProducerLast(99, 1, 1)})
    assert same.filter(once, 0, parse_batch_header(once)) is None


def test_producer_summaries_follow_data_and_markers():
    from twisted_kafka.log.cleaner.producers import merge, note_batch, retains_batch

    data = parse_batch_header(_batch([(b"a", b"1")], base_offset=10, producer_id=5, producer_epoch=0,
                                     base_sequence=0, transactional=True))
    bump = parse_batch_header(_marker(epoch=1, base_offset=11))
    first: dict = {}
    note_batch(first, data)
    later: dict = {}
    note_batch(later, bump)
    assert later == {5: ProducerLast(-1, -1, 1)}
    merge(first, later)
    assert first == {5: ProducerLast(10, 0, 1)}
    assert retains_batch(data, first) and retains_batch(bump, first)
    assert not retains_batch(parse_batch_header(_marker(epoch=0, base_offset=9)), first)

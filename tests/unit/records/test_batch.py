"""Batch headers, walking, CRC, in-place patches and record decoding, against Kafka's layout and codes."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.exceptions import ProtocolDecodeError
from twisted_kafka.protocol.records import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    CompressionType,
    ControlRecordType,
    InvalidRecordBatch,
    build_batch,
    control_record,
    iter_batch_headers,
    iter_records,
    parse_batch_header,
    rewrite_offsets_and_epoch,
    set_log_append_time,
    validate_batch,
    verify_crc,
)
from twisted_kafka.protocol.records.batch import InvalidRecordBatch as BatchModuleError
from twisted_kafka.protocol.records.builder import encode_record

from .helpers import fix_crc, patched

T0 = 1_700_000_000_000
RECORDS = [(b"k1", b"v1", [("a", b"1")], T0), (None, b"v2", [], T0 + 5), (b"k3", None, [("n", None)], T0 - 3)]


def batch(**kwargs) -> bytes:
    return build_batch(RECORDS, **kwargs)


def error_of(fn, *args, **kwargs) -> InvalidRecordBatch:
    with pytest.raises(InvalidRecordBatch) as info:
        fn(*args, **kwargs)
    return info.value


def all_headers(buf, **kwargs):
    return list(iter_batch_headers(buf, **kwargs))


def all_records(raw):
    return list(iter_records(raw, 0, parse_batch_header(raw)))


def test_constants_and_exception_type():
    assert (BATCH_HEADER_SIZE, LOG_OVERHEAD) == (61, 12)
    assert BatchModuleError is InvalidRecordBatch and issubclass(InvalidRecordBatch, ProtocolDecodeError)


def test_header_fields_and_properties():
    raw = batch(base_offset=100, producer_id=7, producer_epoch=2, base_sequence=11, transactional=True,
                partition_leader_epoch=4, compression=CompressionType.LZ4)
    h = parse_batch_header(raw)
    assert (h.base_offset, h.partition_leader_epoch, h.magic, h.last_offset_delta, h.records_count) == (100, 4, 2, 2, 3)
    assert (h.base_timestamp, h.max_timestamp) == (T0, T0 + 5)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 2, 11)
    assert h.size == len(raw) == LOG_OVERHEAD + h.batch_length
    assert (h.last_offset, h.next_offset) == (102, 103)
    assert h.compression is CompressionType.LZ4 and h.timestamp_type == 0
    assert h.is_transactional and not h.is_control and h.has_producer_id
    assert h.crc == crc32c(raw[21:])
    plain = parse_batch_header(batch())
    assert not plain.has_producer_id and not plain.is_transactional and plain.compression is CompressionType.NONE


def test_parse_at_a_position_inside_a_blob():
    first, second = batch(), batch(base_offset=3)
    blob = first + second
    assert parse_batch_header(blob, len(first)).base_offset == 3


@pytest.mark.parametrize("magic, code", [(0, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
                                         (1, ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
                                         (3, ErrorCode.CORRUPT_MESSAGE), (-1, ErrorCode.CORRUPT_MESSAGE),
                                         (127, ErrorCode.CORRUPT_MESSAGE)])
def test_magic_mapping(magic, code):
    raw = patched(batch(), magic=magic)
    assert error_of(parse_batch_header, raw).error_code is code
    assert error_of(all_headers, raw).error_code is code


def test_legacy_message_shorter_than_a_v2_header_is_still_reported_as_legacy():
    # A magic-1 message: offset, size, crc, magic 1, attributes, timestamp, key -1, value "x".
    body = struct.pack(">IbbqiI", 0, 1, 0, T0, -1, 1) + b"x"
    legacy = struct.pack(">qi", 0, len(body)) + body
    assert len(legacy) < BATCH_HEADER_SIZE
    assert error_of(parse_batch_header, legacy).error_code is ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


def test_truncated_header_and_too_small_length():
    raw = batch()
    for cut in (0, 5, 16, 17, 60):
        assert error_of(parse_batch_header, raw[:cut]).error_code is ErrorCode.CORRUPT_MESSAGE
    assert error_of(parse_batch_header, patched(raw, batch_length=48)).error_code is ErrorCode.CORRUPT_MESSAGE


def test_iter_batch_headers_walks_and_reports_positions():
    a, b, c = batch(), batch(base_offset=3, compression=CompressionType.GZIP), batch(base_offset=6)
    blob = a + b + c
    walked = list(iter_batch_headers(blob))
    assert [pos for pos, _ in walked] == [0, len(a), len(a) + len(b)]
    assert [h.base_offset for _, h in walked] == [0, 3, 6]
    assert [pos for pos, _ in iter_batch_headers(blob, len(a), len(a) + len(b))] == [len(a)]
    assert list(iter_batch_headers(b"")) == []


def test_partial_tail_raises_or_stops():
    a, b = batch(), batch(base_offset=3)
    for cut in (1, 11, 16, 17, 40, 61, len(b) - 1):
        blob = a + b[:cut]
        err = error_of(all_headers, blob)
        assert err.error_code is ErrorCode.CORRUPT_MESSAGE and err.position == len(a)
        assert [pos for pos, _ in iter_batch_headers(blob, allow_partial_tail=True)] == [0]


def test_garbage_at_the_tail_is_corrupt_even_when_partial_tails_are_allowed():
    a = batch()
    bad_magic = patched(batch(), recrc=False, magic=7)[:40]
    bad_length = patched(batch(), recrc=False, batch_length=3)[:40]
    for tail in (bad_magic, bad_length):
        err = error_of(all_headers, a + tail, allow_partial_tail=True)
        assert err.error_code is ErrorCode.CORRUPT_MESSAGE and err.position == len(a)


def test_verify_crc_and_bad_crc():
    raw = batch(compression=CompressionType.SNAPPY)
    h = parse_batch_header(raw)
    verify_crc(raw, 0, h)
    bad = patched(raw, recrc=False, crc=h.crc ^ 1)
    err = error_of(verify_crc, bad, 0, parse_batch_header(bad))
    assert err.error_code is ErrorCode.CORRUPT_MESSAGE and err.position == 0
    flipped = bytearray(raw)
    flipped[-1] ^= 0x01
    assert error_of(verify_crc, flipped, 0, h).error_code is ErrorCode.CORRUPT_MESSAGE


def test_validate_batch_order_and_codes():
    raw = batch()
    h = parse_batch_header(raw)
    validate_batch(raw, 0, h, max_size=len(raw))
    # Too large is reported before the CRC is looked at (Kafka's order).
    bad_crc = patched(raw, recrc=False, crc=0)
    err = error_of(validate_batch, bad_crc, 0, parse_batch_header(bad_crc), max_size=len(raw) - 1)
    assert err.error_code is ErrorCode.MESSAGE_TOO_LARGE
    assert error_of(validate_batch, bad_crc, 0, parse_batch_header(bad_crc)).error_code is ErrorCode.CORRUPT_MESSAGE
    for attributes in (5, 6, 7):
        bad = patched(raw, attributes=attributes)
        err = error_of(validate_batch, bad, 0, parse_batch_header(bad))
        assert err.error_code is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    for fields in (dict(records_count=-1), dict(last_offset_delta=-1), dict(records_count=4),
                   dict(records_count=1000, last_offset_delta=999)):
        bad = patched(raw, **fields)
        assert error_of(validate_batch, bad, 0, parse_batch_header(bad)).error_code is ErrorCode.INVALID_RECORD
    truncated = raw[:-1]
    assert error_of(validate_batch, truncated, 0, h).error_code is ErrorCode.CORRUPT_MESSAGE


def test_compacted_shapes_are_valid_stored_batches():
    """Compaction leaves fewer records than the offset span, or none: valid as stored data."""
    raw = patched(batch(), last_offset_delta=9)
    validate_batch(raw, 0, parse_batch_header(raw))
    empty = bytearray(raw[:BATCH_HEADER_SIZE])
    struct.pack_into(">i", empty, 8, BATCH_HEADER_SIZE - LOG_OVERHEAD)
    struct.pack_into(">i", empty, 57, 0)
    fix_crc(empty)
    validate_batch(bytes(empty), 0, parse_batch_header(empty))
    assert list(iter_records(bytes(empty), 0, parse_batch_header(empty))) == []


def test_rewrite_offsets_and_epoch_touches_only_bytes_outside_the_crc():
    raw = batch(compression=CompressionType.ZSTD)
    buf = bytearray(b"\xee" * 7 + raw + b"\xee" * 3)
    rewrite_offsets_and_epoch(buf, 7, 123456789012, 17)
    changed = [i for i in range(len(buf)) if buf[i] != (b"\xee" * 7 + raw + b"\xee" * 3)[i]]
    assert all(7 <= i < 15 or 19 <= i < 23 for i in changed)
    h = parse_batch_header(buf, 7)
    assert (h.base_offset, h.partition_leader_epoch) == (123456789012, 17)
    verify_crc(buf, 7, h)
    assert [r.offset for r in iter_records(buf, 7, h)] == [123456789012, 123456789013, 123456789014]
    view = memoryview(bytearray(raw))
    rewrite_offsets_and_epoch(view, 0, 5, 6)
    assert parse_batch_header(view)[:3] == (5, len(raw) - LOG_OVERHEAD, 6)


def test_set_log_append_time():
    raw = bytearray(batch(compression=CompressionType.GZIP))
    set_log_append_time(raw, 0, T0 + 999)
    h = parse_batch_header(raw)
    verify_crc(raw, 0, h)
    assert h.timestamp_type == 1 and h.max_timestamp == T0 + 999 and h.compression is CompressionType.GZIP
    assert [r.timestamp for r in iter_records(raw, 0, h)] == [T0 + 999] * 3


def test_iter_records_decodes_every_field():
    raw = batch(base_offset=40, compression=CompressionType.SNAPPY)
    records = list(iter_records(raw, 0, parse_batch_header(raw)))
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (40, T0, b"k1", b"v1", [("a", b"1")]),
        (41, T0 + 5, None, b"v2", []),
        (42, T0 - 3, b"k3", None, [("n", None)]),
    ]
    assert [(r.offset_delta, r.timestamp_delta, r.attributes) for r in records] == [(0, 0, 0), (1, 5, 0), (2, -3, 0)]


def _with_payload(payload: bytes, count: int, codec=CompressionType.NONE) -> bytes:
    """A batch around an arbitrary records payload, with a valid CRC."""
    from twisted_kafka.protocol.records import compress
    body = compress(codec, payload)
    raw = bytearray(batch()[:BATCH_HEADER_SIZE]) + body
    struct.pack_into(">i", raw, 8, len(raw) - LOG_OVERHEAD)
    struct.pack_into(">h", raw, 21, int(codec))
    struct.pack_into(">i", raw, 23, max(count - 1, 0))
    struct.pack_into(">i", raw, 57, count)
    return bytes(fix_crc(raw))


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
def test_record_count_mismatch_is_invalid_record(codec):
    two = encode_record(0, 0, b"a", b"1") + encode_record(1, 0, b"b", b"2")
    for count in (1, 3):        # records left over / premature end
        raw = _with_payload(two, count, codec)
        err = error_of(all_records, raw)
        assert err.error_code is ErrorCode.INVALID_RECORD and err.position == 0


def test_malformed_records_are_invalid_record():
    good = encode_record(0, 0, b"key", b"value", [("h", b"v")])
    bad_payloads = [
        good[:-1],                                              # truncated
        b"\x7f" + good[1:],                                     # length says -64
        good[:1] + b"\xff" * 12,                                # endless varint
        bytes([good[0] + 2]) + good[1:] + b"\x00",              # declared size larger than its fields
        good[:4] + b"\x03" + good[5:],                          # key length -2
    ]
    for payload in bad_payloads:
        raw = _with_payload(payload, 1)
        err = error_of(all_records, raw)
        assert err.error_code is ErrorCode.INVALID_RECORD, payload


def test_corrupt_compressed_payload_is_corrupt_message():
    raw = bytearray(batch(compression=CompressionType.LZ4))
    raw[BATCH_HEADER_SIZE:BATCH_HEADER_SIZE + 4] = b"XXXX"        # destroy the lz4 frame magic
    fix_crc(raw)
    err = error_of(all_records, raw)
    assert err.error_code is ErrorCode.CORRUPT_MESSAGE and err.position == 0


def test_control_batch_roundtrip():
    key, value = control_record(ControlRecordType.COMMIT, coordinator_epoch=3)
    raw = build_batch([(key, value, [], T0)], control=True, transactional=True, producer_id=9,
                      producer_epoch=1, base_sequence=-1)
    h = parse_batch_header(raw)
    assert h.is_control and h.is_transactional
    (record,) = iter_records(raw, 0, h)
    assert struct.unpack(">hh", record.key) == (0, ControlRecordType.COMMIT)
    assert struct.unpack(">hi", record.value) == (0, 3)


def test_builder_requires_a_record():
    with pytest.raises(ValueError):
        build_batch([])

"""validate_records: a Produce partition's records, checked with Kafka's rules, order and error codes."""

from __future__ import annotations

import struct

import pytest

from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.records import (
    BATCH_HEADER_SIZE,
    CompressionType,
    InvalidRecordBatch,
    build_batch,
    compress,
    validate_records,
)
from twisted_kafka.protocol.records.builder import encode_record

from .helpers import fix_crc, patched

T0 = 1_700_000_000_000
RECORDS = [(b"k%d" % i, b"value %d" % i, [], T0 + i) for i in range(5)]


def code_of(buf, **kwargs) -> ErrorCode:
    with pytest.raises(InvalidRecordBatch) as info:
        validate_records(buf, **kwargs)
    return info.value.error_code


@pytest.mark.parametrize("codec", list(CompressionType))
def test_valid_batches_pass_and_report_positions(codec):
    raw = build_batch(RECORDS, compression=codec, producer_id=5, producer_epoch=0, base_sequence=0)
    [(pos, header)] = validate_records(raw, produce_version=7, max_batch_size=len(raw), deep=True)
    assert pos == 0 and header.records_count == 5 and header.compression is codec


def test_produce_v3_request_rules():
    one = build_batch(RECORDS)
    assert code_of(b"", produce_version=3) is ErrorCode.INVALID_RECORD
    assert code_of(None, produce_version=3) is ErrorCode.INVALID_RECORD
    assert code_of(one + one, produce_version=3) is ErrorCode.INVALID_RECORD
    # Without request rules (internal appends), several batches are fine.
    assert len(validate_records(one + one)) == 2
    assert validate_records(b"") == []


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_in_produce_v3_is_invalid_record_like_kafka(magic):
    raw = patched(build_batch(RECORDS), magic=magic)
    assert code_of(raw, produce_version=3) is ErrorCode.INVALID_RECORD
    # Without a request version: the parse-level diagnosis.
    assert code_of(raw) is ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


@pytest.mark.parametrize("magic", [3, -2, 100])
def test_unknown_magic_is_corrupt_message(magic):
    assert code_of(patched(build_batch(RECORDS), magic=magic), produce_version=7) is ErrorCode.CORRUPT_MESSAGE


def test_zstd_needs_produce_v7():
    raw = build_batch(RECORDS, compression=CompressionType.ZSTD)
    assert code_of(raw, produce_version=6) is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    validate_records(raw, produce_version=7)


def test_log_append_checks_in_kafka_order():
    raw = build_batch(RECORDS)
    assert code_of(patched(raw, base_offset=7)) is ErrorCode.INVALID_RECORD
    assert code_of(raw, max_batch_size=len(raw) - 1) is ErrorCode.MESSAGE_TOO_LARGE
    # Size before CRC, CRC before everything about the records.
    bad_crc = patched(raw, recrc=False, crc=1)
    assert code_of(bad_crc, max_batch_size=len(raw) - 1) is ErrorCode.MESSAGE_TOO_LARGE
    assert code_of(bad_crc) is ErrorCode.CORRUPT_MESSAGE
    assert code_of(patched(raw, attributes=6)) is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert code_of(raw + raw, max_records_size=2 * len(raw) - 1) is ErrorCode.RECORD_LIST_TOO_LARGE


@pytest.mark.parametrize("fields", [
    dict(records_count=4),                                  # count != lastOffsetDelta + 1
    dict(records_count=0, last_offset_delta=-1),
    dict(records_count=-5),
    dict(attributes=0x20),                                  # control batch from a client
    dict(producer_id=3, base_sequence=-1),                  # producer id without a sequence
])
def test_client_batch_rules_are_invalid_record(fields):
    assert code_of(patched(build_batch(RECORDS), **fields)) is ErrorCode.INVALID_RECORD


def test_a_count_the_payload_does_not_hold_needs_the_deep_walk():
    """Header self-consistent (6 records, deltas 0..5) but 5 records inside: only the walk sees it."""
    raw = patched(build_batch(RECORDS), records_count=6, last_offset_delta=5)
    validate_records(raw)
    assert code_of(raw, deep=True) is ErrorCode.INVALID_RECORD
    huge = patched(build_batch(RECORDS), records_count=1000, last_offset_delta=999)
    assert code_of(huge) is ErrorCode.INVALID_RECORD       # 1000 records cannot fit: caught cheaply


def test_log_append_time_from_a_producer_is_invalid_timestamp():
    raw = patched(build_batch(RECORDS), attributes=0x08)
    assert code_of(raw) is ErrorCode.INVALID_TIMESTAMP


def test_non_idempotent_batches_with_sequence_zero_are_fine():
    """aiokafka's non-idempotent batches carry producerId -1 with baseSequence 0: sequences
    are checked only when producerId >= 0."""
    validate_records(build_batch(RECORDS, producer_id=-1, base_sequence=0), produce_version=7)


def _with_payload(payload: bytes, count: int, codec=CompressionType.NONE) -> bytes:
    raw = bytearray(build_batch(RECORDS)[:BATCH_HEADER_SIZE]) + compress(codec, payload)
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    struct.pack_into(">h", raw, 21, int(codec))
    struct.pack_into(">i", raw, 23, count - 1)
    struct.pack_into(">i", raw, 57, count)
    return bytes(fix_crc(raw))


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4,
                                   CompressionType.ZSTD])
def test_compressed_batches_are_walked_by_default(codec):
    two = encode_record(0, 0, b"a", b"1") + encode_record(1, 0, b"b", b"2")
    validate_records(_with_payload(two, 2, codec))
    assert code_of(_with_payload(two, 3, codec)) is ErrorCode.INVALID_RECORD          # premature end
    assert code_of(_with_payload(two + b"\x00", 2, codec)) is ErrorCode.INVALID_RECORD  # trailing bytes
    swapped = encode_record(1, 0, b"a", b"1") + encode_record(0, 0, b"b", b"2")
    assert code_of(_with_payload(swapped, 2, codec)) is ErrorCode.INVALID_RECORD       # offset deltas
    # deep=False trusts the payload (and does not even decompress it).
    validate_records(_with_payload(two, 3, codec), deep=False)
    garbage = bytearray(_with_payload(two, 2, codec))
    garbage[BATCH_HEADER_SIZE:] = b"\x99" * (len(garbage) - BATCH_HEADER_SIZE)
    assert code_of(bytes(fix_crc(garbage))) is ErrorCode.CORRUPT_MESSAGE


def test_uncompressed_batches_are_walked_only_when_asked():
    two = encode_record(0, 0, b"a", b"1") + encode_record(1, 0, b"b", b"2")
    short = _with_payload(two + b"\x00" * 20, 2)        # framing wrong, CRC right
    validate_records(short)                               # the fast path: header + CRC
    assert code_of(short, deep=True) is ErrorCode.INVALID_RECORD


def test_offset_deltas_past_63_use_multibyte_varints():
    records = [(b"k", b"v", [], T0)] * 300
    for codec in (CompressionType.NONE, CompressionType.LZ4):
        validate_records(build_batch(records, compression=codec), deep=True)


def test_decompression_bomb_is_message_too_large():
    record = encode_record(0, 0, None, bytes(4 * 1024 * 1024))
    raw = _with_payload(record, 1, CompressionType.ZSTD)
    assert len(raw) < 4096
    assert code_of(raw, max_decompressed_size=1024 * 1024) is ErrorCode.MESSAGE_TOO_LARGE
    validate_records(raw)


def test_error_position_points_at_the_bad_batch():
    good = build_batch(RECORDS)
    bad = patched(good, recrc=False, crc=0)
    with pytest.raises(InvalidRecordBatch) as info:
        validate_records(good + bad)
    assert info.value.position == len(good)


# -- compacted topics: every record needs a key (Kafka's LogValidator.validateKey, KIP-467 record errors)

KEYLESS = "Compacted topic cannot accept message without key in topic partition c-0."


@pytest.mark.parametrize("codec", list(CompressionType))
def test_a_compacted_topic_refuses_keyless_records_naming_each_one(codec):
    mixed = [(b"k0", b"v", [], T0), (None, b"v", [], T0), (b"k2", None, [], T0), (None, None, [], T0)]
    raw = build_batch(mixed, compression=codec)
    with pytest.raises(InvalidRecordBatch) as info:
        validate_records(raw, produce_version=9, compacted=True, topic_partition="c-0")
    error = info.value
    assert error.error_code is ErrorCode.INVALID_RECORD and error.position == 0
    assert error.record_errors == [(1, KEYLESS), (3, KEYLESS)]
    assert str(error).startswith("One or more records have been rejected due to 2 record errors in total")
    # The same batch on a topic that is not compacted, and a keyed one on a compacted topic, are fine.
    validate_records(raw, produce_version=9)
    keyed = build_batch([(b"k%d" % i, None, [], T0) for i in range(70)], compression=codec)
    validate_records(keyed, produce_version=9, compacted=True, topic_partition="c-0")


def test_an_empty_key_is_a_key():
    validate_records(build_batch([(b"", b"v", [], T0)]), compacted=True, topic_partition="c-0")


def test_record_errors_are_kept_only_for_the_record_rules():
    assert InvalidRecordBatch("x", ErrorCode.CORRUPT_MESSAGE).record_errors == []

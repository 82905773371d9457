"""Property tests: roundtrips, CRC coverage, and that bad bytes only ever raise InvalidRecordBatch."""

from __future__ import annotations

import contextlib
import struct

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from twisted_kafka.protocol.records import (
    BATCH_HEADER_SIZE,
    CompressionType,
    InvalidRecordBatch,
    build_batch,
    iter_batch_headers,
    iter_records,
    parse_batch_header,
    rewrite_offsets_and_epoch,
    set_log_append_time,
    validate_batch,
    validate_records,
    verify_crc,
)

from .helpers import fix_crc

# Compression makes example times vary: no deadline (set per test, not as a global profile).
relaxed = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

codecs = st.sampled_from(list(CompressionType))
maybe_bytes = st.none() | st.binary(max_size=120)
header_keys = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12)
records = st.lists(
    st.tuples(maybe_bytes, maybe_bytes,
              st.lists(st.tuples(header_keys, st.none() | st.binary(max_size=20)), max_size=3),
              st.integers(-1, 2 ** 50)),
    min_size=1, max_size=25)
int64 = st.integers(-2 ** 63, 2 ** 63 - 1)
int32 = st.integers(-2 ** 31, 2 ** 31 - 1)


def everything(buf) -> None:
    """Run every reader over ``buf``; only InvalidRecordBatch may escape."""
    for pos, header in iter_batch_headers(buf):
        validate_batch(buf, pos, header)
        list(iter_records(buf, pos, header))
    validate_records(buf, produce_version=7, deep=True)


@relaxed
@given(records, codecs, int64, int32, st.booleans())
def test_build_parse_iterate_roundtrip(recs, codec, base_offset, epoch, transactional):
    raw = build_batch(recs, compression=codec, base_offset=base_offset, partition_leader_epoch=epoch,
                      transactional=transactional, producer_id=7 if transactional else -1,
                      producer_epoch=0, base_sequence=0)
    [(pos, header)] = list(iter_batch_headers(raw))
    validate_batch(raw, pos, header)
    assert header.size == len(raw)
    assert (header.base_offset, header.partition_leader_epoch, header.records_count) == (base_offset, epoch, len(recs))
    assert header.compression is codec and header.is_transactional == transactional
    assert header.max_timestamp == max(r[3] for r in recs)
    decoded = list(iter_records(raw, pos, header))
    assert [(r.key, r.value, r.headers, r.timestamp) for r in decoded] == [tuple(r) for r in recs]
    assert [r.offset for r in decoded] == [base_offset + i for i in range(len(recs))]
    if base_offset == 0:
        validate_records(raw, produce_version=7, deep=True)


@relaxed
@given(records, codecs)
def test_built_batches_carry_a_valid_crc(recs, codec):
    raw = build_batch(recs, compression=codec)
    verify_crc(raw, 0, parse_batch_header(raw))


@relaxed
@given(records, codecs, int64, int32)
def test_rewriting_offsets_and_epoch_keeps_the_crc(recs, codec, base_offset, epoch):
    buf = bytearray(build_batch(recs, compression=codec))
    before = bytes(buf)
    rewrite_offsets_and_epoch(buf, 0, base_offset, epoch)
    header = parse_batch_header(buf)
    verify_crc(buf, 0, header)
    assert (header.base_offset, header.partition_leader_epoch) == (base_offset, epoch)
    assert buf[8:12] == before[8:12] and buf[16:] == before[16:]


@relaxed
@given(records, codecs, st.integers(0, 2 ** 62))
def test_log_append_time_keeps_the_crc(recs, codec, now):
    buf = bytearray(build_batch(recs, compression=codec))
    set_log_append_time(buf, 0, now)
    header = parse_batch_header(buf)
    verify_crc(buf, 0, header)
    assert all(r.timestamp == now for r in iter_records(buf, 0, header))


@relaxed
@given(records, codecs, st.data())
def test_flipping_any_crc_covered_byte_breaks_verification(recs, codec, data):
    raw = bytearray(build_batch(recs, compression=codec))
    index = data.draw(st.integers(17, len(raw) - 1), label="index")      # the CRC itself, then [21, end)
    raw[index] ^= data.draw(st.integers(1, 255), label="xor")
    try:
        verify_crc(raw, 0, parse_batch_header(raw))
    except InvalidRecordBatch as exc:
        assert exc.error_code.name == "CORRUPT_MESSAGE"
    else:
        raise AssertionError(f"flipping byte {index} went unnoticed")


@relaxed
@given(records, codecs, st.data())
def test_truncation_anywhere_raises_invalid_record_batch(recs, codec, data):
    raw = build_batch(recs, compression=codec) + build_batch(recs[:1], base_offset=len(recs))
    cut = data.draw(st.integers(1, len(raw) - 1), label="cut")
    try:
        everything(raw[:cut])
    except InvalidRecordBatch:
        pass
    else:
        assert cut == len(raw) - len(build_batch(recs[:1], base_offset=len(recs))), cut


@relaxed
@given(st.binary(max_size=400))
def test_random_garbage_only_raises_invalid_record_batch(garbage):
    with contextlib.suppress(InvalidRecordBatch):
        everything(garbage)


@relaxed
@given(codecs, st.binary(max_size=300), st.integers(0, 40))
def test_garbage_behind_a_valid_header_only_raises_invalid_record_batch(codec, payload, count):
    """A well-formed header and a correct CRC over garbage records: decoding must still fail cleanly."""
    raw = bytearray(build_batch([(b"k", b"v", [], 0)])[:BATCH_HEADER_SIZE]) + payload
    struct.pack_into(">i", raw, 8, len(raw) - 12)
    struct.pack_into(">h", raw, 21, int(codec))
    struct.pack_into(">i", raw, 23, max(count - 1, 0))
    struct.pack_into(">i", raw, 57, count)
    fix_crc(raw)
    with contextlib.suppress(InvalidRecordBatch):
        everything(bytes(raw))


@relaxed
@given(records, codecs, st.data())
def test_mutated_records_with_a_fixed_crc_only_raise_invalid_record_batch(recs, codec, data):
    raw = bytearray(build_batch(recs, compression=codec))
    assume(len(raw) > BATCH_HEADER_SIZE)
    for _ in range(data.draw(st.integers(1, 4), label="mutations")):
        index = data.draw(st.integers(BATCH_HEADER_SIZE, len(raw) - 1), label="index")
        raw[index] = data.draw(st.integers(0, 255), label="byte")
    fix_crc(raw)
    with contextlib.suppress(InvalidRecordBatch):
        everything(bytes(raw))

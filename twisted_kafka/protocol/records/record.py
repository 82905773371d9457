"""Records inside a v2 batch: decode them, or just walk their framing.

Record layout (Kafka's "Record" documentation), all lengths zig-zag varints::

    length            varint   bytes after this field
    attributes        int8     unused (0)
    timestampDelta    varlong  added to the batch's baseTimestamp
    offsetDelta       varint   added to the batch's baseOffset
    keyLength, key    varint + bytes   (-1 = null)
    valueLength, value varint + bytes  (-1 = null)
    headerCount       varint
    headers           [keyLength varint, key utf-8, valueLength varint (-1 = null), value]

Structural problems map to INVALID_RECORD, as in Kafka, where the record
iterator throws ``InvalidRecordException`` (declared size not matching the
bytes read, premature end, records left over after ``recordsCount``); a
payload the codec cannot decompress is CORRUPT_MESSAGE.

Header keys are decoded with ``surrogateescape``: Java decodes invalid UTF-8
leniently rather than failing, and this keeps the bytes recoverable.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

from ..errors import ErrorCode
from .batch import BATCH_HEADER_SIZE, RecordBatchHeader
from .compression import MAX_DECOMPRESSED_SIZE, CompressionType, decompress
from .errors import InvalidRecordBatch
from .varint import read_varint

__all__ = ["Record", "iter_records", "keyless_records", "records_payload", "scan_records"]


class Record(NamedTuple):
    """One record with its absolute offset and timestamp resolved."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    attributes: int = 0
    offset_delta: int = 0
    timestamp_delta: int = 0


def _invalid(reason: str) -> InvalidRecordBatch:
    return InvalidRecordBatch(reason, ErrorCode.INVALID_RECORD)


def records_payload(buf, pos: int, header: RecordBatchHeader, *,
                    max_decompressed_size: int = MAX_DECOMPRESSED_SIZE,
                    ) -> tuple[bytes | bytearray | memoryview, int, int]:
    """The batch's record bytes as ``(buffer, start, end)``, decompressed if needed.

    Uncompressed batches are not copied: the result points into ``buf``.
    """
    start = pos + BATCH_HEADER_SIZE
    end = pos + header.size
    if end > len(buf):
        raise InvalidRecordBatch(f"record batch of {header.size} bytes is truncated to {len(buf) - pos}",
                                 ErrorCode.CORRUPT_MESSAGE, position=pos)
    codec = header.compression
    if codec is CompressionType.NONE:
        return buf, start, end
    with memoryview(buf) as mv:
        data = decompress(codec, mv[start:end], max_size=max_decompressed_size)
    return data, 0, len(data)


def iter_records(buf, pos: int, header: RecordBatchHeader, *,
                 max_decompressed_size: int = MAX_DECOMPRESSED_SIZE) -> Iterator[Record]:
    """Decode the records of the batch at ``pos``, decompressing per its attributes.

    The CRC is not checked here (``verify_crc`` does that once, where the
    bytes arrive); the framing of every record is.  Exactly
    ``header.records_count`` records are yielded and they must fill the
    payload exactly.  With LogAppendTime every record's timestamp is the
    batch's maxTimestamp, as Kafka reports it.
    """
    try:
        data, p, end = records_payload(buf, pos, header, max_decompressed_size=max_decompressed_size)
    except InvalidRecordBatch as exc:
        exc.at(pos)
        raise
    base_offset = header.base_offset
    base_ts = header.base_timestamp
    log_append_time = header.max_timestamp if header.timestamp_type == 1 else None
    count = header.records_count
    index = 0
    try:
        for index in range(count):
            if p >= end:
                raise _invalid(f"premature end of records: {index} of {count} records read")
            length, p = read_varint(data, p)
            rec_end = p + length
            if length < 6 or rec_end > end:
                raise _invalid(f"invalid record size {length} at record {index}")
            attributes = data[p]
            ts_delta, p = read_varint(data, p + 1, 10)
            offset_delta, p = read_varint(data, p)
            key_len, p = read_varint(data, p)
            if key_len < 0:
                if key_len != -1:
                    raise _invalid(f"invalid key length {key_len}")
                key = None
            else:
                if p + key_len > rec_end:
                    raise _invalid(f"key length {key_len} overruns record {index}")
                key = bytes(data[p:p + key_len])
                p += key_len
            value_len, p = read_varint(data, p)
            if value_len < 0:
                if value_len != -1:
                    raise _invalid(f"invalid value length {value_len}")
                value = None
            else:
                if p + value_len > rec_end:
                    raise _invalid(f"value length {value_len} overruns record {index}")
                value = bytes(data[p:p + value_len])
                p += value_len
            header_count, p = read_varint(data, p)
            if header_count < 0:
                raise _invalid(f"invalid header count {header_count}")
            headers = []
            for _ in range(header_count):
                hk_len, p = read_varint(data, p)
                if hk_len < 0 or p + hk_len > rec_end:
                    raise _invalid(f"invalid header key length {hk_len}")
                hkey = bytes(data[p:p + hk_len]).decode("utf-8", "surrogateescape")
                p += hk_len
                hv_len, p = read_varint(data, p)
                if hv_len < 0:
                    if hv_len != -1:
                        raise _invalid(f"invalid header value length {hv_len}")
                    hvalue = None
                else:
                    if p + hv_len > rec_end:
                        raise _invalid(f"header value length {hv_len} overruns record {index}")
                    hvalue = bytes(data[p:p + hv_len])
                    p += hv_len
                headers.append((hkey, hvalue))
                if p > rec_end:
                    break
            if p != rec_end:
                raise _invalid(f"record {index} declares {length} bytes but its fields take {length + p - rec_end}")
            yield Record(
                base_offset + offset_delta,
                log_append_time if log_append_time is not None else base_ts + ts_delta,
                key, value, headers, attributes, offset_delta, ts_delta)
    except IndexError:
        raise _invalid(f"premature end of records in record {index} of {count}").at(pos) from None
    except InvalidRecordBatch as exc:
        exc.at(pos)
        raise
    if p != end:
        raise _invalid(f"{end - p} bytes remain after the declared {count} records").at(pos)


def scan_records(data, start: int, end: int, count: int) -> None:
    """Check the framing of ``count`` records in ``data[start:end]`` without decoding them.

    This is the per-record check of produce validation: every record's
    length fits, offset deltas run 0, 1, 2, ... (Kafka re-assigns the batch
    otherwise, which this broker does not do: it never rewrites records),
    and the records fill the payload exactly.  Keys, values and headers are
    skipped over by the record length (Kafka's ``skipKeyValueIterator``
    idea).  One- and two-byte varints (records under 8 KiB, offset deltas
    under 8192) are read inline: about 0.3 us per record.
    """
    p = start
    index = 0
    try:
        for index in range(count):
            b = data[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                p += 1
            elif data[p + 1] < 0x80:
                raw = (b & 0x7F) | (data[p + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                p += 2
            else:
                length, p = read_varint(data, p)
            rec_end = p + length
            if length < 6 or rec_end > end:
                raise _invalid(f"invalid record size {length} at record {index}")
            q = p + 1                       # skip attributes, then timestampDelta's bytes
            while data[q] & 0x80:
                q += 1
            q += 1                          # offsetDelta: compare with the encoding of ``index``
            want = index << 1
            if want < 0x80:
                ok = data[q] == want
            elif want < 0x4000:
                ok = data[q] == (want & 0x7F) | 0x80 and data[q + 1] == want >> 7
            else:
                ok = read_varint(data, q)[0] == index
            if not ok:
                raise _invalid(f"record {index} has offset delta {read_varint(data, q)[0]}, not {index}")
            if q >= rec_end:
                raise _invalid(f"record {index} overruns its size")
            p = rec_end
    except IndexError:
        raise _invalid(f"premature end of records in record {index} of {count}") from None
    if p != end:
        raise _invalid(f"{end - p} bytes remain after the declared {count} records")


class RecordSpan(NamedTuple):
    """Where one record sits in a (decompressed) payload, with what a log cleaner decides on
    (offset and timestamp deltas, key, tombstone): it copies kept records by their spans."""

    start: int              # first byte of the record (its length varint)
    end: int                # one past its last byte
    offset_delta: int
    timestamp_delta: int
    key: bytes | None
    tombstone: bool         # null value
    body: int               # first byte after the offset delta (the key length)
    attributes: int = 0


def record_spans(data, start: int, end: int, count: int) -> list[RecordSpan]:
    """The ``count`` records in ``data[start:end]``; raises InvalidRecordBatch on bad framing."""
    spans = []
    p = start
    try:
        for index in range(count):
            b = data[p]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                q = p + 1
            else:
                length, q = read_varint(data, p)
            rec_end = q + length
            if length < 6 or rec_end > end:
                raise _invalid(f"invalid record size {length} at record {index}")
            attributes = data[q]
            ts_delta, q = read_varint(data, q + 1, 10)
            b = data[q]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                q += 1
            else:
                offset_delta, q = read_varint(data, q)
            body = q
            b = data[q]
            if b < 0x80:
                key_len = (b >> 1) ^ -(b & 1)
                q += 1
            else:
                key_len, q = read_varint(data, q)
            if key_len < 0:
                key = None
            else:
                if q + key_len > rec_end:
                    raise _invalid(f"key length {key_len} overruns record {index}")
                key = bytes(data[q:q + key_len])
                q += key_len
            b = data[q]
            if b < 0x80:
                value_len = (b >> 1) ^ -(b & 1)
            else:
                value_len, _ = read_varint(data, q)
            spans.append(RecordSpan(p, rec_end, offset_delta, ts_delta, key, value_len < 0, body, attributes))
            p = rec_end
    except IndexError:
        raise _invalid(f"premature end of records in record {len(spans)} of {count}") from None
    if p != end:
        raise _invalid(f"{end - p} bytes remain after the declared {count} records")
    return spans


def keyless_records(data, start: int, end: int, count: int) -> list[int]:
    """The indexes (in the batch) of the records in ``data[start:end]`` whose key is null.

    The framing must have been checked already (``scan_records``): this only
    skips each record's attributes, timestampDelta and offsetDelta to read its
    keyLength (-1: no key).  A compacted topic keeps the latest record per key,
    so Kafka refuses records without one there (``LogValidator.validateKey``).
    """
    keyless = []
    p = start
    try:
        for index in range(count):
            length, p = read_varint(data, p)
            rec_end = p + length
            q = p + 1                       # attributes
            while data[q] & 0x80:           # timestampDelta
                q += 1
            q += 1
            while data[q] & 0x80:           # offsetDelta
                q += 1
            q += 1
            if data[q] == 0x01:             # keyLength -1, zig-zag encoded
                keyless.append(index)
            p = rec_end
    except IndexError:
        raise _invalid(f"premature end of records in record {index} of {count}") from None
    return keyless

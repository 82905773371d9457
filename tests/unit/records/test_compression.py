"""The codecs: every framing a client writes decodes, and bad or hostile payloads are refused.

Payloads written by the clients' own libraries (python-snappy's xerial
framing as kafka-python uses it, the ``lz4`` and ``zstandard`` packages with
the frame options clients use) serve as independent oracles here.
"""

from __future__ import annotations

import gzip
import os
import struct
import zlib

import cramjam
import pytest

from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.records import CompressionType, InvalidRecordBatch, compress, decompress
from twisted_kafka.protocol.records import compression as compression_module

PAYLOAD = b"".join(b"record %05d " % i + os.urandom(8) for i in range(3000))   # ~57 KiB, compressible
ALL_CODECS = list(CompressionType)


@pytest.mark.parametrize("codec", ALL_CODECS)
@pytest.mark.parametrize("data", [b"", b"x", PAYLOAD, PAYLOAD * 3], ids=["empty", "1", "57k", "171k"])
def test_roundtrip(codec, data):
    assert bytes(decompress(codec, compress(codec, data))) == data


def test_snappy_compress_writes_xerial_blocks_of_32k():
    framed = compress(CompressionType.SNAPPY, PAYLOAD)
    assert framed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, sizes = 16, []
    while pos < len(framed):
        (n,) = struct.unpack_from(">i", framed, pos)
        sizes.append(len(cramjam.snappy.decompress_raw(framed[pos + 4:pos + 4 + n])))
        pos += 4 + n
    assert pos == len(framed)
    assert sizes[:-1] == [32768] * (len(sizes) - 1) and sum(sizes) == len(PAYLOAD)


def test_snappy_raw_block_as_librdkafka_sends_it():
    raw = bytes(cramjam.snappy.compress_raw(PAYLOAD))
    assert bytes(decompress(CompressionType.SNAPPY, raw)) == PAYLOAD


def test_snappy_xerial_from_python_snappy():
    snappy = pytest.importorskip("snappy")
    # kafka-python's framing: xerial header, then [int32 length][raw block] per 32 KiB.
    framed = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for start in range(0, len(PAYLOAD), 32768):
        block = snappy.compress(PAYLOAD[start:start + 32768])
        framed += struct.pack(">i", len(block)) + block
    assert bytes(decompress(CompressionType.SNAPPY, framed)) == PAYLOAD


def test_lz4_frames_of_every_client_flavour():
    lz4_frame = pytest.importorskip("lz4.frame")
    variants = [
        dict(),                                              # kafka-python: content size stored
        dict(block_linked=False, store_size=False),          # librdkafka, Java: independent, no size
        dict(block_linked=True, content_checksum=True),
        dict(block_checksum=True, store_size=False),
        dict(block_size=lz4_frame.BLOCKSIZE_MAX4MB),
    ]
    for kwargs in variants:
        frame = lz4_frame.compress(PAYLOAD * 3, **kwargs)
        assert bytes(decompress(CompressionType.LZ4, frame)) == PAYLOAD * 3, kwargs


def test_lz4_compress_uses_independent_blocks_for_java_consumers():
    frame = compress(CompressionType.LZ4, PAYLOAD * 3)
    assert frame[:4] == b"\x04\x22\x4d\x18"
    flg = frame[4]
    assert flg >> 6 == 1 and flg & 0x20, "version 1 with the block-independence bit"


def test_zstd_with_and_without_content_size_and_concatenated_frames():
    zstandard = pytest.importorskip("zstandard")
    with_size = zstandard.ZstdCompressor().compress(PAYLOAD)
    without = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)
    stream = zstandard.ZstdCompressor().compressobj()
    streamed = stream.compress(PAYLOAD) + stream.flush()
    for frame in (with_size, without, streamed):
        assert bytes(decompress(CompressionType.ZSTD, frame)) == PAYLOAD
    assert bytes(decompress(CompressionType.ZSTD, with_size + without)) == PAYLOAD * 2
    assert compression_module._zstd_content_size(with_size) == len(PAYLOAD)
    assert compression_module._zstd_content_size(without) is None


def test_content_size_announcements_are_not_trusted():
    """A header announcing too small a size only costs a retry; the output is still complete."""
    zstandard = pytest.importorskip("zstandard")
    frame = bytearray(zstandard.ZstdCompressor().compress(PAYLOAD))
    a = zstandard.ZstdCompressor().compress(b"a" * 10)
    assert bytes(decompress(CompressionType.ZSTD, a + bytes(frame))) == b"a" * 10 + PAYLOAD


def test_gzip_members_are_concatenated():
    data = gzip.compress(b"first ") + gzip.compress(b"second")
    assert bytes(decompress(CompressionType.GZIP, data)) == b"first second"


@pytest.mark.parametrize("codec", [c for c in ALL_CODECS if c is not CompressionType.NONE])
def test_decompression_is_bounded(codec):
    bomb = compress(codec, bytes(8 * 1024 * 1024))
    with pytest.raises(InvalidRecordBatch) as info:
        decompress(codec, bomb, max_size=1024 * 1024)
    assert info.value.error_code is ErrorCode.MESSAGE_TOO_LARGE
    assert len(decompress(codec, bomb, max_size=8 * 1024 * 1024)) == 8 * 1024 * 1024


@pytest.mark.parametrize("codec", [c for c in ALL_CODECS if c is not CompressionType.NONE])
def test_corrupt_payloads_are_corrupt_message(codec):
    good = compress(codec, PAYLOAD)
    for bad in (b"", good[: len(good) // 2], b"garbage" * 50):
        with pytest.raises(InvalidRecordBatch) as info:
            decompress(codec, bad)
        assert info.value.error_code is ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", [c for c in ALL_CODECS if c is not CompressionType.NONE])
def test_mangled_payloads_never_decode_to_the_original(codec):
    """Codecs without a checksum over the content (zstd as written here) may decode garbage
    into *something*; the batch CRC is what catches that, checked before decompression."""
    mangled = bytearray(compress(codec, PAYLOAD))
    for i in range(len(mangled) // 3, len(mangled) // 3 + 64):
        mangled[i] ^= 0x5A
    try:
        out = decompress(codec, bytes(mangled))
    except InvalidRecordBatch as exc:
        assert exc.error_code is ErrorCode.CORRUPT_MESSAGE
    else:
        assert bytes(out) != PAYLOAD


def test_unknown_codec_id():
    for codec in (5, 6, 7):
        with pytest.raises(InvalidRecordBatch) as info:
            decompress(codec, b"")
        assert info.value.error_code is ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


def test_cramjam_still_reports_a_full_output_buffer_the_way_growth_relies_on():
    """compression._into tells "buffer too small" from corruption by this message."""
    for module in (cramjam.lz4, cramjam.zstd):
        with pytest.raises(cramjam.DecompressionError, match=compression_module._OUTPUT_FULL):
            module.decompress_into(bytes(module.compress(PAYLOAD)), bytearray(100))


def test_xerial_framing_errors():
    header = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for bad in (b"\x82SNAPPY\x00\x00", header + b"\x00\x00", header + struct.pack(">i", 99) + b"abc",
                header + struct.pack(">i", -1)):
        with pytest.raises(InvalidRecordBatch) as info:
            decompress(CompressionType.SNAPPY, bad)
        assert info.value.error_code is ErrorCode.CORRUPT_MESSAGE
    assert decompress(CompressionType.SNAPPY, header) == b""


def test_gzip_truncated_stream():
    data = gzip.compress(PAYLOAD)
    with pytest.raises(InvalidRecordBatch) as info:
        decompress(CompressionType.GZIP, data[:-10])
    assert info.value.error_code is ErrorCode.CORRUPT_MESSAGE
    assert zlib.decompress(data, 31) == PAYLOAD


def test_an_announced_content_size_does_not_make_the_broker_allocate_it(monkeypatch):
    """A tiny frame claiming 90 MiB gets a buffer sized by its own length, not by the claim."""
    sizes = []
    real_into = cramjam.lz4.decompress_into

    def spy(data, out):
        sizes.append(len(out))
        return real_into(data, out)

    monkeypatch.setattr(cramjam.lz4, "decompress_into", spy)
    lz4_frame = pytest.importorskip("lz4.frame")
    frame = bytearray(lz4_frame.compress(b"tiny", store_size=True))
    struct.pack_into("<Q", frame, 6, 90 * 1024 * 1024)     # lie (the header checksum byte then fails)
    with pytest.raises(InvalidRecordBatch):
        decompress(CompressionType.LZ4, bytes(frame))
    assert sizes and max(sizes) < 1024 * 1024

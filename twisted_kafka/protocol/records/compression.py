"""The record-batch codecs: what each Kafka client writes, and how to read it back.

One library does three of the four codecs: ``cramjam`` (Rust bindings) reads
and writes raw snappy blocks, LZ4 frames and zstd frames, including zstd
frames without a content size and concatenated frames.  gzip is the
standard library's ``zlib``.  No other compression package is needed.

What the clients write (checked against captures of each client's traffic,
see ``tests/unit/records/test_real_clients.py``):

* gzip: a gzip member (librdkafka, kafka-python, aiokafka, Java).
* snappy: librdkafka writes one **raw** snappy block; kafka-python, aiokafka
  and the Java client write **xerial** framing (a 16-byte header starting
  ``\\x82SNAPPY\\x00``, then ``int32`` length-prefixed raw blocks).  The two
  are told apart by that magic header, the way xerial's own
  ``SnappyInputStream`` does it.
* lz4: an LZ4 *frame* (not a bare block).  The Java client refuses frames
  with dependent (linked) blocks, so ``compress`` writes independent blocks.
* zstd: one or more zstd frames, with or without the content size.

Decompression is bounded (``max_size``, default 100 MiB, the default of
``socket.request.max.bytes`` and of librdkafka's ``receive.message.max.bytes``
that bounds its own decompression): a 1 MiB zstd batch of zeros would
otherwise expand to gigabytes inside the broker.  The output buffer starts
at the size the payload itself announces (snappy, lz4 and zstd headers can
carry it, believed up to a 256x ratio) or at a small multiple of the input,
and grows by 4x up to the bound, as librdkafka does.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum

import cramjam

from ..errors import ErrorCode
from .errors import InvalidRecordBatch

__all__ = ["CompressionType", "compress", "decompress", "MAX_DECOMPRESSED_SIZE", "XERIAL_MAGIC"]


class CompressionType(IntEnum):
    """The codec id in bits 0-2 of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


MAX_DECOMPRESSED_SIZE = 100 * 1024 * 1024
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)    # version 1, compatible with 1
_XERIAL_BLOCK = 32 * 1024                                     # the Java client's block size
_INITIAL_GUESS = 64 * 1024
# Rust's io::Write::write_all message: cramjam's ``*_into`` functions raise it
# when the output buffer is too small.  A unit test pins it, so a cramjam
# upgrade that changes it fails loudly instead of reading as corruption.
_OUTPUT_FULL = "failed to write whole buffer"


def _corrupt(codec: CompressionType, why) -> InvalidRecordBatch:
    return InvalidRecordBatch(f"cannot decompress {codec.name} payload: {why}", ErrorCode.CORRUPT_MESSAGE)


def _too_large(codec: CompressionType, max_size: int) -> InvalidRecordBatch:
    # MESSAGE_TOO_LARGE makes the Java producer split the batch and retry,
    # which is the useful reaction to an oversized (not a corrupt) payload.
    return InvalidRecordBatch(
        f"{codec.name} payload decompresses to more than {max_size} bytes", ErrorCode.MESSAGE_TOO_LARGE)


# --------------------------------------------------------------------------- decompress

def decompress(codec: int, data, *, max_size: int = MAX_DECOMPRESSED_SIZE) -> bytes | bytearray:
    """Decompress a batch's records payload; returns a bytes-like object.

    Raises ``InvalidRecordBatch`` with CORRUPT_MESSAGE for a payload the codec
    rejects, MESSAGE_TOO_LARGE when it would exceed ``max_size`` bytes, and
    UNSUPPORTED_COMPRESSION_TYPE for a codec id that is not 0-4.
    """
    try:
        codec = CompressionType(codec)
    except ValueError:
        raise InvalidRecordBatch(f"unknown compression type {codec}", ErrorCode.UNSUPPORTED_COMPRESSION_TYPE) from None
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        return _gunzip(data, max_size)
    if codec is CompressionType.SNAPPY:
        return _unsnappy(data, max_size)
    if codec is CompressionType.LZ4:
        return _into(codec, cramjam.lz4.decompress_into, data, _lz4_content_size(data), max_size)
    return _into(codec, cramjam.zstd.decompress_into, data, _zstd_content_size(data), max_size)


def _gunzip(data, max_size: int) -> bytes:
    """One or more gzip members (Java's GZIPInputStream reads concatenated members too)."""
    out = []
    total = 0
    data = bytes(data)
    try:
        while True:
            d = zlib.decompressobj(wbits=31)
            chunk = d.decompress(data, max_size + 1 - total)
            total += len(chunk)
            if total > max_size:
                raise _too_large(CompressionType.GZIP, max_size)
            out.append(chunk)
            if not d.eof:
                raise _corrupt(CompressionType.GZIP, "truncated gzip stream")
            data = d.unused_data
            if not data:
                return b"".join(out) if len(out) != 1 else out[0]
    except zlib.error as exc:
        raise _corrupt(CompressionType.GZIP, exc) from None


def _unsnappy(data, max_size: int) -> bytes:
    mv = memoryview(data)
    if bytes(mv[:8]) != XERIAL_MAGIC:
        return _snappy_raw(mv, max_size, 0)
    # xerial: 8-byte magic, int32 version, int32 min-compatible version, then
    # blocks of [int32 length][raw snappy block] to the end of the payload.
    pos = 16
    end = len(mv)
    if end < pos:
        raise _corrupt(CompressionType.SNAPPY, "truncated xerial header")
    out = []
    total = 0
    while pos < end:
        if end - pos < 4:
            raise _corrupt(CompressionType.SNAPPY, "truncated xerial block length")
        (n,) = struct.unpack_from(">i", mv, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise _corrupt(CompressionType.SNAPPY, f"xerial block length {n} out of bounds")
        block = _snappy_raw(mv[pos:pos + n], max_size, total)
        total += len(block)
        out.append(block)
        pos += n
    return b"".join(out)


def _snappy_raw(block, max_size: int, already: int) -> bytes:
    # A raw block starts with its uncompressed length (a varint), so the bound
    # is checked before anything is allocated.
    try:
        size = cramjam.snappy.decompress_raw_len(block)
    except cramjam.DecompressionError as exc:
        raise _corrupt(CompressionType.SNAPPY, exc) from None
    if already + size > max_size:
        raise _too_large(CompressionType.SNAPPY, max_size)
    try:
        return bytes(cramjam.snappy.decompress_raw(block))
    except cramjam.DecompressionError as exc:
        raise _corrupt(CompressionType.SNAPPY, exc) from None


def _into(codec: CompressionType, decompress_into, data, hint: int | None, max_size: int) -> bytearray:
    """Decompress into a bounded buffer, growing it (x4) until the output fits."""
    if hint is not None and hint > max_size:
        raise _too_large(codec, max_size)
    # An announced size is believed only up to a 256x ratio, so a few bytes
    # cannot make the broker allocate max_size; beyond that the buffer grows.
    guess = hint if hint is not None else 4 * len(data)
    size = min(max_size, max(_INITIAL_GUESS, guess), _INITIAL_GUESS + 256 * len(data))
    while True:
        out = bytearray(size)
        try:
            n = decompress_into(data, out)
        except cramjam.DecompressionError as exc:
            if _OUTPUT_FULL not in str(exc):
                raise _corrupt(codec, exc) from None
            if size >= max_size:
                raise _too_large(codec, max_size) from None
            # The announced size (if any) was a lie or covered one frame of several.
            size = min(max_size, max(size, _INITIAL_GUESS) * 4)
            continue
        del out[n:]
        return out


def _lz4_content_size(data) -> int | None:
    """The content size an LZ4 frame header announces (FLG bit 3), if any."""
    if len(data) >= 14 and bytes(data[:4]) == b"\x04\x22\x4d\x18" and data[4] & 0x08:
        return struct.unpack_from("<Q", data, 6)[0] or None
    return None


def _zstd_content_size(data) -> int | None:
    """The Frame_Content_Size a zstd frame header announces (RFC 8878 3.1.1.1), if any."""
    if len(data) < 6 or bytes(data[:4]) != b"\x28\xb5\x2f\xfd":
        return None
    fhd = data[4]
    fcs_flag = fhd >> 6
    single_segment = (fhd >> 5) & 1
    pos = 5 + (0 if single_segment else 1) + (0, 1, 2, 4)[fhd & 3]
    width = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
    if width == 0 or len(data) < pos + width:
        return None
    value = int.from_bytes(bytes(data[pos:pos + width]), "little")
    return value + 256 if width == 2 else value or None


# --------------------------------------------------------------------------- compress

def compress(codec: int, data) -> bytes:
    """Compress a records payload the way the Java client does (for building batches).

    snappy is xerial-framed in 32 KiB blocks and lz4 frames use independent
    blocks: every client (Java included) reads those.
    """
    codec = CompressionType(codec)
    if codec is CompressionType.NONE:
        return bytes(data)
    if codec is CompressionType.GZIP:
        gzip = zlib.compressobj(6, zlib.DEFLATED, 31)
        return gzip.compress(data) + gzip.flush()
    if codec is CompressionType.SNAPPY:
        mv = memoryview(data)
        parts = [_XERIAL_HEADER]
        for start in range(0, len(mv), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(mv[start:start + _XERIAL_BLOCK]))
            parts.append(struct.pack(">i", len(block)))
            parts.append(block)
        return b"".join(parts)
    if codec is CompressionType.LZ4:
        lz4 = cramjam.lz4.Compressor(block_linked=False)
        lz4.compress(data)
        return bytes(lz4.finish())
    return bytes(cramjam.zstd.compress(data))

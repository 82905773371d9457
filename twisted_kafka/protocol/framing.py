"""Kafka's size-prefixed framing, sans-IO: bytes in, whole frames out.

Every Kafka request and response is a 4-byte big-endian *signed* size and
that many bytes.  A negative size is an error to report (not a huge unsigned
one), and so is one above the limit (``socket.request.max.bytes`` on a
broker).

The buffer is a ``bytearray``: appending is amortised O(1) and CPython drops
a consumed prefix without moving the rest, so accumulating a multi-megabyte
frame that arrives in 64 KiB reads is linear in its size, and each frame is
copied out exactly once.  (Twisted's stock ``Int32StringReceiver`` rebuilds
its whole buffer on every read, which is quadratic for such frames.)
"""

from __future__ import annotations

from struct import unpack_from

SIZE_PREFIX = 4

_TLS_RECORD_TYPES = (0x14, 0x15, 0x16, 0x17)
_HTTP_PREFIXES = (b"GET ", b"POST", b"PUT ", b"HEAD", b"HTTP", b"OPTI", b"DELE", b"PATC", b"CONN", b"TRAC", b"PRI ")


def looks_like_tls(prefix: bytes) -> bool:
    """Whether the first bytes read are a TLS record header (content type, version 3.x)."""
    return len(prefix) >= 3 and prefix[0] in _TLS_RECORD_TYPES and prefix[1] == 0x03 and prefix[2] <= 0x04


def likely_mistake(prefix: bytes) -> str | None:
    """Name the usual cause of an absurd frame size, from the first bytes read."""
    if looks_like_tls(prefix):
        return "the bytes look like a TLS record: is a client using SSL against a PLAINTEXT listener?"
    if prefix[:4] in _HTTP_PREFIXES:
        return "the bytes look like HTTP: is an HTTP client pointed at a Kafka listener?"
    return None


class InvalidFrameSize(Exception):
    """A frame size that is negative or above the limit: the stream cannot be resynchronised."""

    def __init__(self, size: int, limit: int, prefix: bytes, *, kind: str = "frame", limit_name: str = "the limit"):
        problem = "negative" if size < 0 else f"larger than {limit_name} ({limit})"
        message = f"invalid {kind} size {size}: {problem}"
        hint = likely_mistake(prefix)
        if hint:
            message = f"{message}; {hint}"
        super().__init__(message)
        self.size = size
        self.limit = limit
        self.prefix = prefix


class FrameBuffer:
    """Accumulates bytes and hands out complete frames, one at a time."""

    __slots__ = ("_buffer", "max_frame_size", "kind", "limit_name")

    def __init__(self, max_frame_size: int, *, kind: str = "frame", limit_name: str = "the limit"):
        self._buffer = bytearray()
        self.max_frame_size = max_frame_size
        self.kind = kind            # "request" or "response", for the error message
        self.limit_name = limit_name

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def __len__(self) -> int:
        return len(self._buffer)

    def next_size(self) -> int | None:
        """The size of the next frame including its prefix, once the prefix is readable.

        Raises :class:`InvalidFrameSize` (and discards what is buffered) for
        a negative or oversized frame.
        """
        buf = self._buffer
        if len(buf) < SIZE_PREFIX:
            return None
        (size,) = unpack_from("!i", buf, 0)
        if size < 0 or size > self.max_frame_size:
            prefix = bytes(buf[:8])
            buf.clear()
            raise InvalidFrameSize(size, self.max_frame_size, prefix, kind=self.kind, limit_name=self.limit_name)
        return SIZE_PREFIX + size

    def complete(self) -> bool:
        """Whether a whole frame is buffered (raises :class:`InvalidFrameSize` like ``next_size``)."""
        size = self.next_size()
        return size is not None and len(self._buffer) >= size

    def pop(self) -> bytes:
        """Remove and return the next frame's payload (without its size); call when ``complete()``."""
        end = self.next_size()
        assert end is not None and len(self._buffer) >= end
        with memoryview(self._buffer) as view:
            frame = bytes(view[SIZE_PREFIX:end])
        del self._buffer[:end]
        return frame

    def clear(self) -> None:
        self._buffer = bytearray()


__all__ = ["FrameBuffer", "InvalidFrameSize", "likely_mistake", "SIZE_PREFIX"]

"""Kafka's size-prefixed framing on top of Twisted's ``Int32StringReceiver``.

Two things differ from the stock class.  Kafka sizes are *signed* int32s
(a negative size is an error to report, not a huge unsigned one), and the
stock ``dataReceived`` concatenates its whole buffer with every chunk, which
is quadratic for a multi-megabyte Produce arriving in 64 KiB reads.  Here the
buffer is a ``bytearray``: appends are amortised O(1) and CPython deletes a
consumed prefix without moving the rest, so accumulating a frame is linear in
its size and each frame is copied out exactly once.

Frames are delivered one at a time and only when ``readyForFrame`` agrees,
which is how a ``Processor`` mutes a connection while its request is in
flight: undelivered bytes stay buffered (and the transport is paused) until
the response has been sent.
"""

from __future__ import annotations

from struct import unpack_from

from twisted.protocols.basic import Int32StringReceiver

_TLS_RECORD_TYPES = (0x14, 0x15, 0x16, 0x17)
_HTTP_PREFIXES = (b"GET ", b"POST", b"PUT ", b"HEAD", b"HTTP", b"OPTI", b"DELE", b"PATC", b"CONN", b"TRAC", b"PRI ")


def likely_mistake(prefix: bytes) -> str | None:
    """Name the usual cause of an absurd frame size, from the first bytes read."""
    if len(prefix) >= 3 and prefix[0] in _TLS_RECORD_TYPES and prefix[1] == 0x03 and prefix[2] <= 0x04:
        return "the bytes look like a TLS record: is a client using SSL against a PLAINTEXT listener?"
    if prefix[:4] in _HTTP_PREFIXES:
        return "the bytes look like HTTP: is an HTTP client pointed at a Kafka listener?"
    return None


class KafkaFrameReceiver(Int32StringReceiver):
    """Int32-size-prefixed frames with linear buffering and gated delivery."""

    structFormat = "!i"
    MAX_LENGTH = 104857600  # socket.request.max.bytes; set per instance by the acceptor

    _buffer: bytearray
    _delivering = False

    def connectionMade(self) -> None:
        self._buffer = bytearray()

    def dataReceived(self, data: bytes) -> None:
        self._buffer += data
        self.deliverFrames()

    def readyForFrame(self, size: int) -> bool:
        """Whether the next complete frame may be handed to ``stringReceived`` now."""
        return True

    def invalidFrameSize(self, size: int, prefix: bytes) -> None:
        """A negative or oversized frame size: the connection must be closed."""
        self.transport.abortConnection()

    def deliverFrames(self) -> None:
        """Hand over every complete frame the buffer holds, as long as delivery is allowed.

        Re-entrant calls (a response sent synchronously from ``stringReceived``
        unmutes the connection, which delivers again) only flag that another
        pass is due, so frames are never delivered out of order or twice.
        """
        if self._delivering:
            self._redeliver = True
            return
        self._delivering = True
        try:
            self._redeliver = True
            while self._redeliver:
                self._redeliver = False
                self._deliver_available()
        finally:
            self._delivering = False

    def _deliver_available(self) -> None:
        buf = self._buffer
        while len(buf) >= 4 and self.transport is not None and self.connected:
            (size,) = unpack_from("!i", buf, 0)
            if size < 0 or size > self.MAX_LENGTH:
                prefix = bytes(buf[:8])
                buf.clear()
                self.invalidFrameSize(size, prefix)
                return
            end = 4 + size
            if len(buf) < end:
                return
            if not self.readyForFrame(end):
                return
            with memoryview(buf) as view:
                frame = bytes(view[4:end])
            del buf[:end]
            self.stringReceived(frame)

    def buffered_bytes(self) -> int:
        return len(self._buffer)

"""Instrumented framing buffers: the work of assembling frames, counted in bytes copied.

Linear buffering is a property of the work done, not of the time taken, so the
tests measure it by counting copies rather than with a clock.
"""

from __future__ import annotations

import struct

from twisted_kafka.protocol.framing import FrameBuffer


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class Work:
    bytes_copied = 0


class CountingBytearray(bytearray):
    """A bytearray that counts the bytes each Python-level operation copies.

    Appending counts what is appended; slicing, concatenating and ``bytes()``
    count what they copy; deleting a slice counts the tail it moves, except
    for a prefix, which CPython drops by advancing the buffer's start (the
    property ``FrameBuffer`` relies on).  Copies through a ``memoryview`` are
    invisible here, so callers add the frames they pop (one copy each).
    """

    def __init__(self, *args, work: Work):
        super().__init__(*args)
        self.work = work

    def __iadd__(self, other):
        self.work.bytes_copied += len(other)
        return super().__iadd__(other)

    def extend(self, other):
        self.work.bytes_copied += len(other)
        super().extend(other)

    def __add__(self, other):
        self.work.bytes_copied += len(self) + len(other)
        return CountingBytearray(super().__add__(other), work=self.work)

    def __getitem__(self, index):
        result = super().__getitem__(index)
        if isinstance(index, slice):
            self.work.bytes_copied += len(result)
        return result

    def __delitem__(self, index):
        if isinstance(index, slice):
            start, stop, _ = index.indices(len(self))
            if start > 0:
                self.work.bytes_copied += len(self) - stop
        super().__delitem__(index)

    def __bytes__(self):
        self.work.bytes_copied += len(self)
        return bytes(memoryview(self))

    def copy(self):
        self.work.bytes_copied += len(self)
        return CountingBytearray(self, work=self.work)


class CountingFrameBuffer(FrameBuffer):
    """The real FrameBuffer over a CountingBytearray, counting each popped frame as one copy."""

    def __init__(self, *args, work: Work, **kwargs):
        super().__init__(*args, **kwargs)
        self.work = work
        self._buffer = CountingBytearray(work=work)

    def pop(self) -> bytes:
        frame = super().pop()
        self.work.bytes_copied += len(frame)
        return frame

    def clear(self) -> None:
        self._buffer = CountingBytearray(work=self.work)


class RebuildingFrameBuffer(CountingFrameBuffer):
    """A deliberately quadratic buffer (Twisted's Int32StringReceiver rebuilds its buffer on every read)."""

    def feed(self, data: bytes) -> None:
        self._buffer = self._buffer + data


CHUNK = 64 * 1024


def chunks_of(data: bytes) -> list[bytes]:
    return [data[i:i + CHUNK] for i in range(0, len(data), CHUNK)]


def frame_buffer_work(buffer_class, payload_size: int) -> tuple[int, int]:
    """(bytes copied, bytes received) to assemble one frame of ``payload_size`` bytes in 64 KiB reads."""
    work = Work()
    frames = buffer_class(1 << 30, work=work)
    stream = framed(bytes(payload_size))
    popped = []
    for chunk in chunks_of(stream):
        frames.feed(chunk)
        while frames.complete():
            popped.append(len(frames.pop()))
    assert popped == [payload_size]
    return work.bytes_copied, len(stream)

"""KafkaFrameReceiver: signed sizes, linear accumulation, gated and re-entrant delivery."""

from __future__ import annotations

import struct
import time

import pytest
from twisted.internet.testing import StringTransport
from twisted.protocols.basic import Int32StringReceiver

from twisted_kafka.network.framing import KafkaFrameReceiver, likely_mistake


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


class Recorder(KafkaFrameReceiver):
    def __init__(self):
        self.frames: list[bytes] = []
        self.ready = True
        self.invalid: list[tuple[int, bytes]] = []
        self.on_frame = None

    def readyForFrame(self, size):
        return self.ready

    def stringReceived(self, frame):
        self.frames.append(frame)
        if self.on_frame is not None:
            self.on_frame(frame)

    def invalidFrameSize(self, size, prefix):
        self.invalid.append((size, prefix))
        super().invalidFrameSize(size, prefix)


def connected(cls=Recorder, max_length=None):
    protocol = cls()
    if max_length is not None:
        protocol.MAX_LENGTH = max_length
    transport = StringTransport()
    protocol.makeConnection(transport)
    return protocol, transport


def test_frames_split_and_coalesced_arbitrarily_come_out_whole_and_in_order():
    protocol, _ = connected()
    payloads = [bytes([i]) * (i * 37 % 300) for i in range(40)]
    stream = b"".join(framed(p) for p in payloads)
    for step in (1, 3, 7, 64, 1000, len(stream)):
        protocol.frames.clear()
        for i in range(0, len(stream), step):
            protocol.dataReceived(stream[i:i + step])
        assert protocol.frames == payloads
        assert protocol.buffered_bytes() == 0


def test_negative_size_closes_and_reports():
    protocol, transport = connected()
    protocol.dataReceived(struct.pack(">i", -1) + b"abcd")
    assert protocol.invalid == [(-1, struct.pack(">i", -1) + b"abcd")]
    assert transport.disconnecting
    assert protocol.frames == []


def test_size_above_limit_closes_before_the_body_arrives():
    protocol, transport = connected(max_length=1000)
    protocol.dataReceived(struct.pack(">i", 1001))
    assert protocol.invalid and protocol.invalid[0][0] == 1001
    assert transport.disconnecting
    # exactly at the limit is fine
    protocol, transport = connected(max_length=1000)
    protocol.dataReceived(framed(b"x" * 1000))
    assert protocol.frames == [b"x" * 1000] and not transport.disconnecting


def test_gated_frames_stay_buffered_until_delivery_is_allowed():
    protocol, _ = connected()
    protocol.ready = False
    protocol.dataReceived(framed(b"one") + framed(b"two"))
    assert protocol.frames == []
    assert protocol.buffered_bytes() == 14
    protocol.ready = True
    protocol.deliverFrames()
    assert protocol.frames == [b"one", b"two"]


def test_reentrant_delivery_keeps_order_and_delivers_once():
    """A response sent synchronously from stringReceived unmutes and re-delivers:
    the nested call must neither reorder nor duplicate frames."""
    protocol, _ = connected()
    nesting = [0, 0]  # current, deepest

    def on_frame(frame):
        nesting[0] += 1
        nesting[1] = max(nesting)
        protocol.deliverFrames()  # as Processor.send_response does
        nesting[0] -= 1

    protocol.on_frame = on_frame
    protocol.dataReceived(b"".join(framed(b"%d" % i) for i in range(3000)))
    assert protocol.frames == [b"%d" % i for i in range(3000)]
    assert nesting[1] == 1, "stringReceived was re-entered: the stack grows with the number of frames"


def test_one_frame_at_a_time_when_the_gate_closes_after_each():
    """Processor mutes after every request: the receiver must stop mid-buffer."""
    protocol, _ = connected()

    def mute(frame):
        protocol.ready = False

    protocol.on_frame = mute
    protocol.dataReceived(framed(b"a") + framed(b"b") + framed(b"c"))
    assert protocol.frames == [b"a"]
    for expected in ([b"a", b"b"], [b"a", b"b", b"c"]):
        protocol.ready = True
        protocol.deliverFrames()
        assert protocol.frames == expected


@pytest.mark.parametrize("prefix, expected", [
    (bytes.fromhex("16030100a5010000"), "TLS"),          # ClientHello record
    (bytes.fromhex("1603030200000000"), "TLS"),
    (b"GET / HT", "HTTP"),
    (b"POST /x ", "HTTP"),
    (b"\x00\x00\x00\x10\x00\x12\x00\x00", None),
])
def test_likely_mistake_names_tls_and_http(prefix, expected):
    hint = likely_mistake(prefix)
    if expected is None:
        assert hint is None
    else:
        assert expected in hint


class Counter(KafkaFrameReceiver):
    """Keeps only the sizes of the frames it receives."""

    def __init__(self):
        self.sizes: list[int] = []

    def stringReceived(self, frame):
        self.sizes.append(len(frame))


def _per_mib_cost(frame_mib: int, total_mib: int = 20, cls=None, repeats: int = 5) -> float:
    """Seconds per MiB to receive ``total_mib`` MiB as frames of ``frame_mib`` MiB in 64 KiB reads
    (best of ``repeats``)."""
    count = total_mib // frame_mib
    stream = framed(bytes(frame_mib << 20)) * count
    chunks = [stream[i:i + 65536] for i in range(0, len(stream), 65536)]
    del stream
    best = float("inf")
    for _ in range(repeats):
        protocol, _ = connected(cls or Counter, max_length=1 << 30)
        start = time.perf_counter()
        for chunk in chunks:
            protocol.dataReceived(chunk)
        best = min(best, time.perf_counter() - start)
        assert protocol.sizes == [frame_mib << 20] * count
    return best / total_mib


def test_accumulating_a_large_frame_is_linear_in_its_size():
    """64 KiB reads of a multi-MiB frame must not re-copy the buffer each time.

    The same 20 MiB arrive as 20 frames of 1 MiB and as one 20 MiB frame.
    A linear receiver spends about the same per byte on both; Twisted's stock
    Int32StringReceiver re-concatenates its buffer on every read, which costs
    ~10x more per byte for the 20 MiB frame (and seconds in absolute terms).
    """
    small = _per_mib_cost(1)
    large = _per_mib_cost(20)
    assert large / small < 5, f"per MiB: 1 MiB frames {small * 1e3:.3f} ms, the 20 MiB frame {large * 1e3:.3f} ms"
    assert large * 20 < 0.5, f"the 20 MiB frame took {large * 20:.3f}s"


def test_the_linearity_measurement_detects_a_quadratic_receiver():
    """Control for the test above: Twisted's stock receiver fails the same bound."""

    class Stock(Int32StringReceiver):
        MAX_LENGTH = 1 << 30

        def __init__(self):
            self.sizes = []

        def stringReceived(self, frame):
            self.sizes.append(len(frame))

    ratio = _per_mib_cost(20, cls=Stock, repeats=1) / _per_mib_cost(1, cls=Stock, repeats=1)
    assert ratio > 5

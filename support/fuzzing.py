"""Fuzzing a real broker with mutated real-client requests.

The seed corpus is what real clients sent (``support/fuzz_corpus.py``),
one captured connection at a time.  A *plan* replays one captured connection
on a new connection to the same kind of listener, with some of its frames
mutated:

* in the header: api key, api version, correlation id, the client id's
  length or bytes;
* in the body: bit flips, bytes set, truncation, insertions, deletions,
  duplicated slices, int16/int32/varint fields overwritten with boundary
  values (lengths, counts, timeouts, ids);
* in the framing: a size prefix that lies (short, long, negative, huge),
  frames dropped, duplicated or swapped, the bytes written in small
  pieces;
* and in how the connection ends: FIN, RST, or a half close, once every
  frame has been answered or no answer came for a while (``linger_ms``).

Plans are drawn by Hypothesis (``plans(corpus)``): its integer and choice
strategies favour boundary values, and a test failing on a plan shrinks it
to a small one.  ``Sender`` plays plans over many concurrent non-blocking
connections and counts what it wrote and read; ``liveness`` asks a fresh
connection for ApiVersions and Metadata; ``scan_log`` finds tracebacks and
errors in the broker's output; ``rss_kib`` reads the broker's memory.
"""

from __future__ import annotations

import contextlib
import errno
import queue
import random
import re
import selectors
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from support.fuzz_corpus import CAPTURE_BROKER_OVERRIDES, Corpus
from support.raw_client import RawClient

__all__ = ["FUZZ_BROKER_OVERRIDES", "Mutation", "FrameEdit", "Plan", "plans", "render", "play", "fuzz_round",
           "Sender", "SenderStats", "liveness", "scan_log", "rss_kib", "MUTATION_KINDS"]

#: The fuzzed broker (``BrokerProcess`` overrides): a PLAINTEXT and a SASL_PLAINTEXT listener (with the capture
#: broker's SASL settings, so captured SASL exchanges replay) and a control plane; default group timing.
FUZZ_BROKER_OVERRIDES = {
    "listeners": ("PLAINTEXT://127.0.0.1:{port:PLAINTEXT},SASL_PLAINTEXT://127.0.0.1:{port:SASL_PLAINTEXT},"
                  "CONTROLLER://127.0.0.1:{port:CONTROLLER}"),
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "control.plane.listener.name": "CONTROLLER",
    **{k: v for k, v in CAPTURE_BROKER_OVERRIDES.items() if k != "group.initial.rebalance.delay.ms"},
}

INTERESTING_16 = (-32768, -129, -128, -2, -1, 0, 1, 2, 7, 8, 16, 127, 128, 255, 256, 1000, 0x3FFF, 0x7FFE, 0x7FFF)
INTERESTING_32 = (-(2 ** 31), -1_000_000, -65536, -2, -1, 0, 1, 2, 16, 100, 1000, 65535, 65536, 1 << 20,
                  100 * 1024 * 1024, 100 * 1024 * 1024 + 1, 2 ** 30, 2 ** 31 - 2, 2 ** 31 - 1)
#: Unsigned varints at boundaries (compact lengths and counts of flexible versions, KIP-482): 0 is
#: "null", 1 is "empty", then large values and an over-long encoding.
INTERESTING_VARINTS = (b"\x00", b"\x01", b"\x02", b"\x7f", b"\x80\x01", b"\xff\x7f", b"\xff\xff\x03",
                       b"\xff\xff\xff\xff\x07", b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
                       b"\x80\x80\x80\x80\x80\x80")

#: Mutations of one frame (the payload after the size prefix: header, then body).
MUTATION_KINDS = ("api_key", "api_version", "correlation_id", "client_id_length", "client_id_bytes", "bit_flip",
                  "byte_set", "truncate", "insert", "delete", "duplicate", "int16", "int32", "varint", "int64")


@dataclass(frozen=True)
class Mutation:
    kind: str
    at: int            # a position, taken modulo the frame's length
    value: int         # kind-specific: the new value, a count, a seed


@dataclass(frozen=True)
class FrameEdit:
    """What happens to one captured frame of the connection."""

    index: int                                  # which frame (modulo the connection's length)
    mutations: tuple[Mutation, ...] = ()
    size_delta: int | None = None               # the size prefix lies by this much (None: it does not)
    op: str = "mutate"                          # "mutate", "drop", "duplicate", "swap" (with the next)


@dataclass(frozen=True)
class Plan:
    """One fuzzing connection: a captured connection replayed with edits."""

    connection: int                             # index into the corpus (modulo its size)
    edits: tuple[FrameEdit, ...] = ()
    keep: int | None = None                     # send only the first ``keep`` frames (None: all)
    chunk: int = 0                              # 0: one write; else pieces of 1..chunk bytes
    close: str = "fin"                          # "fin", "rst", "half"
    linger_ms: int = 50     # once all is written: how long to wait for more answers (less if all came)

    def describe(self, corpus: Corpus) -> str:
        captured = corpus.connections[self.connection % len(corpus.connections)]
        return f"{captured.label} ({captured.listener}, {len(captured.frames)} frames): {self}"


# -- applying a plan ----------------------------------------------------------------------------------


def _put(frame: bytearray, at: int, data: bytes) -> None:
    if not frame:
        return
    at %= len(frame)
    frame[at:at + len(data)] = data[:max(0, len(frame) - at)] if at + len(data) > len(frame) else data


def mutate(frame: bytes, mutation: Mutation) -> bytes:
    out = bytearray(frame)
    kind, at, value = mutation.kind, mutation.at, mutation.value
    n = len(out)
    if kind == "api_key" and n >= 2:
        out[0:2] = struct.pack(">h", _s16(value))
    elif kind == "api_version" and n >= 4:
        out[2:4] = struct.pack(">h", _s16(value))
    elif kind == "correlation_id" and n >= 8:
        out[4:8] = struct.pack(">i", _s32(value))
    elif kind == "client_id_length" and n >= 10:
        out[8:10] = struct.pack(">h", _s16(value))
    elif kind == "client_id_bytes" and n >= 10:
        (length,) = struct.unpack_from(">h", out, 8)
        if length > 0 and n > 10:
            _put(out, 10 + at % min(length, n - 10), bytes([value & 0xFF]))
    elif kind == "bit_flip" and n:
        out[at % n] ^= 1 << (value % 8)
    elif kind == "byte_set" and n:
        out[at % n] = value & 0xFF
    elif kind == "truncate":
        del out[at % (n + 1):]
    elif kind == "insert":
        count = value % 32 + 1
        out[at % (n + 1):at % (n + 1)] = random.Random(value).randbytes(count)
    elif kind == "delete" and n:
        start = at % n
        del out[start:start + value % 16 + 1]
    elif kind == "duplicate" and n:
        start = at % n
        piece = out[start:start + value % 64 + 1]
        out[start:start] = piece
    elif kind == "int16":
        _put(out, at, struct.pack(">h", _s16(value)))
    elif kind == "int32":
        _put(out, at, struct.pack(">i", _s32(value)))
    elif kind == "int64":
        _put(out, at, struct.pack(">q", value if -(2 ** 63) <= value < 2 ** 63 else -1))
    elif kind == "varint" and n:
        _put(out, at, INTERESTING_VARINTS[value % len(INTERESTING_VARINTS)])
    return bytes(out)


def _s16(value: int) -> int:
    return (value + 2 ** 15) % 2 ** 16 - 2 ** 15


def _s32(value: int) -> int:
    return (value + 2 ** 31) % 2 ** 32 - 2 ** 31


def render(corpus: Corpus, plan: Plan) -> tuple[str, list[bytes], int]:
    """The plan as (listener, byte pieces to write in order, frames written)."""
    captured = corpus.connections[plan.connection % len(corpus.connections)]
    frames: list[tuple[bytes, int | None]] = [(f, None) for f in captured.frames]
    for edit in plan.edits:
        if not frames:
            break
        i = edit.index % len(frames)
        frame, delta = frames[i]
        if edit.op == "drop":
            del frames[i]
            continue
        if edit.op == "duplicate":
            frames.insert(i, (frame, delta))
            continue
        if edit.op == "swap" and i + 1 < len(frames):
            frames[i], frames[i + 1] = frames[i + 1], frames[i]
            continue
        for mutation in edit.mutations:
            frame = mutate(frame, mutation)
        frames[i] = (frame, edit.size_delta if edit.size_delta is not None else delta)
    if plan.keep is not None:
        frames = frames[:max(1, plan.keep)]
    data = bytearray()
    for frame, delta in frames:
        size = len(frame) if delta is None else _s32(len(frame) + delta if abs(delta) < 1 << 16 else delta)
        data += struct.pack(">i", size) + frame
    if plan.chunk <= 0:
        pieces = [bytes(data)]
    else:
        rng = random.Random(plan.chunk * 7919 + len(data))
        pieces, pos = [], 0
        while pos < len(data):
            step = rng.randint(1, plan.chunk)
            pieces.append(bytes(data[pos:pos + step]))
            pos += step
    return captured.listener, pieces, len(frames)


# -- Hypothesis strategies ----------------------------------------------------------------------------


def _values() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from(INTERESTING_32), st.sampled_from(INTERESTING_16),
                     st.integers(-(2 ** 31), 2 ** 31 - 1), st.integers(0, 255))


def mutations() -> st.SearchStrategy[Mutation]:
    return st.builds(Mutation, kind=st.sampled_from(MUTATION_KINDS), at=st.integers(0, 1 << 16), value=_values())


def frame_edits() -> st.SearchStrategy[FrameEdit]:
    size_deltas = st.one_of(st.none(), st.none(), st.none(),
                            st.sampled_from((-5, -4, -1, 1, 4, -(2 ** 31), -1 - (1 << 20), 2 ** 31 - 1,
                                             100 * 1024 * 1024 + 1)))
    return st.builds(FrameEdit, index=st.integers(0, 63), mutations=st.lists(mutations(), min_size=1, max_size=3)
                     .map(tuple), size_delta=size_deltas,
                     op=st.sampled_from(("mutate", "mutate", "mutate", "mutate", "mutate", "drop", "duplicate",
                                         "swap")))


def plans(corpus: Corpus) -> st.SearchStrategy[Plan]:
    """Plans over ``corpus``: most keep the captured frames and mutate one to three of them."""
    return st.builds(
        Plan,
        connection=st.integers(0, len(corpus.connections) - 1),
        edits=st.lists(frame_edits(), min_size=0, max_size=4).map(tuple),
        keep=st.one_of(st.none(), st.none(), st.integers(1, 30)),
        chunk=st.sampled_from((0, 0, 0, 0, 1, 3, 17)),
        close=st.sampled_from(("fin", "rst", "half")),
        linger_ms=st.sampled_from((0, 50, 200, 1000)),
    )


def play(corpus: Corpus, sender: Sender, plan: Plan) -> None:
    listener, pieces, _ = render(corpus, plan)
    sender.submit(listener, pieces, plan.close, plan.linger_ms)


def fuzz_round(corpus: Corpus, sender: Sender, connections: int, round_seed: int,
               record: Callable[[Plan], None] | None = None) -> None:
    """Hypothesis draws ``connections`` plans (seeded: a round can be drawn again), the sender plays
    them; returns once every one has been played.  A fresh Hypothesis run per round keeps its
    bookkeeping of what it drew small."""

    @seed(round_seed)
    @settings(max_examples=connections, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(plans(corpus))
    def generate(plan: Plan) -> None:
        play(corpus, sender, plan)
        if record is not None:
            record(plan)

    generate()
    sender.drain()


# -- sending ------------------------------------------------------------------------------------------


@dataclass
class SenderStats:
    connections: int = 0
    frames: int = 0              # frames whose bytes were all written
    bytes_out: int = 0
    bytes_in: int = 0
    answers: int = 0             # response frames read
    closed_by_broker: int = 0    # the broker closed (EOF or reset) before we did
    refused: int = 0             # connect failed
    stuck: int = 0               # a connection that made no progress for ``Sender.stall`` seconds (aborted)
    listeners: dict[str, int] = field(default_factory=dict)


class _Connection:
    __slots__ = ("sock", "pieces", "written", "close", "linger", "last", "done_writing", "offsets", "frames_done",
                 "answers", "header", "skip")

    def __init__(self, sock, pieces, close, linger, now):
        self.sock = sock
        self.offsets = _frame_ends(pieces)     # where each frame of the stream ends
        self.pieces = deque(pieces)
        self.written = 0
        self.close = close
        self.linger = linger
        self.last = now
        self.done_writing = False
        self.frames_done = 0
        self.answers = 0                 # response frames received
        self.header = b""                # the part of a response's size prefix read so far
        self.skip = 0                    # bytes of the current response still to come

    def count_answers(self, data: bytes) -> None:
        """Count the response frames completed by ``data`` (their size prefixes, not their bytes)."""
        pos = 0
        while pos < len(data):
            if self.skip:
                step = min(self.skip, len(data) - pos)
                self.skip -= step
                pos += step
                if not self.skip:
                    self.answers += 1
                continue
            need = 4 - len(self.header)
            self.header += data[pos:pos + need]
            pos += need
            if len(self.header) == 4:
                self.skip = max(0, struct.unpack(">i", self.header)[0])
                self.header = b""
                if not self.skip:
                    self.answers += 1


class Sender:
    """Plays rendered plans over ``concurrency`` connections at once, on a thread of its own."""

    def __init__(self, ports: dict[str, int], *, concurrency: int = 48, stall: float = 5.0):
        self.ports = ports
        self.concurrency = concurrency
        self.stall = stall
        self.stats = SenderStats()
        self._queue: queue.Queue = queue.Queue(maxsize=concurrency * 4)
        self._selector = selectors.DefaultSelector()
        self._active: dict[int, _Connection] = {}
        self._stopping = False
        self._idle = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fuzz-sender", daemon=True)
        self._thread.start()

    def submit(self, listener: str, pieces: list[bytes], close: str, linger_ms: int) -> None:
        self._idle.clear()
        self._queue.put((listener, pieces, close, linger_ms / 1000.0))

    def drain(self, timeout: float = 120.0) -> bool:
        """Wait until every submitted plan has been played; False on timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._queue.empty() and not self._active and self._idle.wait(0.05):
                return True
        return False

    def stop(self) -> None:
        self._stopping = True
        self._thread.join(10)
        for conn in list(self._active.values()):
            self._finish(conn, "rst")

    def _loop(self) -> None:
        while not self._stopping:
            while len(self._active) < self.concurrency:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                self._open(*item)
            if not self._active:
                if self._queue.empty():
                    self._idle.set()
                try:
                    item = self._queue.get(timeout=0.05)
                except queue.Empty:
                    continue
                self._idle.clear()
                self._open(*item)
                continue
            for key, events in self._selector.select(timeout=0.01):
                conn = key.data
                if events & selectors.EVENT_WRITE:
                    self._write(conn)
                if events & selectors.EVENT_READ and conn.sock.fileno() in self._active:
                    self._read(conn)
            now = time.monotonic()
            for conn in list(self._active.values()):
                if conn.done_writing and (now - conn.last >= conn.linger or conn.answers >= conn.frames_done):
                    self._finish(conn, conn.close)
                elif now - conn.last >= self.stall:
                    self.stats.stuck += 1
                    self._finish(conn, "rst")

    def _open(self, listener, pieces, close, linger) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        code = sock.connect_ex(("127.0.0.1", self.ports[listener]))
        if code not in (0, errno.EINPROGRESS):
            self.stats.refused += 1
            sock.close()
            return
        self.stats.connections += 1
        self.stats.listeners[listener] = self.stats.listeners.get(listener, 0) + 1
        conn = _Connection(sock, pieces, close, linger, time.monotonic())
        self._active[sock.fileno()] = conn
        self._selector.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)

    def _write(self, conn: _Connection) -> None:
        try:
            while conn.pieces:
                piece = conn.pieces[0]
                sent = conn.sock.send(piece)
                conn.written += sent
                self.stats.bytes_out += sent
                conn.last = time.monotonic()
                if sent < len(piece):
                    conn.pieces[0] = piece[sent:]
                    return
                conn.pieces.popleft()
        except BlockingIOError:
            return
        except OSError:
            self._count_frames(conn)
            self.stats.closed_by_broker += 1
            self._finish(conn, "rst")
            return
        self._count_frames(conn)
        conn.done_writing = True
        self._selector.modify(conn.sock, selectors.EVENT_READ, conn)
        if conn.close == "half":
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_WR)

    def _count_frames(self, conn: _Connection) -> None:
        done = sum(1 for end in conn.offsets if end <= conn.written)
        self.stats.frames += done - conn.frames_done
        conn.frames_done = done

    def _read(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._count_frames(conn)
            self.stats.closed_by_broker += 1
            self._finish(conn, "fin")
            return
        self.stats.bytes_in += len(data)
        before = conn.answers
        conn.count_answers(data)
        self.stats.answers += conn.answers - before
        conn.last = time.monotonic()

    def _finish(self, conn: _Connection, how: str) -> None:
        fd = conn.sock.fileno()
        self._active.pop(fd, None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(conn.sock)
        with contextlib.suppress(OSError):
            if how == "rst":
                conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.sock.close()


def _frame_ends(pieces: list[bytes]) -> list[int]:
    """Byte offsets at which each frame of the written stream ends (as its size prefixes declare them)."""
    data = b"".join(pieces)
    ends, pos = [], 0
    while pos + 4 <= len(data):
        (size,) = struct.unpack_from(">i", data, pos)
        end = pos + 4 + max(size, 0)
        if size < 0 or end > len(data):
            ends.append(len(data))      # a lying prefix: the rest is one (broken) frame
            break
        ends.append(end)
        pos = end
    return ends


# -- checks -------------------------------------------------------------------------------------------


def liveness(port: int, timeout: float = 10.0) -> float:
    """Seconds a fresh connection took for ApiVersions v3 and Metadata v1; raises if it failed."""
    began = time.monotonic()
    with RawClient(port, timeout=timeout) as client:
        versions = client.api_versions(version=3, timeout=timeout)
        if versions.error_code != 0:
            raise AssertionError(f"ApiVersions answered error {versions.error_code}")
        metadata = client.metadata(version=1, topics=None, timeout=timeout)
        if not metadata.brokers:
            raise AssertionError("Metadata named no broker")
    return time.monotonic() - began


#: What the broker's output must not contain after fuzzing: tracebacks, unhandled errors, and lines
#: at level error or critical (a handler crash is logged as one).
_BAD = re.compile(r"Traceback \(most recent call last\)|Unhandled error|Unhandled Error|#critical\]|#error\]")


def scan_log(text: str) -> list[str]:
    """Lines of the broker's output that show a crash, a traceback or an error."""
    lines = text.splitlines()
    found = []
    for number, line in enumerate(lines):
        if _BAD.search(line):
            found.append("\n".join(lines[number:number + 12]))
    return found


def rss_kib(pid: int) -> tuple[int, int]:
    """The process's (VmRSS, VmHWM) in KiB."""
    values = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(("VmRSS:", "VmHWM:")):
                name, amount = line.split(":", 1)
                values[name] = int(amount.split()[0])
    return values.get("VmRSS", 0), values.get("VmHWM", 0)

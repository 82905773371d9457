"""Raw-socket load generators, run in their own processes so the client is not the bottleneck.

Used by the network integration tests and by ``bench/network.py`` and ``bench/planes.py``:

    python -m support.load pipeline --port 9092 --connections 10 --depth 5 --duration 5 --api metadata
    python -m support.load accept --port 9092 --concurrency 16 --duration 5
    python -m support.load latency --port 9093 --duration 3 --interval 0.01
    python -m support.load nonreader --port 9092 --duration 30 --api metadata

Each prints one JSON object (its last line of output).  ``pipeline`` keeps
``depth`` requests in flight on each of ``connections`` connections for
``duration`` seconds or until it receives SIGTERM (``stop()``), then stops
sending and waits for every outstanding response; it checks that each
connection's responses come back in request order.  Before its result it
prints ``{"connected": true}`` once every connection is open (from then on
SIGTERM stops it cleanly) and ``{"answering": true}`` once every connection
has had an answer, so a test can wait for the flood to be under way
(``wait_connected()``, ``wait_answering()``) instead of sleeping.
``accept`` opens connections as fast as ``concurrency`` slots allow; each
sends one ApiVersions request, reads the answer and closes.
``latency`` sends one request at a time on one connection, every
``interval`` seconds (the generator's own pace), and reports the round-trip
times.  ``nonreader`` is a client that never reads its responses: one
connection with 4 KiB socket buffers sending requests as fast as the
broker takes them, until ``duration``, SIGTERM or the broker closes it; it
reports how many requests the broker took and whether (and after how long)
the broker closed it.

The requests are hand-built (no encoder in the loop): ApiVersions v0,
Metadata v1 with a null topic list (every topic), and Produce v3 (acks=1,
one record of 100 bytes to partition 0 of ``PRODUCE_TOPIC``, which must
exist; its record batch is built once).
"""

from __future__ import annotations

import argparse
import errno
import json
import math
import os
import select
import selectors
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from support.readiness import ready_within

_CLIENT_ID = b"load"
_HEADER = struct.Struct(">ihhih")   # size, api_key, api_version, correlation_id, client_id length
API_KEYS = {"api_versions": (18, 0, b""), "metadata": (3, 1, struct.pack(">i", -1)), "produce": (0, 3, None)}
PRODUCE_TOPIC = "load-produce"
_bodies: dict[str, bytes] = {}


def _body(api: str) -> bytes:
    body = API_KEYS[api][2]
    if body is not None:
        return body
    body = _bodies.get(api)
    if body is None:       # Produce v3: null transactional id, acks=1, 5 s, one topic, partition 0, one batch
        from twisted_kafka.protocol.records import build_batch

        batch = build_batch([(None, b"v" * 100)])
        topic = PRODUCE_TOPIC.encode()
        body = _bodies[api] = (struct.pack(">hhii", -1, 1, 5000, 1) + struct.pack(">h", len(topic)) + topic
                               + struct.pack(">iii", 1, 0, len(batch)) + batch)
    return body


def request(api: str, correlation_id: int) -> bytes:
    key, version, _ = API_KEYS[api]
    body = _body(api)
    return (_HEADER.pack(2 + 2 + 4 + 2 + len(_CLIENT_ID) + len(body), key, version, correlation_id, len(_CLIENT_ID))
            + _CLIENT_ID + body)


class _Conn:
    __slots__ = ("sock", "next_id", "expected", "outstanding", "buf", "received")

    def __init__(self, sock):
        self.sock = sock
        self.next_id = 0
        self.expected = 0
        self.outstanding = 0
        self.buf = bytearray()
        self.received = 0


def _connect(host: str, port: int, source: str | None = None) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if source:
        sock.bind((source, 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(10)
    sock.connect((host, port))
    sock.setblocking(False)
    return sock


_stop_requested = False


def _request_stop(signum, frame) -> None:
    global _stop_requested
    _stop_requested = True


def pipeline(host: str, port: int, connections: int, depth: int, duration: float, api: str,
             drain_timeout: float = 30.0) -> dict:
    signal.signal(signal.SIGTERM, _request_stop)
    selector = selectors.DefaultSelector()
    conns = [_Conn(_connect(host, port)) for _ in range(connections)]
    print(json.dumps({"connected": True}), flush=True)
    sent = received = out_of_order = closed = dropped = partial = 0
    announced = False

    def send(conn: _Conn, count: int) -> None:
        nonlocal sent
        data = b"".join(request(api, conn.next_id + i) for i in range(count))
        conn.next_id += count
        conn.outstanding += count
        sent += count
        view = memoryview(data)
        while view:
            try:
                n = conn.sock.send(view)
            except BlockingIOError:  # the broker is not reading: wait for room in the socket buffer
                ready_within(conn.sock, select.POLLOUT, 1.0)
                continue
            except (BrokenPipeError, ConnectionResetError):
                return               # closed by the broker: the next read sees it and counts what is lost
            view = view[n:]

    for conn in conns:
        selector.register(conn.sock, selectors.EVENT_READ, conn)
        send(conn, depth)
    start = time.monotonic()
    deadline = start + duration
    sending = True
    while True:
        now = time.monotonic()
        if sending and (now >= deadline or closed == len(conns) or _stop_requested):
            sending = False
            stop_sending_at = now
        if not sending and (all(c.outstanding == 0 for c in conns) or now > stop_sending_at + drain_timeout):
            break
        for key, _ in selector.select(timeout=0.05):
            conn: _Conn = key.data
            try:
                chunk = conn.sock.recv(1 << 18)
            except (BlockingIOError, InterruptedError):
                continue
            except ConnectionResetError:
                chunk = b""
            if not chunk:   # closed by the broker: what it did not answer is counted as dropped
                selector.unregister(conn.sock)
                closed += 1
                dropped += conn.outstanding
                partial += 1 if conn.buf else 0
                conn.outstanding = 0
                continue
            buf = conn.buf
            buf += chunk
            answered = 0
            pos = 0
            while len(buf) - pos >= 8:
                size, correlation_id = struct.unpack_from(">ii", buf, pos)
                if len(buf) - pos < 4 + size:
                    break
                if correlation_id != conn.expected:
                    out_of_order += 1
                conn.expected = correlation_id + 1
                pos += 4 + size
                answered += 1
            del buf[:pos]
            conn.outstanding -= answered
            conn.received += answered
            received += answered
            if sending and answered:
                send(conn, answered)
        if not announced and all(c.received for c in conns):
            announced = True
            print(json.dumps({"answering": True}), flush=True)
    elapsed_sending = stop_sending_at - start
    for conn in conns:
        conn.sock.close()
    selector.close()
    return {"mode": "pipeline", "api": api, "connections": connections, "depth": depth,
            "sent": sent, "received": received, "out_of_order": out_of_order, "closed_by_broker": closed,
            "dropped_at_close": dropped, "partial_frame_at_close": partial,
            "unanswered": sum(c.outstanding for c in conns),
            "sending_seconds": elapsed_sending,
            "total_seconds": time.monotonic() - start}


def accept(host: str, port: int, concurrency: int, duration: float, count: int | None = None,
           stall: float = 30.0) -> dict:
    """Connect, ApiVersions, read the answer, close; ``concurrency`` at a time, for ``duration`` seconds --
    or, with ``count``, until ``count`` connections have been opened and finished (``duration`` unused; a
    phase that completes nothing for ``stall`` seconds raises)."""
    selector = selectors.DefaultSelector()
    probe = request("api_versions", 1)
    completed = failed = 0
    start = time.monotonic()
    deadline = start + duration

    def open_one():
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setblocking(False)
        err = sock.connect_ex((host, port))
        if err not in (0, errno.EINPROGRESS):
            sock.close()
            return False
        selector.register(sock, selectors.EVENT_WRITE, [sock, "connecting", bytearray()])
        return True

    active = opened = 0
    progress = start
    while True:
        now = time.monotonic()
        while active < concurrency and (opened < count if count is not None else now < deadline):
            opened += 1
            if open_one():
                active += 1
            else:
                failed += 1
        if active == 0:
            break
        if count is not None and now - progress > stall:
            raise RuntimeError(f"accept: no connection finished for {stall:g} s ({completed} of {count} done)")
        for key, _ in selector.select(timeout=0.05):
            state = key.data
            sock = state[0]
            done = False
            if state[1] == "connecting":
                if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    failed += 1
                    done = True
                else:
                    try:
                        sock.send(probe)
                        state[1] = "waiting"
                        selector.modify(sock, selectors.EVENT_READ, state)
                    except OSError:
                        failed += 1
                        done = True
            else:
                try:
                    chunk = sock.recv(4096)
                except BlockingIOError:
                    continue
                except OSError:
                    chunk = b""
                if not chunk:
                    failed += 1
                    done = True
                else:
                    state[2] += chunk
                    buf = state[2]
                    if len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                        completed += 1
                        done = True
            if done:
                selector.unregister(sock)
                sock.close()
                active -= 1
                progress = time.monotonic()
        if count is None and time.monotonic() > deadline + 30:
            break
    elapsed = time.monotonic() - start
    selector.close()
    return {"mode": "accept", "concurrency": concurrency, "completed": completed, "failed": failed,
            "seconds": elapsed}


def latency(host: str, port: int, duration: float, interval: float, api: str) -> dict:
    """One connection, one request at a time every ``interval`` s: the round-trip times in ms."""
    sock = socket.create_connection((host, port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    samples = []
    correlation_id = 0
    deadline = time.monotonic() + duration
    while time.monotonic() < deadline:
        correlation_id += 1
        started = time.perf_counter()
        sock.sendall(request(api, correlation_id))
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
            chunk = sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the broker closed the latency probe connection")
            buf += chunk
        samples.append((time.perf_counter() - started) * 1000.0)
        if struct.unpack_from(">i", buf, 4)[0] != correlation_id:
            raise AssertionError("response out of order")
        time.sleep(interval)            # the probe's own pace between requests
    sock.close()
    ordered = sorted(samples)
    return {"mode": "latency", "api": api, "count": len(samples), "samples_ms": samples,
            "p50_ms": percentile(ordered, 0.50), "p99_ms": percentile(ordered, 0.99), "max_ms": ordered[-1]}


def read_frame(sock: socket.socket, buf: bytearray) -> bytes:
    """One response frame (its size prefix off) from ``sock``; bytes read past it stay in ``buf``."""
    while len(buf) < 4 or len(buf) < 4 + struct.unpack_from(">i", buf)[0]:
        chunk = sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        buf += chunk
    size = struct.unpack_from(">i", buf)[0]
    frame = bytes(buf[4:4 + size])
    del buf[:4 + size]
    return frame


def nonreader(host: str, port: int, duration: float, api: str, receive_buffer: int = 4096) -> dict:
    """Send requests as fast as the broker takes them and never read an answer."""
    signal.signal(signal.SIGTERM, _request_stop)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, receive_buffer)   # requests wait in the broker, not here
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(10)
    sock.connect((host, port))
    sock.setblocking(False)
    print(json.dumps({"connected": True}), flush=True)
    batch = 256
    data = b"".join(request(api, i) for i in range(batch))
    per_request = len(data) / batch
    sent_bytes = 0
    closed_after = None
    start = time.monotonic()
    view = memoryview(data)
    offset = 0
    while not _stop_requested and time.monotonic() - start < duration:
        try:
            n = sock.send(view[offset:])
        except (BlockingIOError, InterruptedError):
            ready_within(sock, select.POLLOUT, 0.05)
            continue
        except OSError:          # reset or broken pipe: the broker closed it
            closed_after = time.monotonic() - start
            break
        sent_bytes += n
        offset = (offset + n) % len(data)
    sock.close()
    return {"mode": "nonreader", "api": api, "requests_taken": int(sent_bytes / per_request),
            "closed_by_broker": closed_after is not None, "closed_after_seconds": closed_after,
            "seconds": time.monotonic() - start}


def percentile(ordered: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of an ascending list."""
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, math.ceil(round(q * len(ordered), 6)) - 1))]


def spawn(mode: str, **kwargs) -> subprocess.Popen:
    """Start a generator in its own process (stdout: one JSON line)."""
    args = [sys.executable, "-m", "support.load", mode]
    for key, value in kwargs.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    root = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=root, env=env)


def _wait_for(process: subprocess.Popen, event: str, timeout: float) -> None:
    """Read a ``pipeline`` generator's progress lines until ``{event: true}``."""
    fd = process.stdout.fileno()
    deadline = time.monotonic() + timeout
    while True:
        line = b""
        while not line.endswith(b"\n"):      # byte by byte: what follows is left for collect()
            if not ready_within(fd, select.POLLIN, deadline - time.monotonic()):
                raise TimeoutError(f"the load generator did not report {event!r} within {timeout}s")
            byte = os.read(fd, 1)
            if not byte:
                raise RuntimeError(f"the load generator ended before reporting {event!r}: "
                                   f"{process.stderr.read()[-2000:]}")
            line += byte
        progress = json.loads(line)
        if progress.get(event):
            return
        if set(progress) - {"connected", "answering"}:
            raise RuntimeError(f"unexpected line from the load generator: {line!r}")


def wait_connected(process: subprocess.Popen, timeout: float = 30) -> None:
    """Wait until every connection of a ``pipeline`` generator is open (it then stops cleanly on ``stop()``)."""
    _wait_for(process, "connected", timeout)


def wait_answering(process: subprocess.Popen, timeout: float = 30) -> None:
    """Wait until every connection of a ``pipeline`` generator has had an answer."""
    _wait_for(process, "answering", timeout)


def stop(process: subprocess.Popen) -> None:
    """Ask a ``pipeline`` generator to stop sending (it then drains and prints its result).

    Only once it reported ``connected`` (``wait_connected()``/``wait_answering()``):
    before, SIGTERM would end it without a result.
    """
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)


def collect(process: subprocess.Popen, timeout: float = 120) -> dict:
    out, err = process.communicate(timeout=timeout)
    if process.returncode != 0:
        raise RuntimeError(f"load generator failed ({process.returncode}): {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m support.load")
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("pipeline")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--connections", type=int, default=1)
    p.add_argument("--depth", type=int, default=5)
    p.add_argument("--duration", type=float, default=5.0)
    p.add_argument("--api", choices=sorted(API_KEYS), default="api_versions")
    a = sub.add_parser("accept")
    a.add_argument("--host", default="127.0.0.1")
    a.add_argument("--port", type=int, required=True)
    a.add_argument("--concurrency", type=int, default=16)
    a.add_argument("--duration", type=float, default=5.0)
    lat = sub.add_parser("latency")
    lat.add_argument("--host", default="127.0.0.1")
    lat.add_argument("--port", type=int, required=True)
    lat.add_argument("--duration", type=float, default=3.0)
    lat.add_argument("--interval", type=float, default=0.01)
    lat.add_argument("--api", choices=sorted(API_KEYS), default="api_versions")
    nr = sub.add_parser("nonreader")
    nr.add_argument("--host", default="127.0.0.1")
    nr.add_argument("--port", type=int, required=True)
    nr.add_argument("--duration", type=float, default=30.0)
    nr.add_argument("--api", choices=sorted(API_KEYS), default="metadata")
    args = parser.parse_args(argv)
    if args.mode == "pipeline":
        result = pipeline(args.host, args.port, args.connections, args.depth, args.duration, args.api)
    elif args.mode == "latency":
        result = latency(args.host, args.port, args.duration, args.interval, args.api)
    elif args.mode == "nonreader":
        result = nonreader(args.host, args.port, args.duration, args.api)
    else:
        result = accept(args.host, args.port, args.concurrency, args.duration)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

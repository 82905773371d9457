"""A client that never reads its responses costs a bounded amount of memory and is closed as idle.

Kafka mutes a connection until its response has actually left (the
Selector's send completes), so a client that stops reading stops being
read.  Here the connection is the transport's streaming producer: once the
transport holds more unsent bytes than its limit, the connection hands out
no further request and reads nothing more, until the transport has drained.
A connection whose responses make no progress for
``connections.max.idle.ms`` is closed as idle.

Black-box, on the real broker process: a raw socket with a tiny receive
buffer pipelines a thousand Fetch requests whose answers carry 100 KiB of
records each (100 MB in all) and never reads.  The broker's peak RSS
(VmHWM, from /proc) grows by far less than that, a well-behaved client
beside it keeps being answered, the non-reader is closed as idle (its
blocked send fails), and the broker says why in its log.  A slow reader that
does read gets every response, in order, however often the transport fills.
"""

from __future__ import annotations

import socket
import sys
import threading

import pytest

from support.broker_process import BrokerProcess
from support.raw_client import RawClient, auto_create_topic
from tests.integration.data.helpers import fetch_request, produce_request
from twisted_kafka.protocol.codec import encode_request
from twisted_kafka.protocol.framing import FrameBuffer
from twisted_kafka.protocol.records import build_batch

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the broker's peak RSS from /proc"),
]

TOPIC = "flow"
RECORD = 100 * 1024            # one record of 100 KiB: every Fetch answer carries it
FETCHES = 1000                 # pipelined and never read: 100 MB of answers
MEMORY_BOUND = 20 * 1024 * 1024
IDLE_MS = 2000
TINY_BUFFER = 4096             # SO_RCVBUF / SO_SNDBUF (the kernel doubles it)
FETCH_VERSION = 11


def peak_rss(pid: int) -> int:
    """The process's peak resident set size in bytes (VmHWM)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/<pid>/status")


def tiny_socket(port: int) -> socket.socket:
    """A client socket whose buffers are set before connecting (the window is negotiated then)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, TINY_BUFFER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, TINY_BUFFER)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.settimeout(60)
    sock.connect(("127.0.0.1", port))
    return sock


def pipelined_fetches(count: int, first_correlation_id: int = 1) -> bytes:
    fetch = fetch_request({TOPIC: {0: 0}}, version=FETCH_VERSION, partition_max_bytes=4 * RECORD)
    return b"".join(b"".join(encode_request(fetch, FETCH_VERSION, first_correlation_id + i, "non-reader"))
                    for i in range(count))


def broker_with_a_record(tmp_path, overrides: dict[str, str]) -> tuple[BrokerProcess, RawClient]:
    broker = BrokerProcess(tmp_path, {"auto.create.topics.enable": "true", **overrides}).start()
    client = RawClient(broker.data_port, timeout=30)
    auto_create_topic(client, TOPIC, 1)
    produced = client.request(produce_request({TOPIC: {0: build_batch([(None, b"x" * RECORD)])}}, acks=1))
    assert produced.responses[0].partition_responses[0].error_code == 0, produced
    return broker, client


def fetch_once(client: RawClient) -> int:
    """One Fetch of the record by a well-behaved client: the size of the records returned."""
    response = client.request(fetch_request({TOPIC: {0: 0}}, version=FETCH_VERSION, partition_max_bytes=4 * RECORD),
                              FETCH_VERSION)
    partition = response.responses[0].partitions[0]
    assert partition.error_code == 0, partition
    return len(partition.records)


def test_a_client_that_never_reads_costs_bounded_memory_and_is_closed_as_idle(tmp_path):
    # A small receive buffer on the broker's side too: the non-reader's requests pile up in
    # the broker process (where they would be read and answered) rather than in the kernel.
    broker, polite = broker_with_a_record(tmp_path, {"connections.max.idle.ms": str(IDLE_MS),
                                                     "socket.receive.buffer.bytes": str(TINY_BUFFER)})
    outcome: dict = {}
    try:
        for _ in range(20):          # warm up: whatever one Fetch allocates is in the baseline
            assert fetch_once(polite) >= RECORD
        before = peak_rss(broker.pid)
        data = pipelined_fetches(FETCHES)
        non_reader = tiny_socket(broker.data_port)
        non_reader_port = non_reader.getsockname()[1]

        def send_without_reading():
            sent = 0
            try:
                while sent < len(data):
                    sent += non_reader.send(data[sent:sent + 65536])
            except OSError as exc:
                outcome["error"] = exc
            outcome["sent"] = sent

        sender = threading.Thread(target=send_without_reading, daemon=True)
        sender.start()
        answered = [fetch_once(polite) for _ in range(20)]   # a client beside it is answered
        sender.join(timeout=120)
        assert not sender.is_alive(), "the non-reader's send neither completed nor failed"
        peak = peak_rss(broker.pid)
        polite.close()
        non_reader.close()
    finally:
        status = broker.stop()
    assert status == 0
    assert all(size >= RECORD for size in answered)
    growth = peak - before
    assert growth < MEMORY_BOUND, (f"the broker's peak RSS grew by {growth / 2**20:.0f} MiB for a client that "
                                   f"reads nothing (its answers add up to {FETCHES * RECORD / 2**20:.0f} MiB)")
    assert outcome["sent"] < len(data), "the broker stopped reading the non-reader"
    assert isinstance(outcome.get("error"), (ConnectionResetError, BrokenPipeError)), outcome
    log = broker.log_text()
    assert f"127.0.0.1:{non_reader_port}" in log and "connections.max.idle.ms" in log, \
        "the idle close of the non-reader is logged with its peer"


def test_a_slow_reader_gets_every_response_in_order(tmp_path):
    """Every answer fills the transport past its limit, so the connection pauses and resumes
    once per request: nothing is lost or reordered."""
    count = 200
    broker, polite = broker_with_a_record(tmp_path, {})
    try:
        polite.close()
        sock = tiny_socket(broker.data_port)
        data = pipelined_fetches(count)
        sender = threading.Thread(target=sock.sendall, args=(data,), daemon=True)
        sender.start()
        frames = FrameBuffer(8 * RECORD, kind="response", limit_name="the test's limit")
        correlation_ids = []
        while len(correlation_ids) < count:
            chunk = sock.recv(TINY_BUFFER)
            assert chunk, f"closed by the broker after {len(correlation_ids)} responses"
            frames.feed(chunk)
            while frames.complete():
                frame = frames.pop()
                correlation_ids.append(int.from_bytes(frame[:4], "big", signed=True))
                assert len(frame) > RECORD
        sender.join(timeout=30)
        sock.close()
    finally:
        status = broker.stop()
    assert status == 0
    assert correlation_ids == list(range(1, count + 1))

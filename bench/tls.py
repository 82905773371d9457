"""What TLS costs: produce/consume throughput and connection (handshake) rate, TLS next to plaintext, one run.

Run with ``.venv/bin/python bench/tls.py [--key-type ecdsa|rsa] [--only connect]`` (``--quick`` for a smoke run,
``--scale 2`` for longer cases).  One broker is started the README way
(``bin/twisted-kafka-server-start``, ``etc/server.properties``) with two
data-plane listeners on loopback -- PLAINTEXT and SSL (a CA and a broker
certificate made for the run with trustme, PEM key store, TLS 1.2 and 1.3
enabled, ``ssl.client.auth=none``) -- so both transports are measured
against the same broker, the same log directory and the same moment's
machine load.

* produce / consume: one confluent-kafka (librdkafka) Producer sends N
  messages of 1 KiB to a new single-partition topic (linger.ms=5, acks=1)
  and flushes; one Consumer in assign mode reads them back from offset 0.
  Each client has connected and sent (or received) one message before
  its clock starts, so connection set-up is not part of the figure.
  Reported: messages/s, MB/s of payload, the broker's CPU per message
  (psutil, user+sys) and the client's CPU per message (this process,
  librdkafka's threads included; ``bench/common.py``);
* connection rate: C connections one after another, each connecting,
  sending ApiVersions, reading the answer and closing -- over TLS a full
  handshake each (no session resumption), with Python's ``ssl`` module
  (OpenSSL, as librdkafka) so the client's per-connection cost is that of
  OpenSSL and not of starting a librdkafka instance (several threads).
  Reported: connections/s, broker CPU per connection, client CPU per
  connection, and handshakes per second of broker CPU (the broker serves
  every connection on its one reactor thread: one core's capacity);
* resumed connections (``tls-resumed``): the same, each connection offering
  the session of the one before (the TLS 1.3 ticket the broker sent), as a
  reconnecting client does; the run fails unless every connection after the
  first resumed.

``--key-type ecdsa`` (the default: P-256, trustme's) or ``rsa`` (2048 bits)
chooses the certificates' keys; ``--only connect`` skips produce/consume.

Every case also runs at N/2 (C/2) first, and the N-scaling check reports
time(N) / time(N/2) (about 2 when the figure measures the work;
``bench/common.py``).  With ``--repeat R`` (default 2) every case runs R
times, plaintext and TLS alternating, and the fastest run of each is kept:
the machine is shared, and the fastest run is the least disturbed.  The client shares the machine with the broker:
absolute figures are a floor, the TLS/plaintext ratios are the result.
"""

from __future__ import annotations

import argparse
import os
import socket
import ssl
import struct
import sys
import tempfile
import time
from dataclasses import dataclass

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import ClientCpu, ratio_cell, report_scaling, scaling_check
from support.broker_process import BrokerProcess
from support.tls import Pki, tls_overrides

MB = 1_000_000
MESSAGE = b"x" * 1024
_REQUEST = struct.pack(">hhih", 18, 0, 1, 5) + b"bench"
API_VERSIONS = struct.pack(">i", len(_REQUEST)) + _REQUEST
STALL_SECONDS = 15.0
#: plaintext; TLS with a full handshake each; TLS resuming the previous connection's session (ticket)
TRANSPORTS = ("plaintext", "tls", "tls-resumed")


@dataclass
class Figure:
    transport: str
    phase: str
    count: int
    seconds: float
    broker_cpu: float
    client_cpu: float

    @property
    def rate(self) -> float:
        return self.count / self.seconds

    def row(self, unit: str) -> str:
        per = 1e6 / self.count
        mbps = f"{self.rate * len(MESSAGE) / MB:8.1f}" if unit == "msg" else "       -"
        return (f"{self.transport:9} {self.phase:9} {self.count:8d} {self.rate:12.0f} {mbps} "
                f"{self.broker_cpu * per:14.1f} {self.client_cpu * per:14.1f}")


class BrokerCpu:
    def __init__(self, pid: int):
        self.process = psutil.Process(pid)

    def seconds(self) -> float:
        times = self.process.cpu_times()
        return times.user + times.system


def client_conf(transport: str, broker: BrokerProcess, pki: Pki) -> dict:
    if transport == "plaintext":
        return {"bootstrap.servers": broker.bootstrap}
    return {"bootstrap.servers": f"localhost:{broker.port('SSL')}", "security.protocol": "SSL",
            "ssl.ca.location": pki.ca_file, "ssl.endpoint.identification.algorithm": "https"}


def measure(transport: str, phase: str, count: int, broker_cpu: BrokerCpu, work) -> Figure:
    cpu = ClientCpu().start()
    before = broker_cpu.seconds()
    started = time.perf_counter()
    work()
    seconds = time.perf_counter() - started
    return Figure(transport, phase, count, seconds, broker_cpu.seconds() - before, cpu.stop())


def produce_consume(transport: str, broker: BrokerProcess, pki: Pki, count: int, broker_cpu: BrokerCpu,
                    topic: str) -> list[Figure]:
    conf = client_conf(transport, broker, pki)
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({**conf, "linger.ms": 5, "acks": 1, "queue.buffering.max.messages": 1_000_000})
    producer.produce(topic, MESSAGE)      # connected and warm before the clock starts
    producer.flush(30)

    def produce() -> None:
        for _ in range(count):
            while True:
                try:
                    producer.produce(topic, MESSAGE)
                    break
                except BufferError:
                    producer.poll(0.01)
        if producer.flush(STALL_SECONDS * 4):
            raise RuntimeError(f"{transport}: produce did not finish")

    figures = [measure(transport, "produce", count, broker_cpu, produce)]
    consumer = Consumer({**conf, "group.id": f"bench-{topic}", "enable.auto.commit": False,
                         "queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 10})
    consumer.assign([TopicPartition(topic, 0, 0)])

    first = None
    while first is None or first.error() is not None:      # the warm-up message: connected, fetching
        first = consumer.poll(STALL_SECONDS)
        if first is None:
            raise RuntimeError(f"{transport}: no first message")

    def consume() -> None:
        got, last = 0, time.monotonic()
        while got < count:
            messages = consumer.consume(min(10_000, count - got), 1.0)
            got += sum(1 for m in messages if m.error() is None)
            if messages:
                last = time.monotonic()
            elif time.monotonic() - last > STALL_SECONDS:
                raise RuntimeError(f"{transport}: consume stalled at {got}/{count}")

    figures.append(measure(transport, "consume", count, broker_cpu, consume))
    consumer.close()
    return figures


def read_exactly(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed before the answer")
        data += chunk
    return data


def connections(transport: str, broker: BrokerProcess, pki: Pki, count: int, broker_cpu: BrokerCpu) -> Figure:
    """``count`` connections one after another.  ``tls-resumed``: each offers the session (the TLS 1.3
    ticket) of the one before, as a reconnecting client does; every one after the first must resume."""
    context = ssl.create_default_context(cafile=pki.ca_file)
    port = broker.port("SSL") if transport.startswith("tls") else broker.data_port
    session: list = [None]
    resumed = [0]

    def one() -> None:
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        if transport == "plaintext":
            sock = raw
        else:
            sock = context.wrap_socket(raw, server_hostname="localhost",
                                       session=session[0] if transport == "tls-resumed" else None)
        try:
            sock.sendall(API_VERSIONS)
            size = struct.unpack(">i", read_exactly(sock, 4))[0]
            read_exactly(sock, size)
            if transport == "tls-resumed":
                resumed[0] += sock.session_reused
                session[0] = sock.session        # the ticket arrived with (before) the answer
        finally:
            sock.close()

    def run() -> None:
        for _ in range(count):
            one()

    figure = measure(transport, "connect", count, broker_cpu, run)
    if transport == "tls-resumed" and resumed[0] < count - 1:
        raise RuntimeError(f"only {resumed[0]} of {count} connections resumed their TLS session")
    return figure


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the counts")
    parser.add_argument("--key-type", choices=("ecdsa", "rsa"), default="ecdsa",
                        help="the certificates' keys: ECDSA P-256 or RSA 2048")
    parser.add_argument("--only", default="produce,consume,connect",
                        help="comma-separated phases (produce and consume run together)")
    parser.add_argument("--repeat", type=int, default=2,
                        help="run every case this many times and keep the fastest (the machine is shared)")
    args = parser.parse_args()
    phases = set(args.only.split(","))
    messages = int((20_000 if args.quick else 200_000) * args.scale)
    conns = int((100 if args.quick else 1_000) * args.scale)

    with tempfile.TemporaryDirectory(prefix="bench-tls-") as tmp:
        pki = Pki(os.path.join(tmp, "pki"), key_type=args.key_type)
        overrides = tls_overrides(pki, pki.server_keystore("localhost", "127.0.0.1"))
        overrides["connection.events.enable"] = "false"      # one record per connection would be measured too
        overrides["max.connection.creation.rate"] = str(2**31 - 1)
        broker = BrokerProcess(tmp, overrides).start(60)
        try:
            assert broker.pid is not None
            broker_cpu = BrokerCpu(broker.pid)
            figures: dict[tuple[str, str, int], Figure] = {}

            def keep(key: tuple[str, str, int], figure: Figure) -> None:
                if key not in figures or figure.seconds < figures[key].seconds:
                    figures[key] = figure

            for transport in TRANSPORTS:
                connections(transport, broker, pki, 20, broker_cpu)          # warm-up, not reported
            for run in range(args.repeat):
                for transport in TRANSPORTS:     # alternating: all see the same moments' load
                    if transport != "tls-resumed" and phases & {"produce", "consume"}:
                        for n in (messages // 2, messages):
                            for figure in produce_consume(transport, broker, pki, n, broker_cpu,
                                                          f"bench-{transport}-{n}-{run}"):
                                keep((transport, figure.phase, n), figure)
                    if "connect" in phases:
                        for c in (conns // 2, conns):
                            keep((transport, "connect", c), connections(transport, broker, pki, c, broker_cpu))
        finally:
            status = broker.stop()
        if status != 0:
            print(f"broker exited with status {status}")
            return 1

    print(f"\nTLS vs plaintext (one broker, loopback; {args.key_type.upper()} certificates; {len(MESSAGE)} B "
          "messages, 1 partition, acks=1)")
    print(f"{'transport':9} {'phase':9} {'count':>8} {'per second':>12} {'MB/s':>8} "
          f"{'broker µs/op':>14} {'client µs/op':>14}  N-ratio")
    checks = []
    for phase, unit, full in (("produce", "msg", messages), ("consume", "msg", messages), ("connect", "conn", conns)):
        if phase not in phases and not (phase == "consume" and "produce" in phases):
            continue
        transports = TRANSPORTS if phase == "connect" else TRANSPORTS[:2]
        for transport in transports:
            figure, half = figures[(transport, phase, full)], figures[(transport, phase, full // 2)]
            check = scaling_check(f"{transport} {phase}", half.seconds, figure.seconds)
            checks.append(check)
            print(f"{figure.row(unit)}  {ratio_cell(check)}")
        plain = figures[("plaintext", phase, full)]
        for transport in transports[1:]:
            tls = figures[(transport, phase, full)]
            print(f"{'':9} {phase:9} {transport}/plaintext: rate x{tls.rate / plain.rate:.2f}, broker CPU per op "
                  f"x{(tls.broker_cpu / tls.count) / max(plain.broker_cpu / plain.count, 1e-12):.2f}")
        if phase == "connect":
            for transport in transports[1:]:
                tls = figures[(transport, phase, full)]
                print(f"{'':9} {phase:9} {transport}: {tls.count / tls.broker_cpu:,.0f} handshakes per second of "
                      "broker CPU (one core: the broker handles every connection on its reactor thread)")
    report_scaling(checks)
    return 0


if __name__ == "__main__":
    sys.exit(main())

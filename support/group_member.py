"""One consumer group member in its own process, for the group tests (and the groups benchmark).

    python -u -m support.group_member --client confluent --bootstrap HOST:PORT \\
        --group G --topic T [--assignor roundrobin] [--session-ms 6000] [--instance-id I] [--name N]

``--client`` is ``confluent`` (librdkafka), ``kafka-python`` or ``aiokafka``.
The member subscribes to the topic, consumes, and after each batch commits
the batch's offsets synchronously; only once the commit succeeded does it
report the batch, so a message reported is a message consumed *and*
committed.  A member killed in between reports nothing for that batch, and
whoever owns the partition next starts from the last commit.

It prints one line per event on stdout (flushed at once); every event but
``MSG`` carries the time (``time.monotonic()``, the same clock in every
process of the machine) as its first field:

* ``READY t`` once subscribed;
* ``ASSIGN t p,p,...`` whenever its assignment changes (partition numbers, sorted; empty for none);
* ``FIRST t`` when the first message arrives;
* ``MSG partition offset`` for every committed message (not with ``--quiet``);
* ``BATCH t n`` after the ``MSG`` lines of each committed batch (not with ``--quiet``): when
  the member last made progress, for its longest gap during a rebalance;
* ``PROGRESS t n`` after each commit with ``--quiet``: n messages committed so far;
* ``ERR t text`` for a failed commit (a rebalance may fail one): the batch is not
  reported, and the member reads it again if it still owns its partitions;
* ``CLOSING t`` on SIGTERM, before closing the consumer (leaving the group);
* ``CLOSED t`` after a clean close;
* ``COUNT t n seconds`` at exit.

``--hold`` (librdkafka only) keeps assigned partitions paused until a ``GO``
line arrives on stdin (then ``GO t``): the whole group is formed before
anyone consumes.  ``--poll-ms`` is the poll timeout (100 ms),
``--max-messages N`` makes it exit cleanly after N messages,
``--commit-every N`` commits every N messages instead of after every batch
(the benchmark's consumers), and ``--quiet`` leaves out the ``MSG`` lines.

With ``GROUP_MEMBER_DEBUG_DIR`` set, kafka-python's and aiokafka's DEBUG logs
go to ``<dir>/<group>.<name>.log``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time

stop = False


def _on_term(signum, frame):
    global stop
    stop = True


def out(kind: str, rest: str = "") -> None:
    sys.stdout.write(f"{kind} {time.monotonic():.6f} {rest}".rstrip() + "\n")
    sys.stdout.flush()


def heartbeat_ms(args) -> int:
    return args.heartbeat_ms or max(100, args.session_ms // 4)


def rewind(batch: list[tuple[int, int]]) -> dict[int, int]:
    """The first offset of each partition in a batch whose commit failed: a member that keeps the
    partition (an incremental rebalance) reads from there again, as a new owner would."""
    first: dict[int, int] = {}
    for p, o in batch:
        first.setdefault(p, o)
    return first


def _wait_for_go(go: threading.Event) -> None:
    for line in sys.stdin:
        if line.strip() == "GO":
            go.set()
            return


class Reporter:
    def __init__(self, args):
        self.args = args
        self.assignment: tuple[int, ...] | None = None
        self.count = 0
        self.first = False

    def assigned(self, partitions) -> None:
        current = tuple(sorted(partitions))
        if current != self.assignment:
            self.assignment = current
            out("ASSIGN", ",".join(map(str, current)))

    def received(self) -> None:
        if not self.first:
            self.first = True
            out("FIRST")

    def committed(self, batch: list[tuple[int, int]]) -> None:
        self.count += len(batch)
        if self.args.quiet:
            out("PROGRESS", str(self.count))
        else:
            sys.stdout.write("".join(f"MSG {p} {o}\n" for p, o in batch))
            out("BATCH", str(len(batch)))

    def closing(self) -> None:
        if stop:
            out("CLOSING")

    @property
    def done(self) -> bool:
        return bool(self.args.max_messages) and self.count >= self.args.max_messages


def run_confluent(args, report: Reporter) -> None:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    conf = {"bootstrap.servers": args.bootstrap, "group.id": args.group, "client.id": args.name,
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": args.session_ms, "heartbeat.interval.ms": heartbeat_ms(args),
            "fetch.wait.max.ms": 100, "topic.metadata.refresh.interval.ms": 2000}
    if args.protocol == "consumer":
        # KIP-848: the session, heartbeat and assignor are the broker's (group.remote.assignor picks one).
        conf["group.protocol"] = "consumer"
        del conf["session.timeout.ms"], conf["heartbeat.interval.ms"]
        if args.assignor:
            conf["group.remote.assignor"] = args.assignor
    elif args.assignor:
        conf["partition.assignment.strategy"] = args.assignor
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    consumer = Consumer(conf)
    subscription = [args.topic_regex] if args.topic_regex else [args.topic]
    go = threading.Event()
    held = False

    def on_assign(c, partitions):
        # With --hold, assigned partitions are paused before their first fetch, until GO.
        c.assign(partitions)
        if not go.is_set():
            c.pause(partitions)

    if args.hold:
        threading.Thread(target=_wait_for_go, args=(go,), daemon=True).start()
        held = True
        consumer.subscribe(subscription, on_assign=on_assign)
    else:
        consumer.subscribe(subscription)
    out("READY")
    pending: dict[int, int] = {}
    batch: list[tuple[int, int]] = []
    try:
        while not stop and not report.done:
            if held and go.is_set():
                held = False
                consumer.resume(consumer.assignment())
                out("GO")
            messages = consumer.consume(1000, timeout=args.poll_ms / 1000)
            report.assigned(tp.partition for tp in consumer.assignment())
            for msg in messages:
                if msg.error() is not None:
                    continue
                report.received()
                pending[msg.partition()] = msg.offset() + 1
                batch.append((msg.partition(), msg.offset()))
            if pending and (len(batch) >= args.commit_every or not messages):
                try:
                    consumer.commit(offsets=[TopicPartition(args.topic, p, o) for p, o in pending.items()],
                                    asynchronous=False)
                except KafkaException as exc:
                    out("ERR", f"commit {exc}")
                    for p, o in rewind(batch).items():     # read them again if the partition stays ours
                        with contextlib.suppress(KafkaException):
                            consumer.seek(TopicPartition(args.topic, p, o))
                else:
                    report.committed(batch)
                pending, batch = {}, []
    finally:
        report.closing()
        consumer.close()
    out("CLOSED")


def run_kafka_python(args, report: Reporter) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError
    from kafka.structs import OffsetAndMetadata

    conf = dict(bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.name,
                auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=args.session_ms,
                heartbeat_interval_ms=heartbeat_ms(args), fetch_max_wait_ms=100,
                metadata_max_age_ms=2000)
    if args.assignor:
        conf["partition_assignment_strategy"] = [
            {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[a]
            for a in args.assignor.split(",")]
    if args.instance_id:
        conf["group_instance_id"] = args.instance_id
    consumer = KafkaConsumer(**conf)
    consumer.subscribe([args.topic])
    # kafka-python 3.0.12 can lose a rejoin.  A leader compares the partitions it assigned
    # with those its metadata listener has seen for the subscription since ``subscribe()``;
    # when the first assignment runs before any metadata update, the next update starts a
    # rejoin.  If a poll's timeout returns while that JoinGroup/SyncGroup is in flight, the
    # leader's new assignment has already made ``need_rejoin()`` false, so no later poll
    # awaits the join's end and heartbeats stay disabled for good: the broker expels the
    # member at its session timeout and it never rejoins.  A blocking metadata update
    # after ``subscribe()`` (``topics()``) lets the first assignment match what is known.
    if args.topic not in consumer.topics():
        raise SystemExit(f"{args.topic} is not in the metadata")
    out("READY")
    pending: dict[int, int] = {}
    batch: list[tuple[int, int]] = []
    try:
        while not stop and not report.done:
            records = consumer.poll(timeout_ms=args.poll_ms, max_records=1000)
            report.assigned(tp.partition for tp in consumer.assignment())
            got = False
            for tp, msgs in records.items():
                for msg in msgs:
                    got = True
                    report.received()
                    pending[tp.partition] = msg.offset + 1
                    batch.append((tp.partition, msg.offset))
            if pending and (len(batch) >= args.commit_every or not got):
                try:
                    consumer.commit({TopicPartition(args.topic, p): OffsetAndMetadata(o, "", -1)
                                     for p, o in pending.items()})
                except KafkaError as exc:
                    out("ERR", f"commit {exc!r}")
                    for p, o in rewind(batch).items():
                        with contextlib.suppress(Exception):
                            consumer.seek(TopicPartition(args.topic, p), o)
                else:
                    report.committed(batch)
                pending, batch = {}, []
    finally:
        report.closing()
        consumer.close()
    out("CLOSED")


def run_aiokafka(args, report: Reporter) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import KafkaError

    async def main():
        conf = dict(bootstrap_servers=args.bootstrap, group_id=args.group, client_id=args.name,
                    auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=args.session_ms,
                    heartbeat_interval_ms=heartbeat_ms(args), fetch_max_wait_ms=100,
                    metadata_max_age_ms=2000)
        if args.assignor:
            conf["partition_assignment_strategy"] = (RoundRobinPartitionAssignor,)
        if args.instance_id:
            conf["group_instance_id"] = args.instance_id
        consumer = AIOKafkaConsumer(**conf)
        await consumer.start()
        consumer.subscribe([args.topic])
        out("READY")
        pending: dict[int, int] = {}
        batch: list[tuple[int, int]] = []
        try:
            while not stop and not report.done:
                records = await consumer.getmany(timeout_ms=args.poll_ms, max_records=1000)
                report.assigned(tp.partition for tp in consumer.assignment())
                got = False
                for tp, msgs in records.items():
                    for msg in msgs:
                        got = True
                        report.received()
                        pending[tp.partition] = msg.offset + 1
                        batch.append((tp.partition, msg.offset))
                if pending and (len(batch) >= args.commit_every or not got):
                    try:
                        await consumer.commit({TopicPartition(args.topic, p): o for p, o in pending.items()})
                    except KafkaError as exc:
                        out("ERR", f"commit {exc!r}")
                        for p, o in rewind(batch).items():
                            with contextlib.suppress(Exception):
                                consumer.seek(TopicPartition(args.topic, p), o)
                    else:
                        report.committed(batch)
                    pending, batch = {}, []
        finally:
            report.closing()
            await consumer.stop()

    asyncio.run(main())
    out("CLOSED")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", choices=["confluent", "kafka-python", "aiokafka"], required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--assignor", default=None)
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--instance-id", default=None)
    parser.add_argument("--name", default=f"member-{os.getpid()}")
    parser.add_argument("--max-messages", type=int, default=0)
    parser.add_argument("--commit-every", type=int, default=1)
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--poll-ms", type=int, default=100)
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--heartbeat-ms", type=int, default=0, help="default: a quarter of the session timeout")
    parser.add_argument("--protocol", choices=["classic", "consumer"], default="classic",
                        help="librdkafka's group.protocol (consumer: KIP-848, the broker times and assigns)")
    parser.add_argument("--topic-regex", default=None, help="subscribe to this regular expression (librdkafka: "
                        "starts with ^) instead of --topic")
    args = parser.parse_args(argv)
    debug_dir = os.environ.get("GROUP_MEMBER_DEBUG_DIR")
    if debug_dir:        # the Python clients' own DEBUG logs, one file per member, for a stalled group
        logging.basicConfig(filename=os.path.join(debug_dir, f"{args.group}.{args.name}.log"), level=logging.DEBUG,
                            format="%(asctime)s %(threadName)s %(name)s %(levelname)s %(message)s")
    signal.signal(signal.SIGTERM, _on_term)
    report = Reporter(args)
    began = time.monotonic()
    {"confluent": run_confluent, "kafka-python": run_kafka_python, "aiokafka": run_aiokafka}[args.client](
        args, report)
    out("COUNT", f"{report.count} {time.monotonic() - began:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

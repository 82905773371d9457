"""Exactly-once consume-transform-produce across crashes (KIP-98, KIP-447), real processes throughout.

The application (``support/ctp_app.py``, confluent-kafka) reads an
input topic in a consumer group and writes every record to an output topic
in transactions that also commit its offsets (``send_offsets_to_transaction``).
It is stopped in the middle of a transaction -- its records produced and on
the broker, the commit not sent -- and then either

* the application is killed with SIGKILL and started again: the new
  instance's ``init_transactions`` fences the old one and aborts its open
  transaction, and it resumes from the group's committed offsets; or
* the broker is killed with SIGKILL and started again on the same log dirs:
  the coordinator reloads the open transaction from ``__transaction_state``
  and the application commits or aborts and retries it.

Either way a read_committed consumer of the output finds every input key
exactly once: none missing, none twice.  Each run moves 100,000 records
(about 15 s on a 2-core machine).
"""

from __future__ import annotations

import collections
import subprocess
import sys
import time
import uuid

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from support.broker_process import REPO_ROOT
from support.wait import wait_until

BROKER_OVERRIDES = {"transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5",
                    "group.initial.rebalance.delay.ms": "0"}
PARTITIONS = 4
N = 100_000
BATCH = 1000
APP_TIMEOUT = 240.0


def new_topics(broker) -> tuple[str, str]:
    suffix = uuid.uuid4().hex[:8]
    names = (f"eos-in-{suffix}", f"eos-out-{suffix}")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(n, PARTITIONS, 1) for n in names]).values():
        future.result(30)
    return names


def feed(broker, topic: str, n: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20,
                                         "enable.idempotence": True})
    for i in range(n):
        producer.produce(topic, b"v%d" % i, b"k%d" % i, partition=i % PARTITIONS)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


class App:
    """One instance of the application, a child process."""

    def __init__(self, broker, source: str, sink: str, group: str, tid: str, hold_after: int | None = None):
        command = [sys.executable, "-m", "support.ctp_app", broker.bootstrap, source, sink, group, tid,
                   "--batch", str(BATCH)]
        if hold_after is not None:
            command += ["--hold-after", str(hold_after)]
        self.process = subprocess.Popen(command, cwd=REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True)
        self.lines: list[str] = []

    def wait_for(self, word: str, timeout: float = APP_TIMEOUT) -> None:
        """Read the application's lines until one starts with ``word`` (the pipe's readline is the wait)."""
        deadline = time.monotonic() + timeout
        assert self.process.stdout is not None
        while time.monotonic() < deadline:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError(f"the application exited ({self.process.wait()}) before {word}:\n"
                                     + "".join(self.lines[-30:]))
            self.lines.append(line)
            if line.startswith(word):
                return
        raise AssertionError(f"no {word} within {timeout}s")

    def release(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def finish(self) -> None:
        self.wait_for("DONE")
        assert self.process.wait(30) == 0

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()


def read_committed_keys(broker, topic: str, expected: int, timeout: float = 120.0) -> collections.Counter:
    """Every key of ``topic`` as a read_committed consumer sees it, read to the end of every partition."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": uuid.uuid4().hex,
                                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.subscribe([topic])
    keys: collections.Counter = collections.Counter()
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not (sum(keys.values()) >= expected and len(at_end) == PARTITIONS):
            for msg in consumer.consume(5000, 0.5):
                if msg.error():
                    if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                    continue
                at_end.discard(msg.partition())
                keys[msg.key()] += 1
    finally:
        consumer.close()
    return keys


def assert_exactly_once(broker, sink: str, n: int) -> None:
    keys = read_committed_keys(broker, sink, n)
    missing = [i for i in range(n) if keys[b"k%d" % i] == 0]
    twice = {k: c for k, c in keys.items() if c > 1}
    assert not missing, f"{len(missing)} input keys missing from the output, e.g. {missing[:5]}"
    assert not twice, f"{len(twice)} keys more than once, e.g. {list(twice.items())[:5]}"
    assert sum(keys.values()) == n


def uncommitted_count(broker, sink: str) -> int:
    """Records in the output as read_uncommitted sees them (aborted ones included)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": uuid.uuid4().hex})
    try:
        total = 0
        for p in range(PARTITIONS):
            low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(sink, p), timeout=30)
            total += high - low
        return total
    finally:
        consumer.close()


def application_killed(broker, n: int) -> None:
    source, sink = new_topics(broker)
    feed(broker, source, n)
    group, tid = f"eos-{uuid.uuid4().hex[:6]}", f"eos-app-{uuid.uuid4().hex[:6]}"
    first = App(broker, source, sink, group, tid, hold_after=n // BATCH // 3)
    first.wait_for("HOLDING")
    first.kill()                                # SIGKILL with its transaction open, its records in the log
    second = App(broker, source, sink, group, tid)
    second.finish()
    assert_exactly_once(broker, sink, n)
    # the killed instance's records are in the log, aborted: more records than keys, none of them read
    assert uncommitted_count(broker, sink) > n


def broker_killed(broker, n: int) -> None:
    source, sink = new_topics(broker)
    feed(broker, source, n)
    group, tid = f"eos-{uuid.uuid4().hex[:6]}", f"eos-app-{uuid.uuid4().hex[:6]}"
    app = App(broker, source, sink, group, tid, hold_after=n // BATCH // 3)
    try:
        app.wait_for("HOLDING")
        broker.kill()                           # SIGKILL with the transaction open
        broker.start()
        wait_until(lambda: broker.running, what="the broker to run again")
        app.release()                           # it commits, or aborts and does the batch again
        app.finish()
    finally:
        if app.process.poll() is None:
            app.kill()
    assert_exactly_once(broker, sink, n)


def test_application_killed_mid_transaction_is_fenced_and_its_transaction_aborted(module_broker):
    application_killed(module_broker, N)


def test_broker_killed_mid_transaction(module_broker):
    broker_killed(module_broker, N)


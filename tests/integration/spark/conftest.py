"""Fixtures of the Spark data source tests: one real Spark and one real broker for the whole package.

* ``spark`` — one local SparkSession (``local[2]``, no UI) for the test
  session, its Python workers running this interpreter with the checkout
  first on ``PYTHONPATH``; the ``twisted_kafka`` data source is registered.
  Starting Spark costs seconds, so every test shares it.
* ``kafka`` — one broker process for the package (tests use their own topics).
* ``make_topic(partitions)`` — a new topic with a unique name (``create_topic``).

Helpers: ``produce`` (confluent-kafka, returns what was acknowledged, by
partition and offset), ``consume_all`` (confluent-kafka in assign mode),
``run_available_now`` (a streaming query with Trigger.AvailableNow whose
micro-batches are collected on the driver with foreachBatch).
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import time
import uuid
from dataclasses import dataclass, field

import pytest

from support.broker_process import REPO_ROOT, BrokerProcess

FORMAT = "twisted_kafka"


@pytest.fixture(scope="session")
def spark():
    if shutil.which("java") is None:
        pytest.fail("java is not installed: run bin/install-system-deps (as root) for openjdk-17-jre-headless")
    saved = {name: os.environ.get(name) for name in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH")}
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Spark's Python workers import twisted_kafka from this checkout.
    paths = [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    from pyspark.sql import SparkSession

    from twisted_kafka.spark import register

    session = (SparkSession.builder.master("local[2]").appName("twisted_kafka-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.ui.showConsoleProgress", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="package")
def kafka(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("spark-broker"), {"num.partitions": "4"}).start()
    yield broker
    if broker.running:
        status = broker.stop()
        assert status == 0, f"clean stop exited with status {status}\n{broker.log_text()[-4000:]}"


def create_topic(bootstrap: str, partitions: int = 4, prefix: str = "spark", **config: str) -> str:
    """A new topic with a unique name (and topic ``config``, dots written as underscores)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, partitions, 1, config={k.replace("_", "."): v for k, v in config.items()})
    admin.create_topics([topic], operation_timeout=15)[name].result(30)
    return name


@pytest.fixture
def make_topic(kafka):
    return lambda partitions=4, prefix="spark", **config: create_topic(kafka.bootstrap, partitions, prefix, **config)


@dataclass
class Produced:
    """What the broker acknowledged: (partition, offset) -> (key, value, headers)."""

    records: dict = field(default_factory=dict)

    def offsets(self, partition: int) -> list[int]:
        return sorted(o for p, o in self.records if p == partition)


def record_for(i: int, *, tag: bytes = b"") -> tuple[bytes | None, bytes, list | None]:
    """Record ``i`` of a test: every 7th has no key, every 3rd has headers (one with a null value)."""
    key = None if i % 7 == 0 else b"key-%d" % i
    value = b"value-%d-%s" % (i, tag) + b"x" * (i % 13)
    headers = [("h", b"%d" % i), ("empty", None)] if i % 3 == 0 else None
    return key, value, headers


def produce(bootstrap: str, topic: str, count: int, *, partitions: int, first: int = 0,
            tag: bytes = b"") -> Produced:
    """``count`` records round-robin over ``partitions`` (record ``first + i`` to partition i % partitions)."""
    from confluent_kafka import Producer

    produced = Produced()
    errors = []

    def delivered(headers, err, msg):  # a delivery report does not carry the headers
        if err is not None:
            errors.append(err)
        else:
            produced.records[(msg.partition(), msg.offset())] = (msg.key(), msg.value(), headers)

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(first, first + count):
        key, value, headers = record_for(i, tag=tag)
        producer.produce(topic, value, key, partition=i % partitions, headers=headers,
                         on_delivery=functools.partial(delivered, headers))
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0, "records left undelivered"
    assert not errors, errors[:3]
    assert len(produced.records) == count
    return produced


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 30) -> list:
    """Every record of ``topic`` from offset 0 until ``expected`` were read (then a moment more for extras)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    got = []
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(got) < expected and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                assert msg.error() is None, msg.error()
                got.append(msg)
        # Anything written twice would be right behind: read until the partitions' ends.
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(partitions)}
        seen = {p: max((m.offset() for m in got if m.partition() == p), default=-1) for p in range(partitions)}
        while any(seen[p] < ends[p] - 1 for p in range(partitions)) and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                got.append(msg)
                seen[msg.partition()] = max(seen[msg.partition()], msg.offset())
    finally:
        consumer.close()
    return got


class Batches:
    """foreachBatch sink: the rows of every non-empty micro-batch, kept on the driver."""

    def __init__(self, columns=("partition", "offset", "key", "value")):
        self.columns = list(columns)
        self.batches: list[tuple[int, list]] = []

    def __call__(self, df, batch_id):
        rows = df.select(*self.columns).collect()
        if rows:
            self.batches.append((batch_id, rows))

    @property
    def rows(self) -> list:
        return [row for _, rows in self.batches for row in rows]


def stream(session, bootstrap: str, **options):
    reader = session.readStream.format(FORMAT).option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def run_available_now(df, checkpoint: str, sink=None, timeout: float = 120):
    """Run ``df`` to a foreachBatch sink with Trigger.AvailableNow until the query ends by itself."""
    sink = sink or Batches()
    query = (df.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    try:
        finished = query.awaitTermination(timeout)
    finally:
        if query.isActive:
            query.stop()
    assert finished, f"the AvailableNow query did not end within {timeout}s"
    return sink, query

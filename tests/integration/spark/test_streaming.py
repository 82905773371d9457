"""Structured Streaming reads: checkpoint resume across sessions, maxOffsetsPerTrigger, data loss."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from support.broker_process import REPO_ROOT

from .conftest import Batches, produce, run_available_now, stream

PARTITIONS = 4
JOB = os.path.join(os.path.dirname(os.path.abspath(__file__)), "available_now_job.py")


def offsets_of(rows) -> list[tuple[int, int]]:
    return sorted((r.partition, r.offset) for r in rows)


def latest_committed_offsets(checkpoint: str) -> dict:
    """The source offsets of the last batch in the checkpoint's offset log (Spark's Kafka JSON)."""
    directory = os.path.join(checkpoint, "offsets")
    last = max((name for name in os.listdir(directory) if name.isdigit()), key=int)
    with open(os.path.join(directory, last)) as fh:
        lines = fh.read().splitlines()
    return json.loads(lines[-1])


def spark_submit_available_now(kafka, topic: str, checkpoint: str, output: str, *options: str) -> list[dict]:
    """One AvailableNow run in a separate Spark application (spark-submit, local[2]); the rows it read."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    command = [os.path.join(os.path.dirname(sys.executable), "spark-submit"), "--master", "local[2]",
               "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
               "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
               JOB, kafka.bootstrap, topic, checkpoint, output, *options]
    done = subprocess.run(command, env=env, cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, f"spark-submit exited with {done.returncode}\n{done.stderr[-4000:]}"
    with open(output, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh]


def test_available_now_twice_across_sessions_reads_exactly_the_new_records(spark, kafka, make_topic, tmp_path):
    topic = make_topic(PARTITIONS)
    checkpoint = str(tmp_path / "checkpoint")
    first = produce(kafka.bootstrap, topic, 1000, partitions=PARTITIONS)

    sink, _ = run_available_now(stream(spark, kafka.bootstrap, subscribe=topic, startingOffsets="earliest"),
                                checkpoint)
    assert offsets_of(sink.rows) == sorted(first.records)
    assert latest_committed_offsets(checkpoint) == {topic: {str(p): 250 for p in range(PARTITIONS)}}

    second = produce(kafka.bootstrap, topic, 600, partitions=PARTITIONS, first=1000, tag=b"second")
    # The second run is another Spark application (its own JVM and driver): it knows
    # where to resume only from the checkpoint.
    rows = spark_submit_available_now(kafka, topic, checkpoint, str(tmp_path / "second.jsonl"),
                                      "startingOffsets=earliest")
    got = sorted((r["partition"], r["offset"]) for r in rows)
    assert len(got) == len(set(got)) == 600, "duplicates or missing records in the second run"
    assert got == sorted(second.records)
    for row in rows:
        key, value, _ = second.records[(row["partition"], row["offset"])]
        assert (row["key"], row["value"]) == (None if key is None else key.hex(), value.hex())
    assert latest_committed_offsets(checkpoint) == {topic: {str(p): 400 for p in range(PARTITIONS)}}


def test_max_offsets_per_trigger_splits_the_backlog(spark, kafka, make_topic, tmp_path):
    topic = make_topic(PARTITIONS)
    produced = produce(kafka.bootstrap, topic, 1000, partitions=PARTITIONS)  # 250 per partition
    sink, _ = run_available_now(stream(spark, kafka.bootstrap, subscribe=topic, startingOffsets="earliest",
                                       maxOffsetsPerTrigger=300), str(tmp_path / "checkpoint"))
    # 300 shared by 4 equal partitions: 75 each per batch, then the 25 left of each.
    assert [len(rows) for _, rows in sink.batches] == [300, 300, 300, 100]
    for n, (_, rows) in enumerate(sink.batches):
        for p in range(PARTITIONS):
            mine = sorted(r.offset for r in rows if r.partition == p)
            assert mine == list(range(75 * n, min(75 * (n + 1), 250))), (n, p)
    assert offsets_of(sink.rows) == sorted(produced.records)


def test_data_loss_under_a_stopped_stream(spark, kafka, make_topic, tmp_path):
    topic = make_topic(2)
    checkpoint = str(tmp_path / "checkpoint")
    produce(kafka.bootstrap, topic, 200, partitions=2)  # offsets 0-99 in each partition
    sink, _ = run_available_now(stream(spark, kafka.bootstrap, subscribe=topic, startingOffsets="earliest"),
                                checkpoint)
    assert len(sink.rows) == 200

    # While the query is stopped: 100 more per partition, then offsets 100-149 of partition 0
    # are deleted (the log start offset moves to 150) before the query read them.
    later = produce(kafka.bootstrap, topic, 200, partitions=2, first=200)
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    (future,) = admin.delete_records([TopicPartition(topic, 0, 150)]).values()
    assert future.result(30).low_watermark == 150
    del admin, future

    with pytest.raises(Exception) as failure:
        run_available_now(stream(spark, kafka.bootstrap, subscribe=topic, failOnDataLoss="true"), checkpoint)
    message = str(failure.value)
    assert "data loss" in message and f"offsets 100 to 149 of {topic}-0" in message, message[-3000:]
    assert "failOnDataLoss" in message

    sink, _ = run_available_now(stream(spark, kafka.bootstrap, subscribe=topic, failOnDataLoss="false"), checkpoint)
    expected = sorted((p, o) for p, o in later.records if not (p == 0 and o < 150))
    assert offsets_of(sink.rows) == expected
    assert latest_committed_offsets(checkpoint) == {topic: {"0": 200, "1": 200}}


def test_pattern_picks_up_a_topic_created_later(spark, kafka, make_topic, tmp_path):
    prefix = f"spark-pattern-{os.urandom(3).hex()}"
    first = make_topic(2, prefix=prefix)
    checkpoint = str(tmp_path / "checkpoint")
    options = dict(subscribePattern=f"{prefix}-.*", startingOffsets="earliest", maxOffsetsPerTrigger=70)
    a = produce(kafka.bootstrap, first, 100, partitions=2)
    columns = ("topic", "partition", "offset")
    sink, _ = run_available_now(stream(spark, kafka.bootstrap, **options), checkpoint, Batches(columns))
    assert sorted((r.partition, r.offset) for r in sink.rows) == sorted(a.records)
    assert [len(rows) for _, rows in sink.batches] == [70, 30]

    # A new topic matching the pattern is read from offset 0, within the same per-batch limit.
    second = make_topic(2, prefix=prefix)
    b = produce(kafka.bootstrap, second, 60, partitions=2)
    sink, _ = run_available_now(stream(spark, kafka.bootstrap, **options), checkpoint, Batches(columns))
    assert {r.topic for r in sink.rows} == {second}
    assert sorted((r.partition, r.offset) for r in sink.rows) == sorted(b.records)
    assert [len(rows) for _, rows in sink.batches] == [60]

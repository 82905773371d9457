"""Writes with a real broker and a local Spark: every row arrives, with its key, value and headers."""

from __future__ import annotations

from collections import Counter

import pytest
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructField, StructType

from .conftest import FORMAT, consume_all, produce, run_available_now, stream

N = 2000
PARTITIONS = 4
SCHEMA = StructType([
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                 StructField("value", BinaryType())]))),
    StructField("partition", IntegerType()),
])


def row(i: int) -> tuple:
    key = None if i % 5 == 0 else b"k%d" % i
    headers = [("n", b"%d" % i), ("kind", b"even" if i % 2 == 0 else b"odd")] if i % 4 else None
    return key, b"row-%d" % i, headers, i % PARTITIONS


def as_record(key, value, headers) -> tuple:
    return key, value, tuple(headers) if headers else None


def test_batch_write_then_read_back_with_confluent_kafka(spark, kafka, make_topic):
    topic = make_topic(PARTITIONS)
    rows = [row(i) for i in range(N)]
    df = spark.createDataFrame(rows, SCHEMA).repartition(3)
    (df.write.format(FORMAT).option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", topic)
     .mode("append").save())

    got = consume_all(kafka.bootstrap, topic, PARTITIONS, N)
    assert len(got) == N, f"{len(got)} records read back, {N} written"
    read = Counter((m.partition(), *as_record(m.key(), m.value(), m.headers())) for m in got)
    written = Counter((p, *as_record(k, v, h)) for k, v, h, p in rows)
    assert read == written


def test_topic_column_and_string_values(spark, kafka, make_topic):
    topics = [make_topic(1), make_topic(1)]
    rows = [(topics[i % 2], f"key-{i}", f"välue-{i}") for i in range(100)]
    df = spark.createDataFrame(rows, "topic string, key string, value string")
    df.write.format(FORMAT).option("kafka.bootstrap.servers", kafka.bootstrap).mode("append").save()
    for topic in topics:
        got = consume_all(kafka.bootstrap, topic, 1, 50)
        assert sorted((m.key(), m.value()) for m in got) == sorted(
            (k.encode(), v.encode()) for t, k, v in rows if t == topic)


def test_writes_without_value_or_topic_are_refused(spark, kafka):
    df = spark.createDataFrame([(b"k",)], "key binary")
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        df.write.format(FORMAT).option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", "t").mode(
            "append").save()
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(Exception, match="'topic' option is required"):
        df.write.format(FORMAT).option("kafka.bootstrap.servers", kafka.bootstrap).mode("append").save()
    with pytest.raises(Exception, match="Overwrite is not allowed"):
        df.write.format(FORMAT).option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", "t").mode(
            "overwrite").save()


def test_stream_from_topic_to_topic(spark, kafka, make_topic, tmp_path):
    source, target = make_topic(PARTITIONS), make_topic(2)
    produced = produce(kafka.bootstrap, source, 800, partitions=PARTITIONS)
    df = stream(spark, kafka.bootstrap, subscribe=source, startingOffsets="earliest", includeHeaders="true")
    query = (df.select("key", "value", "headers").writeStream.format(FORMAT)
             .option("kafka.bootstrap.servers", kafka.bootstrap).option("topic", target)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120), "the AvailableNow query did not end within 120s"
    finally:
        if query.isActive:
            query.stop()
    got = consume_all(kafka.bootstrap, target, 2, 800)
    assert Counter(as_record(m.key(), m.value(), m.headers()) for m in got) == Counter(
        as_record(*record) for record in produced.records.values())
    # ... and the copy reads back through the source as well.
    sink, _ = run_available_now(stream(spark, kafka.bootstrap, subscribe=target, startingOffsets="earliest"),
                                str(tmp_path / "checkpoint-2"))
    assert len(sink.rows) == 800

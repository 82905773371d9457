"""Batch reads with a real broker and a real local Spark: every record exactly once, Spark's Kafka schema."""

from __future__ import annotations

import time

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .conftest import FORMAT, create_topic, produce

PARTITIONS = 4
N = 4000

# The schema Spark's Kafka source declares (KafkaRecordToRowConverter): every field nullable.
SPARK_KAFKA_SCHEMA = StructType([
    StructField("key", BinaryType(), True),
    StructField("value", BinaryType(), True),
    StructField("topic", StringType(), True),
    StructField("partition", IntegerType(), True),
    StructField("offset", LongType(), True),
    StructField("timestamp", TimestampType(), True),
    StructField("timestampType", IntegerType(), True),
])
SPARK_KAFKA_SCHEMA_WITH_HEADERS = StructType(SPARK_KAFKA_SCHEMA.fields + [
    StructField("headers", ArrayType(StructType([StructField("key", StringType(), True),
                                                 StructField("value", BinaryType(), True)]), True), True)])


@pytest.fixture(scope="module")
def topic_with_records(kafka, spark):
    name = create_topic(kafka.bootstrap, PARTITIONS, prefix="spark-batch")
    before_ms = int(time.time() * 1000)
    produced = produce(kafka.bootstrap, name, N, partitions=PARTITIONS)
    after_ms = int(time.time() * 1000)
    return name, produced, (before_ms, after_ms)


def read(spark, bootstrap, **options):
    reader = spark.read.format(FORMAT).option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        reader = reader.option(key, str(value))
    return reader.load()


def test_every_record_exactly_once_with_the_kafka_schema(spark, kafka, topic_with_records):
    topic, produced, (before_ms, after_ms) = topic_with_records
    df = read(spark, kafka.bootstrap, subscribe=topic, includeHeaders="true")
    assert df.schema == SPARK_KAFKA_SCHEMA_WITH_HEADERS
    assert [(f.name, f.nullable) for f in df.schema.fields] == [
        (f.name, f.nullable) for f in SPARK_KAFKA_SCHEMA_WITH_HEADERS.fields]
    assert df.rdd.getNumPartitions() == PARTITIONS

    rows = df.collect()
    assert len(rows) == N
    seen = {(r.partition, r.offset) for r in rows}
    assert len(seen) == N, "a record was read twice"
    assert seen == set(produced.records)
    for row in rows:
        key, value, headers = produced.records[(row.partition, row.offset)]
        assert row.topic == topic
        assert row.key == key and row.value == value
        got_headers = None if row.headers is None else [(h.key, h.value) for h in row.headers]
        assert got_headers == headers
        assert row.timestampType == 0  # CreateTime
        millis = int(row.timestamp.timestamp() * 1000)
        assert before_ms - 1000 <= millis <= after_ms + 1000


def test_schema_without_headers(spark, kafka, topic_with_records):
    topic, _, _ = topic_with_records
    df = read(spark, kafka.bootstrap, subscribe=topic)
    assert df.schema == SPARK_KAFKA_SCHEMA
    assert df.count() == N


def test_min_partitions_splits_ranges_and_reads_each_record_once(spark, kafka, topic_with_records):
    topic, produced, _ = topic_with_records
    df = read(spark, kafka.bootstrap, subscribe=topic, minPartitions=10)
    assert df.rdd.getNumPartitions() == 10
    rows = df.select("partition", "offset").collect()
    assert sorted((r.partition, r.offset) for r in rows) == sorted(produced.records)


def test_specific_offsets_and_assign(spark, kafka, topic_with_records):
    topic, produced, _ = topic_with_records
    starting = f'{{"{topic}": {{"0": 10, "1": -2}}}}'
    ending = f'{{"{topic}": {{"0": 20, "1": 5}}}}'
    df = read(spark, kafka.bootstrap, assign=f'{{"{topic}": [0, 1]}}', startingOffsets=starting,
              endingOffsets=ending)
    got = sorted((r.partition, r.offset) for r in df.select("partition", "offset").collect())
    assert got == [(0, o) for o in range(10, 20)] + [(1, o) for o in range(0, 5)]


def test_subscribe_pattern(spark, kafka, topic_with_records):
    topic, _, _ = topic_with_records
    df = read(spark, kafka.bootstrap, subscribePattern="spark-batch-" + "." * (len(topic) - len("spark-batch-")))
    assert df.select("topic").distinct().collect()[0].topic == topic
    assert df.count() == N


def test_bad_options_fail_with_a_clear_message(spark, kafka, topic_with_records):
    topic, _, _ = topic_with_records
    with pytest.raises(Exception, match="Exactly one of the options 'subscribe', 'subscribePattern' or 'assign'"):
        read(spark, kafka.bootstrap, subscribe=topic, assign=f'{{"{topic}": [0]}}').count()
    with pytest.raises(Exception, match="must give an offset for every partition"):
        read(spark, kafka.bootstrap, subscribe=topic, startingOffsets=f'{{"{topic}": {{"0": 1}}}}').count()

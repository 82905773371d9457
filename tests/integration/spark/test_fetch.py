"""The executors' read of one offset range, against a real broker (no Spark needed to drive it).

Covers what a Spark task meets when records are removed after the driver
planned its range: the planning check cannot see that, the task must.
"""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from twisted_kafka.spark.fetch import read_range
from twisted_kafka.spark.offsets import DataLossError, OffsetRange
from twisted_kafka.spark.schema import arrow_schema, kafka_schema

from .conftest import produce

SCHEMA = arrow_schema(kafka_schema(include_headers=True))


def read(kafka, rng, **kwargs):
    batches = list(read_range({"bootstrap.servers": kafka.bootstrap}, rng, SCHEMA, include_headers=True,
                              poll_timeout_ms=30_000, **kwargs))
    assert all(batch.schema.equals(SCHEMA) for batch in batches)
    return [row for batch in batches for row in batch.to_pylist()]


def test_a_range_is_read_exactly_in_small_batches(kafka, make_topic):
    topic = make_topic(1)
    produced = produce(kafka.bootstrap, topic, 300, partitions=1)
    batches = list(read_range({"bootstrap.servers": kafka.bootstrap}, OffsetRange(topic, 0, 40, 260), SCHEMA,
                              include_headers=True, fail_on_data_loss=True, poll_timeout_ms=30_000,
                              batch_rows=64))
    assert [b.num_rows for b in batches][:3] == [64, 64, 64]
    rows = [row for batch in batches for row in batch.to_pylist()]
    assert [r["offset"] for r in rows] == list(range(40, 260))
    for r in rows:
        key, value, headers = produced.records[(0, r["offset"])]
        assert (r["key"], r["value"], r["topic"], r["partition"]) == (key, value, topic, 0)
        assert (None if r["headers"] is None else [(h["key"], h["value"]) for h in r["headers"]]) == headers


def test_records_removed_after_planning(kafka, make_topic):
    topic = make_topic(1)
    produce(kafka.bootstrap, topic, 100, partitions=1)
    planned = OffsetRange(topic, 0, 0, 100)  # planned while offsets 0-99 existed
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap})
    (future,) = admin.delete_records([TopicPartition(topic, 0, 60)]).values()
    assert future.result(30).low_watermark == 60
    del admin, future

    with pytest.raises(DataLossError, match=f"offsets 0 to 59 of {topic}-0 were removed"):
        read(kafka, planned, fail_on_data_loss=True)
    rows = read(kafka, planned, fail_on_data_loss=False)
    assert [r["offset"] for r in rows] == list(range(60, 100))

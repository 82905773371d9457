"""The source on a topic written in transactions (KIP-98): ``kafka.isolation.level`` as Spark's Kafka source.

A transactional producer commits, aborts and commits again, and leaves a
fourth transaction open.  A batch read with
``kafka.isolation.level=read_committed`` returns the committed rows only
(its ranges end at the last stable offset, before the open transaction);
the default, read_uncommitted as in Spark, returns every data record,
aborted and open ones too.  Neither waits for the markers, which a client
never receives.
"""

from __future__ import annotations

import confluent_kafka
import pytest

from .conftest import FORMAT

PARTITIONS = 2


def read(spark, bootstrap, topic, **options):
    reader = (spark.read.format(FORMAT).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
              .option("kafkaConsumer.pollTimeoutMs", "20000"))      # a range waiting for markers fails
    for key, value in options.items():
        reader = reader.option(key, value)
    return sorted(bytes(row.value) for row in reader.load().select("value").collect())


def test_read_committed_returns_committed_rows_only(spark, kafka, make_topic):
    topic = make_topic(PARTITIONS)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"spark-{topic}",
                                         "log_level": 0})
    producer.init_transactions(30)
    written: dict[str, list[bytes]] = {}
    for outcome in ("commit1", "abort", "commit2", "open"):
        values = written[outcome] = [f"{outcome}-{i}".encode() for i in range(10)]
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.produce(topic, value, partition=i % PARTITIONS)
        producer.flush(30)
        if outcome.startswith("commit"):
            producer.commit_transaction(30)
        elif outcome == "abort":
            producer.abort_transaction(30)
    try:
        committed = sorted(written["commit1"] + written["commit2"])
        assert read(spark, kafka.bootstrap, topic, **{"kafka.isolation.level": "read_committed"}) == committed
        everything = sorted(v for values in written.values() for v in values)
        assert read(spark, kafka.bootstrap, topic) == everything
    finally:
        producer.abort_transaction(30)
    assert read(spark, kafka.bootstrap, topic, **{"kafka.isolation.level": "read_committed"}) == committed


def test_an_unknown_isolation_level_is_refused(spark, kafka, make_topic):
    topic = make_topic(1)
    with pytest.raises(Exception, match="kafka.isolation.level' must be read_uncommitted or read_committed"):
        read(spark, kafka.bootstrap, topic, **{"kafka.isolation.level": "serializable"})

"""A compacted topic refuses records without a key, as Kafka's LogValidator does.

Kafka keeps the latest record per key on a topic whose ``cleanup.policy``
includes ``compact``, so it refuses a record without a key there: the
partition answers INVALID_RECORD, with the refused records named in KIP-467's
``record_errors`` and a summary in ``error_message`` (Produce v8+).  The
batch is refused whole: none of its records is stored.  Checked with
confluent-kafka (librdkafka), kafka-python and a raw Produce v9 request; a
keyed record on the same topic is stored.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kafka.errors import InvalidRecordError

from support.raw_client import RawClient
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.records import build_batch

from .helpers import produce_request

pytestmark = pytest.mark.integration

KEYLESS = "Compacted topic cannot accept message without key in topic partition {}-0."


def create_topic(broker, name: str, policy: str = "compact") -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1, config={"cleanup.policy": policy})])[name].result(10)


def produce_one(bootstrap: str, topic: str, key: bytes | None, value: bytes):
    """Produce one record with confluent-kafka; the delivery report's error (None when stored)."""
    reports = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "retries": 0,
                         "enable.idempotence": False})
    producer.produce(topic, value, key, partition=0, on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(15) == 0
    [error] = reports
    return error


def stored_values(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        got = []
        while len(got) < high - low:
            message = consumer.poll(10)
            assert message is not None, f"{len(got)} of {high - low} records read"
            assert message.error() is None, message.error()
            got.append((message.key(), message.value()))
        return got
    finally:
        consumer.close()


@pytest.mark.parametrize("policy", ["compact", "delete,compact"])
def test_confluent_kafka_keyless_record_is_refused_keyed_one_stored(data_broker, policy):
    topic = f"compacted-confluent-{policy.replace(',', '-')}"
    create_topic(data_broker, topic, policy)
    error = produce_one(data_broker.bootstrap, topic, None, b"no key")
    assert error is not None and error.code() == KafkaError.INVALID_RECORD, error
    assert produce_one(data_broker.bootstrap, topic, b"k", b"keyed") is None
    assert stored_values(data_broker.bootstrap, topic) == [(b"k", b"keyed")]


def test_a_topic_that_is_not_compacted_takes_keyless_records(data_broker):
    create_topic(data_broker, "not-compacted", "delete")
    assert produce_one(data_broker.bootstrap, "not-compacted", None, b"no key") is None


def test_kafka_python_keyless_record_is_refused_keyed_one_stored(data_broker):
    create_topic(data_broker, "compacted-kafka-python")
    producer = KafkaProducer(bootstrap_servers=data_broker.bootstrap, retries=0, enable_idempotence=False,
                             compression_type="gzip")
    try:
        with pytest.raises(InvalidRecordError):
            producer.send("compacted-kafka-python", b"no key", partition=0).get(timeout=15)
        metadata = producer.send("compacted-kafka-python", b"keyed", key=b"k", partition=0).get(timeout=15)
        assert metadata.offset == 0
    finally:
        producer.close(5)
    assert stored_values(data_broker.bootstrap, "compacted-kafka-python") == [(b"k", b"keyed")]


def test_produce_v9_names_every_keyless_record(data_broker):
    create_topic(data_broker, "compacted-raw")
    batch = build_batch([(b"a", b"1", (), 0), (None, b"2", (), 0), (b"c", b"3", (), 0), (None, b"4", (), 0)])
    with RawClient(data_broker.data_port) as client:
        response = client.request(produce_request({"compacted-raw": {0: batch}}, version=9))
    [[partition]] = [topic.partition_responses for topic in response.responses]
    assert (partition.error_code, partition.base_offset) == (ErrorCode.INVALID_RECORD, -1)
    expected = KEYLESS.format("compacted-raw")
    assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
        (1, expected), (3, expected)]
    assert partition.error_message.startswith("One or more records have been rejected due to 2 record errors")

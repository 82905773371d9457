"""Metadata auto-creation of topics, as each client asks for it (Metadata v4+ allow_auto_topic_creation).

librdkafka producers send ``allow_auto_topic_creation=true`` and consumers
``false``; kafka-python sends true for both.  With
``auto.create.topics.enable=false`` nobody creates anything, and a Produce to
an unknown topic is answered UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

import glob
import os

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from kafka import KafkaProducer
from kafka.errors import KafkaTimeoutError

from support.raw_client import RawClient
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.records.builder import build_batch

from .helpers import produce_request


def metadata_error(broker, topic: str, *, allow: bool) -> tuple[int, int]:
    """(error code, partition count) of ``topic`` from Metadata v9 with the given allow flag."""
    with RawClient(broker.data_port) as client:
        response = client.request(m.MetadataRequest(
            version=9, topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=allow, include_topic_authorized_operations=False), 9)
    (entry,) = response.topics
    return entry.error_code, len(entry.partitions)


def has_log(broker, topic: str) -> bool:
    return bool(glob.glob(os.path.join(broker.log_dirs[0], f"{topic}-*")))


def test_librdkafka_producer_creates_consumer_does_not(broker_factory):
    broker = broker_factory({"num.partitions": "3"})
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    topic = producer.list_topics("made-by-producer", timeout=10).topics["made-by-producer"]
    assert topic.error is None and len(topic.partitions) == 3
    assert metadata_error(broker, "made-by-producer", allow=False) == (0, 3)
    assert has_log(broker, "made-by-producer")

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        topic = consumer.list_topics("asked-by-consumer", timeout=10).topics["asked-by-consumer"]
    finally:
        consumer.close()
    assert topic.error is not None and topic.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert metadata_error(broker, "asked-by-consumer", allow=False) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0)
    assert not has_log(broker, "asked-by-consumer")

    # Illegal names are refused, whoever asks.
    assert metadata_error(broker, "bad/name", allow=True)[0] == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_nobody_creates_with_auto_create_disabled(broker_factory):
    broker = broker_factory({"auto.create.topics.enable": "false"})
    topic = "never-created"
    assert metadata_error(broker, topic, allow=True) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0)

    errors = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 1500})
    producer.produce(topic, b"lost", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert len(errors) == 1 and errors[0] is not None, errors

    with pytest.raises(KafkaTimeoutError):
        kp = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False, max_block_ms=1000)
        try:
            kp.send(topic, b"lost").get(timeout=5)
        finally:
            kp.close(timeout=1)

    with RawClient(broker.data_port) as client:
        response = client.request(produce_request({topic: {0: build_batch([(None, b"x")])}}))
    assert [(p.error_code, p.base_offset) for p in response.responses[0].partition_responses] == \
        [(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]
    assert metadata_error(broker, topic, allow=True) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, 0)
    assert not has_log(broker, topic)

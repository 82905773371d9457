"""Transactions (KIP-98): a batch of orders is written all or nothing; read_committed readers never see an
aborted batch."""

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from orders import Order, decode, encode

from .helpers import read_back


def transactional_producer(config: dict) -> Producer:
    producer = Producer({**config, "transactional.id": f"orders-{uuid.uuid4()}"})
    producer.init_transactions(30)
    return producer


def write(producer: Producer, topic: str, orders: list[Order]) -> None:
    for order in orders:
        producer.produce(topic, key=order.customer.encode(), value=encode(order))


@pytest.mark.kafka_topic(partitions=2)
def test_a_read_committed_reader_sees_the_committed_batch_and_not_the_aborted_one(kafka_client_config,
                                                                                   kafka_topic):
    producer = transactional_producer(kafka_client_config)
    producer.begin_transaction()
    write(producer, kafka_topic, [Order(f"kept-{i}", f"customer-{i % 3}", i) for i in range(20)])
    producer.commit_transaction(30)
    producer.begin_transaction()
    write(producer, kafka_topic, [Order(f"dropped-{i}", f"customer-{i % 3}", i) for i in range(20)])
    producer.flush(30)      # written to the log first: abort_transaction() drops what is still queued
    producer.abort_transaction(30)
    producer.begin_transaction()
    write(producer, kafka_topic, [Order("last", "customer-0", 0)])
    producer.commit_transaction(30)

    committed = read_back({**kafka_client_config, "isolation.level": "read_committed"}, kafka_topic, 2, 21)
    assert sorted(decode(m.value()).order_id for m in committed) == sorted([f"kept-{i}" for i in range(20)]
                                                                           + ["last"])
    # A read_uncommitted reader sees the aborted orders too: they were written, then aborted by a marker.
    everything = read_back({**kafka_client_config, "isolation.level": "read_uncommitted"}, kafka_topic, 2, 41)
    assert sum(decode(m.value()).order_id.startswith("dropped-") for m in everything) == 20


@pytest.mark.kafka_topic(partitions=1)
def test_an_open_transaction_holds_read_committed_readers_at_its_start(kafka_client_config, kafka_topic):
    producer = transactional_producer(kafka_client_config)
    producer.begin_transaction()
    write(producer, kafka_topic, [Order("pending", "customer-0", 0)])
    producer.flush(30)
    consumer = Consumer({**kafka_client_config, "group.id": f"reader-{uuid.uuid4()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        # The record is written but not readable under read_committed while its transaction is open.
        consumer.assign([TopicPartition(kafka_topic, 0, 0)])
        assert consumer.consume(1, timeout=1.0) == []
        producer.commit_transaction(30)
        read = []
        deadline = time.monotonic() + 30
        while not read and time.monotonic() < deadline:
            read = [m for m in consumer.consume(1, timeout=1.0) if not m.error()]
        assert read, "the committed record never became readable"
        assert decode(read[0].value()).order_id == "pending"
    finally:
        consumer.close()

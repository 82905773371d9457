"""acks=0 through librdkafka: nothing is lost on a healthy broker.

(The raw-socket half — no response frame at all — is in test_raw_requests.py.)
This one runs against a broker with the default ``message.max.bytes``: with
acks=0 a producer never learns that a batch was refused, so a small limit
would drop batches silently, exactly as Apache Kafka would.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer, TopicPartition

from .helpers import Tally

BROKER_OVERRIDES = {"num.partitions": "4"}


def test_acks_0_loses_nothing_on_a_healthy_broker(data_broker):
    topic = "acks0-confluent"
    n = 20_000
    sent = Tally()
    producer = Producer({"bootstrap.servers": data_broker.bootstrap, "acks": 0, "linger.ms": 5})
    for i in range(n):
        sent.add(i % 4, b"%d" % i, b"value-%d" % i)
        producer.produce(topic, b"value-%d" % i, b"%d" % i, partition=i % 4)
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0
    got = Tally()
    consumer = Consumer({"bootstrap.servers": data_broker.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(4)])
    try:
        deadline = time.monotonic() + 10
        while got.total < n and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, timeout=0.5):
                if msg.error() is None:
                    got.add(msg.partition(), msg.key(), msg.value())
    finally:
        consumer.close()
    assert got.digests() == sent.digests()

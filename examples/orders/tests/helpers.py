"""Reading a topic back from the start (confluent-kafka, assign mode: no group involved)."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaException, TopicPartition


def read_back(config: dict, topic: str, partitions: int, count: int, timeout: float = 30.0) -> list:
    consumer = Consumer({**config, "group.id": "read-back", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages = []
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"read {len(messages)} of {count} messages from {topic}")
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                raise KafkaException(message.error())
            messages.append(message)
    finally:
        consumer.close()
    return messages

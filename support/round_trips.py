"""One produce-then-read-back per real client, for tests that vary only how the client connects.

Each function writes ``values`` to partition 0 of ``topic`` with one client
library and reads the partition back from offset 0 in assign mode (no group),
returning what it read; the caller compares.  ``conf`` is the client's own
connection settings (bootstrap, security protocol, SASL, TLS), in that
library's spelling; kcat takes its ``-b``/``-X`` arguments.
"""

from __future__ import annotations

import asyncio
import subprocess

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

#: How long one read may wait for the next records before the test fails.
POLL_SECONDS = 10


def confluent_kafka(conf: dict, topic: str, values: list[bytes]) -> list[bytes]:
    producer = Producer(conf)
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    try:
        while len(got) < len(values):
            message = consumer.poll(POLL_SECONDS)
            assert message is not None, f"nothing within {POLL_SECONDS} s; got {len(got)}"
            assert message.error() is None, message.error()
            got.append(message.value())
    finally:
        consumer.close()
    return got


def kcat(args: list[str], topic: str, values: list[bytes]) -> list[bytes]:
    common = [*args, "-t", topic]
    produced = subprocess.run(["kcat", "-P", *common], input=b"\n".join(values) + b"\n", capture_output=True,
                              timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", "-C", *common, "-o", "beginning", "-e", "-q"], capture_output=True,
                              timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    return consumed.stdout.splitlines()


def kafka_python(conf: dict, topic: str, values: list[bytes]) -> list[bytes]:
    producer = KafkaProducer(enable_idempotence=False, **conf)
    try:
        futures = [producer.send(topic, value) for value in values]
        producer.flush(30)
        assert [future.get(timeout=10).offset for future in futures] == list(range(len(values)))
    finally:
        producer.close()
    consumer = KafkaConsumer(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest", **conf)
    got: list[bytes] = []
    try:
        consumer.assign([KpTopicPartition(topic, 0)])
        while len(got) < len(values):
            batch = consumer.poll(timeout_ms=POLL_SECONDS * 1000)
            assert batch, f"nothing within {POLL_SECONDS} s; got {len(got)}"
            got.extend(record.value for records in batch.values() for record in records)
    finally:
        consumer.close()
    return got


def aiokafka(conf: dict, topic: str, values: list[bytes]) -> list[bytes]:
    return asyncio.run(_aiokafka(conf, topic, values))


async def _aiokafka(conf: dict, topic: str, values: list[bytes]) -> list[bytes]:
    producer = AIOKafkaProducer(**conf)
    await producer.start()
    try:
        for value in values:
            await producer.send(topic, value)
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest", **conf)
    await consumer.start()
    got: list[bytes] = []
    try:
        consumer.assign([AioTopicPartition(topic, 0)])
        while len(got) < len(values):
            batch = await consumer.getmany(timeout_ms=POLL_SECONDS * 1000)
            assert batch, f"nothing within {POLL_SECONDS} s; got {len(got)}"
            got.extend(record.value for records in batch.values() for record in records)
    finally:
        await consumer.stop()
    return got

"""kafka-python and aiokafka: producers (acks=all and 1, every codec) and consumers in assign mode.

Both clients really compress with lz4 (unlike librdkafka without
FindCoordinator), with xerial-framed snappy (librdkafka sends raw blocks),
and both verify CRC-32C on fetch by default (``check_crcs``), so a batch the
broker stored or served differently from what was produced fails here.

kafka-python's default producer is idempotent (``enable_idempotence=True``),
which needs InitProducerId; ``test_kafka_python_default_producer`` pins what
that default does against this broker.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import IncompatibleBrokerVersion

from .helpers import CODECS, Tally, assert_stored_codec, stored_codecs
from .test_confluent_roundtrip import advertised_keys

PARTITIONS = 3
BROKER_OVERRIDES = {"num.partitions": str(PARTITIONS)}
N = 3000
INIT_PRODUCER_ID = 22


def message(i: int) -> tuple[bytes, bytes]:
    return b"key-%06d" % i, b"value-%d-" % i + bytes(range(i % 200)) + b"y" * (i % 300)


def kafka_python_consume(bootstrap: str, topic: str, expected: Tally) -> Tally:
    got = Tally()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    try:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        next_offset = {p: 0 for p in range(PARTITIONS)}
        while got.total < expected.total:
            batch = consumer.poll(timeout_ms=5000)
            assert batch, f"no records within 5 s; got {got.total} of {expected.total}"
            for tp, records in batch.items():
                for record in records:
                    assert record.offset == next_offset[tp.partition]
                    next_offset[tp.partition] += 1
                    got.add(tp.partition, record.key, record.value)
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("acks", ["all", 1])
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_produce_and_consume(data_broker, codec, acks):
    topic = f"kp-{codec}-{acks}"
    producer = KafkaProducer(bootstrap_servers=data_broker.bootstrap, enable_idempotence=False, acks=acks,
                             compression_type=None if codec == "none" else codec, linger_ms=5)
    sent = Tally()
    futures = []
    for i in range(N):
        key, value = message(i)
        partition = i % PARTITIONS
        sent.add(partition, key, value)
        futures.append(producer.send(topic, value=value, key=key, partition=partition))
    producer.flush(30)
    next_offset = {p: 0 for p in range(PARTITIONS)}
    for i, future in enumerate(futures):
        metadata = future.get(timeout=10)
        assert metadata.offset == next_offset[i % PARTITIONS]
        next_offset[i % PARTITIONS] += 1
    producer.close()

    got = kafka_python_consume(data_broker.bootstrap, topic, sent)
    assert got.digests() == sent.digests()
    assert_stored_codec(stored_codecs(data_broker, topic), codec)


def test_kafka_python_default_producer(data_broker):
    """The default producer is idempotent: it works only once InitProducerId is served."""
    if INIT_PRODUCER_ID in advertised_keys(data_broker):
        producer = KafkaProducer(bootstrap_servers=data_broker.bootstrap)
        try:
            assert producer.send("kp-default", b"v").get(timeout=10).offset == 0
        finally:
            producer.close()
    else:
        # The producer is built, but its first send fails: the idempotent producer
        # needs a producer id and the broker does not serve InitProducerId.
        producer = KafkaProducer(bootstrap_servers=data_broker.bootstrap)
        try:
            with pytest.raises(IncompatibleBrokerVersion, match="InitProducerId"):
                producer.send("kp-default", b"v").get(timeout=10)
        finally:
            producer.close(timeout=2)


async def aiokafka_round_trip(bootstrap: str, topic: str, codec: str, acks) -> tuple[Tally, Tally]:
    sent = Tally()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=5,
                                compression_type=None if codec == "none" else codec)
    await producer.start()
    try:
        futures = []
        for i in range(N):
            key, value = message(i)
            partition = i % PARTITIONS
            sent.add(partition, key, value)
            futures.append(await producer.send(topic, value=value, key=key, partition=partition))
        results = await asyncio.gather(*futures)
    finally:
        await producer.stop()
    next_offset = {p: 0 for p in range(PARTITIONS)}
    for i, metadata in enumerate(results):
        assert metadata.offset == next_offset[i % PARTITIONS]
        next_offset[i % PARTITIONS] += 1

    got = Tally()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([AioTopicPartition(topic, p) for p in range(PARTITIONS)])
        next_offset = {p: 0 for p in range(PARTITIONS)}
        while got.total < sent.total:
            batch = await consumer.getmany(timeout_ms=5000)
            assert batch, f"no records within 5 s; got {got.total} of {sent.total}"
            for tp, records in batch.items():
                for record in records:
                    assert record.offset == next_offset[tp.partition]
                    next_offset[tp.partition] += 1
                    got.add(tp.partition, record.key, record.value)
    finally:
        await consumer.stop()
    return sent, got


@pytest.mark.parametrize("acks", ["all", 1])
@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka_produce_and_consume(data_broker, codec, acks):
    topic = f"aio-{codec}-{acks}"
    sent, got = asyncio.run(aiokafka_round_trip(data_broker.bootstrap, topic, codec, acks))
    assert got.digests() == sent.digests()
    assert_stored_codec(stored_codecs(data_broker, topic), codec)


def test_kafka_python_reads_what_aiokafka_wrote_with_lz4(data_broker):
    """Cross-client: lz4 frames from aiokafka (cramjam), read and CRC-checked by kafka-python (lz4)."""
    topic = "cross-lz4"
    sent, _ = asyncio.run(aiokafka_round_trip(data_broker.bootstrap, topic, "lz4", 1))
    got = kafka_python_consume(data_broker.bootstrap, topic, sent)
    assert got.digests() == sent.digests()
    assert_stored_codec(stored_codecs(data_broker, topic), "lz4")

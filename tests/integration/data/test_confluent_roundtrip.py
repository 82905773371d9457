"""confluent-kafka (librdkafka 2.16) produces 100k messages to 4 partitions and reads them back.

Every codec librdkafka has: each key/value is folded into a running checksum
per partition on both sides (producer: in send order, which per partition is
offset order on a healthy broker; consumer: in offset order, checking that
offsets run 0, 1, 2, ... with no gap or repeat), and the codec of the batches
the broker *stored* is read from the segment files.

lz4: librdkafka enables its LZ4 feature only when the broker advertises
FindCoordinator (the API that arrived with Kafka 0.9, which its feature map
ties LZ4 to); without it, it silently sends lz4-configured batches
uncompressed.  The broker advertises FindCoordinator (consumer groups), so
lz4 batches are stored as lz4, like every other codec; the test checks that
FindCoordinator stays advertised.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from support.raw_client import RawClient

from .helpers import CODECS, Tally, assert_stored_codec, stored_codecs

N = 100_000
PARTITIONS = 4
BROKER_OVERRIDES = {"num.partitions": str(PARTITIONS)}
FIND_COORDINATOR = 10


def advertised_keys(broker) -> set[int]:
    with RawClient(broker.data_port) as client:
        return {k.api_key for k in client.api_versions(3).api_keys}


def produce_all(bootstrap: str, topic: str, codec: str, n: int, **conf) -> Tally:
    sent = Tally()
    errors = []

    def delivered(err, msg):
        if err is not None:
            errors.append(err)

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5,
                         "batch.num.messages": 2000, **conf})
    for i in range(n):
        partition = i % PARTITIONS
        key = b"k%07d" % i
        value = b"value-%d-%s" % (i, b"x" * (i % 37))
        sent.add(partition, key, value)
        while True:
            try:
                producer.produce(topic, value, key, partition=partition, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0, "messages left undelivered"
    assert not errors, errors[:5]
    return sent


def consume_all(bootstrap: str, topic: str, expected_counts: dict[int, int]) -> Tally:
    got = Tally()
    next_offset = {p: 0 for p in range(PARTITIONS)}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-assign-only",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    try:
        idle = 0
        while any(next_offset[p] < expected_counts.get(p, 0) for p in range(PARTITIONS)):
            messages = consumer.consume(10_000, timeout=1.0)
            if not messages:
                idle += 1
                assert idle < 10, f"stalled at {next_offset}, expected {expected_counts}"
                continue
            idle = 0
            for msg in messages:
                assert msg.error() is None, msg.error()
                p = msg.partition()
                assert msg.offset() == next_offset[p], (p, msg.offset(), next_offset[p])
                next_offset[p] += 1
                got.add(p, msg.key(), msg.value())
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_100k_messages_round_trip(data_broker, codec):
    topic = f"roundtrip-{codec}"
    sent = produce_all(data_broker.bootstrap, topic, codec, N)
    assert sent.total == N
    got = consume_all(data_broker.bootstrap, topic, dict(sent.counts))
    assert got.digests() == sent.digests()

    stored = stored_codecs(data_broker, topic)
    assert sum(stored.values()) >= PARTITIONS
    if codec == "lz4":
        # librdkafka's LZ4 feature needs FindCoordinator in ApiVersions.
        assert FIND_COORDINATOR in advertised_keys(data_broker)
    assert_stored_codec(stored, codec)

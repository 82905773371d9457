"""Incremental fetch sessions (KIP-227) with real consumers.

kafka-python (3.x) opens a session per broker and then sends incremental
fetches; librdkafka (confluent-kafka) and aiokafka never do (librdkafka
sends ``session_id`` 0, ``session_epoch`` -1).  The broker here has one
session slot (``max.incremental.fetch.session.cache.slots=1``): the first
kafka-python consumer takes it, a second one is answered without a session
(``session_id`` 0) and keeps to full fetches -- every consumer reads every
record either way, also records that arrive after idle incremental rounds.
"""

from __future__ import annotations

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CkTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from support.scrape import scrape
from support.wait import wait_until

PARTITIONS = 4
BROKER_OVERRIDES = {"num.partitions": str(PARTITIONS), "max.incremental.fetch.session.cache.slots": "1"}
SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"


def produce(bootstrap: str, topic: str, values: list[bytes], partition: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False, acks="all")
    for value in values:
        producer.send(topic, value=value, partition=partition)
    producer.flush(10)
    producer.close()


def kafka_python(bootstrap: str, topic: str) -> KafkaConsumer:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    return consumer


def drain(consumer: KafkaConsumer, want: int) -> list[tuple[int, bytes]]:
    got: list[tuple[int, bytes]] = []

    def more() -> bool:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend((r.partition, r.value) for r in records)
        return len(got) >= want
    wait_until(more, timeout=20, what=f"{want} records")
    return sorted(got)


def session_of(consumer: KafkaConsumer):
    [handler] = consumer._fetcher._session_handlers.values()
    return handler.next_metadata


def test_kafka_python_consumes_through_an_incremental_session_and_a_second_one_without_a_slot(data_broker):
    bootstrap, topic = data_broker.bootstrap, "sessions-kp"
    produce(bootstrap, topic, [b"a", b"b"], 0)
    first = kafka_python(bootstrap, topic)
    second = None
    try:
        assert drain(first, 2) == [(0, b"a"), (0, b"b")]
        # The session holds the 4 partitions; the consumer's fetches after the first are incremental.
        wait_until(lambda: not first.poll(timeout_ms=50) and session_of(first).epoch > 3, timeout=20,
                   what="kafka-python's incremental fetches")
        metrics = scrape(data_broker.admin_url)
        assert (metrics.value(SESSIONS), metrics.value(CACHED)) == (1, PARTITIONS)

        # New records on an idle partition reach the consumer through an incremental answer.
        produce(bootstrap, topic, [b"c"], 3)
        assert drain(first, 1) == [(3, b"c")]
        assert session_of(first).session_id != 0

        # No free slot and nothing worth less to evict: the second consumer gets no session, reads all.
        second = kafka_python(bootstrap, topic)
        assert drain(second, 3) == [(0, b"a"), (0, b"b"), (3, b"c")]
        assert session_of(second).session_id == 0
        produce(bootstrap, topic, [b"d"], 2)
        assert drain(first, 1) == [(2, b"d")] and drain(second, 1) == [(2, b"d")]
        assert scrape(data_broker.admin_url).value(SESSIONS) == 1
    finally:
        first.close()
        if second is not None:
            second.close()


def test_librdkafka_fetches_without_sessions(data_broker):
    bootstrap, topic = data_broker.bootstrap, "sessions-ck"
    produce(bootstrap, topic, [b"x", b"y"], 1)
    before = scrape(data_broker.admin_url).value(SESSIONS)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "sessions-ck", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    try:
        consumer.assign([CkTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got: list[bytes] = []

        def more() -> bool:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                got.append(message.value())
            return len(got) >= 2
        wait_until(more, timeout=20, what="2 records")
        assert got == [b"x", b"y"]
        assert scrape(data_broker.admin_url).value(SESSIONS) == before
    finally:
        consumer.close()

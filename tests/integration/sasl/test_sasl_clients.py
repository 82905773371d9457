"""confluent-kafka, kcat, kafka-python and aiokafka produce and consume over SASL_PLAINTEXT,
with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.

SCRAM users are created through the admin API (confluent-kafka's
alter_user_scram_credentials) on the broker's PLAINTEXT listener; PLAIN's
come from the listener's PlainLoginModule configuration (conftest).
"""

from __future__ import annotations

import asyncio
import subprocess

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

N = 50
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret-256"),
         "SCRAM-SHA-512": ("carol", "carol-secret-512")}


@pytest.fixture(scope="module")
def broker(sasl_broker):
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{sasl_broker.port('PLAINTEXT')}"})
    upsertions = [
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"bob-secret-256"),
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                     b"carol-secret-512"),
    ]
    for future in admin.alter_user_scram_credentials(upsertions).values():
        future.result(timeout=30)
    return sasl_broker


def messages(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(N)]


def test_confluent_kafka(broker, mechanism):
    user, password = USERS[mechanism]
    conf = {"bootstrap.servers": f"127.0.0.1:{broker.port('SASL_PLAINTEXT')}", "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
    topic = f"confluent-{mechanism.lower()}"
    producer = Producer(conf)
    for value in messages(topic):
        producer.produce(topic, value)
    assert producer.flush(30) == 0
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        while len(got) < N:
            message = consumer.poll(10)
            assert message is not None, f"nothing within 10 s; got {len(got)}"
            assert message.error() is None, message.error()
            got.append(message.value())
    finally:
        consumer.close()
    assert got == messages(topic)


def test_kcat(broker, mechanism):
    user, password = USERS[mechanism]
    topic = f"kcat-{mechanism.lower()}"
    common = ["-b", f"127.0.0.1:{broker.port('SASL_PLAINTEXT')}", "-X", "security.protocol=SASL_PLAINTEXT",
              "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}", "-X", f"sasl.password={password}",
              "-t", topic]
    produced = subprocess.run(["kcat", "-P", *common], input=b"\n".join(messages(topic)) + b"\n",
                              capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", "-C", *common, "-o", "beginning", "-e", "-q"], capture_output=True,
                              timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == messages(topic)


def test_kafka_python(broker, mechanism):
    user, password = USERS[mechanism]
    conf = {"bootstrap_servers": f"127.0.0.1:{broker.port('SASL_PLAINTEXT')}", "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
    topic = f"kafka-python-{mechanism.lower()}"
    producer = KafkaProducer(enable_idempotence=False, **conf)
    try:
        futures = [producer.send(topic, value) for value in messages(topic)]
        producer.flush(30)
        assert [future.get(timeout=10).offset for future in futures] == list(range(N))
    finally:
        producer.close()
    consumer = KafkaConsumer(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest", **conf)
    got: list[bytes] = []
    try:
        consumer.assign([KpTopicPartition(topic, 0)])
        while len(got) < N:
            batch = consumer.poll(timeout_ms=10_000)
            assert batch, f"nothing within 10 s; got {len(got)}"
            got.extend(record.value for records in batch.values() for record in records)
    finally:
        consumer.close()
    assert got == messages(topic)


async def aiokafka_round_trip(conf: dict, topic: str) -> list[bytes]:
    producer = AIOKafkaProducer(**conf)
    await producer.start()
    try:
        for value in messages(topic):
            await producer.send(topic, value)
        await producer.flush()
    finally:
        await producer.stop()
    consumer = AIOKafkaConsumer(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest", **conf)
    await consumer.start()
    got: list[bytes] = []
    try:
        consumer.assign([AioTopicPartition(topic, 0)])
        while len(got) < N:
            batch = await consumer.getmany(timeout_ms=10_000)
            assert batch, f"nothing within 10 s; got {len(got)}"
            got.extend(record.value for records in batch.values() for record in records)
    finally:
        await consumer.stop()
    return got


def test_aiokafka(broker, mechanism):
    user, password = USERS[mechanism]
    conf = {"bootstrap_servers": f"127.0.0.1:{broker.port('SASL_PLAINTEXT')}", "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
    topic = f"aiokafka-{mechanism.lower()}"
    assert asyncio.run(aiokafka_round_trip(conf, topic)) == messages(topic)


@pytest.fixture(params=MECHANISMS)
def mechanism(request):
    return request.param

"""SASL over TLS (SASL_SSL): the same authentication as SASL_PLAINTEXT, on a TLS listener.

confluent-kafka, kcat, kafka-python and aiokafka produce and consume with
PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, trusting a CA made by the test
(trustme).  The SASL layer does not know what carries it: these tests use the
TLS listener settings of tests/integration/security and SASL's own keys.
"""

from __future__ import annotations

import asyncio
import subprocess

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.helpers import create_ssl_context
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition

from tests.integration.security import tls_support
from tests.support.broker_process import BrokerProcess

from .conftest import PLAIN_JAAS

N = 20
USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret-256"),
         "SCRAM-SHA-512": ("carol", "carol-secret-512")}


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory):
    pki = tls_support.Pki(tmp_path_factory.mktemp("sasl-ssl-pki"))
    keystore = pki.server_keystore("localhost", "127.0.0.1")
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:{port:PLAINTEXT},SASL_SSL://127.0.0.1:{port:SASL_SSL}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        "listener.name.sasl_ssl.ssl.keystore.location": keystore,
        "listener.name.sasl_ssl.ssl.truststore.type": "PEM",
        "listener.name.sasl_ssl.ssl.truststore.location": pki.ca_file,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "num.partitions": "1",
    }
    broker = BrokerProcess(tmp_path_factory.mktemp("sasl-ssl-broker"), overrides, control_plane=False).start()
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port('PLAINTEXT')}"})
    upsertions = [
        UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret-256"),
        UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                     b"carol-secret-512"),
    ]
    for future in admin.alter_user_scram_credentials(upsertions).values():
        future.result(timeout=30)
    yield broker, pki
    if broker.running:
        assert broker.stop() == 0, broker.log_text()[-4000:]


@pytest.fixture(params=list(USERS))
def mechanism(request):
    return request.param


def messages(tag: str) -> list[bytes]:
    return [f"{tag}-{i}".encode() for i in range(N)]


def test_confluent_kafka(tls_broker, mechanism):
    broker, pki = tls_broker
    user, password = USERS[mechanism]
    conf = {"bootstrap.servers": f"localhost:{broker.port('SASL_SSL')}", "security.protocol": "SASL_SSL",
            "ssl.ca.location": pki.ca_file, "sasl.mechanism": mechanism, "sasl.username": user,
            "sasl.password": password}
    topic = f"ssl-confluent-{mechanism.lower()}"
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
            assert message is not None and message.error() is None, message and message.error()
            got.append(message.value())
    finally:
        consumer.close()
    assert got == messages(topic)


def test_kcat(tls_broker, mechanism):
    broker, pki = tls_broker
    user, password = USERS[mechanism]
    topic = f"ssl-kcat-{mechanism.lower()}"
    common = ["-b", f"localhost:{broker.port('SASL_SSL')}", "-X", "security.protocol=SASL_SSL",
              "-X", f"ssl.ca.location={pki.ca_file}", "-X", f"sasl.mechanisms={mechanism}",
              "-X", f"sasl.username={user}", "-X", f"sasl.password={password}", "-t", topic]
    produced = subprocess.run(["kcat", "-P", *common], input=b"\n".join(messages(topic)) + b"\n",
                              capture_output=True, timeout=60)
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(["kcat", "-C", *common, "-o", "beginning", "-e", "-q"], capture_output=True,
                              timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.splitlines() == messages(topic)


def test_kafka_python(tls_broker, mechanism):
    broker, pki = tls_broker
    user, password = USERS[mechanism]
    conf = {"bootstrap_servers": f"localhost:{broker.port('SASL_SSL')}", "security_protocol": "SASL_SSL",
            "ssl_cafile": pki.ca_file, "sasl_mechanism": mechanism, "sasl_plain_username": user,
            "sasl_plain_password": password}
    topic = f"ssl-kafka-python-{mechanism.lower()}"
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


def test_aiokafka(tls_broker, mechanism):
    broker, pki = tls_broker
    user, password = USERS[mechanism]
    conf = {"bootstrap_servers": f"localhost:{broker.port('SASL_SSL')}", "security_protocol": "SASL_SSL",
            "ssl_context": create_ssl_context(cafile=pki.ca_file), "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": password}
    topic = f"ssl-aiokafka-{mechanism.lower()}"
    assert asyncio.run(aiokafka_round_trip(conf, topic)) == messages(topic)

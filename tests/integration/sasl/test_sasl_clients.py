"""confluent-kafka, kcat, kafka-python and aiokafka produce and consume over SASL_PLAINTEXT,
with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512.

SCRAM users are created through the admin API (confluent-kafka's
alter_user_scram_credentials) on the broker's PLAINTEXT listener; PLAIN's
come from the listener's PlainLoginModule configuration (conftest).
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from support import round_trips

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
    assert round_trips.confluent_kafka(conf, topic, messages(topic)) == messages(topic)


def test_kcat(broker, mechanism):
    user, password = USERS[mechanism]
    topic = f"kcat-{mechanism.lower()}"
    args = ["-b", f"127.0.0.1:{broker.port('SASL_PLAINTEXT')}", "-X", "security.protocol=SASL_PLAINTEXT",
            "-X", f"sasl.mechanisms={mechanism}", "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
    assert round_trips.kcat(args, topic, messages(topic)) == messages(topic)


def test_kafka_python(broker, mechanism):
    user, password = USERS[mechanism]
    conf = {"bootstrap_servers": f"127.0.0.1:{broker.port('SASL_PLAINTEXT')}", "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
    topic = f"kafka-python-{mechanism.lower()}"
    assert round_trips.kafka_python(conf, topic, messages(topic)) == messages(topic)


def test_aiokafka(broker, mechanism):
    user, password = USERS[mechanism]
    conf = {"bootstrap_servers": f"127.0.0.1:{broker.port('SASL_PLAINTEXT')}", "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
    topic = f"aiokafka-{mechanism.lower()}"
    assert round_trips.aiokafka(conf, topic, messages(topic)) == messages(topic)


@pytest.fixture(params=MECHANISMS)
def mechanism(request):
    return request.param

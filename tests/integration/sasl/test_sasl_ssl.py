"""SASL over TLS (SASL_SSL): the same authentication as SASL_PLAINTEXT, on a TLS listener.

confluent-kafka, kcat, kafka-python and aiokafka produce and consume with
PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, trusting a CA made by the test
(trustme).  The SASL layer does not know what carries it: these tests use the
TLS listener settings of tests/integration/security and SASL's own keys.
"""

from __future__ import annotations

import pytest
from aiokafka.helpers import create_ssl_context
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from support import round_trips
from support import tls as tls_support
from support.broker_process import BrokerProcess

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
    assert round_trips.confluent_kafka(conf, topic, messages(topic)) == messages(topic)


def test_kcat(tls_broker, mechanism):
    broker, pki = tls_broker
    user, password = USERS[mechanism]
    topic = f"ssl-kcat-{mechanism.lower()}"
    args = ["-b", f"localhost:{broker.port('SASL_SSL')}", "-X", "security.protocol=SASL_SSL",
            "-X", f"ssl.ca.location={pki.ca_file}", "-X", f"sasl.mechanisms={mechanism}",
            "-X", f"sasl.username={user}", "-X", f"sasl.password={password}"]
    assert round_trips.kcat(args, topic, messages(topic)) == messages(topic)


def test_kafka_python(tls_broker, mechanism):
    broker, pki = tls_broker
    user, password = USERS[mechanism]
    conf = {"bootstrap_servers": f"localhost:{broker.port('SASL_SSL')}", "security_protocol": "SASL_SSL",
            "ssl_cafile": pki.ca_file, "sasl_mechanism": mechanism, "sasl_plain_username": user,
            "sasl_plain_password": password}
    topic = f"ssl-kafka-python-{mechanism.lower()}"
    assert round_trips.kafka_python(conf, topic, messages(topic)) == messages(topic)


def test_aiokafka(tls_broker, mechanism):
    broker, pki = tls_broker
    user, password = USERS[mechanism]
    conf = {"bootstrap_servers": f"localhost:{broker.port('SASL_SSL')}", "security_protocol": "SASL_SSL",
            "ssl_context": create_ssl_context(cafile=pki.ca_file), "sasl_mechanism": mechanism,
            "sasl_plain_username": user, "sasl_plain_password": password}
    topic = f"ssl-aiokafka-{mechanism.lower()}"
    assert round_trips.aiokafka(conf, topic, messages(topic)) == messages(topic)

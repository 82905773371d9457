"""The broker's own connections over SASL: a control plane and inter-broker listener that are
SASL_PLAINTEXT, with SCRAM-SHA-512 (the broker's user created offline with ``bin/twisted-kafka-scram
--log-dirs`` before the first start, as Kafka's ``kafka-storage format --add-scram`` bootstraps it) and
with PLAIN (the PlainLoginModule holding both the users and the broker's own credentials).

The broker starts, its controller authenticates to its control plane and makes a topic's leader, and
confluent-kafka produces and consumes -- over PLAINTEXT and as a SASL client of the inter-broker listener.
With a wrong password the controller's attempts fail with a log line naming the listener, and are retried.
"""

from __future__ import annotations

import subprocess

import pytest

from support.broker_process import REPO_ROOT
from tests.integration.security.test_tls_clients import consume_with_confluent

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

TOOL = REPO_ROOT / "bin" / "twisted-kafka-scram"
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="broker" password="{password}";')
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
              'password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";')
LISTENERS = {
    "listeners": "PLAINTEXT://127.0.0.1:{port:PLAINTEXT},INTERNAL://127.0.0.1:{port:INTERNAL},"
                 "CONTROLLER://127.0.0.1:{port:CONTROLLER}",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
    "control.plane.listener.name": "CONTROLLER",
    "num.partitions": "1",
}


def scram_overrides(password: str) -> dict[str, str]:
    jaas = SCRAM_JAAS.format(password=password)
    return {**LISTENERS, "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.internal.scram-sha-512.sasl.jaas.config": jaas,
            "listener.name.controller.scram-sha-512.sasl.jaas.config": jaas}


def plain_overrides() -> dict[str, str]:
    return {**LISTENERS, "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS,
            "listener.name.controller.plain.sasl.jaas.config": PLAIN_JAAS}


def add_scram_user(broker, user: str, password: str) -> None:
    added = subprocess.run([str(TOOL), "--log-dirs", broker.log_dirs[0], "--alter", "--entity-type", "users",
                            "--entity-name", user, "--add-config", f"SCRAM-SHA-512=[password={password}]"],
                           capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr


def produce_and_consume(conf: dict, topic: str) -> None:
    from confluent_kafka import Producer

    producer = Producer(conf)
    for i in range(5):
        producer.produce(topic, f"m{i}".encode())
    assert producer.flush(30) == 0, "every record acknowledged: the partition got a leader"
    assert consume_with_confluent(conf, topic, 5) == [f"m{i}".encode() for i in range(5)]


def test_scram_sha_512_control_plane_and_inter_broker_listener(broker_factory):
    broker = broker_factory(scram_overrides("broker-secret"), start=False)
    add_scram_user(broker, "broker", "broker-secret")
    add_scram_user(broker, "alice", "alice-secret")
    broker.start()
    produce_and_consume({"bootstrap.servers": broker.bootstrap}, "scram-controlled")
    produce_and_consume({"bootstrap.servers": f"127.0.0.1:{broker.port('INTERNAL')}",
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                         "sasl.username": "alice", "sasl.password": "alice-secret"}, "scram-internal")
    assert "Controller cannot reach broker" not in broker.log_text()
    assert broker.stop() == 0, broker.log_text()[-4000:]


def test_plain_control_plane_and_inter_broker_listener(broker_factory):
    broker = broker_factory(plain_overrides())
    produce_and_consume({"bootstrap.servers": broker.bootstrap}, "plain-controlled")
    produce_and_consume({"bootstrap.servers": f"127.0.0.1:{broker.port('INTERNAL')}",
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.username": "alice", "sasl.password": "alice-secret"}, "plain-internal")
    assert broker.stop() == 0, broker.log_text()[-4000:]


def test_a_wrong_password_fails_the_controllers_attempts_naming_the_listener_and_they_are_retried(broker_factory):
    broker = broker_factory(scram_overrides("not-the-password"), start=False)
    add_scram_user(broker, "broker", "broker-secret")
    broker.spawn()          # not start(): whether it reports ready before its controller gets through is moot
    pattern = (r"Controller cannot reach broker 0: .*SASL authentication with SCRAM-SHA-512 as user 'broker' "
               r"on listener CONTROLLER failed: SASL_AUTHENTICATION_FAILED")
    first = broker.wait_for_log(pattern, timeout=20)
    assert "not-the-password" not in broker.log_text()
    broker.wait_for_log(pattern, timeout=20, after=broker.log_text().index(first) + len(first))
    broker.stop()           # its startup waits for its controller, so it reports the startup as failed
    assert "Broker startup failed" in broker.log_text()


def test_an_inter_broker_mechanism_the_listener_does_not_enable_is_refused_at_startup(broker_factory):
    from support.broker_process import BrokerExited

    broker = broker_factory({**plain_overrides(), "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"},
                            start=False)
    with pytest.raises(BrokerExited):
        broker.start()
    assert "sasl.mechanism.inter.broker.protocol" in broker.log_text()


def test_with_an_authorizer_the_controllers_sasl_user_is_the_brokers_own_principal(broker_factory):
    """No ACL names User:broker and nothing is allowed without one, yet the controller's requests (over
    SCRAM as ``broker``) are accepted on the control plane: that user is the broker's own principal there."""
    broker = broker_factory({**scram_overrides("broker-secret"),
                             "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                             "allow.everyone.if.no.acl.found": "false", "super.users": "User:ANONYMOUS",
                             "offsets.topic.replication.factor": "1"}, start=False)
    add_scram_user(broker, "broker", "broker-secret")
    broker.start()
    produce_and_consume({"bootstrap.servers": broker.bootstrap}, "authorized")
    assert "Refused" not in broker.log_text()
    assert broker.stop() == 0, broker.log_text()[-4000:]


def test_sasl_ssl_control_plane_authenticates_inside_tls(broker_factory, tmp_path):
    """SASL_SSL: the controller's connection does the TLS handshake with the listener's ssl.* keys, then
    SCRAM-SHA-512 inside it; with an authorizer its SASL user (not its certificate) is the own principal."""
    from support.tls import Pki

    pki = Pki(tmp_path / "pki")
    jaas = SCRAM_JAAS.format(password="broker-secret")
    broker = broker_factory({
        "listeners": "PLAINTEXT://127.0.0.1:{port:PLAINTEXT},CONTROLLER://127.0.0.1:{port:CONTROLLER}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_SSL",
        "inter.broker.listener.name": "PLAINTEXT", "control.plane.listener.name": "CONTROLLER",
        "listener.name.controller.ssl.keystore.type": "PEM",
        "listener.name.controller.ssl.keystore.location": pki.server_keystore("localhost", "127.0.0.1"),
        "listener.name.controller.ssl.truststore.type": "PEM",
        "listener.name.controller.ssl.truststore.location": pki.ca_file,
        "sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.controller.scram-sha-512.sasl.jaas.config": jaas,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "false", "super.users": "User:ANONYMOUS",
        "offsets.topic.replication.factor": "1", "num.partitions": "1"}, start=False)
    add_scram_user(broker, "broker", "broker-secret")
    broker.start()
    produce_and_consume({"bootstrap.servers": broker.bootstrap}, "sasl-ssl-controlled")
    assert "Refused" not in broker.log_text() and "Controller cannot reach" not in broker.log_text()
    assert broker.stop() == 0, broker.log_text()[-4000:]

"""twisted-kafka-configs and twisted-kafka-acls against one broker with an ACL authorizer and a SASL_SSL listener.

The PLAINTEXT listener's principal (``User:ANONYMOUS``) is a super user, so
the configs tool makes the first SCRAM users there; every later command runs
over SASL_SSL with ``--command-config`` (``security.protocol=SASL_SSL``,
SCRAM-SHA-512, the test's trustme CA as ``ssl.ca.location``), as the
``admin`` user it made.  What the tools changed is checked with confluent-
kafka: the configs a broker reports, and what a SCRAM user may read once an
ACL grants it and after the ACL is removed.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

from support import tls as tls_support
from support.broker_process import BrokerProcess

from .support import fails, ok, run

TOPIC = "secrets"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    pki = tls_support.Pki(tmp_path_factory.mktemp("tools-pki"))
    keystore = pki.server_keystore("localhost", "127.0.0.1")
    overrides = {
        "listeners": "PLAINTEXT://127.0.0.1:{port:PLAINTEXT},SASL_SSL://127.0.0.1:{port:SASL_SSL}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        "listener.name.sasl_ssl.ssl.keystore.location": keystore,
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS;User:admin",
        "num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    broker = BrokerProcess(tmp_path_factory.mktemp("tools-secured"), overrides, control_plane=False).start()
    yield broker, pki
    if broker.running:
        assert broker.stop() == 0, broker.log_text()[-4000:]


@pytest.fixture(scope="module")
def plaintext(secured) -> str:
    return f"127.0.0.1:{secured[0].port('PLAINTEXT')}"


@pytest.fixture(scope="module")
def sasl_ssl(secured, tmp_path_factory) -> tuple[str, str]:
    """(bootstrap, --command-config file) of the SASL_SSL listener, as ``admin``; the SCRAM users exist."""
    broker, pki = secured
    plain = f"127.0.0.1:{broker.port('PLAINTEXT')}"
    for user, mechanism in (("admin", "SCRAM-SHA-512"), ("alice", "SCRAM-SHA-256")):
        added = ok("configs", "--bootstrap-server", plain, "--alter", "--entity-type", "users", "--entity-name", user,
                   "--add-config", f"{mechanism}=[iterations=8192,password={user}-secret]")
        assert added.lines == [f"Completed updating config for user {user}."]
    config = tmp_path_factory.mktemp("tools-client") / "admin.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                      'username="admin" password="admin-secret";\n'
                      f"ssl.ca.location={pki.ca_file}\n")
    return f"localhost:{broker.port('SASL_SSL')}", str(config)


def alice_reads(secured, group: str) -> list[bytes] | KafkaError:
    """What ``alice`` (SCRAM-SHA-256 over SASL_SSL) reads from the start of the topic: its values, or the error."""
    broker, pki = secured
    consumer = Consumer({"bootstrap.servers": f"localhost:{broker.port('SASL_SSL')}", "security.protocol": "SASL_SSL",
                         "ssl.ca.location": pki.ca_file, "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
                         "sasl.password": "alice-secret", "group.id": group, "auto.offset.reset": "earliest"})
    consumer.subscribe([TOPIC])
    values: list[bytes] = []
    try:
        for _ in range(60):
            message = consumer.poll(0.5)
            if message is None:
                if len(values) == 2:
                    return values
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return message.error()
            values.append(message.value())
        return values
    finally:
        consumer.close()


def test_users_over_sasl_ssl(sasl_ssl):
    bootstrap, config = sasl_ssl
    described = ok("configs", "--bootstrap-server", bootstrap, "--command-config", config, "--describe",
                   "--entity-type", "users")
    assert described.lines == ["SCRAM credential configs for user-principal 'admin' are SCRAM-SHA-512=iterations=8192",
                               "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192"]
    # twisted-kafka-scram --bootstrap-server is the same command
    scram = ok("scram", "--bootstrap-server", bootstrap, "--command-config", config, "--describe", "--entity-name",
               "alice", wrapper=True)
    assert scram.lines == described.lines[1:]
    # a wrong password: one line naming the cause, exit 1
    wrong = config.replace("admin.properties", "wrong.properties")
    with open(config) as good, open(wrong, "w") as bad:
        bad.write(good.read().replace('password="admin-secret"', 'password="nope"'))
    line = fails("configs", "--bootstrap-server", bootstrap, "--command-config", wrong, "--describe",
                 "--entity-type", "users")
    assert line.startswith(f"cannot reach {bootstrap}: ") and "Authentication failed" in line


def test_acls_over_sasl_ssl_grant_and_revoke(secured, sasl_ssl):
    bootstrap, config = sasl_ssl
    ok("topics", "--bootstrap-server", bootstrap, "--command-config", config, "--create", "--topic", TOPIC)
    producer_config = config.replace("admin.properties", "producer.properties")
    with open(config) as source, open(producer_config, "w") as target:     # Kafka's names for the trust store
        target.write(source.read().replace("ssl.ca.location=", "ssl.truststore.type=PEM\nssl.truststore.location="))
    ok("console-producer", "--bootstrap-server", bootstrap, "--producer.config", producer_config, "--topic", TOPIC,
       input="first\nsecond\n")
    refused = alice_reads(secured, "alice-group")
    assert isinstance(refused, KafkaError) and refused.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                                  KafkaError.GROUP_AUTHORIZATION_FAILED)

    added = ok("acls", "--bootstrap-server", bootstrap, "--command-config", config, "--add", "--allow-principal",
               "User:alice", "--consumer", "--topic", TOPIC, "--group", "alice-group")
    assert added.out == (
        f"Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name={TOPIC}, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW) \n\n"
        "Adding ACLs for resource `ResourcePattern(resourceType=GROUP, name=alice-group, patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) \n\n")
    assert alice_reads(secured, "alice-group") == [b"first", b"second"]

    listed = ok("acls", "--bootstrap-server", bootstrap, "--command-config", config, "--list", "--topic", TOPIC)
    assert listed.lines[0] == (f"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name={TOPIC}, "
                               "patternType=LITERAL)`: ")
    assert listed.lines[1].startswith(" \t(") and listed.lines[2].endswith(") ") and listed.lines[3] == ""
    assert {line.strip() for line in listed.lines[1:3]} == {
        "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)",
        "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)"}
    by_principal = ok("acls", "--bootstrap-server", bootstrap, "--command-config", config, "--list", "--principal",
                      "User:alice")
    assert by_principal.lines[0] == "ACLs for principal `User:alice`" and len(by_principal.lines) == 8

    # --remove asks first: "n" keeps them, --force does not ask
    kept = run("acls", "--bootstrap-server", bootstrap, "--command-config", config, "--remove", "--topic", TOPIC,
               input="n\n")
    assert kept.code == 0 and "Are you sure you want to delete all ACLs for resource filter" in kept.out
    assert ok("acls", "--bootstrap-server", bootstrap, "--command-config", config, "--list", "--topic",
              TOPIC).lines[1:3] == listed.lines[1:3]
    ok("acls", "--bootstrap-server", bootstrap, "--command-config", config, "--remove", "--topic", TOPIC, "--force")
    assert ok("acls", "--bootstrap-server", bootstrap, "--command-config", config, "--list", "--topic",
              TOPIC).out == ""
    refused = alice_reads(secured, "alice-group")
    assert isinstance(refused, KafkaError) and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    assert fails("acls", "--bootstrap-server", bootstrap, "--command-config", config, "--add", "--allow-principal",
                 "User:alice", "--operation", "IdempotentWrite", "--topic", TOPIC) == (
        "twisted-kafka-acls: ResourceType TOPIC only supports operations All, Alter, AlterConfigs, Create, Delete, "
        "Describe, DescribeConfigs, Read, Write")


def test_topic_and_broker_configs(plaintext):
    admin = AdminClient({"bootstrap.servers": plaintext})

    def reported(kind, name: str) -> dict[str, tuple[str, str]]:
        resource = ConfigResource(kind, name)
        entries = admin.describe_configs([resource])[resource].result(timeout=30)
        return {k: (e.value, e.source) for k, e in entries.items()}

    ok("topics", "--bootstrap-server", plaintext, "--create", "--topic", "tuned")
    assert ok("configs", "--bootstrap-server", plaintext, "--alter", "--entity-type", "topics", "--entity-name",
              "tuned", "--add-config", "retention.ms=5000,cleanup.policy=[compact,delete]").lines == [
        "Completed updating config for topic tuned."]
    assert reported(ResourceType.TOPIC, "tuned")["cleanup.policy"][0] == "compact,delete"
    described = ok("configs", "--bootstrap-server", plaintext, "--describe", "--topic", "tuned").lines
    assert described[0] == "Dynamic configs for topic tuned are:"
    assert described[1].startswith("  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
                                   "cleanup.policy=compact,delete, ")
    assert described[2].startswith("  retention.ms=5000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
                                   "retention.ms=5000, ")
    assert len(described) == 3
    ok("configs", "--bootstrap-server", plaintext, "--alter", "--topic", "tuned", "--delete-config", "retention.ms")
    assert reported(ResourceType.TOPIC, "tuned")["retention.ms"][0] != "5000"
    assert fails("configs", "--bootstrap-server", plaintext, "--alter", "--topic", "tuned", "--delete-config",
                 "retention.ms") == "Invalid config(s): retention.ms"

    # brokers: the cluster default, then this broker's own value above it
    assert ok("configs", "--bootstrap-server", plaintext, "--alter", "--entity-type", "brokers", "--entity-default",
              "--add-config", "log.cleaner.threads=2").lines == [
        "Completed updating default config for brokers in the cluster."]
    ok("configs", "--bootstrap-server", plaintext, "--alter", "--broker", "0", "--add-config", "log.cleaner.threads=3")
    assert reported(ResourceType.BROKER, "0")["log.cleaner.threads"][0] == "3"
    assert ok("configs", "--bootstrap-server", plaintext, "--describe", "--broker", "0").lines == [
        "Dynamic configs for broker 0 are:",
        "  log.cleaner.threads=3 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.threads=3, "
        "DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2, DEFAULT_CONFIG:log.cleaner.threads=1}"]
    assert ok("configs", "--bootstrap-server", plaintext, "--describe", "--entity-type", "brokers",
              "--entity-default").lines == [
        "Default configs for brokers in the cluster are:",
        "  log.cleaner.threads=2 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.cleaner.threads=2}"]
    ok("configs", "--bootstrap-server", plaintext, "--alter", "--broker", "0", "--delete-config", "log.cleaner.threads")
    assert reported(ResourceType.BROKER, "0")["log.cleaner.threads"][0] == "2"

    # ips: connection-rate quotas (KIP-612), stored as the broker's dynamic default
    ok("configs", "--bootstrap-server", plaintext, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.9",
       "--add-config", "connection_creation_rate=10")
    ok("configs", "--bootstrap-server", plaintext, "--alter", "--ip-defaults", "--add-config",
       "connection_creation_rate=100")
    assert ok("configs", "--bootstrap-server", plaintext, "--describe", "--entity-type", "ips").lines == [
        "Quota configs for ip '127.0.0.9' are connection_creation_rate=10.0"]
    assert ok("configs", "--bootstrap-server", plaintext, "--describe", "--ip-defaults").lines == [
        "Quota configs for the default ip are connection_creation_rate=100.0"]
    rates = reported(ResourceType.BROKER, "0")["quota.ip.connection.creation.rate"][0]
    assert set(rates.split(",")) == {"127.0.0.9:10", "<default>:100"}

    # what this broker does not enforce is refused by the broker, in one line
    line = fails("configs", "--bootstrap-server", plaintext, "--alter", "--entity-type", "users", "--entity-name",
                 "alice", "--add-config", "producer_byte_rate=1024")
    assert "INVALID_REQUEST" in line
    assert fails("configs", "--bootstrap-server", plaintext, "--describe") == \
        "twisted-kafka-configs: At least one entity type must be specified"

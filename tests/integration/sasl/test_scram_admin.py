"""SCRAM credentials managed through Describe/AlterUserScramCredentials (kafka-python, confluent-kafka)
and ``bin/twisted-kafka-scram``, used by clients at once, and kept across a restart."""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient
from kafka.admin._users import ScramMechanism, UserScramCredentialDeletion, UserScramCredentialUpsertion
from kafka.errors import KafkaError as KafkaPythonError

from support.broker_process import REPO_ROOT

from .conftest import SASL_OVERRIDES, authenticates

TOOL = REPO_ROOT / "bin" / "twisted-kafka-scram"


def tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(TOOL), *args], capture_output=True, text=True, timeout=60)


def can_produce(broker, mechanism: str, user: str, password: str) -> bool:
    """Whether kafka-python authenticates as ``user`` and produces one record (slow to say no: it retries)."""
    try:
        producer = KafkaProducer(bootstrap_servers=f"127.0.0.1:{broker.port('SASL_PLAINTEXT')}",
                                 security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                                 sasl_plain_username=user, sasl_plain_password=password, enable_idempotence=False,
                                 max_block_ms=5000, request_timeout_ms=5000)
    except KafkaPythonError:
        return False
    try:
        producer.send("scram-admin", b"v").get(timeout=10)
        return True
    except KafkaPythonError:
        return False
    finally:
        producer.close(timeout=2)


@pytest.fixture(scope="module")
def admin(sasl_broker):
    client = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{sasl_broker.port('PLAINTEXT')}")
    yield client
    client.close()


def test_kafka_python_alters_and_describes_and_clients_use_the_credential_at_once(sasl_broker, admin):
    assert admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("erin", ScramMechanism.SCRAM_SHA_512, "erin-secret", iterations=5000),
        UserScramCredentialUpsertion("erin", ScramMechanism.SCRAM_SHA_256, "erin-secret"),
    ]) == {"erin": None}
    described = admin.describe_user_scram_credentials(["erin"])["erin"]
    assert described["error"] is None
    assert {(info["mechanism"], info["iterations"]) for info in described["credential_infos"]} == {
        (ScramMechanism.SCRAM_SHA_256, 4096), (ScramMechanism.SCRAM_SHA_512, 5000)}
    assert can_produce(sasl_broker, "SCRAM-SHA-512", "erin", "erin-secret")
    assert not authenticates(sasl_broker, "SCRAM-SHA-512", "erin", "wrong")

    assert admin.alter_user_scram_credentials([UserScramCredentialDeletion("erin", ScramMechanism.SCRAM_SHA_512)]) \
        == {"erin": None}
    assert not authenticates(sasl_broker, "SCRAM-SHA-512", "erin", "erin-secret")
    assert authenticates(sasl_broker, "SCRAM-SHA-256", "erin", "erin-secret")


def test_kafka_python_gets_kafkas_errors(admin):
    results = admin.alter_user_scram_credentials([
        UserScramCredentialUpsertion("few", ScramMechanism.SCRAM_SHA_256, "x", iterations=1000),
        UserScramCredentialUpsertion("many", ScramMechanism.SCRAM_SHA_256, "x", iterations=20000),
        UserScramCredentialDeletion("ghost", ScramMechanism.SCRAM_SHA_256),
    ])
    assert results == {"few": "Too few iterations", "many": "Too many iterations",
                       "ghost": "Attempt to delete a user credential that does not exist"}
    missing = admin.describe_user_scram_credentials(["ghost"])["ghost"]
    assert missing["error"] == "Attempt to describe a user credential that does not exist: ghost"


def test_confluent_kafka_describes_every_user(sasl_broker, admin):
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion("frank", ScramMechanism.SCRAM_SHA_256, "f")])
    confluent = AdminClient({"bootstrap.servers": f"127.0.0.1:{sasl_broker.port('PLAINTEXT')}"})
    described = confluent.describe_user_scram_credentials().result(timeout=30)
    assert "frank" in described
    [info] = described["frank"].scram_credential_infos
    assert info.mechanism.name == "SCRAM_SHA_256" and info.iterations == 4096


def test_the_tool_adds_lists_and_deletes(sasl_broker):
    bootstrap = f"127.0.0.1:{sasl_broker.port('PLAINTEXT')}"
    added = tool("--bootstrap-server", bootstrap, "--alter", "--entity-type", "users", "--entity-name", "grace",
                 "--add-config", "SCRAM-SHA-256=[iterations=8192,password=grace-secret],"
                                 "SCRAM-SHA-512=[password=grace-secret]")
    assert added.returncode == 0, added.stderr
    listed = tool("--bootstrap-server", bootstrap, "--describe", "--entity-type", "users", "--entity-name", "grace")
    assert listed.returncode == 0, listed.stderr
    assert "user-principal 'grace' are SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096" in listed.stdout
    assert authenticates(sasl_broker, "SCRAM-SHA-256", "grace", "grace-secret")
    deleted = tool("--bootstrap-server", bootstrap, "--alter", "--entity-name", "grace",
                   "--delete-config", "SCRAM-SHA-256")
    assert deleted.returncode == 0, deleted.stderr
    assert not authenticates(sasl_broker, "SCRAM-SHA-256", "grace", "grace-secret")
    refused = tool("--bootstrap-server", bootstrap, "--alter", "--entity-name", "grace", "--delete-config",
                   "SCRAM-SHA-256")
    assert refused.returncode == 1 and "does not exist" in refused.stderr


def test_the_tool_authenticates_itself_with_command_config(sasl_broker, tmp_path):
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                      "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                      'username="admin" password="admin-secret";\n')
    listed = tool("--bootstrap-server", f"127.0.0.1:{sasl_broker.port('SASL_PLAINTEXT')}", "--command-config",
                  str(config), "--describe")
    assert listed.returncode == 0, listed.stderr


def test_credentials_made_offline_and_online_survive_a_restart(broker_factory):
    broker = broker_factory(dict(SASL_OVERRIDES), control_plane=False, start=False)
    offline = tool("--log-dirs", broker.log_dirs[0], "--alter", "--entity-name", "heidi",
                   "--add-config", "SCRAM-SHA-512=[password=heidi-secret]")
    assert offline.returncode == 0, offline.stderr
    broker.start()
    assert can_produce(broker, "SCRAM-SHA-512", "heidi", "heidi-secret")
    refused = tool("--log-dirs", broker.log_dirs[0], "--alter", "--entity-name", "judy",
                   "--add-config", "SCRAM-SHA-512=[password=judy-secret]")
    assert refused.returncode == 1 and "in use by another broker" in refused.stderr, "the broker is running"
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{broker.port('PLAINTEXT')}")
    try:
        assert admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("ivan", ScramMechanism.SCRAM_SHA_256, "ivan-secret")]) == {"ivan": None}
    finally:
        admin.close()
    assert broker.stop() == 0
    stored = (broker.dir / "kafka-logs" / "scram-credentials.json").read_text()
    assert "heidi-secret" not in stored and "ivan-secret" not in stored and "stored_key=" in stored
    broker.start()
    assert can_produce(broker, "SCRAM-SHA-512", "heidi", "heidi-secret")
    assert authenticates(broker, "SCRAM-SHA-256", "ivan", "ivan-secret")
    assert not authenticates(broker, "SCRAM-SHA-256", "ivan", "heidi-secret")

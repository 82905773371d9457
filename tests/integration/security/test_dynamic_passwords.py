"""Passwords set at runtime are stored encrypted, as Kafka stores them (``password.encoder.secret``).

A listener's key password altered with a real AdminClient must never reach
the disk in plain text: the metadata file and its backup hold Kafka's
encoded form only, both readable by the broker's user only (0600).  The
value is one the broker really uses -- the password of an encrypted PEM
private key of the listener's new key store -- so a restart that serves the
new certificate proves the stored form decodes; a restart with a new
``password.encoder.secret`` and the previous one as
``password.encoder.old.secret`` re-encodes what is stored.  (Without a
secret such an AlterConfigs is refused: tests/integration/admin/test_admin_configs_confluent.py.)
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import stat
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ResourceType,
)
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from support.broker_process import BrokerProcess
from support.tls import Pki, tls_overrides
from support.wait import wait_until
from tests.integration.admin.support import outcomes
from twisted_kafka.security.password_encoder import PasswordEncoder, looks_encoded

pytestmark = pytest.mark.timeout(180)

BROKER = "0"   # broker.id of etc/server.properties
SECRET = "first encoder secret"
NEW_SECRET = "second encoder secret"
KEY_PASSWORD = "Key-Pa55-qZ7vW-for-the-listener"
KEY = "listener.name.ssl.ssl.key.password"
LOCATION = "listener.name.ssl.ssl.keystore.location"
STORE = "cluster-metadata.json"


def encrypted_keystore(pki: Pki, filename: str, password: str) -> str:
    """A PEM key store whose private key is encrypted with ``password``."""
    cert = pki.ca.issue_cert("localhost", "127.0.0.1", common_name="broker", organization_unit_name="brokers")
    key = serialization.load_pem_private_key(cert.private_key_pem.bytes(), None)
    encrypted = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.BestAvailableEncryption(password.encode()))
    path = pki.dir / filename
    path.write_bytes(encrypted + b"".join(blob.bytes() for blob in cert.cert_chain_pems))
    return str(path)


def served_serial(port: int, ca_file: str) -> int:
    context = ssl.create_default_context(cafile=ca_file)
    with context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                             server_hostname="localhost") as sock:
        der = sock.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def serial_of(path: str) -> int:
    return x509.load_pem_x509_certificates(Path(path).read_bytes())[0].serial_number


def incremental(admin, *ops):
    entries = [ConfigEntry(key, value, incremental_operation=op) for key, op, value in ops]
    [result] = outcomes(admin.incremental_alter_configs(
        [ConfigResource(ResourceType.BROKER, BROKER, incremental_configs=entries)])).values()
    return result


def stored(broker: BrokerProcess, suffix: str = "") -> dict[str, str]:
    """This broker's dynamic configs as the metadata file (or its backup) holds them."""
    data = json.loads(Path(broker.log_dirs[0], STORE + suffix).read_text())
    return data["broker_configs"].get(BROKER, {})


def files_holding(root: Path, needle: bytes) -> list[str]:
    found = []
    for path in root.rglob("*"):
        if path.is_file() and needle in path.read_bytes():
            found.append(str(path))
    return found


def mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def pki(tmp_path):
    return Pki(tmp_path / "pki")


def test_a_listener_key_password_is_stored_encrypted_and_used_after_restarts(tmp_path, pki):
    first = pki.server_keystore("localhost", "127.0.0.1", filename="first.pem")
    second = encrypted_keystore(pki, "second.pem", KEY_PASSWORD)
    broker = BrokerProcess(tmp_path, {**tls_overrides(pki, first), "password.encoder.secret": SECRET}).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000})
        port = broker.port("SSL")
        assert served_serial(port, pki.ca_file) == serial_of(first)

        assert incremental(admin, (LOCATION, AlterConfigOpType.SET, second),
                           (KEY, AlterConfigOpType.SET, KEY_PASSWORD)) is None
        assert served_serial(port, pki.ca_file) == serial_of(second)

        # Kafka's encoded form, with Kafka's defaults; the password itself nowhere on disk.
        encoded = stored(broker)[KEY]
        assert encoded != KEY_PASSWORD and looks_encoded(encoded)
        fields = dict(item.rsplit(":", 1) for item in encoded.split(","))
        assert {k: fields[k] for k in ("cipherAlgorithm", "keyLength", "iterations", "keyFactoryAlgorithm",
                                       "passwordLength")} == {
            "cipherAlgorithm": "AES/CBC/PKCS5Padding", "keyLength": "128", "iterations": "4096",
            "keyFactoryAlgorithm": "PBKDF2WithHmacSHA512", "passwordLength": str(len(KEY_PASSWORD))}
        assert PasswordEncoder(SECRET).decode(encoded) == KEY_PASSWORD
        log_dir = Path(broker.log_dirs[0])
        assert (log_dir / (STORE + ".bak")).exists()
        assert files_holding(broker.dir, KEY_PASSWORD.encode()) == []
        assert mode(log_dir / STORE) == 0o600 and mode(log_dir / (STORE + ".bak")) == 0o600

        [described] = outcomes(admin.describe_configs([ConfigResource(ResourceType.BROKER, BROKER)])).values()
        entry = described[KEY]
        assert entry.is_sensitive and entry.value is None
        assert entry.synonyms and all(synonym.value is None for synonym in entry.synonyms.values())
        assert entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

        # After a restart the stored form is decoded and used: the encrypted key loads.
        broker.restart()
        wait_until(lambda: served_serial(port, pki.ca_file) == serial_of(second), 15,
                   what="the restarted broker to serve the key store set at runtime")

        # A new secret, with the old one to read what is stored: re-encoded at startup.
        broker.overrides.update({"password.encoder.secret": NEW_SECRET, "password.encoder.old.secret": SECRET})
        broker.restart()
        reencoded = wait_until(lambda: (value := stored(broker)[KEY]) != encoded and value, 15,
                               what="the stored password to be re-encoded with the new secret")
        assert PasswordEncoder(NEW_SECRET).decode(reencoded) == KEY_PASSWORD
        with pytest.raises(ValueError):
            PasswordEncoder(SECRET).decode(reencoded)
        wait_until(lambda: served_serial(port, pki.ca_file) == serial_of(second), 15,
                   what="the broker to serve the key store set at runtime after the rotation")

        # The old secret is no longer needed.
        del broker.overrides["password.encoder.old.secret"]
        broker.restart()
        wait_until(lambda: served_serial(port, pki.ca_file) == serial_of(second), 15,
                   what="the broker to serve the key store with the new secret alone")

        # Deleted: neither the file nor its backup (the version before) holds the password.
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000})
        assert incremental(admin, (LOCATION, AlterConfigOpType.DELETE, None),
                           (KEY, AlterConfigOpType.DELETE, None)) is None
        assert KEY not in stored(broker) and KEY in stored(broker, ".bak")
        assert files_holding(broker.dir, KEY_PASSWORD.encode()) == []
        assert mode(log_dir / STORE) == 0o600 and mode(log_dir / (STORE + ".bak")) == 0o600
        assert served_serial(port, pki.ca_file) == serial_of(first)
    finally:
        assert broker.stop() == 0

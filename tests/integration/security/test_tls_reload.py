"""Certificates replaced without a restart: SIGHUP, and AlterConfigs of the listener's key store.

A TLS connection opened before the reload keeps working with the
certificate it shook hands with; a connection opened after it gets the new
one (told apart by serial number).  The new certificate is issued by the
same CA for the same subject and names (``ssl.allow.dn.changes`` and
``ssl.allow.san.changes`` are false by default, as in Kafka).
"""

from __future__ import annotations

import os
import signal
import socket
import ssl
import struct
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from cryptography import x509

from support.broker_process import BrokerProcess
from support.tls import Pki, librdkafka_ssl, tls_overrides
from tests.integration.admin.support import outcomes

pytestmark = pytest.mark.timeout(120)

_REQUEST = struct.pack(">hhih", 18, 0, 9, 4) + b"test"
API_VERSIONS = struct.pack(">i", len(_REQUEST)) + _REQUEST
BROKER = "0"   # broker.id of etc/server.properties


class TlsConnection:
    """A raw TLS connection to the broker: the certificate it got, and ApiVersions on demand."""

    def __init__(self, port: int, ca_file: str):
        context = ssl.create_default_context(cafile=ca_file)
        self.sock = context.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10),
                                        server_hostname="localhost")
        der = self.sock.getpeercert(binary_form=True)
        assert der is not None
        self.serial = x509.load_der_x509_certificate(der).serial_number

    def api_versions(self) -> int:
        self.sock.sendall(API_VERSIONS)
        size = struct.unpack(">i", self._read(4))[0]
        return struct.unpack(">i", self._read(size)[:4])[0]

    def _read(self, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    def close(self) -> None:
        self.sock.close()


def serial_of(path: str) -> int:
    return x509.load_pem_x509_certificates(Path(path).read_bytes())[0].serial_number


@pytest.fixture
def pki(tmp_path):
    return Pki(tmp_path / "pki")


def test_sighup_reloads_the_key_store(tmp_path, pki):
    keystore = pki.server_keystore("localhost", "127.0.0.1", filename="broker.pem")
    broker = BrokerProcess(tmp_path, tls_overrides(pki, keystore)).start()
    try:
        port = broker.port("SSL")
        before = TlsConnection(port, pki.ca_file)
        assert before.serial == serial_of(keystore) and before.api_versions() == 9
        old_serial = before.serial

        pki.server_keystore("localhost", "127.0.0.1", filename="broker.pem")      # replaced in place
        new_serial = serial_of(keystore)
        assert new_serial != old_serial
        mark = broker.log_mark()
        assert broker.pid is not None
        os.kill(broker.pid, signal.SIGHUP)
        broker.wait_for_log(r"TLS certificates: SSL reloaded", after=mark)

        after = TlsConnection(port, pki.ca_file)
        assert after.serial == new_serial and after.api_versions() == 9
        assert before.api_versions() == 9            # the connection from before is still up
        before.close()
        after.close()

        # A SIGHUP with nothing changed changes nothing.
        mark = broker.log_mark()
        os.kill(broker.pid, signal.SIGHUP)
        broker.wait_for_log(r"TLS certificates: SSL unchanged", after=mark)
    finally:
        assert broker.stop() == 0


def test_alter_configs_of_the_listener_key_store(tmp_path, pki):
    keystore = pki.server_keystore("localhost", "127.0.0.1", filename="first.pem")
    broker = BrokerProcess(tmp_path, tls_overrides(pki, keystore)).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def alter(name: str, value: str):
        entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        [result] = outcomes(admin.incremental_alter_configs(
            [ConfigResource(ResourceType.BROKER, BROKER, incremental_configs=[entry])])).values()
        return result

    try:
        port = broker.port("SSL")
        before = TlsConnection(port, pki.ca_file)

        second = pki.server_keystore("localhost", "127.0.0.1", filename="second.pem")
        assert alter("listener.name.ssl.ssl.keystore.location", second) is None
        assert TlsConnection(port, pki.ca_file).serial == serial_of(second)
        assert before.api_versions() == 9

        # Updated in place under the same name: AlterConfigs with the same value re-reads it (as Kafka).
        pki.server_keystore("localhost", "127.0.0.1", filename="second.pem")
        assert alter("listener.name.ssl.ssl.keystore.location", second) is None
        assert TlsConnection(port, pki.ca_file).serial == serial_of(second)

        # Kafka's rules: per listener only, and the subject may not change unless allowed.
        refused = alter("ssl.keystore.location", second)
        assert refused is not None and "only per-listener" in str(refused)
        other = pki.server_keystore("localhost", "127.0.0.1", filename="other.pem", common_name="impostor")
        refused = alter("listener.name.ssl.ssl.keystore.location", other)
        assert refused is not None and "ssl.allow.dn.changes" in str(refused)
        assert TlsConnection(port, pki.ca_file).serial == serial_of(second)

        # A client connecting now produces over the new certificate.
        from confluent_kafka import Producer

        producer = Producer(librdkafka_ssl(pki, f"localhost:{port}"))
        producer.produce("after-reload", b"x")
        assert producer.flush(30) == 0
    finally:
        assert broker.stop() == 0

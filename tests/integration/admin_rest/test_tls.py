"""The admin endpoint and TLS: certificates reloaded through ``POST /v1/tls/reload``, and TLS failures of
the broker's listeners counted as ``tls`` in ``/v1/connections``.

The broker runs in its own process with an SSL listener and an https admin
endpoint, both with PEM key stores issued by a CA made in the test
(trustme); a key store replaced in place is told apart by its certificate's
serial number, as in ``tests/integration/security/test_tls_reload.py``.
"""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.request

import pytest
from cryptography import x509

from support.broker_process import BrokerProcess
from support.tls import Pki, tls_overrides
from support.wait import wait_until
from tests.integration.security.test_tls_reload import TlsConnection, serial_of

from .support import TOKEN

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


class HttpsAdmin:
    """The https admin endpoint through urllib (a real HTTP client, verifying the endpoint's certificate)."""

    def __init__(self, url: str, ca_file: str):
        self.url = url
        self.context = ssl.create_default_context(cafile=ca_file)

    def call(self, method: str, path: str, token: str | None = TOKEN) -> tuple[int, dict]:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        request = urllib.request.Request(self.url + path, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, context=self.context, timeout=10) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())

    def serial(self) -> int:
        """The serial number of the certificate a new connection to the endpoint gets."""
        host, port = self.url.removeprefix("https://").rsplit(":", 1)
        with self.context.wrap_socket(socket.create_connection((host, int(port)), timeout=10),
                                      server_hostname="localhost") as sock:
            der = sock.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der).serial_number


@pytest.fixture
def pki(tmp_path):
    return Pki(tmp_path / "pki")


@pytest.fixture
def tls_broker(tmp_path, pki):
    keystore = pki.server_keystore("localhost", "127.0.0.1", filename="broker.pem")
    admin_keystore = pki.server_keystore("localhost", "127.0.0.1", filename="admin.pem", common_name="admin")
    broker = BrokerProcess(tmp_path, tls_overrides(
        pki, keystore, **{"admin.rest.listener": "https://127.0.0.1:0",
                          "admin.rest.ssl.keystore.location": admin_keystore,
                          "admin.rest.auth.token": TOKEN})).start()
    yield broker
    assert broker.stop() == 0, broker.log_text()[-4000:]


def test_post_tls_reload_swaps_the_listener_and_admin_certificates(tls_broker, pki):
    keystore, admin_keystore = str(pki.dir / "broker.pem"), str(pki.dir / "admin.pem")
    assert tls_broker.admin_url is not None
    admin = HttpsAdmin(tls_broker.admin_url, pki.ca_file)
    port = tls_broker.port("SSL")
    before = TlsConnection(port, pki.ca_file)
    assert before.serial == serial_of(keystore) and before.api_versions() == 9
    assert admin.serial() == serial_of(admin_keystore)

    old_serials = serial_of(keystore), serial_of(admin_keystore)
    pki.server_keystore("localhost", "127.0.0.1", filename="broker.pem")                      # replaced in place
    pki.server_keystore("localhost", "127.0.0.1", filename="admin.pem", common_name="admin")
    assert (serial_of(keystore), serial_of(admin_keystore)) != old_serials

    # Without the token: refused, and nothing is re-read.
    status, body = admin.call("POST", "/v1/tls/reload", token=None)
    assert status == 401 and body["error_code"] == "UNAUTHORIZED"
    assert admin.call("POST", "/v1/tls/reload", token="wrong")[0] == 401
    assert TlsConnection(port, pki.ca_file).serial == old_serials[0]

    status, body = admin.call("POST", "/v1/tls/reload")
    assert status == 200, body
    assert body == {"listeners": {"SSL": "reloaded", "admin.rest": "reloaded"}}
    after = TlsConnection(port, pki.ca_file)
    assert after.serial == serial_of(keystore) and after.api_versions() == 9
    assert before.api_versions() == 9            # the connection from before the reload still works
    assert admin.serial() == serial_of(admin_keystore)
    before.close()
    after.close()

    assert admin.call("POST", "/v1/tls/reload")[1] == {"listeners": {"SSL": "unchanged", "admin.rest": "unchanged"}}
    assert admin.call("GET", "/v1/tls/reload")[0] == 405


def test_an_unusable_new_key_store_is_reported_and_the_old_one_stays(tls_broker, pki):
    assert tls_broker.admin_url is not None
    admin = HttpsAdmin(tls_broker.admin_url, pki.ca_file)
    keystore = str(pki.dir / "broker.pem")
    serial = serial_of(keystore)
    with open(keystore, "wb") as handle:
        handle.write(b"not a key store")
    status, body = admin.call("POST", "/v1/tls/reload")
    assert status == 200
    assert "listener.name.ssl.ssl.keystore.location" in body["listeners"]["SSL"]
    assert body["listeners"]["admin.rest"] == "unchanged"
    assert TlsConnection(tls_broker.port("SSL"), pki.ca_file).serial == serial


def test_a_plaintext_client_on_the_ssl_port_counts_as_a_tls_failure(tls_broker, pki):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    assert tls_broker.admin_url is not None
    admin = HttpsAdmin(tls_broker.admin_url, pki.ca_file)
    client = AdminClient({"bootstrap.servers": f"127.0.0.1:{tls_broker.port('SSL')}",
                          "security.protocol": "PLAINTEXT"})
    with pytest.raises(KafkaException):
        client.list_topics(timeout=2)

    def ssl_listener() -> dict | None:
        _, doc = admin.call("GET", "/v1/connections?listener=SSL")
        [entry] = [e for e in doc["listeners"] if e["listener"] == "SSL"]
        return entry if entry["rejected"]["tls"] >= 1 and entry["closed"]["tls"] >= 1 else None

    entry = wait_until(ssl_listener, what="a tls rejection and close on listener SSL")
    assert entry["rejected"]["authentication"] == 0       # a plaintext client is not a failed login

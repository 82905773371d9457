"""Client certificates (ssl.client.auth), and clients on the wrong kind of port.

* ``required``: a client without a certificate, or with one from another
  CA, is refused in the handshake; the broker logs it (peer and reason),
  records an ``authentication_failed`` and a ``closed``/``tls`` connection
  event, and frees the connection's slot -- with
  ``listener.name.ssl.max.connections=1`` the next client only gets in if
  it was;
* ``requested``: clients with and without a certificate both work, as
  ``User:CN=...`` and ``User:ANONYMOUS`` (the principals are those the
  connection events in ``__connection_events`` carry);
* a plaintext client on the SSL port and a TLS client on the PLAINTEXT
  port are closed, with a log line saying which mistake it was.
"""

from __future__ import annotations

import json
import socket
import ssl
import struct
import time

import pytest

from support.broker_process import BrokerProcess
from support.tls import Pki, librdkafka_ssl, tls_overrides
from support.wait import wait_until

pytestmark = pytest.mark.timeout(120)

# ApiVersions v0, correlation id 7.
_REQUEST = struct.pack(">hhih", 18, 0, 7, 4) + b"test"
API_VERSIONS = struct.pack(">i", len(_REQUEST)) + _REQUEST


def tls_api_versions(port: int, ca_file: str, cert=None) -> int:
    """Send ApiVersions over TLS; the correlation id of the answer (raises if the broker refuses)."""
    context = ssl.create_default_context(cafile=ca_file)
    if cert is not None:
        context.load_cert_chain(cert.cert, cert.key)
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            context.wrap_socket(raw, server_hostname="localhost") as sock:
        sock.sendall(API_VERSIONS)
        data = b""
        while len(data) < 8:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return struct.unpack(">i", data[4:8])[0]


def connection_events(broker: BrokerProcess, predicate, what: str, timeout: float = 30) -> list[dict]:
    """Read ``__connection_events`` (over PLAINTEXT) until the events satisfy ``predicate``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"events-{time.monotonic_ns()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition("__connection_events", 0, 0)])
    events: list[dict] = []
    try:
        def satisfied():
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                events.append(json.loads(message.value()))
            return predicate(events)
        wait_until(satisfied, timeout=timeout, what=what)
    finally:
        consumer.close()
    return events


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def other_pki(tmp_path_factory):
    return Pki(tmp_path_factory.mktemp("other-pki"), name="other")


@pytest.fixture(scope="module")
def required_broker(tmp_path_factory, pki):
    overrides = tls_overrides(pki, pki.server_keystore("localhost", "127.0.0.1"), client_auth="required")
    overrides["listener.name.ssl.max.connections"] = "1"
    broker = BrokerProcess(tmp_path_factory.mktemp("required"), overrides).start()
    yield broker
    if broker.running:
        assert broker.stop() == 0, broker.log_text()[-4000:]


@pytest.fixture(scope="module")
def requested_broker(tmp_path_factory, pki):
    overrides = tls_overrides(pki, pki.server_keystore("localhost", "127.0.0.1"), client_auth="requested")
    broker = BrokerProcess(tmp_path_factory.mktemp("requested"), overrides).start()
    yield broker
    if broker.running:
        assert broker.stop() == 0, broker.log_text()[-4000:]


def test_required_refuses_a_client_without_certificate_and_frees_its_slot(required_broker, pki):
    port = required_broker.port("SSL")
    mark = required_broker.log_mark()
    for _ in range(3):      # each refused connection must give its only slot back
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            tls_api_versions(port, pki.ca_file)
    line = required_broker.wait_for_log(r"TLS handshake failed for connection .* from 127\.0\.0\.1:\d+ on listener "
                                        r"SSL .*", after=mark)
    assert "certificate" in line
    alice = pki.client("alice")
    assert tls_api_versions(port, pki.ca_file, alice) == 7


def test_required_refuses_a_certificate_from_another_ca(required_broker, pki, other_pki):
    port = required_broker.port("SSL")
    mark = required_broker.log_mark()
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        tls_api_versions(port, pki.ca_file, other_pki.client("mallory"))
    line = required_broker.wait_for_log(r"TLS handshake failed for connection .* on listener SSL", after=mark)
    assert "certificate" in line
    assert tls_api_versions(port, pki.ca_file, pki.client("bob")) == 7    # the slot is free again


def test_required_refusals_are_connection_events(required_broker, pki):
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        tls_api_versions(required_broker.port("SSL"), pki.ca_file)

    def refused(events):
        failed = [e for e in events if e["listener"] == "SSL" and e["kind"] == "authentication_failed"]
        closed = [e for e in events if e["listener"] == "SSL" and e["kind"] == "closed" and e["reason"] == "tls"]
        return failed and closed and all(e["reason"].startswith("TLS handshake failed") for e in failed)

    connection_events(required_broker, refused, "authentication_failed and closed/tls events on SSL")


def test_librdkafka_without_certificate_gets_no_metadata(required_broker, pki):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(librdkafka_ssl(pki, f"localhost:{required_broker.port('SSL')}"))
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    alice = pki.client("alice-rdkafka")
    admin = AdminClient(librdkafka_ssl(pki, f"localhost:{required_broker.port('SSL')}", alice))
    assert admin.list_topics(timeout=20).brokers


def test_requested_serves_both_with_their_own_principals(requested_broker, pki):
    from confluent_kafka.admin import AdminClient

    bootstrap = f"localhost:{requested_broker.port('SSL')}"
    carol = pki.client("carol")
    for conf in (librdkafka_ssl(pki, bootstrap, carol), librdkafka_ssl(pki, bootstrap)):
        admin = AdminClient(conf)
        assert admin.list_topics(timeout=20).brokers
        del admin          # closes its connections: each is a "closed" event with its principal

    def both(events):
        principals = {e["principal"] for e in events if e["listener"] == "SSL" and e["kind"] == "closed"}
        return any(p.startswith("User:CN=carol,OU=clients,O=") for p in principals) and \
            "User:ANONYMOUS" in principals

    connection_events(requested_broker, both, "closed events of carol and of an anonymous client")


def test_plaintext_client_on_the_ssl_port(requested_broker):
    mark = requested_broker.log_mark()
    with socket.create_connection(("127.0.0.1", requested_broker.port("SSL")), timeout=10) as sock:
        sock.sendall(API_VERSIONS)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert not answer.startswith(struct.pack(">i", len(answer) - 4))     # no Kafka response, then EOF
    line = requested_broker.wait_for_log(r"TLS handshake failed .* on listener SSL", after=mark)
    assert "PLAINTEXT client connecting to an SSL listener" in line


def test_tls_client_on_the_plaintext_port(requested_broker, pki):
    mark = requested_broker.log_mark()
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        tls_api_versions(requested_broker.port("PLAINTEXT"), pki.ca_file)
    line = requested_broker.wait_for_log(r"Closing connection .* on listener PLAINTEXT .*TLS", after=mark)
    assert "TLS handshake on a PLAINTEXT listener" in line


def test_librdkafka_ssl_on_the_plaintext_port(requested_broker, pki):
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    mark = requested_broker.log_mark()
    admin = AdminClient(librdkafka_ssl(pki, f"localhost:{requested_broker.port('PLAINTEXT')}"))
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    requested_broker.wait_for_log(r"TLS handshake on a PLAINTEXT listener", after=mark)

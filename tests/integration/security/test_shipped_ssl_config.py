"""The shipped ``etc/server-ssl.properties``: a TLS-only broker, started the README way.

Only the ports (0), the log directory and the PEM files (made here with
trustme) are overridden; the controller reaches the mTLS control plane with
the file's settings (host name checked), and a client with a certificate
produces and consumes over the SSL listener.
"""

from __future__ import annotations

import pytest

from support.broker_process import REPO_ROOT
from support.tls import Pki, librdkafka_ssl
from tests.integration.network.test_shipped_config import ShippedConfigBroker
from tests.integration.security.test_tls_clients import consume_with_confluent

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_tls_only_broker_from_the_shipped_file(tmp_path, monkeypatch):
    import tests.integration.network.test_shipped_config as shipped

    monkeypatch.setattr(shipped, "BASE_CONFIG", REPO_ROOT / "etc" / "server-ssl.properties")
    pki = Pki(tmp_path / "pki")
    broker = ShippedConfigBroker(tmp_path / "broker", {
        "listeners": "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "log.dirs": str(tmp_path / "broker" / "logs"),
        "ssl.keystore.location": pki.server_keystore("localhost", "127.0.0.1"),
        "ssl.truststore.location": pki.ca_file})
    try:
        ports = broker.wait_started()
        assert set(ports) == {"SSL", "CONTROLLER"}
        from confluent_kafka import Producer

        conf = librdkafka_ssl(pki, f"localhost:{ports['SSL']}", pki.client("alice"))
        producer = Producer(conf)
        for i in range(5):
            producer.produce("shipped-ssl", f"m{i}".encode())
        assert producer.flush(30) == 0
        assert consume_with_confluent(conf, "shipped-ssl", 5) == [f"m{i}".encode() for i in range(5)]
    finally:
        status = broker.stop()
    assert status == 0, broker.log_text()[-4000:]

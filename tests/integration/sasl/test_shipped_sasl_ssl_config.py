"""The shipped ``etc/server-sasl-ssl.properties``: SASL_SSL for clients, mTLS on the control plane.

Only the ports (0), the log directory and the PEM files (made here with
trustme) are overridden.  A SCRAM user is added with the tool before the
first start; confluent-kafka produces and consumes as that user and as a
PLAIN user, over TLS, while the controller reaches the mTLS control plane.
"""

from __future__ import annotations

import subprocess

import pytest

from support.broker_process import REPO_ROOT
from support.tls import Pki
from tests.integration.network.test_shipped_config import ShippedConfigBroker
from tests.integration.security.test_tls_clients import consume_with_confluent

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_sasl_ssl_broker_from_the_shipped_file(tmp_path, monkeypatch):
    import tests.integration.network.test_shipped_config as shipped

    monkeypatch.setattr(shipped, "BASE_CONFIG", REPO_ROOT / "etc" / "server-sasl-ssl.properties")
    pki = Pki(tmp_path / "pki")
    logs = tmp_path / "broker" / "logs"
    added = subprocess.run([str(REPO_ROOT / "bin" / "twisted-kafka-scram"), "--log-dirs", str(logs), "--alter",
                            "--entity-type", "users", "--entity-name", "bob",
                            "--add-config", "SCRAM-SHA-512=[iterations=8192,password=bob-secret]"],
                           capture_output=True, text=True, timeout=60)
    assert added.returncode == 0, added.stderr
    broker = ShippedConfigBroker(tmp_path / "broker", {
        "listeners": "CLIENTS://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "log.dirs": str(logs),
        "ssl.keystore.location": pki.server_keystore("localhost", "127.0.0.1"),
        "ssl.truststore.location": pki.ca_file})
    try:
        ports = broker.wait_started()
        assert set(ports) == {"CLIENTS", "INTERNAL", "CONTROLLER"}
        from confluent_kafka import Producer

        for mechanism, user, password in (("SCRAM-SHA-512", "bob", "bob-secret"), ("PLAIN", "alice", "alice-secret")):
            conf = {"bootstrap.servers": f"localhost:{ports['CLIENTS']}", "security.protocol": "SASL_SSL",
                    "ssl.ca.location": pki.ca_file, "sasl.mechanism": mechanism, "sasl.username": user,
                    "sasl.password": password}
            topic = f"shipped-sasl-ssl-{user}"
            producer = Producer(conf)
            for i in range(5):
                producer.produce(topic, f"m{i}".encode())
            assert producer.flush(30) == 0
            assert consume_with_confluent(conf, topic, 5) == [f"m{i}".encode() for i in range(5)]
    finally:
        status = broker.stop()
    assert status == 0, broker.log_text()[-4000:]

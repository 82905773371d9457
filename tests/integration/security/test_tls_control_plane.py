"""The controller reaches an SSL control plane with the control-plane listener's TLS settings.

The CONTROLLER listener requires client certificates (mTLS): the controller
presents the listener's key store and checks the broker's certificate
against the trust store and -- ``ssl.endpoint.identification.algorithm``
``https``, the default -- against the advertised host.  A broker whose
certificate does not name 127.0.0.1 is only reachable with the check
turned off (empty), as in Kafka.
"""

from __future__ import annotations

import pytest

from support.broker_process import BrokerExited, BrokerProcess
from support.tls import Pki, librdkafka_ssl

pytestmark = pytest.mark.timeout(120)


def control_plane_ssl(pki: Pki, keystore: str, **extra: str) -> dict[str, str]:
    listeners = "PLAINTEXT://127.0.0.1:{port:PLAINTEXT},CONTROLLER://127.0.0.1:{port:CONTROLLER}"
    return {
        "listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "control.plane.listener.name": "CONTROLLER",
        "listener.name.controller.ssl.keystore.type": "PEM",
        "listener.name.controller.ssl.keystore.location": keystore,
        "listener.name.controller.ssl.truststore.type": "PEM",
        "listener.name.controller.ssl.truststore.location": pki.ca_file,
        "listener.name.controller.ssl.client.auth": "required",
        **extra,
    }


def test_controller_connects_to_an_mtls_control_plane(tmp_path):
    pki = Pki(tmp_path / "pki")
    broker = BrokerProcess(tmp_path, control_plane_ssl(pki, pki.server_keystore("localhost", "127.0.0.1"))).start()
    try:
        from confluent_kafka.admin import AdminClient

        assert AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=20).brokers
        # The control plane itself refuses a client without a certificate.
        admin = AdminClient(librdkafka_ssl(pki, f"localhost:{broker.port('CONTROLLER')}"))
        from confluent_kafka import KafkaException

        with pytest.raises(KafkaException):
            admin.list_topics(timeout=3)
    finally:
        assert broker.stop() == 0


def test_host_name_check_of_the_controller(tmp_path):
    pki = Pki(tmp_path / "pki")
    keystore = pki.server_keystore("broker.example")           # does not name 127.0.0.1
    checked = BrokerProcess(tmp_path, control_plane_ssl(pki, keystore))
    with pytest.raises(BrokerExited):
        checked.start(timeout=20)
    assert "does not match 127.0.0.1" in checked.log_text()
    checked.kill()
    unchecked = BrokerProcess(tmp_path, control_plane_ssl(
        pki, keystore, **{"listener.name.controller.ssl.endpoint.identification.algorithm": ""})).start()
    assert unchecked.stop() == 0

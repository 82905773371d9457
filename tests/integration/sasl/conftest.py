"""A broker with a PLAINTEXT listener (inter-broker, admin) and a SASL_PLAINTEXT one for clients.

PLAIN's users come from the listener's PlainLoginModule configuration;
SCRAM users are added by each test (through the admin API or the tool).
"""

from __future__ import annotations

import pytest

from support.broker_process import BrokerProcess
from support.sasl_listeners import PLAIN_JAAS

SASL_OVERRIDES = {
    "listeners": "PLAINTEXT://127.0.0.1:{port:PLAINTEXT},SASL_PLAINTEXT://127.0.0.1:{port:SASL_PLAINTEXT}",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "connection.failed.authentication.delay.ms": "300",
    "num.partitions": "1",
}


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("sasl-broker"), dict(SASL_OVERRIDES), control_plane=False).start()
    yield broker
    if broker.running:
        assert broker.stop() == 0, broker.log_text()[-4000:]


def authenticates(broker, mechanism: str, user: str, password: str) -> bool:
    """Whether ``user`` authenticates on the SASL listener, over a raw socket (handshake v1,
    SaslAuthenticate v2; SCRAM's client side is kafka-python's), and is then served Metadata."""
    from kafka.net.sasl.scram import ScramClient

    from support.raw_client import RawClient
    from twisted_kafka.protocol.messages import SaslAuthenticateRequest, SaslHandshakeRequest

    with RawClient(broker.port("SASL_PLAINTEXT")).connect() as client:
        def exchange(token: bytes):
            response = client.request(SaslAuthenticateRequest(version=2, auth_bytes=token), 2)
            return None if response.error_code else response.auth_bytes

        assert client.request(SaslHandshakeRequest(version=1, mechanism=mechanism), 1).error_code == 0
        if mechanism == "PLAIN":
            if exchange(b"\0" + user.encode() + b"\0" + password.encode()) is None:
                return False
        else:
            scram = ScramClient(user, password, mechanism)
            server_first = exchange(scram.first_message())
            if server_first is None:
                return False
            scram.process_server_first_message(server_first)
            server_final = exchange(scram.final_message())
            if server_final is None:
                return False
            scram.process_server_final_message(server_final)   # the server proves it knows the key
        return client.metadata().brokers is not None

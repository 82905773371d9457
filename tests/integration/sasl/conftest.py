"""A broker with a PLAINTEXT listener (inter-broker, admin) and a SASL_PLAINTEXT one for clients.

PLAIN's users come from the listener's PlainLoginModule configuration;
SCRAM users are added by each test (through the admin API or the tool).
"""

from __future__ import annotations

import pytest

from tests.support.broker_process import BrokerProcess

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')

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

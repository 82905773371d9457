"""A broker with PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners, as the SASL tests and benches start it.

PLAINTEXT is the inter-broker listener (the setup's own admin requests go
there); the SASL listeners take PLAIN (users in ``PLAIN_JAAS``) and
SCRAM-SHA-256, the SASL_SSL one with a PEM keystore from the test's CA.
"""

from __future__ import annotations

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')


def sasl_listener_overrides(pki) -> dict[str, str]:
    """The listener settings; ``pki`` is a ``support.tls.Pki`` whose CA signs the broker's certificate."""
    return {
        "listeners": "PLAINTEXT://127.0.0.1:{port:PLAINTEXT},SASL_PLAINTEXT://127.0.0.1:{port:SASL_PLAINTEXT},"
                     "SASL_SSL://127.0.0.1:{port:SASL_SSL}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_ssl.ssl.keystore.type": "PEM",
        "listener.name.sasl_ssl.ssl.keystore.location": pki.server_keystore("localhost", "127.0.0.1"),
        "listener.name.sasl_ssl.ssl.truststore.type": "PEM",
        "listener.name.sasl_ssl.ssl.truststore.location": pki.ca_file,
    }

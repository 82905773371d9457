"""ACLs for principals other than ANONYMOUS: mTLS clients are authorized as their certificate's principal.

The broker has a PLAINTEXT listener (``User:ANONYMOUS``, named in
``super.users``: the administrator) and an SSL listener requiring client
certificates, whose principals ``ssl.principal.mapping.rules`` maps to the
certificate's common name.  An ACL for ``User:alice`` lets alice's producer
write; bob's, with a certificate from the same CA, is refused with
TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError as CK
from confluent_kafka import Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from support.tls import Pki, librdkafka_ssl, tls_overrides
from tests.integration.admin.support import confluent_admin, outcomes

pytestmark = pytest.mark.integration


def delivery_error(conf: dict, topic: str):
    producer = Producer({"linger.ms": 0, "message.timeout.ms": 10000, **conf})
    reports: list = []
    producer.produce(topic, b"v", on_delivery=lambda err, msg: reports.append(err))
    producer.flush(15)
    assert reports, "no delivery report"
    return None if reports[0] is None else reports[0].code()


def test_mtls_principals_are_authorized_by_their_acls(tmp_path, broker_factory):
    pki = Pki(tmp_path / "pki")
    broker = broker_factory(tls_overrides(
        pki, pki.server_keystore("localhost", "127.0.0.1"), client_auth="required",
        authorizer_class_name="kafka.security.authorizer.AclAuthorizer", super_users="User:ANONYMOUS",
        ssl_principal_mapping_rules="RULE:^CN=([^,]*),OU=clients,.*$/$1/L,DEFAULT"))
    admin = confluent_admin(broker)
    for name, outcome in outcomes(admin.create_topics([NewTopic("mtls-orders", 1, 1)])).items():
        assert outcome is None, (name, outcome)
    for key, outcome in outcomes(admin.create_acls([AclBinding(
            ResourceType.TOPIC, "mtls-", ResourcePatternType.PREFIXED, "User:alice", "*", AclOperation.WRITE,
            AclPermissionType.ALLOW)])).items():
        assert outcome is None, (key, outcome)
    ssl = f"localhost:{broker.port('SSL')}"
    assert delivery_error(librdkafka_ssl(pki, ssl, pki.client("alice")), "mtls-orders") is None
    assert delivery_error(librdkafka_ssl(pki, ssl, pki.client("bob")),
                          "mtls-orders") == CK.TOPIC_AUTHORIZATION_FAILED
    assert "Principal = User:bob is Denied Operation = Describe" in broker.log_text()

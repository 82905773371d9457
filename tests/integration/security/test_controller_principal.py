"""With an authorizer, the mTLS control plane accepts controller requests only from the controller's principal.

The broker's CONTROLLER listener requires client certificates; its
controller connects with the listener's own key store, so its requests
arrive as the broker's own inter-broker principal, which is accepted although
no ACL names it and ``allow.everyone.if.no.acl.found`` is false -- the broker
starts, gets its ACLs and gives its topics a leader.  Another client with a
valid certificate from the same CA is refused: UpdateMetadata answers
CLUSTER_AUTHORIZATION_FAILED, and the refusal is logged with its principal.
"""

from __future__ import annotations

import ssl

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from support.broker_process import BrokerProcess
from support.raw_client import RawClient
from support.tls import Pki
from support.wait import wait_until
from tests.integration.admin.support import outcomes
from tests.integration.network.test_controller_apis import leader, update_metadata_v8
from tests.integration.security.test_tls_control_plane import control_plane_ssl
from twisted_kafka.protocol.errors import ErrorCode

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MAPPING = "RULE:^CN=([^,]*),OU=([^,]*),.*$/$2-$1/,DEFAULT"


def test_only_the_controllers_principal_is_accepted_on_the_control_plane(tmp_path):
    pki = Pki(tmp_path / "pki")
    broker = BrokerProcess(tmp_path, control_plane_ssl(
        pki, pki.server_keystore("localhost", "127.0.0.1"), **{
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": "User:ANONYMOUS",                    # the PLAINTEXT data plane's administrator
            "listener.name.controller.ssl.principal.mapping.rules": MAPPING,
            "offsets.topic.replication.factor": "1"})).start()
    try:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        # An ACL set reaches the broker (in UpdateMetadata, from its controller as User:brokers-broker),
        # then a new topic gets this broker as its leader.
        for key, outcome in outcomes(admin.create_acls([AclBinding(
                ResourceType.TOPIC, "other", ResourcePatternType.LITERAL, "User:clients-alice", "*",
                AclOperation.READ, AclPermissionType.ALLOW)])).items():
            assert outcome is None, (key, outcome)
        for name, outcome in outcomes(admin.create_topics([NewTopic("led", 1, 1)])).items():
            assert outcome is None, (name, outcome)
        wait_until(lambda: leader(broker.data_port, "led") == (ErrorCode.NONE, 0), timeout=15)
        assert "Refused" not in broker.log_text()

        mallory = pki.client("mallory")
        context = ssl.create_default_context(cafile=pki.ca_file)
        context.load_cert_chain(mallory.cert, mallory.key)
        with RawClient(broker.port("CONTROLLER"), tls=context) as client:
            answer = client.request(update_metadata_v8(controller_epoch=1_000_000), 8)
        assert answer.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        broker.wait_for_log("Refused UpdateMetadata v8 from principal User:clients-mallory at 127.0.0.1:")
        # Nothing was applied: the broker still advertises itself and leads its topic.
        assert leader(broker.data_port, "led") == (ErrorCode.NONE, 0)
    finally:
        assert broker.stop() == 0


def test_a_tls_control_plane_without_client_certificates_accepts_its_controller(tmp_path):
    """``ssl.client.auth=none``: the controller's connection is ``User:ANONYMOUS``, the own principal there."""
    pki = Pki(tmp_path / "pki")
    broker = BrokerProcess(tmp_path, control_plane_ssl(
        pki, pki.server_keystore("localhost", "127.0.0.1"), **{
            "listener.name.controller.ssl.client.auth": "none",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "false",
            "super.users": "User:admin",
            "offsets.topic.replication.factor": "1"})).start()
    try:
        # No ACL allows ANONYMOUS anything: a client is refused, the controller's requests were not.
        from confluent_kafka.admin import AdminClient

        assert AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=20).brokers
        assert "Refused" not in broker.log_text()
    finally:
        assert broker.stop() == 0

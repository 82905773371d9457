"""The controller APIs on an mTLS control plane with an authorizer: who may send them, and what a refusal costs.

One broker (its own controller) whose CONTROLLER listener requires client certificates; its certificates
map to ``User:brokers-<CN>``, clients' to ``User:clients-<CN>``.  ``allow.everyone.if.no.acl.found`` is
false and no ACL grants CLUSTER_ACTION.

* A certificate from the broker's own CA that is not the broker's (a plain client's) sends AlterPartition
  with the right broker epoch to empty a partition's ISR: CLUSTER_AUTHORIZATION_FAILED, the ISR is
  unchanged, the connection is closed after the answer, and the refusal is one log line naming the peer,
  the principal and the API.  The other controller APIs answer that certificate the same way.
* The broker's own identity (authorized) guessing broker epochs: each guess is answered
  STALE_BROKER_EPOCH and costs its connection (the next request on it reads EOF), one log line each,
  counted as ``controller_refused`` in the control listener's connection stats.
"""

from __future__ import annotations

import json
import random
import re
import ssl
import urllib.request

import pytest

from support.broker_process import BrokerProcess
from support.raw_client import RawClient
from support.tls import Pki
from support.wait import wait_until
from tests.integration.network.test_controller_apis import controlled_shutdown_v3, create_topic, update_metadata_v8
from tests.integration.security.test_tls_control_plane import control_plane_ssl
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

MAPPING = "RULE:^CN=([^,]*),OU=([^,]*),.*$/$2-$1/,DEFAULT"
TOPIC = "guarded"
A = m.AlterPartitionRequest


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("controller-refusals")
    pki = Pki(tmp / "pki")
    keystore = pki.server_keystore("localhost", "127.0.0.1")
    broker = BrokerProcess(tmp / "broker", control_plane_ssl(pki, keystore, **{
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": "User:ANONYMOUS",                    # the PLAINTEXT data plane's administrator
        "listener.name.controller.ssl.principal.mapping.rules": MAPPING,
        "offsets.topic.replication.factor": "1"})).start()
    assert create_topic(broker.data_port, TOPIC) == ErrorCode.NONE
    wait_until(lambda: isr(broker) == [0], timeout=15, what="the topic's ISR")
    yield broker, pki, keystore
    if broker.running:
        assert broker.stop() == 0, broker.log_text()[-4000:]


def tls_as(pki: Pki, cert: str, key: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=pki.ca_file)
    context.load_cert_chain(cert, key)
    return context


def broker_epoch(broker) -> int:
    return int(re.findall(r"Registered broker 0 with addresses: .*, broker epoch: (-?\d+)", broker.log_text())[-1])


def partition(broker):
    with RawClient(broker.data_port) as client:
        response = client.request(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                                                    allow_auto_topic_creation=False), 7)
    return response.topics[0].partitions[0]


def isr(broker) -> list[int]:
    return list(partition(broker).isr_nodes)


def empty_the_isr(broker, epoch: int) -> A:
    """What an attacker sends: the leader's new ISR is nobody (leader epoch from Metadata, partition epoch 0:
    the topic's first state)."""
    return A(broker_id=0, broker_epoch=epoch, topics=[A.TopicData(topic_name=TOPIC, partitions=[
        A.TopicData.PartitionData(partition_index=0, leader_epoch=partition(broker).leader_epoch, new_isr=[],
                                  leader_recovery_state=0, partition_epoch=0)])])


def answer_then_close(client: RawClient, request, version: int) -> tuple[int, bool]:
    """Send ``request``: its answer's error code, and whether the broker then closed the connection."""
    code = client.request(request, version).error_code
    return code, client.wait_closed(timeout=10)


def control_stats(broker) -> dict:
    with urllib.request.urlopen(f"{broker.admin_url}/v1/connections?listener=CONTROLLER", timeout=10) as reply:
        return json.load(reply)["listeners"][0]


def test_a_client_certificate_that_is_not_the_brokers_cannot_alter_a_partition(secured):
    broker, pki, _ = secured
    mallory = pki.client("mallory")
    context = tls_as(pki, mallory.cert, mallory.key)
    epoch = broker_epoch(broker)
    with RawClient(broker.port("CONTROLLER"), tls=context) as client:
        port = client.local_address[1]
        code, closed = answer_then_close(client, empty_the_isr(broker, epoch), 1)
    assert (code, isr(broker)) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, [0]), "refused, the ISR unchanged"
    assert closed, "the connection stays open after the refusal"
    line = broker.wait_for_log(
        rf"Refused AlterPartition v1 from principal User:clients-mallory at 127\.0\.0\.1:{port} ")
    assert "CLUSTER_AUTHORIZATION_FAILED" in line and "closing the connection" in line
    # The other controller APIs refuse that certificate the same way.
    for request, version in ((update_metadata_v8(broker_epoch=epoch), 8), (controlled_shutdown_v3(epoch), 3)):
        with RawClient(broker.port("CONTROLLER"), tls=context) as client:
            assert answer_then_close(client, request, version) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, True)
    assert isr(broker) == [0]


def test_guessing_the_broker_epoch_costs_a_connection_per_guess(secured):
    broker, pki, keystore = secured
    context = tls_as(pki, keystore)            # the broker's own certificate: authorized
    epoch = broker_epoch(broker)
    closed_before = control_stats(broker)["closed"].get("controller_refused", 0)
    guesses = [g for g in (random.getrandbits(62) for _ in range(5)) if g != epoch]
    ports = []
    for guess in guesses:
        with RawClient(broker.port("CONTROLLER"), tls=context) as client:
            ports.append(client.local_address[1])
            assert client.request(empty_the_isr(broker, guess), 1).error_code == ErrorCode.STALE_BROKER_EPOCH
            # The next guess on the same connection is not read: EOF.
            client.send_request(empty_the_isr(broker, guess + 1), 1)
            assert client.wait_closed(timeout=10), "the connection stays open after a wrong broker epoch"
    assert isr(broker) == [0]
    wait_until(lambda: control_stats(broker)["closed"]["controller_refused"] - closed_before == len(guesses),
               what="every guess's connection counted as closed for controller_refused")
    log = broker.log_text()
    for port in ports:
        lines = [line for line in log.splitlines() if f"127.0.0.1:{port} " in line]
        assert len(lines) == 1, lines
        assert "Refused AlterPartition v1 from principal User:brokers-broker" in lines[0]
        assert "STALE_BROKER_EPOCH" in lines[0]

"""With an authorizer, LeaderAndIsr, UpdateMetadata and StopReplica are accepted only from the controller.

The sender must be authorized CLUSTER_ACTION on the cluster (a super user
is) or be this broker's own inter-broker principal -- the one its control
plane's certificate names; here ``User:broker``, which the controller's
requests arrive with.  Anyone else is refused with
CLUSTER_AUTHORIZATION_FAILED even with the right broker epoch, and nothing
of the request is applied.  Without an authorizer the principal is not
checked (the guard's other checks are: tests/unit/test_controller_requests.py).
"""

from __future__ import annotations

import uuid

import pytest
from twisted.logger import globalLogPublisher

from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.security.acl import AclOperation, ResourceType

from .helpers import Broker
from .test_authorization import AUTHORIZER, allow, grant
from .test_controller_apis import (
    lai_errors,
    lai_partition,
    leader_and_isr,
    stop_errors,
    stop_replica,
    um_partition,
    update_metadata,
)

BROKER, ADMIN, MALLORY, OPERATOR = "User:broker", "User:admin", "User:mallory", "User:operator"
TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")


def secured(tmp_path, **props) -> Broker:
    node = Broker(tmp_path, {"authorizer.class.name": AUTHORIZER, "super.users": ADMIN,
                             "allow.everyone.if.no.acl.found": "false", **props}, start=False)
    node.own_principal = node.channels.principal = BROKER   # an mTLS control plane: the broker's certificate
    node.start()
    return node


def send(node, request, version, principal):
    return node.call(request, version, plane="control", listener="CONTROLLER", principal=principal)


def metadata(node, topic="t"):
    return update_metadata(node, {topic: (TOPIC_ID, [um_partition(0)], {"retention.ms": "1"})})


@pytest.fixture
def warnings():
    events: list = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


def test_another_principal_is_refused_even_with_the_right_broker_epoch(tmp_path, warnings):
    node = secured(tmp_path)
    node.create_topic("kept")                      # the controller's own requests were accepted
    assert node.replica_manager.leader_partition("kept", 0) is not None
    assert send(node, metadata(node), 8, MALLORY).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert "t" not in node.metadata_cache.topics and "t" not in node.config_repository.topics()
    body = send(node, leader_and_isr(node, {"x": (TOPIC_ID, [lai_partition(0)])}), 7, MALLORY)
    assert body.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert set(lai_errors(body).values()) == {ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    assert node.log("x") is None
    body = send(node, stop_replica(node, [("kept", 0)], delete=True), 4, MALLORY)
    assert stop_errors(body) == {("kept", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    assert node.log("kept") is not None
    refusals = [e for e in warnings if e.get("principal") == MALLORY and "source" in e]
    assert [e["api"] for e in refusals] == ["UpdateMetadata v8", "LeaderAndIsr v7", "StopReplica v4"]
    assert all(e["source"] == "127.0.0.1:50000 on listener CONTROLLER" for e in refusals)


def test_the_broker_epoch_is_still_checked_for_an_authorized_principal(tmp_path):
    node = secured(tmp_path)
    request = metadata(node)
    request.broker_epoch += 1
    assert send(node, request, 8, ADMIN).error_code == ErrorCode.STALE_BROKER_EPOCH


@pytest.mark.parametrize("principal", [ADMIN, BROKER])
def test_a_super_user_and_the_brokers_own_principal_are_accepted(tmp_path, principal):
    node = secured(tmp_path)
    assert send(node, metadata(node), 8, principal).error_code == ErrorCode.NONE
    assert node.config_repository.topic_overrides("t") == {"retention.ms": "1"}


def test_a_principal_with_cluster_action_on_the_cluster_is_accepted(tmp_path):
    node = secured(tmp_path)
    assert send(node, metadata(node), 8, OPERATOR).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    grant(node, allow(ResourceType.CLUSTER, "kafka-cluster", AclOperation.CLUSTER_ACTION, principal=OPERATOR))
    assert send(node, metadata(node), 8, OPERATOR).error_code == ErrorCode.NONE
    assert "t" in node.metadata_cache.topics
    grant(node, allow(ResourceType.CLUSTER, "kafka-cluster", AclOperation.DESCRIBE, principal=MALLORY))
    assert send(node, metadata(node, "u"), 8, MALLORY).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_the_first_acl_set_reaches_a_broker_that_holds_none(tmp_path):
    node = secured(tmp_path)
    grant(node, allow(ResourceType.TOPIC, "t", AclOperation.READ, principal=OPERATOR))
    assert [b.entry.principal for b in node.authorization.authorizer.bindings()] == [OPERATOR]


def test_without_an_authorizer_the_principal_is_not_checked(tmp_path):
    node = Broker(tmp_path)
    assert send(node, metadata(node), 8, MALLORY).error_code == ErrorCode.NONE

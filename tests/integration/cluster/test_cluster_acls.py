"""ACLs in a ZooKeeper cluster: Kafka's znodes, every broker authorizes with the same set.

A CreateAcls received by any broker is the controller's to apply (forwarded
to it when it is elsewhere); the controller writes Kafka's ``/kafka-acl``
znodes with their change notification and sends the new set to every
broker.  ACLs written into ZooKeeper directly -- as Kafka's
``kafka-acls.sh --authorizer-properties zookeeper.connect=...`` does --
reach every broker through the change notification.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from support.cluster import Cluster
from support.wait import wait_until

pytestmark = pytest.mark.integration

ANON = "User:ANONYMOUS"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zookeeper):
    cluster = Cluster(tmp_path_factory.mktemp("acl-cluster"), zookeeper, "/acl-cluster", size=2, overrides={
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true", "auto.leader.rebalance.enable": "false"})
    cluster.start()
    yield cluster
    statuses = cluster.stop()
    assert set(statuses.values()) == {0}, statuses


def described(cluster, broker_id) -> set[tuple]:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(broker_id), "socket.timeout.ms": 10000})
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    return {(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)
            for b in admin.describe_acls(everything).result(15)}


def test_acls_reach_every_broker_and_zookeeper(cluster):
    controller = cluster.wait_for_controller()
    other = next(b for b in cluster.running if b != controller)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(other), "socket.timeout.ms": 10000})
    created = [AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, ANON, "*", op,
                          AclPermissionType.ALLOW)
               for op in (AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CLUSTER_ACTION)]
    created.append(AclBinding(ResourceType.TOPIC, "team-", ResourcePatternType.PREFIXED, "User:alice", "*",
                              AclOperation.WRITE, AclPermissionType.ALLOW))
    for future in admin.create_acls(created).values():
        assert future.result(15) is None
    expected = {(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)
                for b in created}
    for broker_id in cluster.running:
        assert described(cluster, broker_id) == expected
    with cluster.zk() as zk:
        cluster_acls = json.loads(zk.get("/kafka-acl/Cluster/kafka-cluster")[0])
        assert cluster_acls["version"] == 1
        assert sorted(a["operation"] for a in cluster_acls["acls"]) == ["Alter", "ClusterAction", "Describe"]
        assert json.loads(zk.get("/kafka-acl-extended/prefixed/Topic/team-")[0])["acls"] == [
            {"principal": "User:alice", "permissionType": "Allow", "operation": "Write", "host": "*"}]

        # Written into ZooKeeper by another tool, announced by a change notification.
        zk.create("/kafka-acl/Group/readers", json.dumps({"version": 1, "acls": [
            {"principal": "User:bob", "permissionType": "Deny", "operation": "Read", "host": "*"}]}).encode(),
            makepath=True)
        zk.create("/kafka-acl-changes/acl_changes_", b"GROUP:readers", sequence=True, makepath=True)
    bob = (ResourceType.GROUP, "readers", ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.READ,
           AclPermissionType.DENY)
    for broker_id in cluster.running:
        wait_until(lambda b=broker_id: bob in described(cluster, b), 30, what=f"broker {broker_id} has bob's ACL")

"""Every API checks its Kafka operation: a broker with the ACL authorizer, requests from several principals.

The ACLs are created through the controller, which sends them to the broker
in UpdateMetadata as it would over the control plane; principals come from
the request context, so ``User:alice`` here stands for any authenticated
principal (SASL, mTLS) as well as ``User:ANONYMOUS``.
"""

from __future__ import annotations

import pytest

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

from .helpers import Broker, records, result_of
from .test_fetch import fetch, partitions
from .test_produce import answers, produce

AUTHORIZER = "twisted_kafka.security.authorizer.AclAuthorizer"
ALICE, BOB, ADMIN = "User:alice", "User:bob", "User:admin"
Op = AclOperation
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED


def allow(resource_type, name, operation, principal=ALICE, pattern=LITERAL,
          permission=AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, "*", operation, permission))


@pytest.fixture
def node(tmp_path) -> Broker:
    node = Broker(tmp_path, {"authorizer.class.name": AUTHORIZER, "super.users": ADMIN,
                             "offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"})
    node.create_topic("t")
    node.create_topic("secret")
    return node


def grant(node, *bindings) -> None:
    results = result_of(node.controller_client.create_acls(list(bindings)))
    assert all(error == ErrorCode.NONE for error, _ in results), results


def metadata_topics(body) -> dict[str, int]:
    return {t.name: t.error_code for t in body.topics}


def test_produce_needs_write_on_the_topic(node):
    grant(node, allow(TOPIC, "t", Op.WRITE))
    request = produce({"t": {0: records(b"a")}, "secret": {0: records(b"b")}, "missing": {0: records(b"c")}})
    assert answers(node.call(request, 9, principal=ALICE)) == {
        ("t", 0): (ErrorCode.NONE, 0), ("secret", 0): (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1),
        ("missing", 0): (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)}     # an unknown topic is not revealed
    assert answers(node.call(produce({"t": {0: records(b"a")}}), 9, principal=BOB)) == {
        ("t", 0): (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)}
    assert answers(node.call(produce({"secret": {0: records(b"a")}}), 9, principal=ADMIN)) == {
        ("secret", 0): (ErrorCode.NONE, 0)}                             # super user


def test_fetch_needs_read_and_a_follower_cluster_action(node):
    node.produce("t", 0, b"x")
    grant(node, allow(TOPIC, "t", Op.READ))
    got = partitions(node.call(fetch({"t": {0: 0}, "secret": {0: 0}}), 12, principal=ALICE))
    assert got[("t", 0)].error_code == ErrorCode.NONE and got[("t", 0)].records
    assert got[("secret", 0)].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    follower = fetch({"t": {0: 0}})
    follower.replica_id = 1
    assert node.call(follower, 12, principal=ALICE).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_metadata_lists_describable_topics_and_refuses_the_others(node):
    grant(node, allow(TOPIC, "t", Op.WRITE))                            # WRITE implies DESCRIBE
    assert metadata_topics(node.call(m.MetadataRequest(topics=None), 12, principal=ALICE)) == {"t": 0}
    named = node.call(m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=n) for n in
                                                ("t", "secret")], allow_auto_topic_creation=False), 12,
                      principal=ALICE)
    assert metadata_topics(named) == {"t": 0, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}


def test_auto_creation_needs_create(node):
    grant(node, allow(TOPIC, "auto-", Op.DESCRIBE, pattern=PREFIXED),
          allow(TOPIC, "auto-ok", Op.CREATE))
    request = m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=n)
                                        for n in ("auto-ok", "auto-no")], allow_auto_topic_creation=True)
    assert metadata_topics(node.call(request, 12, principal=ALICE)) == {
        "auto-ok": 0, "auto-no": ErrorCode.TOPIC_AUTHORIZATION_FAILED}


def test_create_topics_needs_create_on_the_cluster_or_the_topic(node):
    C = m.CreateTopicsRequest
    request = C(topics=[C.CreatableTopic(name=n, num_partitions=1, replication_factor=1, assignments=[],
                                         configs=[]) for n in ("mine-1", "other")], timeout_ms=0,
                validate_only=False)
    grant(node, allow(TOPIC, "mine-", Op.CREATE, pattern=PREFIXED))
    body = node.call(request, 5, principal=ALICE)
    assert {t.name: t.error_code for t in body.topics} == {
        "mine-1": ErrorCode.NONE, "other": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    grant(node, allow(CLUSTER, "kafka-cluster", Op.CREATE, principal=BOB))
    request = C(topics=[C.CreatableTopic(name="other", num_partitions=1, replication_factor=1, assignments=[],
                                         configs=[])], timeout_ms=0, validate_only=False)
    assert node.call(request, 5, principal=BOB).topics[0].error_code == ErrorCode.NONE


def test_delete_topics_needs_delete(node):
    D = m.DeleteTopicsRequest
    body = node.call(D(topic_names=["t"], timeout_ms=0), 5, principal=ALICE)
    assert body.responses[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    grant(node, allow(TOPIC, "t", Op.DELETE))
    assert node.call(D(topic_names=["t"], timeout_ms=0), 5, principal=ALICE).responses[0].error_code == 0


def test_cluster_apis_need_their_cluster_operation(node):
    E = m.ElectLeadersRequest
    request = E(election_type=0, topic_partitions=None, timeout_ms=1000)
    assert node.call(request, 2, principal=ALICE).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    grant(node, allow(CLUSTER, "kafka-cluster", Op.ALTER))
    assert node.call(request, 2, principal=ALICE).error_code == ErrorCode.NONE
    body = node.call(m.DescribeClusterRequest(include_cluster_authorized_operations=False), 0, principal=BOB)
    assert body.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED


def test_configs_need_describe_and_alter_configs(node):
    DC = m.DescribeConfigsRequest
    request = DC(resources=[DC.DescribeConfigsResource(resource_type=2, resource_name=n, configuration_keys=None)
                            for n in ("t", "secret")] + [
        DC.DescribeConfigsResource(resource_type=4, resource_name="0", configuration_keys=None)],
        include_synonyms=False, include_documentation=False)
    grant(node, allow(TOPIC, "t", Op.ALTER_CONFIGS))                   # implies DESCRIBE_CONFIGS
    body = node.call(request, 4, principal=ALICE)
    assert [r.error_code for r in body.results] == [
        ErrorCode.NONE, ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.CLUSTER_AUTHORIZATION_FAILED]


def test_group_apis_need_read_on_the_group(node):
    J = m.JoinGroupRequest
    join = J(group_id="g", session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
             group_instance_id=None, protocol_type="consumer",
             protocols=[J.JoinGroupRequestProtocol(name="range", metadata=b"")])
    assert node.call(join, 5, principal=ALICE).error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    found = node.call(m.FindCoordinatorRequest(key="g", key_type=0), 3, principal=ALICE)
    assert found.error_code == ErrorCode.GROUP_AUTHORIZATION_FAILED
    grant(node, allow(GROUP, "g", Op.READ))
    assert node.call(m.FindCoordinatorRequest(key="g", key_type=0), 3, principal=ALICE).error_code == 0
    R = m.OffsetCommitRequest
    commit = R(group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=[
        R.OffsetCommitRequestTopic(name=n, partitions=[R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
            partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata="")])
        for n in ("t", "secret")])
    grant(node, allow(TOPIC, "t", Op.READ))
    body = node.call(commit, 8, principal=ALICE)
    assert {t.name: t.partitions[0].error_code for t in body.topics} == {
        "t": ErrorCode.NONE, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    body = node.call(m.ListGroupsRequest(states_filter=[], types_filter=[]), 4, principal=BOB)
    assert body.error_code == 0 and body.groups == []                  # bob may describe no group


def test_acl_apis(node):
    CR = m.CreateAclsRequest
    creation = CR.AclCreation(resource_type=TOPIC, resource_name="p-", resource_pattern_type=PREFIXED,
                              principal=ALICE, host="*", operation=Op.READ, permission_type=AclPermissionType.ALLOW)
    bad = CR.AclCreation(resource_type=CLUSTER, resource_name="c", resource_pattern_type=LITERAL,
                         principal=ALICE, host="*", operation=Op.ALTER, permission_type=AclPermissionType.ALLOW)
    refused = node.call(CR(creations=[creation]), 1, principal=ALICE)
    assert [r.error_code for r in refused.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    body = node.call(CR(creations=[creation, bad]), 1, principal=ADMIN)
    assert [(r.error_code, r.error_message) for r in body.results] == [
        (ErrorCode.NONE, None),
        (ErrorCode.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster")]
    DA = m.DescribeAclsRequest
    describe = DA(resource_type_filter=ResourceType.ANY, resource_name_filter=None, pattern_type_filter=PatternType.ANY,
                  principal_filter=None, host_filter=None, operation=Op.ANY, permission_type=AclPermissionType.ANY)
    body = node.call(describe, 1, principal=ADMIN)
    assert [(r.resource_name, r.pattern_type, [a.principal for a in r.acls]) for r in body.resources] == [
        ("p-", PREFIXED, [ALICE])]
    assert node.call(describe, 0, principal=ADMIN).resources == []      # v0 filters mean LITERAL
    unknown = DA(resource_type_filter=ResourceType.ANY, resource_name_filter=None, pattern_type_filter=0,
                 principal_filter=None, host_filter=None, operation=Op.ANY, permission_type=AclPermissionType.ANY)
    assert node.call(unknown, 1, principal=ADMIN).error_code == ErrorCode.INVALID_REQUEST
    DL = m.DeleteAclsRequest
    everything = DL.DeleteAclsFilter(resource_type_filter=ResourceType.ANY, resource_name_filter=None,
                                     pattern_type_filter=PatternType.ANY, principal_filter=None, host_filter=None,
                                     operation=Op.ANY, permission_type=AclPermissionType.ANY)
    invalid = DL.DeleteAclsFilter(resource_type_filter=0, resource_name_filter=None,
                                  pattern_type_filter=PatternType.ANY, principal_filter=None, host_filter=None,
                                  operation=Op.ANY, permission_type=AclPermissionType.ANY)
    body = node.call(DL(filters=[everything, invalid]), 1, principal=ADMIN)
    assert [(r.error_code, [a.resource_name for a in r.matching_acls]) for r in body.filter_results] == [
        (ErrorCode.NONE, ["p-"]), (ErrorCode.INVALID_REQUEST, [])]
    assert node.call(describe, 1, principal=ADMIN).resources == []
    assert node.authorization.authorizer.bindings() == []               # the broker holds the new set


def test_authorized_operations_are_the_principal_s(node):
    grant(node, allow(CLUSTER, "kafka-cluster", Op.ALTER))
    body = node.call(m.DescribeClusterRequest(include_cluster_authorized_operations=True), 0, principal=ALICE)
    assert body.error_code == 0 and body.authorized_operations == {Op.ALTER, Op.DESCRIBE}   # ALTER implies DESCRIBE
    grant(node, allow(GROUP, "g", Op.DESCRIBE))
    assert node.call(m.FindCoordinatorRequest(key="g", key_type=0), 3, principal=ALICE).error_code == 0
    body = node.call(m.DescribeGroupsRequest(groups=["g"], include_authorized_operations=True), 3, principal=ALICE)
    assert body.groups[0].authorized_operations == {Op.DESCRIBE}


def test_metadata_topic_operations_are_the_principal_s(node):
    grant(node, allow(TOPIC, "t", Op.WRITE))
    body = node.call(m.MetadataRequest(topics=None, include_topic_authorized_operations=True), 10, principal=ALICE)
    assert {t.name: t.authorized_operations for t in body.topics} == {"t": {Op.WRITE, Op.DESCRIBE}}
    admin = node.call(m.MetadataRequest(topics=None, include_topic_authorized_operations=True), 10, principal=ADMIN)
    assert len({t.name: t.authorized_operations for t in admin.topics}["t"]) == 8


def test_init_producer_id_needs_idempotent_write_or_write_on_some_topic(node):
    IP = m.InitProducerIdRequest
    request = IP(transactional_id=None, transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
    assert node.call(request, 4, principal=ALICE).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    grant(node, allow(TOPIC, "t", Op.WRITE))                            # KIP-679: WRITE on any topic suffices
    assert node.call(request, 4, principal=ALICE).error_code == ErrorCode.NONE
    grant(node, allow(CLUSTER, "kafka-cluster", Op.IDEMPOTENT_WRITE, principal=BOB))
    assert node.call(request, 4, principal=BOB).error_code == ErrorCode.NONE
    transactional = IP(transactional_id="tx", transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
    assert node.call(transactional, 4, principal=ALICE).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_offset_for_leader_epoch_needs_cluster_action_or_describe(node):
    OE = m.OffsetForLeaderEpochRequest
    request = OE(replica_id=-1, topics=[OE.OffsetForLeaderTopic(topic=n, partitions=[
        OE.OffsetForLeaderTopic.OffsetForLeaderPartition(partition=0, current_leader_epoch=-1, leader_epoch=0)])
        for n in ("t", "secret")])
    grant(node, allow(TOPIC, "t", Op.READ))
    body = node.call(request, 4, principal=ALICE)
    assert {t.topic: t.partitions[0].error_code for t in body.topics} == {
        "t": ErrorCode.NONE, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    grant(node, allow(CLUSTER, "kafka-cluster", Op.CLUSTER_ACTION, principal=BOB))
    body = node.call(request, 4, principal=BOB)
    assert {t.topic: t.partitions[0].error_code for t in body.topics} == {"t": 0, "secret": 0}


def test_client_quotas_need_describe_and_alter_configs_on_the_cluster(node):
    from .test_client_quotas import alter_quotas, describe_quotas

    describe = describe_quotas([("ip", 2, None)])
    assert node.call(describe, 1, principal=ALICE).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    alter = alter_quotas([([("ip", "10.0.0.1")], [("connection_creation_rate", 5.0, False)])])
    body = node.call(alter, 1, principal=ALICE)
    assert [e.error_code for e in body.entries] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    grant(node, allow(CLUSTER, "kafka-cluster", Op.ALTER_CONFIGS))     # implies DESCRIBE_CONFIGS
    assert [e.error_code for e in node.call(alter, 1, principal=ALICE).entries] == [ErrorCode.NONE]
    assert node.call(describe, 1, principal=ALICE).error_code == ErrorCode.NONE


def test_scram_credential_apis_need_describe_and_alter_on_the_cluster(node):
    describe = m.DescribeUserScramCredentialsRequest(users=None)
    A = m.AlterUserScramCredentialsRequest
    alter = A(deletions=[], upsertions=[A.ScramCredentialUpsertion(
        name="carol", mechanism=1, iterations=8192, salt=b"s" * 16, salted_password=b"p" * 32)])
    assert node.call(describe, 0, principal=ALICE).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    assert [r.error_code for r in node.call(alter, 0, principal=ALICE).results] == [
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    grant(node, allow(CLUSTER, "kafka-cluster", Op.ALTER))           # implies DESCRIBE
    assert [r.error_code for r in node.call(alter, 0, principal=ALICE).results] == [ErrorCode.NONE]
    assert node.call(describe, 0, principal=ALICE).error_code == ErrorCode.NONE


def test_transactions_need_describe_and_write_on_the_transactional_id(node):
    TXN = ResourceType.TRANSACTIONAL_ID
    FC, IP = m.FindCoordinatorRequest, m.InitProducerIdRequest
    find = FC(key_type=1, coordinator_keys=["tx"])
    assert [c.error_code for c in node.call(find, 4, principal=ALICE).coordinators] == [
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
    grant(node, allow(TXN, "tx", Op.DESCRIBE))
    assert [c.error_code for c in node.call(find, 4, principal=ALICE).coordinators] == [ErrorCode.NONE]
    init = IP(transactional_id="tx", transaction_timeout_ms=60000, producer_id=-1, producer_epoch=-1)
    assert node.call(init, 4, principal=ALICE).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    grant(node, allow(TXN, "tx", Op.WRITE))
    body = node.call(init, 4, principal=ALICE)
    assert body.error_code == ErrorCode.NONE
    pid = body.producer_id
    APT = m.AddPartitionsToTxnRequest
    add = APT(v3_and_below_transactional_id="tx", v3_and_below_producer_id=pid, v3_and_below_producer_epoch=0,
              v3_and_below_topics=[APT.AddPartitionsToTxnTopic(name=n, partitions=[0]) for n in ("t", "secret")])
    errors = {t.name: t.results_by_partition[0].partition_error_code
              for t in node.call(add, 3, principal=ALICE).results_by_topic_v3_and_below}
    assert errors == {"t": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    grant(node, allow(TOPIC, "t", Op.WRITE))
    errors = {t.name: t.results_by_partition[0].partition_error_code
              for t in node.call(add, 3, principal=ALICE).results_by_topic_v3_and_below}
    assert errors == {"t": ErrorCode.OPERATION_NOT_ATTEMPTED, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
    txn = records(b"x", producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)
    assert answers(node.call(produce({"t": {0: txn}}, transactional_id="other"), 9, principal=ALICE)) == {
        ("t", 0): (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1)}
    end = m.EndTxnRequest(transactional_id="tx", producer_id=pid, producer_epoch=0, committed=True)
    assert node.call(end, 3, principal=BOB).error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_write_txn_markers_needs_cluster_action(node):
    W = m.WriteTxnMarkersRequest
    request = W(markers=[W.WritableTxnMarker(producer_id=1, producer_epoch=0, transaction_result=True, topics=[
        W.WritableTxnMarker.WritableTxnMarkerTopic(name="t", partition_indexes=[0])], coordinator_epoch=0)])
    body = node.call(request, 1, principal=ALICE)
    assert [p.error_code for mk in body.markers for t in mk.topics for p in t.partitions] == [
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    assert node.log("t", 0).log_end_offset == 0                        # nothing written
    body = node.call(request, 1, principal=ADMIN)
    assert [p.error_code for mk in body.markers for t in mk.topics for p in t.partitions] == [ErrorCode.NONE]
    assert node.log("t", 0).log_end_offset == 1
    # the brokers' own inter-broker principal passes without an ACL, as for the controller APIs
    body = node.call(request, 1, principal=node.own_principal)
    assert [p.error_code for mk in body.markers for t in mk.topics for p in t.partitions] == [ErrorCode.NONE]


def test_describe_and_list_transactions_show_only_ids_the_client_may_describe(node):
    TXN = ResourceType.TRANSACTIONAL_ID
    for tid in ("tx-a", "tx-b"):
        node.call(m.FindCoordinatorRequest(key_type=1, coordinator_keys=[tid]), 4, principal=ADMIN)
        assert node.call(m.InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=60000, producer_id=-1,
                                                 producer_epoch=-1), 4, principal=ADMIN).error_code == ErrorCode.NONE
    grant(node, allow(TXN, "tx-a", Op.DESCRIBE))
    body = node.call(m.DescribeTransactionsRequest(transactional_ids=["tx-a", "tx-b"]), 0, principal=ALICE)
    assert [(s.transactional_id, s.error_code, s.transaction_state) for s in body.transaction_states] == [
        ("tx-a", ErrorCode.NONE, "Empty"), ("tx-b", ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "")]
    listed = node.call(m.ListTransactionsRequest(state_filters=[], producer_id_filters=[]), 0, principal=ALICE)
    assert [s.transactional_id for s in listed.transaction_states] == ["tx-a"]


def test_describe_producers_needs_read_on_the_topic(node):
    D = m.DescribeProducersRequest
    request = D(topics=[D.TopicRequest(name=n, partition_indexes=[0]) for n in ("t", "secret")])
    grant(node, allow(TOPIC, "t", Op.READ))
    body = node.call(request, 0, principal=ALICE)
    assert {t.name: t.partitions[0].error_code for t in body.topics} == {
        "t": ErrorCode.NONE, "secret": ErrorCode.TOPIC_AUTHORIZATION_FAILED}

"""The controller's APIs on the wire: where they are served and whom they are accepted from.

A client must not be able to act as the controller.  Each test sends what a
hostile or confused peer would -- raw UpdateMetadata, LeaderAndIsr and
StopReplica requests on a socket -- and then checks that the real controller
still works: a topic created afterwards gets a leader and takes records.

* With ``control.plane.listener.name`` the controller APIs are not served on
  the data plane (the connection is closed unanswered, as for an unknown API).
* Versions that carry no broker epoch (KIP-380) are not served at all.
* Wherever they are served, a request from another controller id, with an
  older controller epoch, for another broker epoch, broker id or cluster id is
  refused, and nothing it carries is applied.

The shipped configuration's part (each broker reaches only its own control
plane) is in ``test_shipped_config.py``.
"""

from __future__ import annotations

import uuid

import pytest

from support.raw_client import RawClient
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

pytestmark = pytest.mark.integration

U = m.UpdateMetadataRequest
L = m.LeaderAndIsrRequest
S = m.StopReplicaRequest
FORGED_EPOCH = 1_000_000


# -- requests a client could forge ----------------------------------------------------------

def update_metadata_v0(controller_epoch: int = FORGED_EPOCH, port: int = 1) -> U:
    """The 65-byte UpdateMetadata v0 of the report: broker 0 is at 127.0.0.1:``port``."""
    return U(version=0, controller_id=0, controller_epoch=controller_epoch, ungrouped_partition_states=[],
             live_brokers=[U.UpdateMetadataBroker(id=0, v0_host="127.0.0.1", v0_port=port)])


def update_metadata_v8(*, controller_id: int = 0, controller_epoch: int = FORGED_EPOCH, broker_epoch: int = 2 ** 62,
                       port: int = 1, **tags) -> U:
    """An UpdateMetadata v8 saying broker 0 is at 127.0.0.1:``port`` (``tags``: twisted_kafka's tagged fields)."""
    endpoint = U.UpdateMetadataBroker.UpdateMetadataEndpoint(port=port, host="127.0.0.1", listener="PLAINTEXT",
                                                             security_protocol=0)
    return U(version=8, controller_id=controller_id, is_k_raft_controller=False, controller_epoch=controller_epoch,
             broker_epoch=broker_epoch, topic_states=[],
             live_brokers=[U.UpdateMetadataBroker(id=0, rack=None, endpoints=[endpoint])], **tags)


def leader_and_isr_v7(topic: str, *, controller_epoch: int = FORGED_EPOCH, broker_epoch: int = 2 ** 62) -> L:
    """Make this broker leader of ``topic``-0 with a leader epoch far ahead."""
    state = L.LeaderAndIsrTopicState.LeaderAndIsrPartitionState(
        partition_index=0, controller_epoch=controller_epoch, leader=0, leader_epoch=FORGED_EPOCH, isr=[0],
        partition_epoch=FORGED_EPOCH, replicas=[0], adding_replicas=[], removing_replicas=[], is_new=True,
        leader_recovery_state=0)
    return L(version=7, controller_id=0, is_k_raft_controller=False, controller_epoch=controller_epoch,
             broker_epoch=broker_epoch, request_type=0,
             topic_states=[L.LeaderAndIsrTopicState(topic_name=topic, topic_id=uuid.uuid4(), partition_states=[state])],
             live_leaders=[L.LeaderAndIsrLiveLeader(broker_id=0, host_name="127.0.0.1", port=1)])


def stop_replica_v4(topic: str, *, controller_epoch: int = FORGED_EPOCH, broker_epoch: int = 2 ** 62) -> S:
    """Stop and delete ``topic``-0."""
    return S(version=4, controller_id=0, is_k_raft_controller=False, controller_epoch=controller_epoch,
             broker_epoch=broker_epoch, topic_states=[S.StopReplicaTopicState(
                 topic_name=topic, partition_states=[S.StopReplicaTopicState.StopReplicaPartitionState(
                     partition_index=0, leader_epoch=-2, delete_partition=True)])])


def controlled_shutdown_v3(broker_epoch: int) -> m.ControlledShutdownRequest:
    return m.ControlledShutdownRequest(version=3, broker_id=0, broker_epoch=broker_epoch)


# -- what the real controller still does ------------------------------------------------------

def create_topic(port: int, name: str) -> int:
    """CreateTopics v7 (1 partition), waiting up to 5 s for the brokers; the topic's error code."""
    request = m.CreateTopicsRequest(topics=[m.CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000, validate_only=False)
    with RawClient(port, timeout=15) as client:
        return client.request(request, 7).topics[0].error_code


def metadata(port: int, topic: str | None = None):
    topics = None if topic is None else [m.MetadataRequest.MetadataRequestTopic(name=topic)]
    with RawClient(port) as client:
        return client.request(m.MetadataRequest(topics=topics, allow_auto_topic_creation=False), 4)


def leader(port: int, topic: str) -> tuple[int, int]:
    """(error code, leader) of ``topic``-0 in Metadata v4."""
    (entry,) = metadata(port, topic).topics
    if entry.error_code or not entry.partitions:
        return entry.error_code, -1
    return entry.partitions[0].error_code, entry.partitions[0].leader_id


def produce_one(port: int, topic: str) -> int:
    from twisted_kafka.protocol.records.builder import build_batch

    P = m.ProduceRequest
    request = P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[
            P.TopicProduceData.PartitionProduceData(index=0, records=build_batch([(b"k", b"v")]))])])
    with RawClient(port) as client:
        return client.request(request, 7).responses[0].partition_responses[0].error_code


def latest_offset(port: int, topic: str) -> int:
    """ListOffsets v1 LATEST of ``topic``-0."""
    LO = m.ListOffsetsRequest
    request = LO(replica_id=-1, topics=[LO.ListOffsetsTopic(name=topic, partitions=[
        LO.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    with RawClient(port) as client:
        partition = client.request(request, 1).topics[0].partitions[0]
    assert partition.error_code == ErrorCode.NONE
    return partition.offset


def assert_controller_still_works(broker, topic: str) -> None:
    """The real controller still creates topics with a leader, and the broker advertises itself."""
    assert create_topic(broker.data_port, topic) == ErrorCode.NONE
    assert leader(broker.data_port, topic) == (ErrorCode.NONE, 0)
    assert produce_one(broker.data_port, topic) == ErrorCode.NONE
    assert [(b.node_id, b.port) for b in metadata(broker.data_port).brokers] == [(0, broker.data_port)]


def refused(port: int, request, version: int) -> int:
    """Send a controller request on a fresh connection; its top-level error code."""
    with RawClient(port) as client:
        return client.request(request, version).error_code


# -- where the controller APIs are served --------------------------------------------------------

def test_data_plane_beside_a_control_plane_closes_controller_apis_unanswered(broker):
    for request, version in ((update_metadata_v0(), 0), (update_metadata_v8(), 8),
                             (leader_and_isr_v7("hijacked"), 7), (stop_replica_v4("hijacked"), 4),
                             (controlled_shutdown_v3(2 ** 62), 3)):
        with RawClient(broker.data_port) as client:
            client.send_request(request, version)
            assert client.wait_closed(5), f"{type(request).__name__} v{version} must not be served on the data plane"
    broker.wait_for_log(r"unknown or unserved api_key 6")
    assert_controller_still_works(broker, "after-data-plane-attempts")


def test_controller_api_versions_without_a_broker_epoch_are_not_served(broker):
    """KIP-380: LeaderAndIsr v0-1, UpdateMetadata v0-4, StopReplica v0 carry no broker epoch."""
    with RawClient(broker.control_port) as client:
        client.send_request(update_metadata_v0(), 0)
        assert client.wait_closed(5), "UpdateMetadata v0 (no broker epoch) must not be served"
    with RawClient(broker.control_port) as client:
        ranges = {k.api_key: (k.min_version, k.max_version) for k in client.api_versions(0).api_keys}
    assert ranges[4] == (2, 7) and ranges[5] == (1, 4) and ranges[6] == (5, 8) and ranges[7] == (2, 3)
    assert_controller_still_works(broker, "after-v0")


def test_forged_controller_requests_on_the_control_plane_are_refused_and_change_nothing(broker):
    assert create_topic(broker.data_port, "victim") == ErrorCode.NONE
    port = broker.control_port
    # Not the controller this broker knows (single node: itself, broker 0).
    assert refused(port, update_metadata_v8(controller_id=7), 8) == ErrorCode.STALE_CONTROLLER_EPOCH
    # The controller's id, but not this broker's epoch (a guess, and "no epoch").
    for guess in (2 ** 62, -1, 0):
        assert refused(port, update_metadata_v8(broker_epoch=guess), 8) == ErrorCode.STALE_BROKER_EPOCH
        assert refused(port, leader_and_isr_v7("victim", broker_epoch=guess), 7) == ErrorCode.STALE_BROKER_EPOCH
        assert refused(port, stop_replica_v4("victim", broker_epoch=guess), 4) == ErrorCode.STALE_BROKER_EPOCH
    # ControlledShutdown for broker 0 needs its current epoch too.
    for guess in (2 ** 62, -1):
        assert refused(port, controlled_shutdown_v3(guess), 3) == ErrorCode.STALE_BROKER_EPOCH
    # An older controller epoch than the one in force.
    assert refused(port, update_metadata_v8(controller_epoch=0), 8) == ErrorCode.STALE_CONTROLLER_EPOCH
    # Nothing moved: the victim topic is still led here and takes records, new topics get a leader.
    assert leader(broker.data_port, "victim") == (ErrorCode.NONE, 0)
    assert produce_one(broker.data_port, "victim") == ErrorCode.NONE
    assert_controller_still_works(broker, "after-forgeries")
    # A restart keeps everything acknowledged, and the new broker epoch is refused as a guess too.
    broker.restart()
    assert leader(broker.data_port, "victim") == (ErrorCode.NONE, 0)
    assert latest_offset(broker.data_port, "victim") == 1
    assert latest_offset(broker.data_port, "after-forgeries") == 1
    assert refused(port, update_metadata_v8(), 8) == ErrorCode.STALE_BROKER_EPOCH
    assert_controller_still_works(broker, "after-restart")


def test_requests_for_another_broker_id_or_cluster_are_refused(broker):
    port = broker.control_port
    assert refused(port, update_metadata_v8(broker_id=7), 8) == ErrorCode.INVALID_REQUEST
    assert refused(port, update_metadata_v8(cluster_id="another-cluster"), 8) == ErrorCode.INCONSISTENT_CLUSTER_ID
    request = leader_and_isr_v7("elsewhere")
    request.cluster_id = "another-cluster"
    assert refused(port, request, 7) == ErrorCode.INCONSISTENT_CLUSTER_ID
    request = stop_replica_v4("elsewhere")
    request.broker_id = 7
    assert refused(port, request, 4) == ErrorCode.INVALID_REQUEST
    assert_controller_still_works(broker, "after-misrouted")


def test_without_a_control_plane_the_data_plane_checks_the_same(broker_factory):
    broker = broker_factory(control_plane=False)
    port = broker.data_port
    with RawClient(port) as client:
        client.send_request(update_metadata_v0(), 0)
        assert client.wait_closed(5)
    assert refused(port, update_metadata_v8(controller_id=7), 8) == ErrorCode.STALE_CONTROLLER_EPOCH
    assert refused(port, update_metadata_v8(), 8) == ErrorCode.STALE_BROKER_EPOCH
    assert_controller_still_works(broker, "no-control-plane")

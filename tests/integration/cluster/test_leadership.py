"""Leadership in a three-broker ZooKeeper cluster: controlled shutdown, broker failure, preferred leader
election (ElectLeaders), partition reassignment (AlterPartitionReassignments / ListPartitionReassignments).

These tests check who leads, with which epochs, and that every broker agrees; the data that moves with
leadership is tests/integration/cluster/test_replication.py's subject.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartition as KafkaTopicPartition

from support.cluster import Cluster
from support.raw_client import RawClient
from support.wait import wait_until
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

EL = m.ElectLeadersRequest
APR = m.AlterPartitionReassignmentsRequest
LPR = m.ListPartitionReassignmentsRequest

#: Every partition's replicas in assignment order, broker 1 preferred for partition 0 and so on.
ASSIGNMENT = {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}


@pytest.fixture
def cluster(tmp_path, zookeeper, zk_chroot):
    cluster = Cluster(tmp_path, zookeeper, zk_chroot, overrides={"auto.leader.rebalance.enable": "false"})
    cluster.start()
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    topic = NewTopic("t", num_partitions=3, replica_assignment=[ASSIGNMENT[p] for p in sorted(ASSIGNMENT)])
    admin.create_topics([topic], operation_timeout=10)["t"].result(30)
    cluster.wait_consistent(lambda md: "t" in md.topics and md.leaders("t") == {0: 1, 1: 2, 2: 3})
    yield cluster
    cluster.kill_all()


def raw(cluster, broker_id, body, version):
    with RawClient(cluster.broker(broker_id).data_port) as client:
        return client.request(body, version)


def test_controlled_shutdown_moves_leadership_before_the_broker_exits(cluster):
    before = cluster.metadata(1).partitions("t")
    assert cluster.broker(2).stop() == 0
    assert "Controlled shutdown succeeded" in cluster.broker(2).log_text()
    md = cluster.wait_consistent(lambda md: md.broker_ids == [1, 3])
    after = md.partitions("t")
    assert after[1].leader == 3                                    # the next in-sync replica of [2, 3, 1]
    # (+1 for the move; when broker 2 was the controller, the next one may take it out of the ISR again
    # once its session closes: +2)
    assert after[1].leader_epoch > before[1].leader_epoch
    assert all(2 not in p.isr for p in after.values())             # it left every ISR
    assert all(p.offline == (2,) for p in after.values())
    assert {p: v.leader for p, v in after.items()} == {0: 1, 1: 3, 2: 3}


def test_a_failed_broker_s_leadership_moves_to_another_in_sync_replica(cluster):
    before = cluster.metadata(1).partitions("t")
    cluster.broker(3).kill()
    # (the controller elects new leaders first, then takes the broker out of the other ISRs: two writes)
    md = cluster.wait_consistent(lambda md: md.broker_ids == [1, 2] and md.leaders("t")[2] != 3
                                 and all(3 not in p.isr for p in md.partitions("t").values()))
    after = md.partitions("t")
    assert after[2].leader == 1 and after[2].isr == (1, 2)          # first live ISR member of [3, 1, 2]
    assert after[2].leader_epoch == before[2].leader_epoch + 1
    assert after[0].isr == (1, 2) and after[0].leader == 1           # a follower left the ISR; leader stays
    # It comes back: in the ISR again, leadership stays where it is (no automatic rebalance here).
    cluster.broker(3).start()
    md = cluster.wait_consistent(lambda md: md.broker_ids == [1, 2, 3] and all(
        set(p.isr) == {1, 2, 3} for p in md.partitions("t").values()))
    assert md.leaders("t") == {0: 1, 1: 2, 2: 1}

    # Preferred leader election (confluent-kafka's elect_leaders): broker 3 leads partition 2 again.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("t", 2), TopicPartition("t", 0)]).result(30)
    errors = {tp.partition: (err.code() if err is not None else 0) for tp, err in result.items()}
    assert errors == {2: 0, 0: ErrorCode.ELECTION_NOT_NEEDED}
    cluster.wait_consistent(lambda md: md.leaders("t") == {0: 1, 1: 2, 2: 3})


def test_elect_leaders_on_a_broker_that_is_not_the_controller(cluster):
    assert cluster.broker(2).stop() == 0
    cluster.broker(2).start()
    cluster.wait_consistent(lambda md: md.broker_ids == [1, 2, 3] and 2 in md.partitions("t")[1].isr)
    other = next(b for b in (1, 2, 3) if b != cluster.controller_id())
    response = raw(cluster, other, EL(election_type=0, topic_partitions=None, timeout_ms=10000), 2)
    assert response.error_code == 0
    # every partition: only those that needed an election are listed
    assert [(r.topic, [(p.partition_id, p.error_code) for p in r.partition_result])
            for r in response.replica_election_results] == [("t", [(1, 0)])]
    cluster.wait_consistent(lambda md: md.leaders("t") == {0: 1, 1: 2, 2: 3})


def test_reassignment_moves_replicas_and_leadership(cluster):
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), client_id="reassign")
    try:
        admin.alter_partition_reassignments({KafkaTopicPartition("t", 0): [3, 2]})
        md = cluster.wait_consistent(lambda md: md.partitions("t")[0].replicas == (3, 2))
        assert md.partitions("t")[0].leader == 3 and set(md.partitions("t")[0].isr) == {2, 3}
        assert admin.list_partition_reassignments() == {}
    finally:
        admin.close()
    # broker 1 no longer hosts t-0: its log was deleted
    wait_until(lambda: not [d for d in (cluster.broker(1).dir / "kafka-logs").glob("t-0")], 10,
               what="broker 1 to delete its replica of t-0")
    with cluster.zk() as zk:
        assert json.loads(zk.get("/brokers/topics/t")[0])["partitions"]["0"] == [3, 2]


def test_reassignment_requests_on_a_broker_that_is_not_the_controller(cluster):
    other = next(b for b in (1, 2, 3) if b != cluster.controller_id())
    response = raw(cluster, other, APR(timeout_ms=10000, allow_replication_factor_change=False, topics=[
        APR.ReassignableTopic(name="t", partitions=[
            APR.ReassignableTopic.ReassignablePartition(partition_index=1, replicas=[1, 2, 3]),
            APR.ReassignableTopic.ReassignablePartition(partition_index=2, replicas=[1, 2]),
            APR.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=None),
            APR.ReassignableTopic.ReassignablePartition(partition_index=7, replicas=[1])])]), 1)
    assert response.error_code == 0
    results = {p.partition_index: p.error_code for t in response.responses for p in t.partitions}
    assert results == {1: 0, 2: ErrorCode.INVALID_REPLICATION_FACTOR, 0: ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                       7: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    md = cluster.wait_consistent(lambda md: md.partitions("t")[1].replicas == (1, 2, 3))
    assert md.partitions("t")[1].leader == 2                        # still in the target replicas: stays
    listed = raw(cluster, other, LPR(timeout_ms=10000, topics=None), 0)
    assert (listed.error_code, listed.topics) == (0, [])


def test_the_controller_moves_leadership_back_to_preferred_replicas_by_itself(tmp_path, zookeeper, zk_chroot):
    cluster = Cluster(tmp_path, zookeeper, zk_chroot, overrides={
        "auto.leader.rebalance.enable": "true", "leader.imbalance.check.interval.seconds": "1"})
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        topic = NewTopic("t", num_partitions=3, replica_assignment=[ASSIGNMENT[p] for p in sorted(ASSIGNMENT)])
        admin.create_topics([topic], operation_timeout=10)["t"].result(30)
        victim = next(b for b in (1, 2, 3) if b != cluster.controller_id())
        cluster.broker(victim).kill()
        cluster.wait_consistent(lambda md: victim not in md.broker_ids and victim not in md.leaders("t").values())
        cluster.broker(victim).start()
        # back in the ISRs, then -- within a check or two -- leading its preferred partition again
        cluster.wait_consistent(lambda md: md.leaders("t") == {0: 1, 1: 2, 2: 3}, timeout=30)
        assert "Leader imbalance above leader.imbalance.per.broker.percentage" in \
            cluster.broker(cluster.controller_id()).log_text()
    finally:
        cluster.kill_all()

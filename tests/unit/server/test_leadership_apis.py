"""ElectLeaders (43), AlterPartitionReassignments (45), ListPartitionReassignments (46) on a single node:
every partition's one replica already leads, so elections are not needed and reassignments can only
name this broker; the cluster tests cover moving leadership between brokers."""

from __future__ import annotations

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

EL = m.ElectLeadersRequest
APR = m.AlterPartitionReassignmentsRequest
LPR = m.ListPartitionReassignmentsRequest


def results(response):
    return {(r.topic, p.partition_id): p.error_code for r in response.replica_election_results
            for p in r.partition_result}


def test_elect_leaders(node):
    node.create_topic("t", 2)
    named = node.call(EL(election_type=0, topic_partitions=[EL.TopicPartitions(topic="t", partitions=[0, 1, 5]),
                                                            EL.TopicPartitions(topic="nope", partitions=[0])],
                         timeout_ms=1000), 2)
    assert named.error_code == 0
    assert results(named) == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED, ("t", 1): ErrorCode.ELECTION_NOT_NEEDED,
                              ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    # every partition: those that needed no election are left out
    every = node.call(EL(election_type=1, topic_partitions=None, timeout_ms=1000), 2)
    assert (every.error_code, every.replica_election_results) == (0, [])
    # v0: preferred, no top-level error
    v0 = node.call(EL(topic_partitions=[EL.TopicPartitions(topic="t", partitions=[0])], timeout_ms=1000), 0)
    assert results(v0) == {("t", 0): ErrorCode.ELECTION_NOT_NEEDED}


def test_reassignments(node):
    node.create_topic("t", 1)
    response = node.call(APR(timeout_ms=1000, allow_replication_factor_change=True, topics=[APR.ReassignableTopic(
        name="t", partitions=[APR.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=[0, 7])])]), 1)
    [[code]] = [[p.error_code for p in t.partitions] for t in response.responses]
    assert code == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    response = node.call(APR(timeout_ms=1000, topics=[APR.ReassignableTopic(
        name="t", partitions=[APR.ReassignableTopic.ReassignablePartition(partition_index=0, replicas=None)])]), 0)
    assert [p.error_code for t in response.responses for p in t.partitions] == [ErrorCode.NO_REASSIGNMENT_IN_PROGRESS]
    listed = node.call(LPR(timeout_ms=1000, topics=None), 0)
    assert (listed.error_code, listed.topics) == (0, [])


def test_without_a_controller(node):
    node.create_topic("t", 1)
    node.controller.shutdown()
    elected = node.call(EL(election_type=0, topic_partitions=[EL.TopicPartitions(topic="t", partitions=[0])],
                           timeout_ms=1000), 2)
    assert (elected.error_code, results(elected)) == (0, {("t", 0): ErrorCode.NOT_CONTROLLER})
    altered = node.call(APR(timeout_ms=1000, allow_replication_factor_change=True, topics=[]), 1)
    assert altered.error_code == ErrorCode.NOT_CONTROLLER
    listed = node.call(LPR(timeout_ms=1000, topics=None), 0)
    assert listed.error_code == ErrorCode.NOT_CONTROLLER

"""AlterPartition (56) as the controller's broker answers it: fenced by broker epoch, leader epoch and
partition epoch, with the partition's state after the change (the single node's controller here)."""

from __future__ import annotations

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

from .helpers import BROKER_EPOCH, BROKER_ID

R = m.AlterPartitionRequest


def alter(node, isr, *, leader_epoch, partition_epoch, broker_epoch=BROKER_EPOCH, version=1):
    return node.call(R(broker_id=BROKER_ID, broker_epoch=broker_epoch, topics=[R.TopicData(topic_name="t", partitions=[
        R.TopicData.PartitionData(partition_index=0, leader_epoch=leader_epoch, new_isr=list(isr),
                                  leader_recovery_state=0, partition_epoch=partition_epoch)])]), version)


def test_an_unchanged_isr_is_accepted_with_the_partition_state(node):
    node.create_topic("t")
    partition = node.replica_manager.partition("t", 0)
    body = alter(node, [BROKER_ID], leader_epoch=partition.leader_epoch, partition_epoch=partition.partition_epoch)
    [answer] = body.topics[0].partitions
    assert body.error_code == ErrorCode.NONE and answer.error_code == ErrorCode.NONE
    assert (answer.leader_id, answer.isr, answer.leader_epoch) == (BROKER_ID, [BROKER_ID], partition.leader_epoch)


def test_fencing(node):
    node.create_topic("t")
    partition = node.replica_manager.partition("t", 0)
    stale = alter(node, [BROKER_ID], leader_epoch=partition.leader_epoch, partition_epoch=partition.partition_epoch,
                  broker_epoch=BROKER_EPOCH + 1)
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    old_leader = alter(node, [BROKER_ID], leader_epoch=partition.leader_epoch - 1,
                       partition_epoch=partition.partition_epoch, version=0)
    assert old_leader.topics[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH
    old_state = alter(node, [BROKER_ID, 7], leader_epoch=partition.leader_epoch,
                      partition_epoch=partition.partition_epoch - 1)
    assert old_state.topics[0].partitions[0].error_code == ErrorCode.INVALID_UPDATE_VERSION

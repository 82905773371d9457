"""OffsetForLeaderEpoch (23): where a leader epoch ended (KIP-320), on the leader; error codes."""

from __future__ import annotations

import pytest

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

OE = m.OffsetForLeaderEpochRequest
OT = OE.OffsetForLeaderTopic
OP = OT.OffsetForLeaderPartition


def request(wanted):
    """``wanted``: {topic: {partition: leader_epoch or (leader_epoch, current_leader_epoch)}}."""
    def part(index, spec):
        epoch, current = spec if isinstance(spec, tuple) else (spec, -1)
        return OP(partition=index, leader_epoch=epoch, current_leader_epoch=current)
    return OE(replica_id=-1, topics=[OT(topic=name, partitions=[part(i, s) for i, s in parts.items()])
                                    for name, parts in wanted.items()])


def answers(body):
    return {(t.topic, p.partition): (p.error_code, p.leader_epoch, p.end_offset) for t in body.topics
            for p in t.partitions}


@pytest.fixture
def epochs(node):
    """Topic "t": offsets 0-1 written in epoch 0, 2-4 in epoch 3 (the current one)."""
    node.create_topic("t")
    node.produce("t", 0, b"a", b"b")
    node.leader_and_isr("t", 0, leader_epoch=3)
    node.produce("t", 0, b"c", b"d", b"e")
    return node


@pytest.mark.parametrize("version", [2, 4])
def test_where_each_epoch_ended(epochs, version):
    got = answers(epochs.call(request({"t": {0: 0}}), version))
    assert got == {("t", 0): (ErrorCode.NONE, 0, 2)}                 # epoch 0 ended where epoch 3 began
    assert answers(epochs.call(request({"t": {0: 2}}), version)) == {("t", 0): (ErrorCode.NONE, 0, 2)}
    assert answers(epochs.call(request({"t": {0: 3}}), version)) == {("t", 0): (ErrorCode.NONE, 3, 5)}
    assert answers(epochs.call(request({"t": {0: 4}}), version)) == {("t", 0): (ErrorCode.NONE, -1, -1)}


def test_each_partition_fails_alone(epochs):
    got = answers(epochs.call(request({"t": {0: (3, 2), 1: 0}, "missing": {0: 0}}), 4))
    assert got == {("t", 0): (ErrorCode.FENCED_LEADER_EPOCH, -1, -1),
                   ("t", 1): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
                   ("missing", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1)}
    assert answers(epochs.call(request({"t": {0: (3, 4)}}), 4)) == {
        ("t", 0): (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1)}
    assert answers(epochs.call(request({"t": {0: (3, 3)}}), 4)) == {("t", 0): (ErrorCode.NONE, 3, 5)}
    epochs.leader_and_isr("t", 0, leader=1, leader_epoch=4, replicas=(0, 1), isr=(0, 1))
    assert answers(epochs.call(request({"t": {0: 3}}), 4)) == {
        ("t", 0): (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)}

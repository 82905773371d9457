"""DeleteRecords (21): the log start offset moves forward on the leader, durably; error codes."""

from __future__ import annotations

from twisted_kafka.log.checkpoints import read_offset_checkpoint
from twisted_kafka.log.layout import LOG_START_OFFSET_CHECKPOINT
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

from .helpers import decode, result_of

D = m.DeleteRecordsRequest
DT = D.DeleteRecordsTopic
DP = DT.DeleteRecordsPartition


def delete(wanted):
    """``wanted``: {topic: {partition: offset}}."""
    return D(timeout_ms=1000, topics=[DT(name=name, partitions=[DP(partition_index=i, offset=o)
                                                                 for i, o in parts.items()])
                                      for name, parts in wanted.items()])


def answers(body):
    return {(t.name, p.partition_index): (p.error_code, p.low_watermark) for t in body.topics for p in t.partitions}


def checkpointed(node, topic, partition=0):
    return read_offset_checkpoint(f"{node.log_dir}/{LOG_START_OFFSET_CHECKPOINT}").get((topic, partition))


def test_the_log_start_moves_and_is_checkpointed_before_the_answer(node):
    node.create_topic("t", 2)
    node.produce("t", 0, b"a", b"b", b"c")
    node.produce("t", 1, b"x", b"y")
    node.pool.hold()
    request, pending = node.pending(delete({"t": {0: 2, 1: -1}}), 2)
    assert not pending.called and request.local_complete_ns > 0        # waiting for the checkpoint
    node.pool.release()
    assert answers(decode(request, result_of(pending))) == {("t", 0): (ErrorCode.NONE, 2),
                                                            ("t", 1): (ErrorCode.NONE, 2)}   # -1: high watermark
    assert (checkpointed(node, "t", 0), checkpointed(node, "t", 1)) == (2, 2)
    assert node.log("t", 0).log_start_offset == 2

    # an offset below the start changes nothing (and nothing needs writing)
    node.pool.hold()
    _, pending = node.pending(delete({"t": {0: 1}}), 2)
    assert pending.called
    node.pool.release()
    assert answers(decode(request, result_of(pending))) == {("t", 0): (ErrorCode.NONE, 2)}


def test_each_partition_fails_alone(node):
    node.create_topic("t", 2)
    node.create_topic("compacted", configs={"cleanup.policy": "compact"})
    node.produce("t", 0, b"a")
    node.produce("compacted", 0, b"a", key=b"k")
    node.leader_and_isr("t", 1, leader=1, leader_epoch=1, replicas=(0, 1), isr=(0, 1))
    got = answers(node.call(delete({"t": {0: 5, 1: 0, 2: 0}, "missing": {0: 0}, "compacted": {0: 1}}), 2))
    assert got == {("t", 0): (ErrorCode.OFFSET_OUT_OF_RANGE, -1), ("t", 1): (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1),
                   ("t", 2): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
                   ("missing", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
                   ("compacted", 0): (ErrorCode.POLICY_VIOLATION, -1)}
    assert answers(node.call(delete({"t": {0: -2}}), 2)) == {("t", 0): (ErrorCode.OFFSET_OUT_OF_RANGE, -1)}
    assert node.log("t", 0).log_start_offset == 0 and node.log("compacted").log_start_offset == 0

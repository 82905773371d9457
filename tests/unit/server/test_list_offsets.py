"""ListOffsets (2): earliest, latest, max timestamp, and the first offset at a time; error codes."""

from __future__ import annotations

import pytest

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

from .helpers import NOW, decode, result_of

L = m.ListOffsetsRequest
LT = L.ListOffsetsTopic
LP = LT.ListOffsetsPartition

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3


def list_offsets(wanted, *, isolation_level=0):
    """``wanted``: {topic: {partition: timestamp or (timestamp, current_leader_epoch)}}."""
    def part(index, spec):
        timestamp, epoch = spec if isinstance(spec, tuple) else (spec, -1)
        return LP(partition_index=index, timestamp=timestamp, current_leader_epoch=epoch)
    return L(replica_id=-1, isolation_level=isolation_level, topics=[
        LT(name=name, partitions=[part(i, s) for i, s in parts.items()]) for name, parts in wanted.items()])


def answers(body):
    return {(t.name, p.partition_index): (p.error_code, p.timestamp, p.offset, p.leader_epoch)
            for t in body.topics for p in t.partitions}


def one(node, timestamp, version=7, **kwargs):
    [answer] = answers(node.call(list_offsets({"t": {0: timestamp}}, **kwargs), version)).values()
    return answer


@pytest.fixture
def filled(node):
    """Topic "t": offsets 0-2 at NOW, NOW+10, NOW+20; 3-4 at NOW+5, NOW+15 (max timestamp at offset 2)."""
    node.create_topic("t")
    node.produce("t", 0, b"a", b"b", b"c", timestamp=NOW, step=10)
    node.produce("t", 0, b"d", b"e", timestamp=NOW + 5, step=10)
    return node


def test_earliest_and_latest(filled):
    assert one(filled, EARLIEST) == (ErrorCode.NONE, -1, 0, 0)
    assert one(filled, LATEST) == (ErrorCode.NONE, -1, 5, 0)
    assert one(filled, LATEST, isolation_level=1) == (ErrorCode.NONE, -1, 5, 0)    # the last stable offset
    filled.log("t").delete_records_before(3)
    assert one(filled, EARLIEST) == (ErrorCode.NONE, -1, 3, 0)
    body = filled.call(list_offsets({"t": {0: LATEST}}), 1)
    assert body.topics[0].partitions[0].offset == 5


def test_latest_for_read_committed_is_the_last_stable_offset(filled):
    from twisted_kafka.log import AppendOrigin
    from twisted_kafka.protocol.records import ControlRecordType, build_end_txn_marker

    from .helpers import records

    log = filled.log("t")
    result_of(log.append_as_leader(records(b"f", producer_id=3, producer_epoch=0, base_sequence=0,
                                           transactional=True), 0))                        # 5: open
    assert one(filled, LATEST) == (ErrorCode.NONE, -1, 6, 0)
    assert one(filled, LATEST, isolation_level=1) == (ErrorCode.NONE, -1, 5, 0)
    result_of(log.append_as_leader(build_end_txn_marker(3, 0, 0, ControlRecordType.COMMIT, NOW), 0,
                                   origin=AppendOrigin.COORDINATOR))
    assert one(filled, LATEST, isolation_level=1) == (ErrorCode.NONE, -1, 7, 0)


def test_max_timestamp_from_v7(filled):
    assert one(filled, MAX_TIMESTAMP) == (ErrorCode.NONE, NOW + 20, 2, 0)
    assert one(filled, MAX_TIMESTAMP, version=6)[0] == ErrorCode.INVALID_REQUEST
    assert one(filled, -4)[0] == ErrorCode.INVALID_REQUEST


def test_the_first_offset_at_a_time(filled):
    assert one(filled, NOW) == (ErrorCode.NONE, NOW, 0, 0)
    # the earliest offset whose timestamp is at least the time (not the closest timestamp)
    assert one(filled, NOW + 11) == (ErrorCode.NONE, NOW + 20, 2, 0)
    assert one(filled, NOW + 21) == (ErrorCode.NONE, -1, -1, -1)      # none


def test_time_lookups_run_in_the_pool(filled):
    filled.pool.hold()
    request, pending = filled.pending(list_offsets({"t": {0: NOW + 1}}), 7)
    assert not pending.called and request.local_complete_ns > 0
    filled.pool.release()
    assert answers(decode(request, result_of(pending))) == {("t", 0): (ErrorCode.NONE, NOW + 10, 1, 0)}


def test_each_partition_fails_alone(filled):
    filled.leader_and_isr("t", 0, leader_epoch=2)
    body = filled.call(list_offsets({"t": {0: (LATEST, 1), 1: LATEST}, "missing": {0: EARLIEST},
                                     "u": {0: (LATEST, 2)}}), 7)
    got = answers(body)
    assert got[("t", 0)][0] == ErrorCode.FENCED_LEADER_EPOCH
    assert got[("t", 1)] == got[("missing", 0)] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1, -1)
    assert got[("u", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert one(filled, (LATEST, 3))[0] == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert one(filled, (LATEST, 2)) == (ErrorCode.NONE, -1, 5, 2)
    assert one(filled, (LATEST, 1), version=3)[0] == ErrorCode.NONE          # no epoch check before v4


def test_a_follower_refuses_with_not_leader(filled):
    filled.leader_and_isr("t", 0, leader=1, leader_epoch=1, replicas=(0, 1), isr=(0, 1))
    assert one(filled, LATEST)[0] == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_version_0_answers_a_list_of_offsets(filled):
    """Kafka 0.8's ListOffsets, which Burrow 1.2 sends: the offset v1 gives, in a list of at most
    ``max_num_offsets``."""
    def v0(timestamp, max_num_offsets=1):
        request = L(replica_id=-1, topics=[LT(name="t", partitions=[
            LP(partition_index=0, timestamp=timestamp, max_num_offsets=max_num_offsets)])])
        [partition] = filled.call(request, 0).topics[0].partitions
        return partition.error_code, partition.old_style_offsets

    assert v0(LATEST) == (ErrorCode.NONE, [5])
    assert v0(EARLIEST) == (ErrorCode.NONE, [0])
    assert v0(LATEST, max_num_offsets=0) == (ErrorCode.NONE, [])
    assert v0(NOW + 12) == (ErrorCode.NONE, [2])
    assert v0(NOW + 1000) == (ErrorCode.NONE, [])         # no record that late

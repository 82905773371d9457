"""The follower's side, with the leader's answers given by a fake connection: truncation with
OffsetForLeaderEpoch (KIP-101) and appending fetched batches as they are, high watermark taken."""

from __future__ import annotations

from types import SimpleNamespace

from twisted.internet.defer import ensureDeferred, succeed

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.server.replica_fetcher import FetchState, ReplicaFetcher
from twisted_kafka.server.replica_manager import PartitionStateChange

from .helpers import BROKER_ID, records, result_of

CONFIG = {"replica.fetch.backoff.ms": 1000, "replica.socket.timeout.ms": 30000, "replica.fetch.wait.max.ms": 500,
          "replica.fetch.max.bytes": 1 << 20, "replica.fetch.min.bytes": 1,
          "replica.fetch.response.max.bytes": 10 << 20}
OE = m.OffsetForLeaderEpochResponse


class FakeLeader:
    """A connection whose answers the test queues; it records what was asked."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked: list = []

    def request(self, body, version):
        self.asked.append(body)
        return succeed(self.answers.pop(0))


def follow(node, partition, leader=2):
    node.replica_manager.become_leader_or_follower([PartitionStateChange(
        partition.topic, partition.topic_id, partition.index, leader, partition.leader_epoch + 1,
        partition.partition_epoch + 1, [BROKER_ID, leader], [BROKER_ID, leader])])
    fetcher = ReplicaFetcher(source_broker=leader, fetcher_id=0, broker_id=BROKER_ID, config=CONFIG,
                             reactor=node.reactor, endpoint=lambda b: None, replica_manager=node.replica_manager)
    state = FetchState(partition, partition.leader_epoch)
    fetcher.partitions[state.key] = state
    return fetcher, state


def test_a_new_follower_drops_what_the_new_leader_does_not_have(node):
    node.create_topic("t")
    partition = node.replica_manager.partition("t", 0)
    for value in (b"a", b"b", b"c"):        # written as leader (epoch 0), one batch each
        node.produce("t", 0, value)
    fetcher, state = follow(node, partition)
    # The new leader's log ends at 1 for epoch 0: offsets 1 and 2 were never replicated to it.
    leader = FakeLeader(OE(throttle_time_ms=0, topics=[OE.OffsetForLeaderTopicResult(topic="t", partitions=[
        OE.OffsetForLeaderTopicResult.EpochEndOffset(error_code=0, partition=0, leader_epoch=0, end_offset=1)])]))
    result_of(ensureDeferred(fetcher._truncate(leader, state)))
    [asked] = leader.asked
    assert asked.replica_id == BROKER_ID and asked.topics[0].partitions[0].leader_epoch == 0
    assert partition.log.log_end_offset == 1 and state.truncated


def test_fetched_batches_are_appended_with_their_offsets_and_the_leader_s_high_watermark(node):
    node.create_topic("t")
    partition = node.replica_manager.partition("t", 0)
    fetcher, state = follow(node, partition)
    state.truncated = True
    batch = records(b"x", b"y")
    answer = SimpleNamespace(error_code=0, session_id=0, responses=[SimpleNamespace(topic="t", partitions=[
        SimpleNamespace(partition_index=0, error_code=0, high_watermark=1, records=batch)])])
    leader = FakeLeader(answer)
    result_of(ensureDeferred(fetcher._fetch(leader, [state])))
    [asked] = leader.asked
    assert asked.replica_id == BROKER_ID and asked.topics[0].partitions[0].fetch_offset == 0
    assert partition.log.log_end_offset == 2 and partition.high_watermark == 1


def test_a_fenced_partition_backs_off(node):
    node.create_topic("t")
    partition = node.replica_manager.partition("t", 0)
    fetcher, state = follow(node, partition)
    state.truncated = True
    answer = SimpleNamespace(error_code=0, session_id=0, responses=[SimpleNamespace(topic="t", partitions=[
        SimpleNamespace(partition_index=0, error_code=ErrorCode.FENCED_LEADER_EPOCH, high_watermark=-1, records=b"")])])
    result_of(ensureDeferred(fetcher._fetch(FakeLeader(answer), [state])))
    assert state.delayed_until == node.reactor.seconds() + 1.0 and partition.log.log_end_offset == 0


def _answer(session_id, *partitions, error_code=0):
    return SimpleNamespace(error_code=error_code, session_id=session_id, responses=[
        SimpleNamespace(topic="t", partitions=list(partitions))] if partitions else [])


def test_fetches_after_the_first_name_only_what_changed_and_a_lost_session_starts_again(node):
    node.create_topic("t", 2)
    p0, p1 = node.replica_manager.partition("t", 0), node.replica_manager.partition("t", 1)
    fetcher, s0 = follow(node, p0)
    s1 = FetchState(p1, p1.leader_epoch)
    fetcher.partitions[s1.key] = s1
    s0.truncated = s1.truncated = True
    leader = FakeLeader(
        _answer(7, SimpleNamespace(partition_index=0, error_code=0, high_watermark=0, records=b""),
                SimpleNamespace(partition_index=1, error_code=0, high_watermark=0, records=b"")),
        _answer(7, SimpleNamespace(partition_index=1, error_code=0, high_watermark=2, records=records(b"x", b"y"))),
        _answer(7),
        _answer(0, error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND),
        _answer(9))
    for _ in range(5):
        result_of(ensureDeferred(fetcher._fetch(leader, [s0, s1])))
    full, idle, moved, lost, again = leader.asked
    assert (full.session_id, full.session_epoch) == (0, 0) and len(full.topics[0].partitions) == 2
    assert (idle.session_id, idle.session_epoch, idle.topics, idle.forgotten_topics_data) == (7, 1, [], [])
    # Partition 1 got two records: its fetch offset moved, so it is named again.
    assert (moved.session_epoch, [(p.partition, p.fetch_offset) for p in moved.topics[0].partitions]) == (2, [(1, 2)])
    assert p1.log.log_end_offset == 2 and p1.high_watermark == 2
    assert (lost.session_id, lost.session_epoch) == (7, 3)
    assert (again.session_id, again.session_epoch) == (0, 0) and len(again.topics[0].partitions) == 2
    # A partition not fetched in a round (backed off) is forgotten by the session.
    result_of(ensureDeferred(fetcher._fetch(FakeLeader(_answer(9)), [s0])))
    assert fetcher.session.session == {("t", 0): (0, s0.leader_epoch, 0, 1 << 20)}

"""TxnMarkerChannel on a task.Clock: markers go to each partition's leader, the local ones written directly,
the others as WriteTxnMarkers; retriable errors are retried with the leader looked up again."""

from __future__ import annotations

from types import SimpleNamespace

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.task import Clock

from twisted_kafka.coordinator.transaction.markers import RETRY_BACKOFF, TxnMarkerChannel
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

R = m.WriteTxnMarkersResponse


class Cache:
    def __init__(self, leaders):
        self.leaders = leaders
        self.topics = {topic: None for topic, _ in leaders}

    def partition(self, topic, index):
        leader = self.leaders.get((topic, index))
        return None if leader is None else SimpleNamespace(leader=leader)


class Local:
    def __init__(self):
        self.calls = []

    def write(self, pid, epoch, commit, coordinator_epoch, partitions):
        self.calls.append((pid, epoch, commit, coordinator_epoch, sorted(partitions)))
        return succeed(dict.fromkeys(partitions, ErrorCode.NONE))


class Sender:
    def __init__(self):
        self.requests = []
        self.answers: list = []

    def send(self, broker_id, request, version):
        self.requests.append((broker_id, request, version))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            return fail(answer)
        return succeed(R(markers=[R.WritableTxnMarkerResult(producer_id=7, topics=[
            R.WritableTxnMarkerResult.WritableTxnMarkerTopicResult(name=topic, partitions=[
                R.WritableTxnMarkerResult.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(
                    partition_index=index, error_code=error)])
            for (topic, index), error in answer.items()])]))


def channel(leaders):
    clock, local, sender, cache = Clock(), Local(), Sender(), Cache(leaders)
    return TxnMarkerChannel(broker_id=1, metadata_cache=cache, local=local, sender=sender, clock=clock), \
        clock, local, sender, cache


def outcome(d: Deferred):
    result = []
    d.addBoth(result.append)
    return result


def test_local_and_remote_leaders_and_a_retry_after_a_leader_change():
    ch, clock, local, sender, cache = channel({("t", 0): 1, ("t", 1): 2})
    sender.answers = [{("t", 1): ErrorCode.NOT_LEADER_OR_FOLLOWER}]
    done = outcome(ch.send("tx", 7, 3, True, 5, [("t", 0), ("t", 1)], lambda: True))
    assert local.calls == [(7, 3, True, 5, [("t", 0)])]
    (broker, request, version), = sender.requests
    assert (broker, version) == (2, 1)
    (marker,) = request.markers
    assert (marker.producer_id, marker.producer_epoch, marker.transaction_result, marker.coordinator_epoch,
            [(t.name, list(t.partition_indexes)) for t in marker.topics]) == (7, 3, True, 5, [("t", [1])])
    assert done == []
    cache.leaders[("t", 1)] = 1                 # the partition moved to this broker
    clock.advance(RETRY_BACKOFF)
    assert local.calls[-1] == (7, 3, True, 5, [("t", 1)]) and done == [True]


def test_an_unreachable_broker_and_an_unknown_leader_are_retried_and_a_deleted_topic_dropped():
    ch, clock, local, sender, cache = channel({("t", 0): 2, ("u", 0): -1})
    sender.answers = [ConnectionError("down"), {("t", 0): ErrorCode.NONE}]
    # "gone" is in no topic of the metadata: a deleted topic
    done = outcome(ch.send("tx", 7, 3, False, 5, [("t", 0), ("u", 0), ("gone", 0)], lambda: True))
    clock.advance(RETRY_BACKOFF)
    assert len(sender.requests) == 2 and done == []
    cache.leaders[("u", 0)] = 1
    clock.advance(RETRY_BACKOFF)
    assert done == [True]


def test_a_fenced_marker_or_a_lost_coordinator_stops_the_sending():
    ch, clock, local, sender, cache = channel({("t", 0): 2})
    sender.answers = [{("t", 0): ErrorCode.TRANSACTION_COORDINATOR_FENCED}]
    assert outcome(ch.send("tx", 7, 3, True, 5, [("t", 0)], lambda: True)) == [False]
    valid = [True]
    sender.answers = [{("t", 0): ErrorCode.NOT_ENOUGH_REPLICAS}]
    done = outcome(ch.send("tx", 7, 3, True, 5, [("t", 0)], lambda: valid[0]))
    valid[0] = False
    clock.advance(RETRY_BACKOFF)
    assert done == [False] and len(sender.requests) == 2


def test_a_leader_that_never_answers_does_not_hold_the_marker_after_its_partition_moved():
    ch, clock, local, sender, cache = channel({("t", 0): 2})
    sender.send = lambda broker_id, request, version: sender.requests.append(broker_id) or Deferred()   # silent
    done = outcome(ch.send("tx", 7, 3, True, 5, [("t", 0)], lambda: True))
    cache.leaders[("t", 0)] = 1          # broker 2 died; this broker leads the partition now
    clock.advance(ch.timeout - 0.01)
    assert done == [] and local.calls == []
    clock.advance(0.01)                  # the timeout: the partition is tried again after the backoff
    clock.advance(RETRY_BACKOFF)
    assert local.calls == [(7, 3, True, 5, [("t", 0)])] and done == [True]


def test_a_refused_marker_is_retried_not_skipped():
    ch, clock, local, sender, cache = channel({("t", 0): 2})
    sender.answers = [{("t", 0): ErrorCode.CLUSTER_AUTHORIZATION_FAILED}, {("t", 0): ErrorCode.NONE}]
    done = outcome(ch.send("tx", 7, 3, True, 5, [("t", 0)], lambda: True))
    assert done == []
    clock.advance(RETRY_BACKOFF)                # the operator granted CLUSTER_ACTION meanwhile
    assert done == [True] and len(sender.requests) == 2

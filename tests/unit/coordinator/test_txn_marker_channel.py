"""TxnMarkerChannel on a clock, with a recording sender in place of the inter-broker channel.

A partition's leader that dies while its WriteTxnMarkers request waits (the
inter-broker channel would retry it until that broker returns) must not hold
the transaction: once the metadata names a new leader, the request is
cancelled and the marker goes to the new leader.  Before this, a coordinator
that took over a PrepareCommit transaction from a killed broker waited
forever for the killed broker, and the transaction stayed open on the
partitions it had led (tests/integration/cluster/test_cluster_transaction_failover.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from twisted.internet.defer import Deferred, succeed
from twisted.internet.task import Clock

from twisted_kafka.coordinator.transaction.markers import RETRY_BACKOFF, TxnMarkerChannel
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

R = m.WriteTxnMarkersResponse.WritableTxnMarkerResult


@dataclass
class Leader:
    leader: int


@dataclass
class Cache:
    leaders: dict
    topics: set = field(default_factory=lambda: {"t"})

    def partition(self, topic, index):
        leader = self.leaders.get((topic, index))
        return None if leader is None else Leader(leader)


class Sender:
    """Records each request; the test answers or leaves it pending (a dead broker)."""

    def __init__(self):
        self.sent: list[tuple[int, object, Deferred]] = []
        self.cancelled: list[int] = []

    def send(self, broker, request, version):
        d: Deferred = Deferred(lambda _: self.cancelled.append(broker))
        self.sent.append((broker, request, d))
        return d


class Local:
    def __init__(self):
        self.written: list = []

    def write(self, producer_id, producer_epoch, commit, coordinator_epoch, partitions):
        self.written.extend(partitions)
        return succeed(dict.fromkeys(partitions, ErrorCode.NONE))


def answer(request, error=ErrorCode.NONE):
    marker = request.markers[0]
    return m.WriteTxnMarkersResponse(markers=[R(producer_id=marker.producer_id, topics=[
        R.WritableTxnMarkerTopicResult(name=t.name, partitions=[
            R.WritableTxnMarkerTopicResult.WritableTxnMarkerPartitionResult(partition_index=p, error_code=error)
            for p in t.partition_indexes]) for t in marker.topics])])


def channel(leaders):
    clock, sender, local, cache = Clock(), Sender(), Local(), Cache(leaders)
    return TxnMarkerChannel(broker_id=0, metadata_cache=cache, local=local, sender=sender, clock=clock), \
        clock, sender, local, cache


def test_a_leader_that_died_with_the_request_pending_is_left_for_the_new_leader():
    markers, clock, sender, local, cache = channel({("t", 0): 1, ("t", 1): 0})
    done = markers.send("tid", 7, 0, True, 3, [("t", 0), ("t", 1)], lambda: True)
    assert local.written == [("t", 1)] and [b for b, _, _ in sender.sent] == [1]
    clock.advance(RETRY_BACKOFF * 5)                     # broker 1 never answers; it still leads t-0
    assert not done.called and sender.cancelled == []
    cache.leaders[("t", 0)] = 2                          # the controller moved t-0 to broker 2
    clock.advance(RETRY_BACKOFF)
    assert sender.cancelled == [1]
    clock.advance(RETRY_BACKOFF)                         # the next round, at the new leader
    broker, request, d = sender.sent[-1]
    assert broker == 2 and not done.called
    d.callback(answer(request))
    results: list = []
    done.addCallback(results.append)
    assert results == [True]


def test_a_leader_that_answers_keeps_its_request_and_no_timer_is_left():
    markers, clock, sender, local, cache = channel({("t", 0): 1})
    done = markers.send("tid", 7, 0, False, 3, [("t", 0)], lambda: True)
    (_, request, d), = sender.sent
    d.callback(answer(request))
    assert done.called and sender.cancelled == [] and clock.getDelayedCalls() == []


def test_a_coordinator_that_lost_the_transaction_stops_waiting():
    valid = [True]
    markers, clock, sender, local, cache = channel({("t", 0): 1})
    done = markers.send("tid", 7, 0, True, 3, [("t", 0)], lambda: valid[0])
    valid[0] = False
    clock.advance(RETRY_BACKOFF)
    assert sender.cancelled == [1]
    clock.advance(RETRY_BACKOFF)
    results: list = []
    done.addCallback(results.append)
    assert results == [False] and len(sender.sent) == 1


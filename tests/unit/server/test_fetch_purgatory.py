"""The fetch purgatory's timing, on a ``task.Clock``: a long-poll fetch (``DelayedFetch`` in the one
purgatory) completes when enough bytes became readable -- at once, in the append's own turn -- or when
``max_wait_ms`` has passed, whichever comes first, and reads again then.  The partitions are stand-ins
holding what ``DelayedFetch`` reads of a ``Partition`` (its state version and fetchable bytes), moved
as the ``ReplicaManager`` moves them; tests/unit/server/test_fetch.py checks the same through the
replica manager and the handler, and tests/integration/data/test_raw_requests.py against a real broker
without timing it."""

from __future__ import annotations

from dataclasses import dataclass

from twisted.internet.defer import succeed
from twisted.internet.task import Clock

from twisted_kafka.purgatory import Purgatory
from twisted_kafka.server.delayed_fetch import DelayedFetch


@dataclass
class StandIn:
    """The part of a ``Partition`` a waiting fetch reads."""

    topic: str
    index: int
    state_version: int = 0
    follower_fetchable_bytes: int = 0
    consumer_fetchable_bytes: int = 0

    def fetchable_bytes(self, follower: bool) -> int:
        return self.follower_fetchable_bytes if follower else self.consumer_fetchable_bytes


class Fetches:
    """A fetch purgatory on a clock, and the replica manager's moves of its partitions."""

    def __init__(self):
        self.clock = Clock()
        self.purgatory = Purgatory(self.clock, "Fetch")
        self.partitions: dict[tuple[str, int], StandIn] = {}
        self.reads = 0

    def partition(self, topic: str, index: int) -> StandIn:
        return self.partitions.setdefault((topic, index), StandIn(topic, index))

    def wait(self, keys, *, min_bytes: int, accumulated: int, max_wait_ms: int, follower: bool = False):
        def read():
            self.reads += 1
            return succeed("read again")

        delayed = DelayedFetch(max_wait_ms=max_wait_ms, min_bytes=min_bytes, follower=follower,
                               partitions=[self.partition(*k) for k in keys], accumulated=accumulated, read=read)
        self.purgatory.try_complete_else_watch(delayed, delayed.keys)
        return delayed.result

    # what the replica manager does, as in ReplicaManager._appended / _high_watermark_moved / _apply

    def appended(self, topic: str, index: int, nbytes: int, *, replicated: bool = False) -> None:
        p = self.partition(topic, index)
        p.follower_fetchable_bytes += nbytes
        if not replicated:
            p.consumer_fetchable_bytes += nbytes
        self.purgatory.check_and_complete((topic, index))

    def high_watermark_moved(self, topic: str, index: int, nbytes: int) -> None:
        self.partition(topic, index).consumer_fetchable_bytes += nbytes
        self.purgatory.check_and_complete((topic, index))

    def partition_changed(self, topic: str, index: int) -> None:
        self.partition(topic, index).state_version += 1
        self.purgatory.check_and_complete((topic, index))


TP = ("t", 0)


def test_a_fetch_with_nothing_appended_completes_when_max_wait_ms_has_passed():
    f = Fetches()
    done = f.wait([TP], min_bytes=1, accumulated=0, max_wait_ms=300)
    f.clock.advance(0.299)
    assert not done.called and f.purgatory.size == 1 and f.reads == 0
    f.clock.advance(0.001)
    assert done.called and f.purgatory.size == 0
    assert done.result == "read again" and f.reads == 1


def test_an_append_reaching_min_bytes_completes_the_fetch_in_its_own_turn_and_cancels_the_timer():
    f = Fetches()
    done = f.wait([TP, ("t", 1)], min_bytes=100, accumulated=10, max_wait_ms=5000)
    f.appended("t", 1, 50)
    assert not done.called, "60 of 100 bytes"
    f.appended("t", 0, 40)
    assert done.called, "100 bytes: no clock advance needed"
    assert f.clock.getDelayedCalls() == [] and f.purgatory.size == 0 and f.reads == 1


def test_appends_to_other_partitions_do_not_wake_a_fetch():
    f = Fetches()
    done = f.wait([TP], min_bytes=1, accumulated=0, max_wait_ms=1000)
    f.appended("t", 1, 1_000_000)
    f.appended("other", 0, 1_000_000)
    f.clock.advance(0.999)
    assert not done.called
    f.clock.advance(0.001)
    assert done.called


def test_what_was_appended_before_the_wait_does_not_count():
    f = Fetches()
    f.appended("t", 0, 1_000_000)
    done = f.wait([TP], min_bytes=100, accumulated=0, max_wait_ms=1000)
    f.appended("t", 0, 99)
    assert not done.called
    f.appended("t", 0, 1)
    assert done.called


def test_a_replicated_append_wakes_followers_at_once_and_consumers_when_the_high_watermark_passes_it():
    f = Fetches()
    consumer = f.wait([TP], min_bytes=10, accumulated=0, max_wait_ms=1000)
    follower = f.wait([TP], min_bytes=10, accumulated=0, max_wait_ms=1000, follower=True)
    f.appended("t", 0, 10, replicated=True)
    assert follower.called and not consumer.called
    f.high_watermark_moved("t", 0, 10)
    assert consumer.called


def test_a_partition_change_answers_waiting_fetches_now():
    f = Fetches()
    done = f.wait([TP], min_bytes=1, accumulated=0, max_wait_ms=1000)
    f.partition_changed(*TP)
    assert done.called and f.clock.getDelayedCalls() == []


def test_shutdown_answers_every_waiting_fetch():
    f = Fetches()
    waiting = [f.wait([("t", p)], min_bytes=1, accumulated=0, max_wait_ms=1000) for p in range(3)]
    f.purgatory.shutdown()
    assert all(d.called for d in waiting) and f.purgatory.size == 0 and f.clock.getDelayedCalls() == []
    assert f.reads == 3, "each answers with what there is"


def test_shutdown_answers_a_fetch_that_watches_no_partition_too():
    """Such a fetch is in no partition's watchers; the shutdown must find it all the same."""
    f = Fetches()
    lonely = f.wait([], min_bytes=1, accumulated=0, max_wait_ms=2**31 - 1)
    assert f.purgatory.size == 1
    f.purgatory.shutdown()
    assert lonely.called and f.purgatory.size == 0 and f.clock.getDelayedCalls() == []

"""The fetch purgatory's timing, on a ``task.Clock``: a long-poll fetch completes when enough bytes
were appended -- at once, in the append's own turn -- or when ``max_wait_ms`` has passed, whichever
comes first.  The integration tests (tests/integration/data/test_raw_requests.py) check the same
behaviour against a real broker without timing it."""

from __future__ import annotations

from twisted.internet.task import Clock

from twisted_kafka.server.delayed_fetch import FetchPurgatory

TP = ("t", 0)


def test_a_fetch_with_nothing_appended_completes_when_max_wait_ms_has_passed():
    clock = Clock()
    purgatory = FetchPurgatory(clock)
    done = purgatory.wait([TP], min_bytes=1, accumulated=0, max_wait_ms=300)
    clock.advance(0.299)
    assert not done.called and purgatory.size == 1
    clock.advance(0.001)
    assert done.called and purgatory.size == 0


def test_an_append_reaching_min_bytes_completes_the_fetch_in_its_own_turn_and_cancels_the_timer():
    clock = Clock()
    purgatory = FetchPurgatory(clock)
    done = purgatory.wait([TP, ("t", 1)], min_bytes=100, accumulated=10, max_wait_ms=5000)
    purgatory.appended("t", 1, 50)
    assert not done.called, "60 of 100 bytes"
    purgatory.appended("t", 0, 40)
    assert done.called, "100 bytes: no clock advance needed"
    assert clock.getDelayedCalls() == [] and purgatory.size == 0


def test_appends_to_other_partitions_do_not_wake_a_fetch():
    clock = Clock()
    purgatory = FetchPurgatory(clock)
    done = purgatory.wait([TP], min_bytes=1, accumulated=0, max_wait_ms=1000)
    purgatory.appended("t", 1, 1_000_000)
    purgatory.appended("other", 0, 1_000_000)
    clock.advance(0.999)
    assert not done.called
    clock.advance(0.001)
    assert done.called


def test_a_partition_change_answers_waiting_fetches_now():
    clock = Clock()
    purgatory = FetchPurgatory(clock)
    done = purgatory.wait([TP], min_bytes=1, accumulated=0, max_wait_ms=1000)
    purgatory.partition_changed(*TP)
    assert done.called and clock.getDelayedCalls() == []


def test_shutdown_answers_every_waiting_fetch():
    clock = Clock()
    purgatory = FetchPurgatory(clock)
    waiting = [purgatory.wait([("t", p)], min_bytes=1, accumulated=0, max_wait_ms=1000) for p in range(3)]
    purgatory.complete_all()
    assert all(d.called for d in waiting) and purgatory.size == 0 and clock.getDelayedCalls() == []


def test_shutdown_answers_a_fetch_that_watches_no_partition_too():
    """Such a fetch is in no partition's watchers; the shutdown must find it all the same."""
    clock = Clock()
    purgatory = FetchPurgatory(clock)
    lonely = purgatory.wait([], min_bytes=1, accumulated=0, max_wait_ms=2**31 - 1)
    assert purgatory.size == 1
    purgatory.complete_all()
    assert lonely.called and purgatory.size == 0 and clock.getDelayedCalls() == []

"""Kafka's leader election algorithms and ISR rules (``controller/election.py``), as pure functions."""

from __future__ import annotations

from functools import partial

from twisted_kafka.controller import election
from twisted_kafka.controller.metadata_store import NO_LEADER, RECOVERED, RECOVERING, PartitionRecord


def record(replicas, leader, isr, *, leader_epoch=3, partition_epoch=7, **kwargs) -> PartitionRecord:
    return PartitionRecord(tuple(replicas), leader, leader_epoch, tuple(isr), partition_epoch, **kwargs)


def test_a_new_partition_is_led_by_its_first_live_replica():
    assert election.initial_state((2, 1, 3), live={1, 3}) == PartitionRecord((2, 1, 3), 1, 0, (1, 3), 0)
    assert election.initial_state((2,), live={1}) is None


def test_offline_election_takes_the_first_assigned_replica_that_is_alive_and_in_sync():
    r = record([1, 2, 3], leader=1, isr=[3, 2, 1])
    elected = election.offline(r, live={2, 3}, unclean=False)
    # assignment order, not ISR order; the ISR keeps its live members; both epochs move on
    assert (elected.leader, elected.isr, elected.leader_epoch, elected.partition_epoch) == (2, (3, 2), 4, 8)


def test_offline_election_without_a_live_in_sync_replica_needs_unclean_election():
    r = record([1, 2, 3], leader=1, isr=[1])
    assert election.offline(r, live={2, 3}, unclean=False) is None
    elected = election.offline(r, live={2, 3}, unclean=True)
    assert (elected.leader, elected.isr, elected.leader_recovery_state) == (2, (2,), RECOVERING)


def test_preferred_election_only_elects_the_first_replica():
    r = record([1, 2], leader=2, isr=[2, 1])
    assert election.preferred(r, live={1, 2}).leader == 1
    assert election.preferred(r, live={2}) is None                                  # preferred is down
    assert election.preferred(record([1, 2], leader=2, isr=[2]), live={1, 2}) is None   # not in sync


def test_controlled_shutdown_election_skips_shutting_down_brokers_and_drops_them_from_the_isr():
    r = record([1, 2, 3], leader=1, isr=[1, 2, 3])
    elected = election.controlled_shutdown(r, live={1, 2, 3}, shutting_down={1, 2})
    assert (elected.leader, elected.isr) == (3, (3,))
    assert election.controlled_shutdown(record([1, 2], leader=1, isr=[1]), live={1, 2}, shutting_down={1}) is None


def test_reassign_election_chooses_among_the_target_replicas():
    r = record([4, 5, 1, 2], leader=1, isr=[1, 2, 4, 5], adding_replicas=(4, 5), removing_replicas=(1, 2))
    assert election.reassign(r, live={1, 2, 4, 5}).leader == 4
    assert election.reassign(r, live={1, 2}) is None


def test_an_offline_replica_leaves_the_isr_but_the_last_member_stays():
    r = record([1, 2], leader=1, isr=[1, 2])
    shrunk = election.without_replica(r, 2)
    assert (shrunk.leader, shrunk.isr, shrunk.leader_epoch) == (1, (1,), 4)
    gone = election.without_replica(shrunk, 1)
    assert (gone.leader, gone.isr) == (NO_LEADER, (1,))       # remembers who had the data
    assert election.without_replica(record([1, 2], leader=1, isr=[1]), 2) is None


def test_expanding_the_isr_moves_only_the_partition_epoch():
    r = record([1, 2, 3], leader=1, isr=[1], leader_recovery_state=RECOVERING)
    expanded = election.expand_isr(r, live={1, 3})
    assert (expanded.isr, expanded.leader_epoch, expanded.partition_epoch) == ((1, 3), 3, 8)
    assert expanded.leader_recovery_state == RECOVERED
    assert election.expand_isr(record([1, 2], leader=NO_LEADER, isr=[1]), live={1, 2}) is None
    assert election.expand_isr(record([1, 2], leader=1, isr=[1, 2]), live={1, 2}) is None


def test_composed_steps_are_one_write():
    r = record([1, 2, 3], leader=1, isr=[1, 2, 3])
    # broker 1 and 2 fail: 3 takes over, and the ISR is just 3; one leader epoch, one partition epoch
    after = election.compose(r, partial(election.offline, live={3}, unclean=False),
                             partial(election.without_replica, replica=1), partial(election.without_replica, replica=2))
    assert (after.leader, after.isr, after.leader_epoch, after.partition_epoch) == (3, (3,), 4, 8)
    assert election.compose(r, partial(election.without_replica, replica=9)) is None
    expanded = election.compose(record([1, 2], leader=1, isr=[1]), partial(election.expand_isr, live={1, 2}))
    assert (expanded.leader_epoch, expanded.partition_epoch) == (3, 8)

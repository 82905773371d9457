"""Partition leader elections and ISR changes, as pure functions of a partition's state.

Kafka's ZooKeeper-mode controller decides leadership with four algorithms
(``PartitionLeaderElectionAlgorithms`` and ``Election``), each looking at
the partition's assignment in order, so the preferred (first) replica wins
whenever it may:

* **offline** (a new partition, or its leader died): the first assigned
  replica that is alive and in the ISR; the new ISR is the ISR's live
  members.  With ``unclean.leader.election.enable`` (per topic), and no live
  ISR member, the first live assigned replica -- data may be lost -- with an
  ISR of just itself, marked RECOVERING (KIP-704);
* **reassign** (a reassignment completes with the leader outside the
  target replicas): the first target replica alive and in the ISR; ISR kept;
* **preferred** (ElectLeaders PREFERRED, auto rebalance): the first
  assigned replica, if alive and in the ISR; ISR kept;
* **controlled shutdown**: the first assigned replica alive, in the ISR and
  not shutting down; the shutting-down brokers leave the ISR.

A replica going offline leaves the ISR (the last member stays, so the
partition remembers who had the data) and, if it led, leaves the partition
without a leader (-1).

Every change produces the next record: the leader epoch grows by one when
leadership (or, in Kafka's ZooKeeper mode, an ISR shrink by the controller)
changes, and the partition epoch -- the state znode's version -- grows by
one with every write.

``expand_isr`` stands in for the leader's AlterPartition (API 56) for a
controller whose brokers do not replicate (its unit tests): a replica that
is alive joins the ISR of a partition whose leader is alive (the partition
epoch moves, the leader epoch does not).  In a cluster the leaders report
their ISR and it is not called; ``shrink_isr`` -- dead replicas leave the
ISR -- is the controller's own job either way.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from enum import Enum

from .metadata_store import NO_LEADER, RECOVERED, RECOVERING, PartitionRecord


class ElectionType(Enum):
    """Kafka's ElectionType (ElectLeaders v1+): 0 preferred, 1 unclean."""

    PREFERRED = 0
    UNCLEAN = 1


def next_epoch(record: PartitionRecord, **changes) -> PartitionRecord:
    """``record`` with ``changes``, its partition epoch moved to the version the write will give it."""
    return replace(record, partition_epoch=record.partition_epoch + 1, **changes)


def with_leader(record: PartitionRecord, leader: int, isr: tuple[int, ...], *,
                recovery: int | None = None) -> PartitionRecord:
    """A new leadership: the leader epoch moves on (Kafka's ``newLeaderAndIsr``)."""
    return next_epoch(record, leader=leader, isr=tuple(isr), leader_epoch=record.leader_epoch + 1,
                      leader_recovery_state=record.leader_recovery_state if recovery is None else recovery)


def initial_state(replicas: tuple[int, ...], live: Collection[int]) -> PartitionRecord | None:
    """A new partition's first state: the first live replica leads, the live replicas are the ISR
    (Kafka's ``initializeLeaderAndIsrForPartitions``); None when no replica is alive."""
    alive = tuple(b for b in replicas if b in live)
    if not alive:
        return None
    return PartitionRecord(replicas=tuple(replicas), leader=alive[0], leader_epoch=0, isr=alive, partition_epoch=0)


def offline(record: PartitionRecord, live: Collection[int], *, unclean: bool) -> PartitionRecord | None:
    for broker in record.replicas:
        if broker in live and broker in record.isr:
            return with_leader(record, broker, tuple(b for b in record.isr if b in live))
    if unclean:
        for broker in record.replicas:
            if broker in live:
                recovery = RECOVERING if broker not in record.isr else record.leader_recovery_state
                return with_leader(record, broker, (broker,), recovery=recovery)
    return None


def reassign(record: PartitionRecord, live: Collection[int]) -> PartitionRecord | None:
    for broker in record.target_replicas:
        if broker in live and broker in record.isr:
            return with_leader(record, broker, record.isr)
    return None


def preferred(record: PartitionRecord, live: Collection[int]) -> PartitionRecord | None:
    if not record.replicas:
        return None
    broker = record.replicas[0]
    if broker in live and broker in record.isr:
        return with_leader(record, broker, record.isr)
    return None


def controlled_shutdown(record: PartitionRecord, live: Collection[int],
                        shutting_down: Collection[int]) -> PartitionRecord | None:
    isr = tuple(b for b in record.isr if b not in shutting_down)
    for broker in record.replicas:
        if broker in live and broker in record.isr and broker not in shutting_down:
            return with_leader(record, broker, isr)
    return None


def without_replica(record: PartitionRecord, replica: int) -> PartitionRecord | None:
    """The replica went offline (Kafka's ``removeReplicasFromIsr``): out of the ISR unless it is the
    last member, and no leader if it led; None when it changes nothing."""
    if replica not in record.isr and replica != record.leader:
        return None
    leader = NO_LEADER if record.leader == replica else record.leader
    isr = record.isr if len(record.isr) == 1 else tuple(b for b in record.isr if b != replica)
    if leader == record.leader and isr == record.isr:
        return None
    return with_leader(record, leader, isr)


def compose(record: PartitionRecord, *steps) -> PartitionRecord | None:
    """Apply ``steps`` (each maps a record to its next one, or None for no change) as one write: the
    leader epoch moves on once if any step moved it, the partition epoch once; None if nothing changed."""
    current = record
    moved = False
    for step in steps:
        following = step(current)
        if following is None:
            continue
        moved = moved or following.leader_epoch != current.leader_epoch
        current = following
    if current is record:
        return None
    return replace(current, leader_epoch=record.leader_epoch + (1 if moved else 0),
                   partition_epoch=record.partition_epoch + 1)


def without_dead_leader(record: PartitionRecord, live: Collection[int]) -> PartitionRecord | None:
    """A leader that is not alive (and that no election replaced) leaves the partition leaderless."""
    if record.leader == NO_LEADER or record.leader in live:
        return None
    return without_replica(record, record.leader)


def shrink_isr(record: PartitionRecord, live: Collection[int]) -> PartitionRecord | None:
    """Replicas that are not alive leave the ISR (the last member stays): a broker's failure does this
    as it happens; this catches up on failures no controller saw (they happened while the controller
    moved), as Kafka's new controller moves replicas of dead brokers to OfflineReplica."""
    current = record
    for broker in record.isr:
        if broker not in live:
            current = without_replica(current, broker) or current
    return None if current is record else current


def expand_isr(record: PartitionRecord, live: Collection[int]) -> PartitionRecord | None:
    """Phase-A stand-in for AlterPartition (see the module docstring); None when nothing changes."""
    if record.leader == NO_LEADER or record.leader not in live:
        return None
    missing = [b for b in record.replicas if b in live and b not in record.isr]
    if not missing and record.leader_recovery_state == RECOVERED:
        return None
    isr = tuple(b for b in record.replicas if b in record.isr or b in missing)
    isr += tuple(b for b in record.isr if b not in isr)
    return next_epoch(record, isr=isr, leader_recovery_state=RECOVERED)


__all__ = ["ElectionType", "initial_state", "offline", "reassign", "preferred", "controlled_shutdown",
           "without_replica", "without_dead_leader", "shrink_isr", "expand_isr", "with_leader", "next_epoch", "compose"]

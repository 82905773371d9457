"""A member's next assignment on its way to the target (Kafka's ``CurrentAssignmentBuilder``).

The rule of KIP-848 is *revocation before reassignment*: a partition moves to
its new owner only once its old owner has stopped using it.  So:

* a member whose target drops partitions it owns keeps its epoch, keeps the
  partitions it may keep and is asked to revoke the others
  (UNREVOKED_PARTITIONS); it advances once its heartbeat shows it no longer
  owns them -- or, if it does not say, never;
* a member gets a partition of its target only if no other member still
  owns it (assigned or pending revocation); it then advances to the target
  epoch, STABLE if it got all of its target, UNRELEASED_PARTITIONS if some are
  still held elsewhere (it gets those on a later heartbeat, once released).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from .consumer_member import Assignment, ConsumerMember, MemberState, normalized

#: (topic id, partition) -> the member id owning it now, None when free
OwnerOf = Callable[[uuid.UUID, int], str | None]


def _owns_any(owned: Assignment | None, revoking: Assignment) -> bool:
    if owned is None:
        return True         # the member did not say: assume it still owns them
    return any(owned.get(topic, frozenset()) & parts for topic, parts in revoking.items())


def next_member_state(member: ConsumerMember, target_epoch: int, target: Assignment, owner_of: OwnerOf,
                      owned: Assignment | None) -> ConsumerMember:
    """The member after a heartbeat that reported ``owned`` (None: unchanged since the last one)."""
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member
        member = member.evolve(pending_revocation={}, state=MemberState.STABLE)
        return _compute(member, member.member_epoch, target_epoch, target, owner_of)
    if member.state is MemberState.UNRELEASED_PARTITIONS or member.member_epoch != target_epoch:
        return _compute(member, member.member_epoch, target_epoch, target, owner_of)
    return member


def _compute(member: ConsumerMember, epoch: int, target_epoch: int, target: Assignment,
             owner_of: OwnerOf) -> ConsumerMember:
    keep: dict[uuid.UUID, set[int]] = {}
    revoke: dict[uuid.UUID, set[int]] = {}
    gain: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic in set(target) | set(member.assigned):
        wanted = target.get(topic, frozenset())
        current = member.assigned.get(topic, frozenset())
        keep[topic] = set(current & wanted)
        revoke[topic] = set(current - wanted)
        for partition in wanted - current:
            holder = owner_of(topic, partition)
            if holder is None or holder == member.member_id:
                gain.setdefault(topic, set()).add(partition)
            else:
                unreleased = True
    to_revoke = normalized(revoke)
    if to_revoke:
        # Revoke first: the member keeps its epoch and only what it may keep.
        return member.evolve(state=MemberState.UNREVOKED_PARTITIONS, assigned=normalized(keep),
                             pending_revocation=to_revoke, member_epoch=epoch)
    for topic, parts in gain.items():
        keep.setdefault(topic, set()).update(parts)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    previous = member.member_epoch if member.member_epoch != target_epoch else member.previous_member_epoch
    return member.evolve(state=state, assigned=normalized(keep), pending_revocation={}, member_epoch=target_epoch,
                         previous_member_epoch=previous)

"""A member of a consumer group of the consumer rebalance protocol (KIP-848).

A member has an *epoch*: the target assignment epoch it has reconciled to.
Its ``assigned`` partitions are the ones it may use now; ``pending_revocation``
the ones it still owns but must give up before it advances.  Its state says
where it is in reconciliation (Kafka's ``MemberState``):

* STABLE -- its assignment is the target one for its epoch;
* UNREVOKED_PARTITIONS -- it must revoke ``pending_revocation`` first;
* UNRELEASED_PARTITIONS -- it is at the target epoch but some of its target
  partitions are still owned by other members, it gets them once released.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from enum import IntEnum

#: topic id -> partition indexes
Assignment = dict[uuid.UUID, frozenset[int]]

#: The epoch a member joins with, and the ones it leaves with (KIP-848).
JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


@dataclass(frozen=True, slots=True)
class ClassicMember:
    """What a member using the classic protocol in a consumer group (KIP-848's online migration) has
    that consumer-protocol members do not: its session timeout and the protocols it offered."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]


class MemberState(IntEnum):
    """Kafka's ``MemberState``, with its record values (``ConsumerGroupCurrentMemberAssignmentValue.State``)."""

    STABLE = 0
    UNREVOKED_PARTITIONS = 1
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = 300000
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)
    classic: ClassicMember | None = None

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def evolve(self, **changes) -> ConsumerMember:
        return replace(self, **changes)

    def same_subscription(self, other: ConsumerMember) -> bool:
        return (self.subscribed_topic_names == other.subscribed_topic_names
                and self.subscribed_topic_regex == other.subscribed_topic_regex
                and self.rack_id == other.rack_id and self.server_assignor == other.server_assignor)


def normalized(assignment: Mapping[uuid.UUID, AbstractSet[int]]) -> Assignment:
    """Without empty topics, as frozensets: two equal assignments compare equal."""
    return {topic: frozenset(parts) for topic, parts in assignment.items() if parts}


def contains(assignment: Assignment, topic: uuid.UUID, partition: int) -> bool:
    return partition in assignment.get(topic, ())


def partition_count(assignment: Assignment) -> int:
    return sum(len(parts) for parts in assignment.values())

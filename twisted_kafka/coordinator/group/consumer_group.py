"""A consumer group of the consumer rebalance protocol (KIP-848): epochs, target, owners.

The group has a *group epoch*, bumped whenever what the assignment depends
on changes (a member joins or leaves, a subscription changes, a subscribed
topic gains partitions), and a *target assignment* computed by the server
assignor for an *assignment epoch*.  Each member reconciles towards its part
of the target at its own pace (``reconciliation``).  The group's state is
derived, as Kafka's ``ConsumerGroup.state``: Empty (no members), Assigning
(the target is older than the group epoch), Reconciling (some member is not
yet at the target), Stable.

``owners`` maps every partition some member still holds (assigned or
pending revocation) to that member: a partition is given to a new owner
only once it is free.
"""

from __future__ import annotations

import functools
import uuid
from enum import StrEnum

import re2

from .consumer_member import Assignment, ConsumerMember, MemberState
from .consumer_records import TopicMetadata


class ConsumerGroupState(StrEnum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


def compile_regex(pattern: str):
    """KIP-848's regular expressions are RE2/J's: compiled with RE2 (``google-re2``), the same syntax,
    and matching in linear time, so no pattern can stall the broker.  Raises ``re2.error``."""
    return _compiled(pattern)


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False     # a client's bad pattern is its INVALID_REQUEST, not a line on stderr


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str):
    return re2.compile(pattern, _OPTIONS)


def regex_matches(pattern: str, topic: str) -> bool:
    """Whether ``topic`` matches ``pattern`` as a whole (Kafka's ``Pattern.matcher(topic).matches()``).
    An invalid pattern matches nothing (the heartbeat that set it was refused)."""
    try:
        return compile_regex(pattern).fullmatch(topic) is not None
    except re2.error:
        return False


class ConsumerGroup:
    def __init__(self, group_id: str):
        self.group_id = group_id
        self.group_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.static_members: dict[str, str] = {}
        self.assignment_epoch = 0
        self.target: dict[str, Assignment] = {}
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        self.owners: dict[tuple[uuid.UUID, int], str] = {}
        self.assignor_name = "uniform"
        self.dead = False

    # -- state ---------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch != self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE
               for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def owner_of(self, topic_id: uuid.UUID, partition: int) -> str | None:
        return self.owners.get((topic_id, partition))

    def member_by_instance(self, instance_id: str) -> ConsumerMember | None:
        member_id = self.static_members.get(instance_id)
        return self.members.get(member_id) if member_id is not None else None

    # -- changes -------------------------------------------------------------------------------

    def put_member(self, member: ConsumerMember) -> None:
        old = self.members.get(member.member_id)
        if old is not None:
            self._release(old)
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, parts in assignment.items():
                for partition in parts:
                    self.owners[(topic_id, partition)] = member.member_id

    def remove_member(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member)
            if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
                del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def _release(self, member: ConsumerMember) -> None:
        for assignment in (member.assigned, member.pending_revocation):
            for topic_id, parts in assignment.items():
                for partition in parts:
                    if self.owners.get((topic_id, partition)) == member.member_id:
                        del self.owners[(topic_id, partition)]

    # -- subscriptions -------------------------------------------------------------------------

    def subscribed_names(self, topic_names, members: dict[str, ConsumerMember] | None = None) -> set[str]:
        """The topic names the members subscribe to that exist (names listed, or matching a regex)."""
        existing = set(topic_names)
        wanted: set[str] = set()
        patterns: set[str] = set()
        for member in (members if members is not None else self.members).values():
            wanted.update(name for name in member.subscribed_topic_names if name in existing)
            if member.subscribed_topic_regex:
                patterns.add(member.subscribed_topic_regex)
        for pattern in patterns:        # members usually share one pattern: each is matched once
            wanted.update(name for name in existing if regex_matches(pattern, name))
        return wanted

    def member_topics(self, member: ConsumerMember) -> frozenset[uuid.UUID]:
        """The ids of the subscribed topics this member asks for."""
        ids = set()
        for name, meta in self.subscription_metadata.items():
            if name in member.subscribed_topic_names or (
                    member.subscribed_topic_regex and regex_matches(member.subscribed_topic_regex, name)):
                ids.add(meta.topic_id)
        return frozenset(ids)

"""One classic group: its members, generation, protocol and committed offsets (Kafka's ``GroupMetadata``).

The group is a state machine (``state.GroupState``); the coordinator drives
it and this class keeps its invariants: the leader is a member, static
members map their instance id to their current member id, the protocol of
the next generation is one every member supports (each member votes for its
first choice among the protocols all members support; the most votes win,
ties to the leader's preference), and the count of members waiting for their
JoinGroup answer is kept in step with their callbacks.

Offsets committed by the group are cached here: the latest durable commit of
each partition (with the offset of the batch that carries it, so a replayed
log never lets an older commit win) and the commits still being written
(``pending_offset_commits``), which OffsetFetch with ``require_stable``
reports as UNSTABLE_OFFSET_COMMIT.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from twisted.logger import Logger

from twisted_kafka.protocol.errors import ErrorCode

from .member import MemberMetadata
from .records import NO_TIMESTAMP, OffsetCommitValue
from .results import JoinedMember, JoinGroupResult, SyncGroupResult
from .state import GroupState

CONSUMER_PROTOCOL_TYPE = "consumer"
_MEMBER_ID_DELIMITER = "-"

log = Logger(namespace="twisted_kafka.coordinator.group")


# A committed offset in memory is the ``OffsetCommitValue`` record itself, so what is
# loaded from ``__consumer_offsets`` and what is written there are one type.
OffsetAndMetadata = OffsetCommitValue


@dataclass(frozen=True, slots=True)
class CommitRecord:
    """A durable commit and the base offset of the ``__consumer_offsets`` batch holding it."""

    batch_offset: int
    value: OffsetAndMetadata


TopicPartition = tuple[str, int]


def subscribed_topics_of(subscription: bytes) -> set[str]:
    """The topics of a consumer's ``ConsumerProtocolSubscription``; every version starts with
    version (int16) and topics ([]string), which is all this reads."""
    (count,) = struct.unpack_from(">i", subscription, 2)
    pos, topics = 6, set()
    for _ in range(count):
        (length,) = struct.unpack_from(">h", subscription, pos)
        if length < 0 or pos + 2 + length > len(subscription):
            raise ValueError("malformed subscription")
        topics.add(subscription[pos + 2:pos + 2 + length].decode("utf-8"))
        pos += 2 + length
    return topics


def assigned_partitions_of(assignment: bytes) -> list[tuple[str, int]]:
    """The partitions of a consumer's ``ConsumerProtocolAssignment`` (every version starts with version
    (int16) and [topic (string), [partition (int32)]]); empty for anything else (another protocol type,
    no assignment yet, bytes that do not parse)."""
    try:
        (count,) = struct.unpack_from(">i", assignment, 2)
        pos, partitions = 6, list[tuple[str, int]]()
        for _ in range(count):
            (length,) = struct.unpack_from(">h", assignment, pos)
            if length < 0:
                return []
            topic = bytes(assignment[pos + 2:pos + 2 + length]).decode("utf-8")
            pos += 2 + length
            (n,) = struct.unpack_from(">i", assignment, pos)
            if n < 0 or pos + 4 + 4 * n > len(assignment):
                return []
            partitions.extend((topic, p) for p in struct.unpack_from(f">{n}i", assignment, pos + 4))
            pos += 4 + 4 * n
        return partitions
    except (struct.error, UnicodeDecodeError):
        return []


class GroupMetadata:
    def __init__(self, group_id: str, initial_state: GroupState, now_ms: Callable[[], int]):
        self.group_id = group_id
        self.state = initial_state
        self._now_ms = now_ms
        self.current_state_timestamp: int | None = now_ms()
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, MemberMetadata] = {}
        self.static_members: dict[str, str] = {}        # group.instance.id -> member id
        self.pending_members: set[str] = set()           # asked to rejoin with an id (MEMBER_ID_REQUIRED)
        self.pending_sync_members: set[str] = set()      # joined this generation, SyncGroup not yet seen
        self._num_awaiting_join = 0
        self._supported_protocols: dict[str, int] = {}
        self.offsets: dict[TopicPartition, CommitRecord] = {}
        self.pending_offset_commits: dict[TopicPartition, OffsetAndMetadata] = {}
        self.subscribed_topics: set[str] | None = None
        self.new_member_added = False

    def __repr__(self) -> str:
        return (f"GroupMetadata(group_id={self.group_id!r}, generation={self.generation_id}, "
                f"protocol_type={self.protocol_type!r}, state={self.state}, members={list(self.members)})")

    # -- state ----------------------------------------------------------------------------

    def is_state(self, state: GroupState) -> bool:
        return self.state is state

    def transition_to(self, state: GroupState) -> None:
        if self.state not in state.valid_previous_states:
            raise RuntimeError(f"Group {self.group_id} should be in one of "
                               f"{sorted(str(s) for s in state.valid_previous_states)} before moving to {state}; "
                               f"it is {self.state}")
        self.state = state
        self.current_state_timestamp = self._now_ms()

    @property
    def can_rebalance(self) -> bool:
        return self.state in GroupState.PREPARING_REBALANCE.valid_previous_states

    # -- members ---------------------------------------------------------------------------

    def has(self, member_id: str) -> bool:
        return member_id in self.members

    def get(self, member_id: str) -> MemberMetadata:
        return self.members[member_id]

    @property
    def size(self) -> int:
        return len(self.members)

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    @property
    def is_consumer_group(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    @property
    def num_awaiting_join(self) -> int:
        return self._num_awaiting_join

    def add(self, member: MemberMetadata, callback: Callable[[JoinGroupResult], None] | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise RuntimeError(f"Static member {member.group_instance_id} is already a member of "
                                   f"{self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.protocol_type != member.protocol_type:
            raise RuntimeError(f"protocol type {member.protocol_type} differs from the group's {self.protocol_type}")
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, 1)
        member.awaiting_join = callback
        if member.is_awaiting_join:
            self._num_awaiting_join += 1
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member, -1)
            if member.is_awaiting_join:
                self._num_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else make any rejoined member the leader; False when none rejoined."""
        if self.leader_id is None:
            return False
        leader = self.members[self.leader_id]
        if leader.is_awaiting_join:
            return True
        for member_id, member in self.members.items():
            if member.is_awaiting_join:
                log.info("Group {group} leader {old} did not rejoin before the rebalance timeout; "
                         "{new} is the new leader", group=self.group_id, old=leader.member_id, new=member_id)
                self.leader_id = member_id
                return True
        return False

    def replace_static_member(self, group_instance_id: str, old_member_id: str, new_member_id: str) -> MemberMetadata:
        """A static member came back with a new member id: the old id is fenced (its waiting
        JoinGroup or SyncGroup is answered FENCED_INSTANCE_ID) and the member keeps its place."""
        member = self.members.pop(old_member_id, None)
        if member is None:
            raise ValueError(f"Cannot replace non-existing member id {old_member_id}")
        self.maybe_invoke_join_callback(member, JoinGroupResult(old_member_id, ErrorCode.FENCED_INSTANCE_ID))
        self.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.FENCED_INSTANCE_ID))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        return member

    def current_static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_members

    def add_pending_member(self, member_id: str) -> None:
        if self.has(member_id):
            raise RuntimeError(f"Pending member {member_id} is already a member of {self.group_id}")
        self.pending_members.add(member_id)

    def add_pending_sync_member(self, member_id: str) -> None:
        if not self.has(member_id):
            raise RuntimeError(f"Pending sync for {member_id}, which is not a member of {self.group_id}")
        self.pending_sync_members.add(member_id)

    def remove_pending_sync_member(self, member_id: str) -> None:
        self.pending_sync_members.discard(member_id)

    @property
    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    def not_yet_rejoined_members(self) -> list[MemberMetadata]:
        return [m for m in self.members.values() if not m.is_awaiting_join]

    @property
    def has_all_members_joined(self) -> bool:
        return len(self.members) == self._num_awaiting_join and not self.pending_members

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @staticmethod
    def generate_member_id(client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}{_MEMBER_ID_DELIMITER}{uuid.uuid4()}"

    def update_member(self, member: MemberMetadata, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, callback: Callable[[JoinGroupResult], None] | None) -> None:
        self._count_protocols(member, -1)
        member.supported_protocols = protocols
        self._count_protocols(member, 1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if callback is not None and not member.is_awaiting_join:
            self._num_awaiting_join += 1
        elif callback is None and member.is_awaiting_join:
            self._num_awaiting_join -= 1
        member.awaiting_join = callback

    def maybe_invoke_join_callback(self, member: MemberMetadata, result: JoinGroupResult) -> None:
        callback = member.awaiting_join
        if callback is None:
            return
        member.awaiting_join = None
        self._num_awaiting_join -= 1
        _invoke(callback, result, member)

    def maybe_invoke_sync_callback(self, member: MemberMetadata, result: SyncGroupResult) -> bool:
        callback = member.awaiting_sync
        if callback is None:
            return False
        member.awaiting_sync = None
        _invoke(callback, result, member)
        return True

    # -- protocols ---------------------------------------------------------------------------

    def _count_protocols(self, member: MemberMetadata, delta: int) -> None:
        counts = self._supported_protocols
        for name in member.protocol_names:
            counts[name] = counts.get(name, 0) + delta
            if not counts[name]:
                del counts[name]

    def candidate_protocols(self) -> set[str]:
        """The protocols every member supports."""
        n = len(self.members)
        return {name for name, count in self._supported_protocols.items() if count == n}

    def supports_protocols(self, protocol_type: str, protocols: set[str]) -> bool:
        """Whether a member offering ``protocols`` of ``protocol_type`` may join: an empty group takes
        any non-empty offer; otherwise the type must match and one protocol be shared by every member."""
        if self.is_state(GroupState.EMPTY):
            return bool(protocol_type) and bool(protocols)
        n = len(self.members)
        return (self.protocol_type == protocol_type
                and any(self._supported_protocols.get(name, 0) == n for name in protocols))

    def select_protocol(self) -> str:
        if not self.members:
            raise RuntimeError("Cannot select a protocol for an empty group")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            choice = member.vote(candidates)
            votes[choice] = votes.get(choice, 0) + 1
        best = max(votes.values())
        # Ties go to the leader's preference (then the first member's), so the choice is stable.
        order = self.members[self.leader_id] if self.leader_id in self.members else next(iter(self.members.values()))
        for name, _ in order.supported_protocols:
            if votes.get(name) == best:
                return name
        return max(votes, key=lambda name: votes[name])

    def compute_subscribed_topics(self) -> set[str] | None:
        """The topics a consumer group subscribes to (None: not a consumer group, or unreadable)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics |= subscribed_topics_of(member.metadata(self.protocol_name))
        except (ValueError, struct.error, UnicodeDecodeError):
            log.warn("Cannot read the consumer protocol subscriptions of group {group}", group=self.group_id)
            return None
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # -- generations -------------------------------------------------------------------------

    def init_next_generation(self) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.COMPLETING_REBALANCE)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(GroupState.EMPTY)
        self.pending_sync_members.clear()

    def current_member_metadata(self) -> list[JoinedMember]:
        """Every member with its metadata for the chosen protocol (the leader's JoinGroup answer)."""
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE) or self.protocol_name is None:
            raise RuntimeError(f"Cannot obtain member metadata for group {self.group_id} in state {self.state}")
        return [JoinedMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
                for m in self.members.values()]

    # -- offsets ------------------------------------------------------------------------------

    def initialize_offsets(self, offsets: dict[TopicPartition, CommitRecord]) -> None:
        self.offsets.update(offsets)

    def prepare_offset_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.pending_offset_commits.update(offsets)

    def on_offset_commit_append(self, tp: TopicPartition, record: CommitRecord) -> None:
        if tp in self.pending_offset_commits:
            current = self.offsets.get(tp)
            if current is None or current.batch_offset < record.batch_offset:
                self.offsets[tp] = record
        if self.pending_offset_commits.get(tp) == record.value:
            del self.pending_offset_commits[tp]

    def fail_pending_offset_write(self, tp: TopicPartition, value: OffsetAndMetadata) -> None:
        if self.pending_offset_commits.get(tp) == value:
            del self.pending_offset_commits[tp]

    def has_pending_offset_commits_for(self, tp: TopicPartition) -> bool:
        return tp in self.pending_offset_commits

    def offset(self, tp: TopicPartition) -> OffsetAndMetadata | None:
        record = self.offsets.get(tp)
        return record.value if record is not None else None

    def all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: record.value for tp, record in self.offsets.items()}

    def remove_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        removed = {}
        for tp in partitions:
            self.pending_offset_commits.pop(tp, None)
            record = self.offsets.pop(tp, None)
            if record is not None:
                removed[tp] = record.value
        return removed

    def remove_all_offsets(self) -> dict[TopicPartition, OffsetAndMetadata]:
        return self.remove_offsets(list(self.offsets))

    @property
    def has_offsets(self) -> bool:
        return bool(self.offsets) or bool(self.pending_offset_commits)

    def remove_expired_offsets(self, now_ms: int, retention_ms: int) -> dict[TopicPartition, OffsetAndMetadata]:
        """Offsets past their retention (KIP-211): those of an Empty group once the group has been
        empty that long; those of a Stable consumer group's unsubscribed topics past it since
        their commit; a group without a protocol type (offsets only) by commit time.  An offset
        with an explicit expiry (OffsetCommit v2-v4 retention time) expires then."""

        def expired(base: Callable[[CommitRecord], int], subscribed: set[str]) -> list[TopicPartition]:
            found = []
            for tp, record in self.offsets.items():
                if tp[0] in subscribed or tp in self.pending_offset_commits:
                    continue
                value = record.value
                if value.expire_timestamp == NO_TIMESTAMP:
                    if now_ms - base(record) >= retention_ms:
                        found.append(tp)
                elif now_ms >= value.expire_timestamp:
                    found.append(tp)
            return found

        if self.protocol_type is not None and self.is_state(GroupState.EMPTY):
            state_ts = self.current_state_timestamp
            tps = expired(lambda r: state_ts if state_ts is not None else r.value.commit_timestamp, set())
        elif (self.protocol_type == CONSUMER_PROTOCOL_TYPE and self.subscribed_topics is not None
              and self.is_state(GroupState.STABLE)):
            tps = expired(lambda r: r.value.commit_timestamp, self.subscribed_topics)
        elif self.protocol_type is None:
            tps = expired(lambda r: r.value.commit_timestamp, set())
        else:
            tps = []
        return {tp: self.offsets.pop(tp).value for tp in tps}

    @property
    def num_offsets(self) -> int:
        return len(self.offsets)


def _invoke(callback: Callable[[Any], None], result: Any, member: MemberMetadata) -> None:
    try:
        callback(result)
    except Exception:
        log.failure("Answering member {member} failed", member=member.member_id)

"""Classic members in a consumer group: KIP-848's online migration, as Kafka 4.0 serves it.

When a consumer-protocol member joins a classic group, the group becomes a
consumer group and its classic members stay in it: they keep sending
JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and those are answered from
the consumer group's state machine:

* **JoinGroup** updates the member (its subscription from the protocol
  metadata it sends -- the topics, and from version 1 the partitions it
  still owns; an eager member owns none once it rejoins), reconciles it,
  and answers at once: the generation is the member epoch, the member is
  not the leader (the broker assigns), the protocol is the member's first;
* **SyncGroup** answers the member's current assignment, in the consumer
  protocol's format; any assignment the member sends is ignored;
* **Heartbeat** keeps the session (the member's own session timeout) and
  answers REBALANCE_IN_PROGRESS while the member has partitions to revoke
  or to get: the member rejoins, which is how a classic member reconciles;
  ILLEGAL_GENERATION for another generation than its epoch;
* **LeaveGroup** removes it, as a consumer-protocol member's leave does.

A new classic member joining a consumer group is handled the same way
(MEMBER_ID_REQUIRED first, as JoinGroup v4+ asks).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from twisted.internet.defer import Deferred, succeed

from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.exceptions import ProtocolDecodeError

from .consumer_group import ConsumerGroup
from .consumer_member import Assignment, ClassicMember, ConsumerMember, MemberState, normalized
from .consumer_protocol_formats import decode_subscription, encode_assignment
from .results import NO_MEMBER_ID, JoinGroupResult, LeaveMemberResult, SyncGroupResult

CONSUMER_PROTOCOL_TYPE = "consumer"


class ClassicMembers:
    def __init__(self, coordinator):
        self.coordinator = coordinator          # the ConsumerGroupCoordinator
        self.pending: dict[str, set[str]] = {}  # group -> member ids handed out by MEMBER_ID_REQUIRED

    # -- JoinGroup ------------------------------------------------------------------------------

    def join(self, group: ConsumerGroup, member_id: str, instance_id: str | None, *, require_known_member_id: bool,
             client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
             protocol_type: str, protocols: list[tuple[str, bytes]]) -> Deferred:
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not protocols:
            return succeed(JoinGroupResult(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        pending = self.pending.setdefault(group.group_id, set())
        if member_id == NO_MEMBER_ID:
            member_id = f"{client_id}-{uuid.uuid4()}"
            if require_known_member_id and instance_id is None:
                # The id is good for one session timeout: a client that never comes back holds nothing.
                pending.add(member_id)
                self.coordinator.clock.callLater(session_timeout_ms / 1000.0, pending.discard, member_id)
                return succeed(JoinGroupResult(member_id, ErrorCode.MEMBER_ID_REQUIRED))
        elif member_id not in group.members and member_id not in pending:
            return succeed(JoinGroupResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        existing = group.members.get(member_id)
        if existing is not None and existing.classic is None:
            return succeed(JoinGroupResult(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        if existing is None and len(group.members) >= self.coordinator.config.max_size:
            return succeed(JoinGroupResult(NO_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED))
        try:
            subscription = decode_subscription(protocols[0][1])
        except ProtocolDecodeError:
            return succeed(JoinGroupResult(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        pending.discard(member_id)
        member = existing or ConsumerMember(member_id=member_id)
        updated = member.evolve(
            instance_id=instance_id, rack_id=subscription.rack, client_id=client_id, client_host=client_host,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))), subscribed_topic_regex=None,
            rebalance_timeout_ms=rebalance_timeout_ms,
            classic=ClassicMember(session_timeout_ms, tuple(protocols)))
        owned = self.ids_of(subscription.owned)
        records: list = []
        _, after = self.coordinator.apply_member(group, member, updated, existing is None, None, owned, records)
        self.coordinator.schedule_timers(group.group_id, after)
        result = JoinGroupResult(member_id, ErrorCode.NONE, generation_id=after.member_epoch,
                                 protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=protocols[0][0], leader_id="")
        return self.coordinator.write_records(group.group_id, records, result, lambda error: JoinGroupResult(
            member_id, error))

    def ids_of(self, owned: dict[str, frozenset[int]]) -> Assignment:
        known = self.coordinator.topics()
        return normalized({known[name].topic_id: parts for name, parts in owned.items() if name in known})

    def names_of(self, assignment: Assignment) -> dict[str, list[int]]:
        names = {info.topic_id: name for name, info in self.coordinator.topics().items()}
        return {names[t]: sorted(parts) for t, parts in assignment.items() if t in names}

    # -- SyncGroup, Heartbeat, LeaveGroup -------------------------------------------------------------

    def _member(self, group: ConsumerGroup, member_id: str, generation_id: int,
                instance_id: str | None) -> tuple[ConsumerMember | None, ErrorCode | None]:
        member = group.members.get(member_id)
        if member is None:
            return None, ErrorCode.UNKNOWN_MEMBER_ID
        if member.classic is None:
            return None, ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if instance_id is not None and member.instance_id not in (None, instance_id):
            return None, ErrorCode.FENCED_INSTANCE_ID
        if generation_id != member.member_epoch:
            return None, ErrorCode.ILLEGAL_GENERATION
        return member, None

    def sync(self, group: ConsumerGroup, member_id: str, generation_id: int, instance_id: str | None,
             protocol_type: str | None, protocol_name: str | None) -> SyncGroupResult:
        member, error = self._member(group, member_id, generation_id, instance_id)
        if error is not None or member is None:
            return SyncGroupResult(error or ErrorCode.UNKNOWN_MEMBER_ID)
        assert member.classic is not None
        name = member.classic.protocols[0][0]
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                (protocol_name is not None and protocol_name != name):
            return SyncGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        self.coordinator.schedule_timers(group.group_id, member)
        return SyncGroupResult(ErrorCode.NONE, encode_assignment(self.names_of(member.assigned)),
                               CONSUMER_PROTOCOL_TYPE, name)

    def heartbeat(self, group: ConsumerGroup, member_id: str, instance_id: str | None, generation_id: int,
                  reconcile: Callable[[ConsumerMember, Assignment | None], ConsumerMember]) -> ErrorCode:
        member, error = self._member(group, member_id, generation_id, instance_id)
        if error is not None or member is None:
            return error or ErrorCode.UNKNOWN_MEMBER_ID
        self.coordinator.schedule_timers(group.group_id, member)
        owned = dict(member.assigned)
        for topic, parts in member.pending_revocation.items():
            owned[topic] = owned.get(topic, frozenset()) | parts
        if member.state is MemberState.UNREVOKED_PARTITIONS or reconcile(member, owned) != member:
            return ErrorCode.REBALANCE_IN_PROGRESS       # rejoin: revoke, or take the partitions now free
        return ErrorCode.NONE

    def leave(self, group: ConsumerGroup, member_id: str, instance_id: str | None) -> LeaveMemberResult:
        member = group.members.get(member_id)
        if member is None and instance_id is not None:
            member = group.member_by_instance(instance_id)
        if member is None:
            if member_id in self.pending.get(group.group_id, ()):
                self.pending[group.group_id].discard(member_id)
                return LeaveMemberResult(member_id, instance_id, ErrorCode.NONE)
            return LeaveMemberResult(member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID)
        self.coordinator.remove_member(group, member.member_id, "LeaveGroup")
        return LeaveMemberResult(member_id, instance_id, ErrorCode.NONE)

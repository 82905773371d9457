"""The consumer rebalance protocol's coordinator (KIP-848): ConsumerGroupHeartbeat and its timers.

One heartbeat does everything the classic protocol's JoinGroup, SyncGroup
and Heartbeat do, without a group-wide barrier:

1. the member is created (epoch 0), checked (its epoch must be its current
   one, or the previous one if it only missed an answer: FENCED_MEMBER_EPOCH
   otherwise) and updated with what the request carries (fields left null are
   unchanged);
2. if the member is new or changed its subscription, or the subscribed
   topics' partition counts changed, the *group epoch* is bumped;
3. if the target assignment is older than the group epoch, the server
   assignor computes a new one;
4. the member reconciles towards its target (``reconciliation``): it first
   revokes what it must give up, and gets a partition only once its
   previous owner has released it;
5. the records of what changed are written to ``__consumer_offsets`` in
   Kafka's formats (``consumer_records``) and the answer -- member epoch,
   heartbeat interval, and the assignment when it changed -- is sent once
   they are durable.

Members that are not affected keep consuming: no one waits for anyone.  A
member that stops heartbeating is removed after
``group.consumer.session.timeout.ms``; one that does not revoke within its
rebalance timeout is removed too.  A member leaves with epoch -1; a static
member (``group.instance.id``) with epoch -2 keeps its assignment until its
session times out, and a new member with the same instance id takes it over
(UNRELEASED_INSTANCE_ID while the old one is still active).

Regular expressions (``SubscribedTopicRegex``) are RE2's (``google-re2``:
KIP-848 specifies RE2/J), matched in linear time as a full match against
the topic names the broker knows, at every heartbeat, so a topic created
later joins the subscription at the next heartbeat of any member.

Timing runs on ``clock`` (``IReactorTime``): ``task.Clock`` drives it in tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

import re2
from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .assignors import MemberSpec, TopicSpec, assignors
from .classic_members import ClassicMembers
from .config import ConsumerGroupConfig
from .consumer_group import ConsumerGroup, ConsumerGroupState, compile_regex
from .consumer_member import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    Assignment,
    ConsumerMember,
    MemberState,
    normalized,
)
from .consumer_records import (
    CURRENT_ASSIGNMENT,
    GROUP_METADATA,
    MEMBER_METADATA,
    PARTITION_METADATA,
    TARGET_MEMBER,
    TARGET_METADATA,
    TopicMetadata,
    encode_current_assignment_value,
    encode_epoch_value,
    encode_key,
    encode_member_metadata_value,
    encode_partition_metadata_value,
    encode_target_member_value,
)
from .consumer_results import ConsumerGroupDescription, HeartbeatResult
from .manager import GroupMetadataManager, store_group_error

log = Logger(namespace="twisted_kafka.coordinator.group.ConsumerGroupCoordinator")

Record = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class TopicInfo:
    topic_id: uuid.UUID
    num_partitions: int
    racks: dict[int, frozenset[str]]


#: The topics the broker knows: name -> TopicInfo (the metadata cache, in the broker).
TopicSource = Callable[[], dict[str, TopicInfo]]


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""


class ConsumerGroupCoordinator:
    def __init__(self, *, config: ConsumerGroupConfig, manager: GroupMetadataManager, clock,
                 topics: TopicSource | None = None):
        self.config = config
        self.manager = manager
        self.clock = clock
        self.topics: TopicSource = topics or dict
        self.groups: dict[str, ConsumerGroup] = {}
        self._session_timers: dict[tuple[str, str], object] = {}
        self._rebalance_timers: dict[tuple[str, str], object] = {}
        self._assignors = assignors()
        self.classic = ClassicMembers(self)
        #: KIP-848's online migration, set by the ``GroupCoordinator`` (which owns classic groups):
        #: ``upgrade(group_id, records)`` turns a classic group with members into a consumer group
        #: (None) or says why not; ``downgrade(group)`` turns a consumer group whose members all use
        #: the classic protocol back into a classic group.
        self.upgrade: Callable[[str, list[Record]], HeartbeatResult | None] | None = None
        self.downgrade: Callable[[ConsumerGroup], None] | None = None

    # -- lookups ---------------------------------------------------------------------------------

    def get(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def is_consumer_group(self, group_id: str) -> bool:
        group = self.groups.get(group_id)
        return group is not None and not group.dead

    # -- ConsumerGroupHeartbeat ------------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest, status_error: ErrorCode | None) -> Deferred:
        """Fires with a ``HeartbeatResult`` (once the records it wrote are durable)."""
        if status_error is not None:
            return succeed(HeartbeatResult(status_error))
        invalid = self._invalid(request)
        if invalid is not None:
            return succeed(HeartbeatResult(ErrorCode.INVALID_REQUEST, invalid))
        if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(request)
        try:
            return self._heartbeat(request)
        except KafkaError as exc:
            return succeed(HeartbeatResult(exc.code, str(exc)))

    def _invalid(self, request: HeartbeatRequest) -> str | None:
        if not request.group_id:
            return "GroupId can't be empty."
        if request.instance_id == "":
            return "InstanceId can't be empty."
        if request.rack_id == "":
            return "RackId can't be empty."
        if request.member_epoch == JOIN_EPOCH:
            if request.rebalance_timeout_ms == -1:
                return "RebalanceTimeoutMs must be provided in first request."
            if request.owned:
                return "TopicPartitions must be empty when (re-)joining."
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                return "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
        elif request.member_epoch > 0 or request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            if not request.member_id:
                return "MemberId can't be empty."
        else:
            return f"MemberEpoch is invalid: {request.member_epoch}."
        if request.member_epoch == STATIC_LEAVE_EPOCH and request.instance_id is None:
            return "InstanceId can't be null when leaving with epoch -2."
        if request.subscribed_topic_regex is not None:
            try:
                compile_regex(request.subscribed_topic_regex)
            except re2.error as exc:
                return f"SubscribedTopicRegex {request.subscribed_topic_regex!r} is not a valid regular " \
                       f"expression: {exc}"
        return None

    def _heartbeat(self, request: HeartbeatRequest) -> Deferred:
        if request.server_assignor is not None and request.server_assignor not in self.config.assignors:
            return succeed(HeartbeatResult(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                           f"ServerAssignor {request.server_assignor} is not supported; "
                                           f"supported assignors: {', '.join(self.config.assignors)}."))
        group_id = request.group_id
        records: list[Record] = []
        classic = self.manager.get_group(group_id)
        if classic is not None and classic.size > 0 and not self.is_consumer_group(group_id):
            if self.upgrade is None or request.member_epoch != JOIN_EPOCH:
                return succeed(HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND,
                                               f"Group {group_id} is a classic group with members."))
            refused = self.upgrade(group_id, records)
            if refused is not None:
                return succeed(refused)
        group = self.groups.get(group_id)
        if group is None or group.dead:
            if request.member_epoch != JOIN_EPOCH:
                return succeed(HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                               f"Group {group_id} has no member {request.member_id}."))
            group = self.groups[group_id] = ConsumerGroup(group_id)
            group.assignor_name = self.config.assignors[0]
        member_id = request.member_id or str(uuid.uuid4())
        member = group.members.get(member_id)
        replaced: ConsumerMember | None = None
        if request.member_epoch == JOIN_EPOCH:
            if request.instance_id is not None:
                previous = group.member_by_instance(request.instance_id)
                if previous is not None and previous.member_id != member_id:
                    if previous.member_epoch != STATIC_LEAVE_EPOCH:
                        return succeed(HeartbeatResult(
                            ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"Static member {previous.member_id} with instance id {request.instance_id} is "
                            "still active."))
                    replaced = previous
            if member is None and replaced is None and len(group.members) >= self.config.max_size:
                return succeed(HeartbeatResult(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                               f"The consumer group has reached its maximum capacity of "
                                               f"{self.config.max_size} members."))
            if member is None:
                member = ConsumerMember(member_id=member_id)
                if replaced is not None:
                    # The static member's new incarnation takes over its assignment and the epoch it had.
                    member = member.evolve(member_epoch=replaced.previous_member_epoch,
                                           previous_member_epoch=replaced.previous_member_epoch,
                                           state=replaced.state, assigned=replaced.assigned,
                                           pending_revocation=replaced.pending_revocation)
            elif member.member_epoch == STATIC_LEAVE_EPOCH:
                member = member.evolve(member_epoch=member.previous_member_epoch)
        else:
            if member is None:
                return succeed(HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                               f"Member {member_id} is not a member of group {group_id}."))
            if member.classic is not None:
                return succeed(HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                               f"Member {member_id} uses the classic protocol."))
            if request.instance_id is not None and member.instance_id not in (None, request.instance_id):
                return succeed(HeartbeatResult(ErrorCode.FENCED_INSTANCE_ID,
                                               f"Member {member_id} has instance id {member.instance_id}."))
            if request.member_epoch > member.member_epoch or (
                    request.member_epoch < member.member_epoch
                    and not (request.member_epoch == member.previous_member_epoch
                             and _is_subset(request.owned, member.assigned))):
                return succeed(HeartbeatResult(
                    ErrorCode.FENCED_MEMBER_EPOCH,
                    f"The member epoch {request.member_epoch} of {member_id} is not {member.member_epoch}."))
        updated = member.evolve(
            instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            client_id=request.client_id, client_host=request.client_host,
            subscribed_topic_names=(tuple(sorted(set(request.subscribed_topic_names)))
                                    if request.subscribed_topic_names is not None
                                    else member.subscribed_topic_names),
            subscribed_topic_regex=(request.subscribed_topic_regex or None
                                    if request.subscribed_topic_regex is not None
                                    else member.subscribed_topic_regex),
            rebalance_timeout_ms=(request.rebalance_timeout_ms if request.rebalance_timeout_ms != -1
                                  else member.rebalance_timeout_ms),
            server_assignor=request.server_assignor if request.server_assignor is not None
            else member.server_assignor)
        is_new = member_id not in group.members
        current, next_member = self.apply_member(group, member, updated, is_new, replaced, request.owned, records)
        self._schedule_session_timeout(group_id, member_id)
        self._schedule_rebalance_timeout(group_id, next_member)
        send_assignment = (request.member_epoch == JOIN_EPOCH or next_member.assigned != current.assigned
                           or next_member.member_epoch != request.member_epoch
                           or (request.owned is not None and request.owned != next_member.assigned))
        result = HeartbeatResult(ErrorCode.NONE, None, member_id, next_member.member_epoch,
                                 self.config.heartbeat_interval_ms,
                                 next_member.assigned if send_assignment else None)
        return self._write(group_id, records, result)

    def apply_member(self, group: ConsumerGroup, member: ConsumerMember, updated: ConsumerMember, is_new: bool,
                     replaced: ConsumerMember | None, owned: Assignment | None,
                     records: list[Record]) -> tuple[ConsumerMember, ConsumerMember]:
        """Put ``updated`` in the group -- bumping the group epoch and computing a new target when what
        the assignment depends on changed -- and reconcile it; returns the member before and after
        the reconciliation.  Used for both kinds of members."""
        group_id, member_id = group.group_id, updated.member_id
        bump = is_new or not updated.same_subscription(member)
        if replaced is not None:
            target = group.target.get(replaced.member_id, {})
            self._drop_member(group, replaced.member_id, records, bump_epoch=False)
            group.target[member_id] = target
            records.append((encode_key(TARGET_MEMBER, group_id, member_id), encode_target_member_value(target)))
            bump = not updated.same_subscription(replaced)
        if is_new or updated != member:
            records.append((encode_key(MEMBER_METADATA, group_id, member_id), encode_member_metadata_value(updated)))
        # The subscribed topics as they are now.
        members_after = dict(group.members)
        members_after[member_id] = updated
        metadata = self._subscription_metadata(group, members_after)
        if metadata != group.subscription_metadata:
            bump = True
            group.subscription_metadata = metadata
            records.append((encode_key(PARTITION_METADATA, group_id),
                            encode_partition_metadata_value(list(metadata.values()))))
        group.put_member(updated)
        if updated.server_assignor is not None:
            group.assignor_name = updated.server_assignor
        if bump:
            group.group_epoch += 1
            records.append((encode_key(GROUP_METADATA, group_id), encode_epoch_value(group.group_epoch)))
            log.info("Group {group} epoch is now {epoch}: {why}", group=group_id, epoch=group.group_epoch,
                     why="member " + member_id + (" joined" if is_new else " changed its subscription")
                     if is_new or not updated.same_subscription(member) else "subscribed topics changed")
        if group.group_epoch > group.assignment_epoch:
            self._compute_target(group, records)
        current = group.members[member_id]
        next_member = _reconcile(group, current, owned)
        if next_member != current or is_new:
            group.put_member(next_member)
            records.append((encode_key(CURRENT_ASSIGNMENT, group_id, member_id),
                            encode_current_assignment_value(next_member)))
        return current, next_member

    def _subscription_metadata(self, group: ConsumerGroup,
                               members: dict[str, ConsumerMember]) -> dict[str, TopicMetadata]:
        known = self.topics()
        names = group.subscribed_names(known, members)
        return {name: TopicMetadata(known[name].topic_id, name, known[name].num_partitions) for name in sorted(names)}

    def _compute_target(self, group: ConsumerGroup, records: list[Record]) -> None:
        known = self.topics()
        topics = {meta.topic_id: TopicSpec(name, meta.num_partitions,
                                           known[name].racks if name in known else {})
                  for name, meta in group.subscription_metadata.items()}
        specs = {m.member_id: MemberSpec(group.member_topics(m), m.rack_id, group.target.get(m.member_id, {}))
                 for m in group.members.values()}
        assign = self._assignors.get(group.assignor_name) or self._assignors[self.config.assignors[0]]
        target = assign(specs, topics)
        for member_id, assignment in target.items():
            if group.target.get(member_id) != assignment or member_id not in group.target:
                records.append((encode_key(TARGET_MEMBER, group.group_id, member_id),
                                encode_target_member_value(assignment)))
        group.target = target
        group.assignment_epoch = group.group_epoch
        records.append((encode_key(TARGET_METADATA, group.group_id), encode_epoch_value(group.assignment_epoch)))
        log.info("Group {group}: target assignment for epoch {epoch} computed with {assignor} for {n} member(s)",
                 group=group.group_id, epoch=group.assignment_epoch, assignor=group.assignor_name, n=len(target))

    # -- leaving ------------------------------------------------------------------------------

    def _leave(self, request: HeartbeatRequest) -> Deferred:
        group = self.groups.get(request.group_id)
        if group is None or group.dead:
            return succeed(HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID, f"Group {request.group_id} is unknown."))
        member = group.members.get(request.member_id)
        if member is None and request.instance_id is not None:
            member = group.member_by_instance(request.instance_id)
            if member is not None and member.member_id != request.member_id:
                return succeed(HeartbeatResult(ErrorCode.FENCED_INSTANCE_ID,
                                               f"Instance {request.instance_id} is member {member.member_id}."))
        if member is None:
            return succeed(HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID,
                                           f"Member {request.member_id} is not a member of group {group.group_id}."))
        records: list[Record] = []
        if request.member_epoch == STATIC_LEAVE_EPOCH:
            # The static member will come back: it keeps its assignment until its session times out.
            left = member.evolve(member_epoch=STATIC_LEAVE_EPOCH, previous_member_epoch=member.member_epoch)
            group.put_member(left)
            records.append((encode_key(CURRENT_ASSIGNMENT, group.group_id, member.member_id),
                            encode_current_assignment_value(left)))
            log.info("Static member {member} ({instance}) of group {group} left temporarily",
                     member=member.member_id, instance=member.instance_id, group=group.group_id)
        else:
            self._drop_member(group, member.member_id, records)
            log.info("Member {member} left group {group}", member=member.member_id, group=group.group_id)
        written = self._write(group.group_id, records, HeartbeatResult(
            ErrorCode.NONE, None, member.member_id, request.member_epoch, 0, None))
        self._maybe_downgrade(group)
        return written

    def _drop_member(self, group: ConsumerGroup, member_id: str, records: list[Record],
                     bump_epoch: bool = True) -> None:
        """Remove a member: its tombstones (current assignment, target, metadata), then the new group epoch."""
        group.remove_member(member_id)
        self._cancel_timers(group.group_id, member_id)
        records.extend([(encode_key(CURRENT_ASSIGNMENT, group.group_id, member_id), None),
                        (encode_key(TARGET_MEMBER, group.group_id, member_id), None),
                        (encode_key(MEMBER_METADATA, group.group_id, member_id), None)])
        if not bump_epoch:
            return
        metadata = self._subscription_metadata(group, group.members)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            records.append((encode_key(PARTITION_METADATA, group.group_id),
                            encode_partition_metadata_value(list(metadata.values()))))
        group.group_epoch += 1
        records.append((encode_key(GROUP_METADATA, group.group_id), encode_epoch_value(group.group_epoch)))
        if group.members:
            self._compute_target(group, records)
        else:
            group.assignment_epoch = group.group_epoch
            records.append((encode_key(TARGET_METADATA, group.group_id), encode_epoch_value(group.assignment_epoch)))

    # -- timers -------------------------------------------------------------------------------

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        """The member's session: ``group.consumer.session.timeout.ms``, or the session timeout a classic
        member joined with."""
        key = (group_id, member_id)
        timer = self._session_timers.pop(key, None)
        if timer is not None and timer.active():        # type: ignore[attr-defined]
            timer.cancel()                              # type: ignore[attr-defined]
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        timeout_ms = (member.classic.session_timeout_ms if member is not None and member.classic is not None
                      else self.config.session_timeout_ms)
        self._session_timers[key] = self.clock.callLater(timeout_ms / 1000.0, self._expire, group_id, member_id,
                                                         "session timeout")

    def _schedule_rebalance_timeout(self, group_id: str, member: ConsumerMember) -> None:
        key = (group_id, member.member_id)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if key not in self._rebalance_timers:
                self._rebalance_timers[key] = self.clock.callLater(
                    member.rebalance_timeout_ms / 1000.0, self._expire, group_id, member.member_id,
                    "rebalance timeout (partitions not revoked)")
            return
        timer = self._rebalance_timers.pop(key, None)
        if timer is not None and timer.active():        # type: ignore[attr-defined]
            timer.cancel()                              # type: ignore[attr-defined]

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        for timers in (self._session_timers, self._rebalance_timers):
            timer = timers.pop((group_id, member_id), None)
            if timer is not None and timer.active():    # type: ignore[attr-defined]
                timer.cancel()                          # type: ignore[attr-defined]

    def _expire(self, group_id: str, member_id: str, why: str) -> None:
        self._session_timers.pop((group_id, member_id), None)
        self._rebalance_timers.pop((group_id, member_id), None)
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members or not self.manager.is_group_local(group_id):
            return
        self.remove_member(group, member_id, why)

    def remove_member(self, group: ConsumerGroup, member_id: str, why: str) -> Deferred:
        """Remove a member (its session expired, it left through LeaveGroup, ...) and write it."""
        records: list[Record] = []
        self._drop_member(group, member_id, records)
        log.info("Member {member} of group {group} removed: {why}", member=member_id, group=group.group_id, why=why)
        written = self._write(group.group_id, records, None)
        self._maybe_downgrade(group)
        return written

    def _maybe_downgrade(self, group: ConsumerGroup) -> None:
        """The last consumer-protocol member left a group with classic members: it becomes classic
        again (KIP-848's online downgrade), as in Kafka 4.0."""
        if self.downgrade is not None and group.members and \
                all(m.classic is not None for m in group.members.values()) and not group.dead:
            self.downgrade(group)

    def schedule_timers(self, group_id: str, member: ConsumerMember) -> None:
        self._schedule_session_timeout(group_id, member.member_id)
        self._schedule_rebalance_timeout(group_id, member)

    def write_records(self, group_id: str, records: list[Record], result, on_error) -> Deferred:
        """Write ``records``; fires with ``result``, or ``on_error(error)`` if the write failed."""
        if not records:
            return succeed(result)
        d = self.manager.writer.append(self.manager.partition_for(group_id), records, self.manager.now_ms())

        def failed(failure: Failure):
            error = failure.value.code if isinstance(failure.value, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR
            log.warn("Writing the records of consumer group {group} failed: {error}", group=group_id,
                     error=error.name)
            return on_error(store_group_error(error))

        d.addCallbacks(lambda _: result, failed)
        return d

    def convert(self, group_id: str, epoch: int, members: list[ConsumerMember], records: list[Record]) -> ConsumerGroup:
        """A consumer group made of a classic group's members at ``epoch``, their partitions as its
        target (the upgrade of KIP-848's online migration); its records are appended to ``records``."""
        group = self.groups[group_id] = ConsumerGroup(group_id)
        group.assignor_name = self.config.assignors[0]
        group.group_epoch = group.assignment_epoch = epoch
        for member in members:
            group.put_member(member)
            group.target[member.member_id] = member.assigned
        group.subscription_metadata = self._subscription_metadata(group, group.members)
        records.append((encode_key(PARTITION_METADATA, group_id),
                        encode_partition_metadata_value(list(group.subscription_metadata.values()))))
        for member in members:
            records.extend([
                (encode_key(MEMBER_METADATA, group_id, member.member_id), encode_member_metadata_value(member)),
                (encode_key(TARGET_MEMBER, group_id, member.member_id), encode_target_member_value(member.assigned)),
                (encode_key(CURRENT_ASSIGNMENT, group_id, member.member_id),
                 encode_current_assignment_value(member))])
            self.schedule_timers(group_id, member)
        records.extend([(encode_key(GROUP_METADATA, group_id), encode_epoch_value(epoch)),
                        (encode_key(TARGET_METADATA, group_id), encode_epoch_value(epoch))])
        return group

    def reconcile(self, group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None) -> ConsumerMember:
        return _reconcile(group, member, owned)

    def drop_records(self, group: ConsumerGroup) -> list[Record]:
        """Every record of the group as tombstones (a downgrade, or a deletion), and the group gone."""
        records: list[Record] = []
        for member_id in list(group.members):
            self._cancel_timers(group.group_id, member_id)
            records.extend([(encode_key(CURRENT_ASSIGNMENT, group.group_id, member_id), None),
                            (encode_key(TARGET_MEMBER, group.group_id, member_id), None),
                            (encode_key(MEMBER_METADATA, group.group_id, member_id), None)])
        records.extend([(encode_key(TARGET_METADATA, group.group_id), None),
                        (encode_key(PARTITION_METADATA, group.group_id), None),
                        (encode_key(GROUP_METADATA, group.group_id), None)])
        group.dead = True
        self.groups.pop(group.group_id, None)
        self.classic.pending.pop(group.group_id, None)
        return records

    # -- writes -------------------------------------------------------------------------------

    def _write(self, group_id: str, records: list[Record], result: HeartbeatResult | None) -> Deferred:
        return self.write_records(group_id, records, result,
                                  lambda error: HeartbeatResult(error) if result is not None else None)

    # -- describe, list, load, unload ------------------------------------------------------------------

    def describe(self, group_id: str) -> ConsumerGroupDescription:
        group = self.groups.get(group_id)
        if group is None or group.dead:
            return ConsumerGroupDescription(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                            f"Group {group_id} not found.")
        names = {info.topic_id: name for name, info in self.topics().items()}
        names.update({meta.topic_id: name for name, meta in group.subscription_metadata.items()})
        return ConsumerGroupDescription(group_id, ErrorCode.NONE, None, str(group.state), group.group_epoch,
                                        group.assignment_epoch, group.assignor_name,
                                        sorted(group.members.values(), key=lambda m: m.member_id),
                                        dict(group.target), names)

    def delete_empty(self, group_id: str) -> Deferred:
        """Delete an Empty group's consumer-protocol records (DeleteGroups, or a classic member taking
        the group id over): tombstones of its target metadata, partition metadata and group metadata."""
        group = self.groups.pop(group_id, None)
        if group is None:
            return succeed(None)
        group.dead = True
        records: list[Record] = [(encode_key(TARGET_METADATA, group_id), None),
                                 (encode_key(PARTITION_METADATA, group_id), None),
                                 (encode_key(GROUP_METADATA, group_id), None)]
        log.info("Consumer group {group} deleted", group=group_id)
        return self._write(group_id, records, None)

    def load(self, group: ConsumerGroup) -> None:
        """A group replayed from the log: its members' sessions start now."""
        self.groups[group.group_id] = group
        for member_id in group.members:
            self._schedule_session_timeout(group.group_id, member_id)

    def unload_partition(self, partition: int | None) -> int:
        """Drop the groups of ``partition`` (None: every group); their timers stop."""
        removed = 0
        for group_id in list(self.groups):
            if partition is None or self.manager.partition_for(group_id) == partition:
                group = self.groups.pop(group_id)
                group.dead = True
                for member_id in list(group.members):
                    self._cancel_timers(group_id, member_id)
                removed += 1
        return removed

    def state_of(self, group_id: str) -> ConsumerGroupState | None:
        group = self.groups.get(group_id)
        return group.state if group is not None else None


def _is_subset(owned: Assignment | None, assigned: Assignment) -> bool:
    if owned is None:
        return True
    return all(parts <= assigned.get(topic, frozenset()) for topic, parts in owned.items())


def _reconcile(group: ConsumerGroup, member: ConsumerMember, owned: Assignment | None) -> ConsumerMember:
    from .reconciliation import next_member_state
    if member.member_epoch == STATIC_LEAVE_EPOCH:
        return member
    return next_member_state(member, group.assignment_epoch, group.target.get(member.member_id, {}),
                             lambda topic, partition: group.owner_of(topic, partition),
                             normalized(owned) if owned is not None else None)

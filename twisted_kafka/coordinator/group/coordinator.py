"""The group coordinator: classic group membership and committed offsets (Kafka's ``GroupCoordinator``).

One instance per broker coordinates the groups whose ``__consumer_offsets``
partition this broker leads.  It implements the classic rebalance protocol:

1. members send JoinGroup; the group goes to PreparingRebalance and waits
   (``DelayedJoin``) until every known member has rejoined or the rebalance
   timeout passes -- an empty group's first rebalance also waits
   ``group.initial.rebalance.delay.ms`` for more members;
2. the generation is bumped, the protocol chosen from those every member
   offers, and every member answered; the leader gets all members'
   metadata and computes the assignment (CompletingRebalance);
3. the leader's SyncGroup carries the assignment, which is written to the
   offsets topic; once durable, every member's SyncGroup is answered with its
   share and the group is Stable;
4. members heartbeat within their session timeout (``DelayedHeartbeat``); a
   heartbeat answered REBALANCE_IN_PROGRESS sends them back to step 1.

Membership changes that start a rebalance: a new member joining, a member
leaving (LeaveGroup), a member's session expiring, a member changing its
subscription, the leader rejoining.  Static members (``group.instance.id``,
KIP-345) survive restarts: a static member rejoining under its instance id
takes its place with a new member id and, when the group is Stable and the
chosen protocol stays the same, without a rebalance; requests from the
replaced member id are answered FENCED_INSTANCE_ID.

JoinGroup v4+ (KIP-394): a member without an id is given one and answered
MEMBER_ID_REQUIRED; it becomes a member when it rejoins with that id.

Offsets: OffsetCommit from a member is checked against the generation and
member id (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); a
commit with generation -1 and no member id comes from a consumer that only
stores offsets (assign() rather than subscribe(), or an admin tool) and is
accepted while the group has no members.  Commits are answered once durable.

Consumer groups of the consumer rebalance protocol (KIP-848) live beside
the classic ones, in ``consumer`` (``ConsumerGroupCoordinator``); a group id
is one or the other.  Their committed offsets are kept like any group's
(an Empty classic group holds them), checked against the member epoch
(STALE_MEMBER_EPOCH).  DescribeGroups, ListGroups (with the group type,
KIP-1043) and DeleteGroups show and delete both kinds.

Every call answers the errors Kafka answers; timing runs on ``clock``
(``IReactorTime``), so ``task.Clock`` drives it in tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger

from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.exceptions import ProtocolDecodeError
from twisted_kafka.purgatory import Purgatory

from .config import ConsumerGroupConfig, GroupConfig, OffsetConfig
from .consumer_coordinator import ConsumerGroupCoordinator, HeartbeatRequest, TopicSource
from .consumer_group import ConsumerGroup
from .consumer_load import consumer_groups_of
from .consumer_member import ClassicMember, ConsumerMember
from .consumer_protocol_formats import decode_subscription, encode_assignment, encode_subscription
from .consumer_results import ConsumerGroupDescription, HeartbeatResult
from .delayed import DelayedHeartbeat, DelayedJoin, DelayedSync, InitialDelayedJoin, join_key, member_key, sync_key
from .group import GroupMetadata, OffsetAndMetadata, TopicPartition, assigned_partitions_of
from .manager import GroupMetadataManager
from .member import MemberMetadata
from .records import encode_group_metadata_key
from .results import (
    NO_MEMBER_ID,
    GroupOverview,
    GroupSummary,
    JoinGroupResult,
    LeaveGroupResult,
    LeaveMemberResult,
    MemberSummary,
    OffsetFetchResult,
    SyncGroupResult,
)
from .state import GroupState
from .txn_offsets import TransactionalOffsets
from .writer import CoordinatorWriter

log = Logger(namespace="twisted_kafka.coordinator.group.GroupCoordinator")

#: New members cannot heartbeat before their first JoinGroup answer; if one disconnects
#: during a long rebalance it would stay forever, so a new member's join times out after this.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000

# APIs, for the group id checks (OffsetCommit, OffsetFetch, DescribeGroups and DeleteGroups
# accept the empty group id, as Kafka does for old tools).
JOIN_GROUP, SYNC_GROUP, HEARTBEAT, LEAVE_GROUP = "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup"
OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, DELETE_GROUPS = "OffsetCommit", "OffsetFetch", "DescribeGroups", \
    "DeleteGroups"
OFFSET_DELETE = "OffsetDelete"
CONSUMER_GROUP_HEARTBEAT = "ConsumerGroupHeartbeat"
_EMPTY_ID_ALLOWED = frozenset({OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, DELETE_GROUPS})

JoinCallback = Callable[[JoinGroupResult], None]
SyncCallback = Callable[[SyncGroupResult], None]


class GroupCoordinator:
    def __init__(self, *, group_config: GroupConfig, offset_config: OffsetConfig, writer: CoordinatorWriter,
                 clock, broker_id: int = 0, consumer_config: ConsumerGroupConfig | None = None,
                 topics: TopicSource | None = None):
        self.broker_id = broker_id
        self.group_config = group_config
        self.offset_config = offset_config
        self.clock = clock
        self.manager = GroupMetadataManager(config=offset_config, writer=writer, clock=clock)
        # Offsets committed in transactions, pending until their marker (TxnOffsetCommit).
        self.transactional_offsets = TransactionalOffsets(self)
        self.manager.pending_transactional_offset = self.transactional_offsets.has_pending
        self.heartbeat_purgatory = Purgatory(clock, "Heartbeat")
        self.rebalance_purgatory = Purgatory(clock, "Rebalance")
        self.active = False
        self.completed_rebalances = 0
        self.consumer = ConsumerGroupCoordinator(config=consumer_config or ConsumerGroupConfig(),
                                                 manager=self.manager, clock=clock, topics=topics)
        self.consumer.upgrade = self._upgrade_to_consumer_group
        self.consumer.downgrade = self._downgrade_to_classic_group

    # -- lifecycle -------------------------------------------------------------------------------

    def startup(self) -> None:
        self.active = True

    def shutdown(self) -> None:
        """Stop coordinating (the broker stops), as when every offsets partition's leadership moves away.

        Every group is unloaded: a member waiting in JoinGroup for the rest of
        its group, or in SyncGroup for its leader's assignment, is answered
        NOT_COORDINATOR now -- nothing can complete those waits once the
        broker reads no more requests, and a member told so looks for its
        coordinator again, where the group is loaded from ``__consumer_offsets``.
        Later requests are answered COORDINATOR_NOT_AVAILABLE, and the
        purgatories shut down: their operations are dropped (each member
        was answered by the unload), their timers stop.  Idempotent.
        """
        if self.active:
            self.active = False
            unloaded = self.manager.unload_all(self._on_group_unloaded) + self.consumer.unload_partition(None)
            if unloaded:
                log.info("Group coordinator stopped: {n} group(s) unloaded", n=unloaded)
        self.heartbeat_purgatory.shutdown()
        self.rebalance_purgatory.shutdown()

    def partition_for(self, group_id: str) -> int:
        return self.manager.partition_for(group_id)

    def now_ms(self) -> int:
        return int(self.clock.seconds() * 1000)

    # -- checks ----------------------------------------------------------------------------------

    def _validate_group_status(self, group_id: str | None, api: str) -> ErrorCode | None:
        if group_id is None or (not group_id and api not in _EMPTY_ID_ALLOWED):
            return ErrorCode.INVALID_GROUP_ID
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if self.manager.is_group_loading(group_id):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if not self.manager.is_group_local(group_id):
            return ErrorCode.NOT_COORDINATOR
        return None

    @staticmethod
    def _validate_current_member(group: GroupMetadata, member_id: str, group_instance_id: str | None,
                                 operation: str) -> ErrorCode | None:
        """A static member's instance id must map to ``member_id`` (else it was replaced:
        FENCED_INSTANCE_ID); the member must exist."""
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            if current != member_id:
                log.info("Member {member} of static instance {instance} is fenced by {current} during {op}",
                         member=member_id, instance=group_instance_id, current=current, op=operation)
                return ErrorCode.FENCED_INSTANCE_ID
            return None
        if not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        return None

    def _accept_joining_member(self, group: GroupMetadata, member_id: str) -> bool:
        state = group.state
        if state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if state is GroupState.PREPARING_REBALANCE:
            # The number of members waiting is what counts: the group may be over a max
            # size that was just lowered, and this keeps out the last ones to rejoin.
            return ((group.has(member_id) and group.get(member_id).is_awaiting_join)
                    or group.num_awaiting_join < self.group_config.max_size)
        return group.has(member_id) or group.size < self.group_config.max_size

    # -- JoinGroup ------------------------------------------------------------------------------

    def join_group(self, group_id: str, member_id: str, group_instance_id: str | None, *,
                   require_known_member_id: bool, support_skip_assignment: bool, client_id: str,
                   client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                   protocols: list[tuple[str, bytes]], reason: str | None = None) -> Deferred:
        """Fires with the ``JoinGroupResult`` (at once for errors, after the rebalance otherwise)."""
        d: Deferred = Deferred()
        self.handle_join_group(group_id, member_id, group_instance_id, require_known_member_id,
                               support_skip_assignment, client_id, client_host, rebalance_timeout_ms,
                               session_timeout_ms, protocol_type, protocols, d.callback, reason or "not provided")
        return d

    def handle_join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                          require_known_member_id: bool, support_skip_assignment: bool, client_id: str,
                          client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                          protocols: list[tuple[str, bytes]], callback: JoinCallback, reason: str) -> None:
        error = self._validate_group_status(group_id, JOIN_GROUP)
        if error is not None:
            callback(JoinGroupResult(member_id, error))
            return
        if not (self.group_config.min_session_timeout_ms <= session_timeout_ms
                <= self.group_config.max_session_timeout_ms):
            callback(JoinGroupResult(member_id, ErrorCode.INVALID_SESSION_TIMEOUT))
            return
        consumer_group = self.consumer.get(group_id)
        if consumer_group is not None and not consumer_group.dead:
            if consumer_group.members:
                # A classic member of a consumer group (KIP-848's online migration).
                self.consumer.classic.join(
                    consumer_group, member_id, group_instance_id, require_known_member_id=require_known_member_id,
                    client_id=client_id, client_host=client_host, rebalance_timeout_ms=rebalance_timeout_ms,
                    session_timeout_ms=session_timeout_ms, protocol_type=protocol_type,
                    protocols=protocols).addCallback(callback)
                return
            self.consumer.delete_empty(group_id)    # an Empty consumer group becomes a classic one
        is_unknown_member = member_id == NO_MEMBER_ID
        group = self.manager.get_or_maybe_create_group(group_id, create=is_unknown_member)
        if group is None:
            callback(JoinGroupResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
            return
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            callback(JoinGroupResult(NO_MEMBER_ID, ErrorCode.GROUP_MAX_SIZE_REACHED))
        elif is_unknown_member:
            self._do_new_member_join(group, group_instance_id, require_known_member_id, support_skip_assignment,
                                     client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                                     protocol_type, protocols, callback, reason)
        else:
            self._do_current_member_join(group, member_id, group_instance_id, client_id, client_host,
                                         rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols,
                                         callback, reason)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    def _do_new_member_join(self, group: GroupMetadata, group_instance_id: str | None,
                            require_known_member_id: bool, support_skip_assignment: bool, client_id: str,
                            client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                            protocol_type: str, protocols: list[tuple[str, bytes]], callback: JoinCallback,
                            reason: str) -> None:
        if group.is_state(GroupState.DEAD):
            # Removed meanwhile (moved to another coordinator, or deleted): the member looks again.
            callback(JoinGroupResult(NO_MEMBER_ID, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            callback(JoinGroupResult(NO_MEMBER_ID, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        new_member_id = group.generate_member_id(client_id, group_instance_id)
        if group_instance_id is not None:
            old_member_id = group.current_static_member_id(group_instance_id)
            if old_member_id is not None:
                log.info("Static member {instance} of group {group} rejoins in state {state}; replacing member "
                         "id {old} by {new}", instance=group_instance_id, group=group.group_id, state=group.state,
                         old=old_member_id, new=new_member_id)
                self._update_static_member_and_rebalance(group, old_member_id, new_member_id, group_instance_id,
                                                         protocols, rebalance_timeout_ms, session_timeout_ms,
                                                         callback, reason, support_skip_assignment)
            else:
                self._add_member_and_rebalance(rebalance_timeout_ms, session_timeout_ms, new_member_id,
                                               group_instance_id, client_id, client_host, protocol_type, protocols,
                                               group, callback, reason)
        elif require_known_member_id:
            # KIP-394: the member gets its id now and becomes a member when it rejoins with it.
            group.add_pending_member(new_member_id)
            self._add_pending_member_expiration(group, new_member_id, session_timeout_ms)
            callback(JoinGroupResult(new_member_id, ErrorCode.MEMBER_ID_REQUIRED))
        else:
            self._add_member_and_rebalance(rebalance_timeout_ms, session_timeout_ms, new_member_id, None, client_id,
                                           client_host, protocol_type, protocols, group, callback, reason)

    def _do_current_member_join(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                                client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                                protocol_type: str, protocols: list[tuple[str, bytes]], callback: JoinCallback,
                                reason: str) -> None:
        if group.is_state(GroupState.DEAD):
            callback(JoinGroupResult(member_id, ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            callback(JoinGroupResult(member_id, ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
            return
        if group.is_pending_member(member_id):
            if group_instance_id is not None:
                # A pending member was given its id as a dynamic member; it cannot claim an instance id now.
                callback(JoinGroupResult(member_id, ErrorCode.FENCED_INSTANCE_ID))
                return
            self._add_member_and_rebalance(rebalance_timeout_ms, session_timeout_ms, member_id, None, client_id,
                                           client_host, protocol_type, protocols, group, callback, reason)
            return
        error = self._validate_current_member(group, member_id, group_instance_id, "join-group")
        if error is not None:
            callback(JoinGroupResult(member_id, error))
            return
        member = group.get(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                              f"member {member_id} joining during {state}; reason: {reason}",
                                              callback)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protocols):
                # The same metadata again (it missed the first answer): answer as then.
                callback(JoinGroupResult(
                    member_id, ErrorCode.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                    group.leader_id or "",
                    group.current_member_metadata() if group.is_leader(member_id) else []))
            else:
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                                  f"member {member_id} changed its metadata; reason: {reason}",
                                                  callback)
        elif state is GroupState.STABLE:
            if group.is_leader(member_id):
                # The leader rejoining forces a rebalance: that is how it reacts to changes its
                # assignment depends on that members' metadata does not show (new partitions).
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                                  f"leader {member_id} rejoining; reason: {reason}", callback)
            elif not member.matches(protocols):
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms,
                                                  f"member {member_id} changed its metadata; reason: {reason}",
                                                  callback)
            else:
                callback(JoinGroupResult(member_id, ErrorCode.NONE, group.generation_id, group.protocol_type,
                                         group.protocol_name, group.leader_id or "", []))
        else:
            log.warn("Member {member} rejoins group {group} in unexpected state {state}", member=member_id,
                     group=group.group_id, state=state)
            callback(JoinGroupResult(member_id, ErrorCode.UNKNOWN_MEMBER_ID))

    def _add_member_and_rebalance(self, rebalance_timeout_ms: int, session_timeout_ms: int, member_id: str,
                                  group_instance_id: str | None, client_id: str, client_host: str,
                                  protocol_type: str, protocols: list[tuple[str, bytes]], group: GroupMetadata,
                                  callback: JoinCallback, reason: str) -> None:
        member = MemberMetadata(member_id, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, protocols)
        member.is_new = True
        if group.is_state(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True       # the initial delay may be extended
        group.add(member, callback)
        self._complete_and_schedule_next_expiration(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"adding new member {member_id} with group instance id "
                                             f"{group_instance_id}; reason: {reason}")

    def _update_static_member_and_rebalance(self, group: GroupMetadata, old_member_id: str, new_member_id: str,
                                            group_instance_id: str, protocols: list[tuple[str, bytes]],
                                            rebalance_timeout_ms: int, session_timeout_ms: int,
                                            callback: JoinCallback, reason: str,
                                            support_skip_assignment: bool) -> None:
        current_leader = group.leader_id
        member = group.replace_static_member(group_instance_id, old_member_id, new_member_id)
        # The old id's heartbeat expires harmlessly (no such member any more); the new id gets its own.
        self._complete_and_schedule_next_heartbeat_expiration(group, member)
        old_rebalance_timeout, old_session_timeout = member.rebalance_timeout_ms, member.session_timeout_ms
        old_protocols = member.supported_protocols
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        state = group.state
        if state is GroupState.STABLE:
            if group.protocol_name == group.select_protocol():
                log.info("Static member {instance} of group {group} rejoined without changing the protocol: "
                         "no rebalance", instance=group_instance_id, group=group.group_id)
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                stored = self.manager.store_group(group, assignment)

                def stored_group(error: ErrorCode) -> None:
                    if error is not ErrorCode.NONE:
                        log.warn("Cannot persist the new member id of static member {instance} of {group}: "
                                 "{error}", instance=group_instance_id, group=group.group_id, error=error.name)
                        group.update_member(member, old_protocols, old_rebalance_timeout, old_session_timeout,
                                            None)
                        old = group.replace_static_member(group_instance_id, new_member_id, old_member_id)
                        self._complete_and_schedule_next_heartbeat_expiration(group, old)
                        callback(JoinGroupResult(NO_MEMBER_ID, error, group.generation_id, group.protocol_type,
                                                 group.protocol_name, current_leader or ""))
                    elif support_skip_assignment:
                        # JoinGroup v9+: the static leader learns it leads, but skips assigning.
                        is_leader = group.is_leader(new_member_id)
                        group.maybe_invoke_join_callback(member, JoinGroupResult(
                            new_member_id, ErrorCode.NONE, group.generation_id, group.protocol_type,
                            group.protocol_name, group.leader_id or "",
                            group.current_member_metadata() if is_leader else [], skip_assignment=is_leader))
                    else:
                        # Before v9 the old leader id is returned, so a returning leader does not run an
                        # assignment that a Stable group would never hand out.
                        group.maybe_invoke_join_callback(member, JoinGroupResult(
                            new_member_id, ErrorCode.NONE, group.generation_id, group.protocol_type,
                            group.protocol_name, current_leader or "", []))

                stored.addCallback(stored_group)
            else:
                self._maybe_prepare_rebalance(group, f"static member {group_instance_id} rejoined with a change of "
                                                     f"protocol; reason: {reason}")
        elif state is GroupState.COMPLETING_REBALANCE:
            # The leader may already have the old member id: rebalance again so the new id gets a share.
            self._prepare_rebalance(group, f"static member {group_instance_id} rejoined during "
                                           f"CompletingRebalance; reason: {reason}")
        elif state in (GroupState.EMPTY, GroupState.DEAD):
            raise RuntimeError(f"Group {group.group_id} in state {state} when static member {group_instance_id} "
                               "rejoined")

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                                     session_timeout_ms: int, reason: str, callback: JoinCallback) -> None:
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, callback)
        self._maybe_prepare_rebalance(group, reason)

    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance:
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_state(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.REBALANCE_IN_PROGRESS)
        self._remove_sync_expiration(group)
        delay = self.group_config.initial_rebalance_delay_ms
        operation: DelayedJoin
        if group.is_state(GroupState.EMPTY):
            operation = InitialDelayedJoin(self, self.rebalance_purgatory, group, delay, delay,
                                           max(group.rebalance_timeout_ms - delay, 0))
        else:
            operation = DelayedJoin(self, group, group.rebalance_timeout_ms)
        previous = group.state
        group.transition_to(GroupState.PREPARING_REBALANCE)
        log.info("Preparing to rebalance group {group} in state {state} with old generation {generation} "
                 "(__consumer_offsets-{partition}) (reason: {reason})", group=group.group_id, state=previous,
                 generation=group.generation_id, partition=self.partition_for(group.group_id), reason=reason)
        self.rebalance_purgatory.try_complete_else_watch(operation, [join_key(group.group_id)])

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        # A new member may still be waiting for its JoinGroup answer: it gets UNKNOWN_MEMBER_ID and rejoins.
        group.maybe_invoke_join_callback(member, JoinGroupResult(NO_MEMBER_ID, ErrorCode.UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        state = group.state
        if state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance(group, reason)
        elif state is GroupState.PREPARING_REBALANCE:
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    def _remove_pending_member_and_update_group(self, group: GroupMetadata, member_id: str) -> None:
        group.remove(member_id)
        if group.is_state(GroupState.PREPARING_REBALANCE):
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))

    # the DelayedJoin callbacks

    def try_complete_join(self, group: GroupMetadata, force_complete: Callable[[], bool]) -> bool:
        if group.has_all_members_joined:
            return force_complete()
        return False

    def on_complete_join(self, group: GroupMetadata) -> None:
        for member in [m for m in group.not_yet_rejoined_members() if not m.is_static]:
            log.info("Group {group} removes member {member}, which did not rejoin in time", group=group.group_id,
                     member=member.member_id)
            group.remove(member.member_id)
            self._remove_heartbeat_for_leaving_member(group, member.member_id)
        if group.is_state(GroupState.DEAD):
            log.info("Group {group} is dead, skipping the rebalance", group=group.group_id)
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # No member rejoined (only static members that have not come back): wait again until
            # their sessions expire and they are removed.
            log.error("Group {group} could not complete its rebalance: no member rejoined", group=group.group_id)
            self.rebalance_purgatory.try_complete_else_watch(
                DelayedJoin(self, group, group.rebalance_timeout_ms), [join_key(group.group_id)])
            return
        group.init_next_generation()
        if group.is_state(GroupState.EMPTY):
            log.info("Group {group} with generation {generation} is now empty (__consumer_offsets-{partition})",
                     group=group.group_id, generation=group.generation_id,
                     partition=self.partition_for(group.group_id))

            def stored(error: ErrorCode) -> None:
                if error is not ErrorCode.NONE:
                    # The previous generation stays in the log; it has no live members, so it is harmless.
                    log.warn("Cannot write the empty metadata of group {group}: {error}", group=group.group_id,
                             error=error.name)

            self.manager.store_group(group, {}).addCallback(stored)
            return
        log.info("Stabilized group {group} generation {generation} (__consumer_offsets-{partition}) with "
                 "{n} member(s), protocol {protocol}", group=group.group_id, generation=group.generation_id,
                 partition=self.partition_for(group.group_id), n=group.size, protocol=group.protocol_name)
        for member in list(group.members.values()):
            result = JoinGroupResult(
                member.member_id, ErrorCode.NONE, group.generation_id, group.protocol_type, group.protocol_name,
                group.leader_id or "",
                group.current_member_metadata() if group.is_leader(member.member_id) else [])
            group.maybe_invoke_join_callback(member, result)
            self._complete_and_schedule_next_heartbeat_expiration(group, member)
            member.is_new = False
            group.add_pending_sync_member(member.member_id)
        self._schedule_pending_sync(group)

    # -- SyncGroup ----------------------------------------------------------------------------------

    def sync_group(self, group_id: str, generation_id: int, member_id: str, protocol_type: str | None,
                   protocol_name: str | None, group_instance_id: str | None,
                   assignments: dict[str, bytes]) -> Deferred:
        """Fires with the ``SyncGroupResult`` (for followers, once the leader's assignment is stored)."""
        d: Deferred = Deferred()
        self.handle_sync_group(group_id, generation_id, member_id, protocol_type, protocol_name, group_instance_id,
                               assignments, d.callback)
        return d

    def handle_sync_group(self, group_id: str, generation_id: int, member_id: str, protocol_type: str | None,
                          protocol_name: str | None, group_instance_id: str | None, assignments: dict[str, bytes],
                          callback: SyncCallback) -> None:
        error = self._validate_group_status(group_id, SYNC_GROUP)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            # The rebalance state was lost with the load: the member rejoins right away.
            callback(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
            return
        if error is not None:
            callback(SyncGroupResult(error))
            return
        consumer_group = self.consumer.get(group_id)
        if consumer_group is not None and not consumer_group.dead:
            callback(self.consumer.classic.sync(consumer_group, member_id, generation_id, group_instance_id,
                                                protocol_type, protocol_name))
            return
        group = self.manager.get_group(group_id)
        if group is None:
            callback(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
            return
        if group.is_state(GroupState.DEAD):
            callback(SyncGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            return
        error = self._validate_current_member(group, member_id, group_instance_id, "sync-group")
        if error is None:
            if generation_id != group.generation_id:
                error = ErrorCode.ILLEGAL_GENERATION
            elif ((protocol_type is not None and protocol_type != group.protocol_type)
                  or (protocol_name is not None and protocol_name != group.protocol_name)):
                error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if error is not None:
            callback(SyncGroupResult(error))
            return
        state = group.state
        if state is GroupState.EMPTY:
            callback(SyncGroupResult(ErrorCode.UNKNOWN_MEMBER_ID))
        elif state is GroupState.PREPARING_REBALANCE:
            callback(SyncGroupResult(ErrorCode.REBALANCE_IN_PROGRESS))
        elif state is GroupState.COMPLETING_REBALANCE:
            group.get(member_id).awaiting_sync = callback
            self._remove_pending_sync_member(group, member_id)
            if group.is_leader(member_id):
                log.info("Assignment received from leader {member} of group {group} for generation {generation}; "
                         "{n} member(s), {static} static", member=member_id, group=group.group_id,
                         generation=group.generation_id, n=group.size, static=len(group.static_members))
                missing = [m for m in group.members if m not in assignments]
                if missing:
                    log.warn("Empty assignments for members {missing} of group {group}, generation {generation}",
                             missing=missing, group=group.group_id, generation=group.generation_id)
                assignment = {m: assignments.get(m, b"") for m in group.members}
                stored = self.manager.store_group(group, assignment)

                def stored_group(error: ErrorCode) -> None:
                    # Another member may have joined meanwhile: act only on the same generation.
                    if not (group.is_state(GroupState.COMPLETING_REBALANCE) and generation_id == group.generation_id):
                        return
                    if error is not ErrorCode.NONE:
                        self._reset_and_propagate_assignment_error(group, error)
                        self._maybe_prepare_rebalance(group, f"error {error.name} when storing the assignment "
                                                             f"(member {member_id})")
                    else:
                        self._set_and_propagate_assignment(group, assignment)
                        group.transition_to(GroupState.STABLE)

                stored.addCallback(stored_group)
                self.completed_rebalances += 1
        elif state is GroupState.STABLE:
            self._remove_pending_sync_member(group, member_id)
            member = group.get(member_id)
            callback(SyncGroupResult(ErrorCode.NONE, member.assignment, group.protocol_type, group.protocol_name))
            self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def _set_and_propagate_assignment(self, group: GroupMetadata, assignment: dict[str, bytes]) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.NONE)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: GroupMetadata, error: ErrorCode) -> None:
        ok = error is ErrorCode.NONE
        for member in list(group.members.values()):
            result = SyncGroupResult(error, member.assignment, group.protocol_type if ok else None,
                                     group.protocol_name if ok else None)
            if group.maybe_invoke_sync_callback(member, result):
                # A session may have expired while the member waited (expirations are ignored then):
                # restart it now that the member has its answer.
                self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def _remove_pending_sync_member(self, group: GroupMetadata, member_id: str) -> None:
        group.remove_pending_sync_member(member_id)
        self.rebalance_purgatory.check_and_complete(sync_key(group.group_id))

    def _remove_sync_expiration(self, group: GroupMetadata) -> None:
        group.pending_sync_members.clear()
        self.rebalance_purgatory.check_and_complete(sync_key(group.group_id))

    def _schedule_pending_sync(self, group: GroupMetadata) -> None:
        self.rebalance_purgatory.try_complete_else_watch(
            DelayedSync(self, group, group.generation_id, group.rebalance_timeout_ms), [sync_key(group.group_id)])

    def try_complete_pending_sync(self, group: GroupMetadata, generation_id: int,
                                  force_complete: Callable[[], bool]) -> bool:
        if generation_id != group.generation_id:
            return force_complete()
        if group.state in (GroupState.DEAD, GroupState.EMPTY, GroupState.PREPARING_REBALANCE):
            return force_complete()
        if group.has_received_sync_from_all_members:
            return force_complete()
        return False

    def on_expire_pending_sync(self, group: GroupMetadata, generation_id: int) -> None:
        if generation_id != group.generation_id:
            return
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) \
                and not group.has_received_sync_from_all_members:
            missing = sorted(group.pending_sync_members)
            for member_id in missing:
                group.remove(member_id)
                self._remove_heartbeat_for_leaving_member(group, member_id)
            self._prepare_rebalance(group, f"removing {missing}, which sent no SyncGroup in time")

    # -- Heartbeat -------------------------------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode:
        error = self._validate_group_status(group_id, HEARTBEAT)
        if error is ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
            return ErrorCode.NONE           # the group is still loading: answer blindly
        if error is not None:
            return error
        consumer_group = self.consumer.get(group_id)
        if consumer_group is not None and not consumer_group.dead:
            return self.consumer.classic.heartbeat(
                consumer_group, member_id, group_instance_id, generation_id,
                lambda member, owned: self.consumer.reconcile(consumer_group, member, owned))
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        error = self._validate_current_member(group, member_id, group_instance_id, "heartbeat")
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        state = group.state
        if state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
        if state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def _complete_and_schedule_next_heartbeat_expiration(self, group: GroupMetadata, member: MemberMetadata) -> None:
        self._complete_and_schedule_next_expiration(group, member, member.session_timeout_ms)

    def _complete_and_schedule_next_expiration(self, group: GroupMetadata, member: MemberMetadata,
                                               timeout_ms: int) -> None:
        key = member_key(group.group_id, member.member_id)
        member.heartbeat_satisfied = True
        self.heartbeat_purgatory.check_and_complete(key)
        member.heartbeat_satisfied = False
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member.member_id, False, timeout_ms), [key])

    def _add_pending_member_expiration(self, group: GroupMetadata, member_id: str, timeout_ms: int) -> None:
        self.heartbeat_purgatory.try_complete_else_watch(
            DelayedHeartbeat(self, group, member_id, True, timeout_ms), [member_key(group.group_id, member_id)])

    def _remove_heartbeat_for_leaving_member(self, group: GroupMetadata, member_id: str) -> None:
        self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member_id))

    def try_complete_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool,
                               force_complete: Callable[[], bool]) -> bool:
        if group.is_state(GroupState.DEAD):
            return force_complete()
        if is_pending:
            return force_complete() if group.has(member_id) else False
        if not group.has(member_id) or group.get(member_id).has_satisfied_heartbeat():
            return force_complete()
        return False

    def on_expire_heartbeat(self, group: GroupMetadata, member_id: str, is_pending: bool) -> None:
        if group.is_state(GroupState.DEAD):
            return
        if is_pending:
            log.info("Pending member {member} of group {group} is removed: it did not rejoin within its session "
                     "timeout", member=member_id, group=group.group_id)
            self._remove_pending_member_and_update_group(group, member_id)
            return
        if not group.has(member_id):
            return
        member = group.get(member_id)
        if not member.has_satisfied_heartbeat():
            log.info("Member {member} of group {group} has failed (session timeout of {ms} ms), removing it",
                     member=member_id, group=group.group_id, ms=member.session_timeout_ms)
            self._remove_member_and_update_group(group, member, f"removing member {member_id} on heartbeat "
                                                                "expiration")

    # -- LeaveGroup ------------------------------------------------------------------------------------

    def leave_group(self, group_id: str, members: Iterable[tuple[str, str | None, str | None]]) -> LeaveGroupResult:
        """``members`` are ``(member_id, group_instance_id, reason)``; a member id "" with an instance id
        removes that static member (an administrator's request)."""
        members = list(members)
        error = self._validate_group_status(group_id, LEAVE_GROUP)
        if error is not None:
            return LeaveGroupResult(error)
        consumer_group = self.consumer.get(group_id)
        if consumer_group is not None and not consumer_group.dead:
            return LeaveGroupResult(ErrorCode.NONE, [self.consumer.classic.leave(consumer_group, m, i)
                                                     for m, i, _ in members])
        group = self.manager.get_group(group_id)
        if group is None:
            return LeaveGroupResult(ErrorCode.NONE, [LeaveMemberResult(m, i, ErrorCode.UNKNOWN_MEMBER_ID)
                                                     for m, i, _ in members])
        if group.is_state(GroupState.DEAD):
            return LeaveGroupResult(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        results = []
        for member_id, instance_id, reason in members:
            if member_id == NO_MEMBER_ID:
                current = group.current_static_member_id(instance_id) if instance_id is not None else None
                if current is None:
                    results.append(LeaveMemberResult(member_id, instance_id, ErrorCode.UNKNOWN_MEMBER_ID))
                    continue
                self._remove_current_member(group, current, reason)
                results.append(LeaveMemberResult(member_id, instance_id, ErrorCode.NONE))
            elif group.is_pending_member(member_id):
                self._remove_pending_member_and_update_group(group, member_id)
                self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member_id))
                log.info("Pending member {member} has left group {group}", member=member_id, group=group.group_id)
                results.append(LeaveMemberResult(member_id, instance_id, ErrorCode.NONE))
            else:
                error = self._validate_current_member(group, member_id, instance_id, "leave-group")
                if error is None:
                    self._remove_current_member(group, member_id, reason)
                    error = ErrorCode.NONE
                results.append(LeaveMemberResult(member_id, instance_id, error))
        return LeaveGroupResult(ErrorCode.NONE, results)

    def _remove_current_member(self, group: GroupMetadata, member_id: str, reason: str | None) -> None:
        member = group.get(member_id)
        self._remove_member_and_update_group(group, member, f"removing member {member_id} on LeaveGroup; "
                                                            f"reason: {reason or 'not provided'}")
        self._remove_heartbeat_for_leaving_member(group, member_id)
        log.info("Member {member} has left group {group} through LeaveGroup; reason: {reason}", member=member_id,
                 group=group.group_id, reason=reason or "not provided")

    # -- OffsetCommit / OffsetFetch / OffsetDelete -------------------------------------------------------

    def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                       offsets: dict[TopicPartition, OffsetAndMetadata], *, api_version: int = 8) -> Deferred:
        """Fires with ``{partition: ErrorCode}`` once the commit is durable (or refused)."""
        error = self._validate_group_status(group_id, OFFSET_COMMIT)
        if error is not None:
            return succeed(dict.fromkeys(offsets, error))
        if self.consumer.is_consumer_group(group_id):
            return self._commit_consumer_group_offsets(group_id, member_id, generation_id, offsets, api_version)
        group = self.manager.get_group(group_id)
        if group is None:
            if generation_id >= 0:
                # A member of a generation this coordinator does not know (the group expired or moved):
                # OffsetCommit v9+ says so (GROUP_ID_NOT_FOUND), older versions ILLEGAL_GENERATION.
                error = ErrorCode.GROUP_ID_NOT_FOUND if api_version >= 9 else ErrorCode.ILLEGAL_GENERATION
                return succeed(dict.fromkeys(offsets, error))
            log.info("Creating simple consumer group {group} for a manual offset commit", group=group_id)
            group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.manager.now_ms))
        error = self._validate_offset_commit(group, generation_id, member_id, group_instance_id)
        if error is not None:
            return succeed(dict.fromkeys(offsets, error))
        state = group.state
        if state is GroupState.COMPLETING_REBALANCE:
            # The member knows the new generation from its JoinGroup answer but has no assignment yet.
            return succeed(dict.fromkeys(offsets, ErrorCode.REBALANCE_IN_PROGRESS))
        if state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE) and group.has(member_id):
            # A commit shows the member is alive; during PreparingRebalance it is still accepted,
            # the member learns of the rebalance from its next heartbeat.
            self._complete_and_schedule_next_heartbeat_expiration(group, group.get(member_id))
        return self.manager.store_offsets(group, offsets)

    def _validate_offset_commit(self, group: GroupMetadata, generation_id: int, member_id: str,
                                group_instance_id: str | None) -> ErrorCode | None:
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.is_state(GroupState.EMPTY):
            return None         # an admin client or a consumer without group management
        if generation_id >= 0 or member_id != NO_MEMBER_ID or group_instance_id is not None:
            error = self._validate_current_member(group, member_id, group_instance_id, "offset-commit")
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.ILLEGAL_GENERATION
            return None
        if not group.is_state(GroupState.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID      # only members commit while the group has members
        return None

    def fetch_offsets(self, group_id: str, require_stable: bool,
                      partitions: list[TopicPartition] | None) -> tuple[ErrorCode, dict[TopicPartition,
                                                                                       OffsetFetchResult]]:
        """The committed offsets of ``partitions`` (None: every partition with one), whatever the state."""
        error = self._validate_group_status(group_id, OFFSET_FETCH)
        if error is not None:
            return error, {}
        return ErrorCode.NONE, self.manager.get_offsets(group_id, require_stable, partitions)

    def delete_offsets(self, group_id: str,
                       partitions: list[TopicPartition]) -> Deferred:
        """OffsetDelete: fires with ``(group error, {partition: error})``."""
        error = self._validate_group_status(group_id, OFFSET_DELETE)
        if error is not None:
            return succeed((error, {}))
        group = self.manager.get_group(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            return succeed((ErrorCode.GROUP_ID_NOT_FOUND if self.manager.group_not_exists(group_id)
                            else ErrorCode.NOT_COORDINATOR, {}))
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_state(GroupState.EMPTY):
            eligible = list(partitions)
        elif group.is_consumer_group:
            eligible = [tp for tp in partitions if not group.is_subscribed_to_topic(tp[0])]
            errors.update({tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC for tp in partitions
                           if group.is_subscribed_to_topic(tp[0])})
        else:
            return succeed((ErrorCode.NON_EMPTY_GROUP, {}))
        if not eligible:
            return succeed((ErrorCode.NONE, errors))
        removed, written = self.manager.cleanup_group_metadata([group], lambda g: g.remove_offsets(eligible))
        errors.update(dict.fromkeys(eligible, ErrorCode.NONE))
        log.info("Deleted {n} offset(s) of group {group}", n=removed, group=group_id)
        written.addCallback(lambda _: (ErrorCode.NONE, errors))
        return written

    # -- DescribeGroups / ListGroups / DeleteGroups ------------------------------------------------------

    def describe_group(self, group_id: str) -> tuple[ErrorCode, GroupSummary]:
        error = self._validate_group_status(group_id, DESCRIBE_GROUPS)
        if error is not None:
            return error, GroupSummary("", "", "")
        if self.consumer.is_consumer_group(group_id):
            return ErrorCode.NONE, self._consumer_group_summary(self.consumer.describe(group_id))
        group = self.manager.get_group(group_id)
        if group is None:
            return ErrorCode.NONE, GroupSummary(str(GroupState.DEAD), "", "")
        if group.is_state(GroupState.STABLE):
            protocol = group.protocol_name or ""
            return ErrorCode.NONE, GroupSummary(str(group.state), group.protocol_type or "", protocol, [
                MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.metadata(protocol),
                              m.assignment) for m in group.members.values()])
        return ErrorCode.NONE, GroupSummary(str(group.state), group.protocol_type or "", "", [
            MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host, b"", b"")
            for m in group.members.values()])

    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> tuple[ErrorCode,
                                                                                          list[GroupOverview]]:
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.manager.is_loading else ErrorCode.NONE
        wanted_states = {s.lower() for s in states}
        wanted_types = {t.lower() for t in types}
        overviews = []
        if not wanted_types or "classic" in wanted_types:
            overviews += [GroupOverview(g.group_id, g.protocol_type or "", str(g.state))
                          for g in self.manager.current_groups if not self.consumer.is_consumer_group(g.group_id)
                          and (not wanted_states or str(g.state).lower() in wanted_states)]
        if not wanted_types or "consumer" in wanted_types:
            overviews += [GroupOverview(g.group_id, "consumer", str(g.state), "consumer")
                          for g in self.consumer.groups.values()
                          if not wanted_states or str(g.state).lower() in wanted_states]
        return error, overviews

    def delete_groups(self, group_ids: Iterable[str]) -> Deferred:
        """DeleteGroups: fires with ``{group_id: ErrorCode}`` once the tombstones are written."""
        errors: dict[str, ErrorCode] = {}
        eligible: list[GroupMetadata] = []
        for group_id in dict.fromkeys(group_ids):
            error = self._validate_group_status(group_id, DELETE_GROUPS)
            if error is not None:
                errors[group_id] = error
                continue
            if self.consumer.is_consumer_group(group_id):
                if self._consumer_group_members(group_id):
                    errors[group_id] = ErrorCode.NON_EMPTY_GROUP
                    continue
                self.consumer.delete_empty(group_id)
                if self.manager.get_group(group_id) is None:
                    errors[group_id] = ErrorCode.NONE
                    continue
            group = self.manager.get_group(group_id)
            if group is None or group.is_state(GroupState.DEAD):
                errors[group_id] = (ErrorCode.GROUP_ID_NOT_FOUND if self.manager.group_not_exists(group_id)
                                    else ErrorCode.NOT_COORDINATOR)
            elif group.is_state(GroupState.EMPTY):
                group.transition_to(GroupState.DEAD)
                eligible.append(group)
            else:
                errors[group_id] = ErrorCode.NON_EMPTY_GROUP
        if not eligible:
            return succeed(errors)
        removed, written = self.manager.cleanup_group_metadata(eligible, lambda g: g.remove_all_offsets())
        errors.update({g.group_id: ErrorCode.NONE for g in eligible})
        log.info("Deleted group(s) {groups}; {n} offset(s) removed", groups=", ".join(g.group_id for g in eligible),
                 n=removed)
        written.addCallback(lambda _: errors)
        return written

    # -- partitions of the offsets topic -------------------------------------------------------------

    def on_election(self, partition: int, epoch: int, read: Callable[[], Deferred]) -> Deferred | None:
        """This broker leads offsets ``partition`` from ``epoch``: load its groups."""
        log.debug("Elected as the group coordinator for partition {partition} in epoch {epoch}",
                 partition=partition, epoch=epoch)
        txn_offsets = self.transactional_offsets

        def read_and_take() -> Deferred:
            d = read()
            d.addCallback(txn_offsets.on_loaded, partition)
            d.addCallback(self._take_consumer_groups, partition)
            return d

        return self.manager.load_partition(partition, epoch, read_and_take, self._on_group_loaded)

    def _take_consumer_groups(self, loaded, partition: int):
        if self.manager.is_partition_loading(partition):
            for group in consumer_groups_of(loaded):
                self.consumer.load(group)
        return loaded

    def on_resignation(self, partition: int, epoch: int | None) -> None:
        log.info("Resigned as the group coordinator for partition {partition} in epoch {epoch}",
                 partition=partition, epoch=epoch)
        self.manager.remove_groups_for_partition(partition, epoch, self._on_group_unloaded)
        if partition not in self.manager.owned_partitions:
            self.consumer.unload_partition(partition)
            if partition not in self.manager.loading_partitions:
                self.transactional_offsets.on_unloaded(partition)

    def _on_group_loaded(self, group: GroupMetadata) -> None:
        if group.size > self.group_config.max_size:
            self._prepare_rebalance(group, f"freshly loaded group is over capacity ({self.group_config.max_size}); "
                                           "rebalancing so members can commit their offsets")
        for member in list(group.members.values()):
            self._complete_and_schedule_next_heartbeat_expiration(group, member)

    def _on_group_unloaded(self, group: GroupMetadata) -> None:
        previous = group.state
        group.transition_to(GroupState.DEAD)
        if previous is GroupState.PREPARING_REBALANCE:
            for member in list(group.members.values()):
                group.maybe_invoke_join_callback(member, JoinGroupResult(member.member_id, ErrorCode.NOT_COORDINATOR))
            self.rebalance_purgatory.check_and_complete(join_key(group.group_id))
        elif previous in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            for member in list(group.members.values()):
                group.maybe_invoke_sync_callback(member, SyncGroupResult(ErrorCode.NOT_COORDINATOR))
                self.heartbeat_purgatory.check_and_complete(member_key(group.group_id, member.member_id))
        self._remove_sync_expiration(group)

    def on_partitions_deleted(self, partitions: list[TopicPartition]) -> int:
        """Topics were deleted: their committed offsets go too."""
        removed, _ = self.manager.cleanup_group_metadata(self.manager.current_groups,
                                                         lambda g: g.remove_offsets(partitions))
        if removed:
            log.info("Removed {n} offset(s) of deleted partitions", n=removed)
        return removed

    def cleanup_expired_offsets(self) -> int:
        return self.manager.cleanup_expired_offsets()

    # -- introspection (metrics, tests) ------------------------------------------------------------

    def group(self, group_id: str) -> GroupMetadata | None:
        return self.manager.get_group(group_id)

    def state_counts(self) -> dict[str, Any]:
        counts: dict[str, int] = {str(s): 0 for s in GroupState}
        for group in self.manager.current_groups:
            counts[str(group.state)] += 1
        return counts

    # -- consumer groups (KIP-848) ---------------------------------------------------------------------

    def consumer_group_heartbeat(self, request: HeartbeatRequest) -> Deferred:
        """ConsumerGroupHeartbeat: fires with a ``HeartbeatResult``."""
        status = self._validate_group_status(request.group_id, CONSUMER_GROUP_HEARTBEAT) if request.group_id \
            else None
        return self.consumer.heartbeat(request, status)

    def consumer_group_describe(self, group_id: str) -> ConsumerGroupDescription:
        error = self._validate_group_status(group_id, DESCRIBE_GROUPS)
        if error is not None:
            return ConsumerGroupDescription(group_id, error)
        group = self.manager.get_group(group_id)
        if not self.consumer.is_consumer_group(group_id) and group is not None and group.size > 0:
            return ConsumerGroupDescription(group_id, ErrorCode.GROUP_ID_NOT_FOUND,
                                            f"Group {group_id} is not a consumer group.")
        return self.consumer.describe(group_id)

    def _consumer_group_members(self, group_id: str) -> int:
        group = self.consumer.get(group_id)
        return len(group.members) if group is not None else 0

    def _commit_consumer_group_offsets(self, group_id: str, member_id: str, member_epoch: int,
                                       offsets: dict[TopicPartition, OffsetAndMetadata], api_version: int) -> Deferred:
        """Kafka's ``ConsumerGroup.validateOffsetCommit``: a member commits with its current epoch
        (STALE_MEMBER_EPOCH otherwise); without a member, only while the group is Empty."""
        group = self.consumer.get(group_id)
        assert group is not None
        if not (member_epoch < 0 and not group.members):
            member = group.members.get(member_id)
            if member is None:
                return succeed(dict.fromkeys(offsets, ErrorCode.UNKNOWN_MEMBER_ID))
            if member.classic is not None:
                if member_epoch != member.member_epoch:        # a classic member's generation is its epoch
                    return succeed(dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION))
            elif api_version < 9:
                return succeed(dict.fromkeys(offsets, ErrorCode.UNSUPPORTED_VERSION))
            elif member_epoch != member.member_epoch:
                return succeed(dict.fromkeys(offsets, ErrorCode.STALE_MEMBER_EPOCH))
        holder = self.manager.get_or_maybe_create_group(group_id, create=True)
        assert holder is not None
        return self.manager.store_offsets(holder, offsets)

    def validate_consumer_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> ErrorCode:
        """OffsetFetch v9+ from a member of a consumer group: its epoch must be the current one."""
        group = self.consumer.get(group_id)
        if group is None or group.dead or (member_id is None and member_epoch < 0) or \
                (not member_id and member_epoch < 0):
            return ErrorCode.NONE
        member = group.members.get(member_id or "")
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return ErrorCode.NONE if member.member_epoch == member_epoch else ErrorCode.STALE_MEMBER_EPOCH

    def _upgrade_to_consumer_group(self, group_id: str, records: list) -> HeartbeatResult | None:
        """A consumer-protocol member joins classic group ``group_id`` (KIP-848's online upgrade): the
        group becomes a consumer group at its generation, its members classic members of it with the
        partitions they have; the classic group's record is deleted (``records`` gets the new
        group's records first).  Only a Stable group of the consumer protocol type converts."""
        group = self.manager.get_group(group_id)
        assert group is not None
        if (group.protocol_type or "") != "consumer":
            return HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND,
                                   f"Group {group_id} is a classic group of protocol type {group.protocol_type}.")
        if not group.is_state(GroupState.STABLE) or group.protocol_name is None:
            return HeartbeatResult(ErrorCode.REBALANCE_IN_PROGRESS,
                                   f"Classic group {group_id} is rebalancing; it converts once it is stable.")
        members = []
        for m in group.members.values():
            try:
                subscription = decode_subscription(m.metadata(group.protocol_name))
            except ProtocolDecodeError:
                return HeartbeatResult(ErrorCode.GROUP_ID_NOT_FOUND,
                                       f"Member {m.member_id} of {group_id} has no consumer subscription.")
            owned: dict[str, set[int]] = {}
            for topic, partition in assigned_partitions_of(m.assignment):
                owned.setdefault(topic, set()).add(partition)
            assigned = self.consumer.classic.ids_of({t: frozenset(p) for t, p in owned.items()})
            members.append(ConsumerMember(
                member_id=m.member_id, instance_id=m.group_instance_id, rack_id=subscription.rack,
                client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=tuple(sorted(set(subscription.topics))),
                rebalance_timeout_ms=m.rebalance_timeout_ms, member_epoch=group.generation_id,
                previous_member_epoch=group.generation_id - 1, assigned=assigned,
                classic=ClassicMember(m.session_timeout_ms, tuple(m.supported_protocols))))
        converted = self.consumer.convert(group_id, group.generation_id, members, records)
        # The classic group keeps only its offsets (an Empty holder); its members are the consumer group's.
        for m in list(group.members.values()):
            self.heartbeat_purgatory.check_and_complete(member_key(group_id, m.member_id))
            group.remove(m.member_id)
        group.transition_to(GroupState.PREPARING_REBALANCE)
        group.transition_to(GroupState.EMPTY)
        group.generation_id = 0
        records.append((encode_group_metadata_key(group_id), None))
        log.info("Classic group {group} converted to a consumer group at epoch {epoch} with {n} classic member(s)",
                 group=group_id, epoch=converted.group_epoch, n=len(members))
        return None

    def _downgrade_to_classic_group(self, consumer_group: ConsumerGroup) -> None:
        """The last consumer-protocol member left: the classic members make a classic group again, at the
        group epoch, which rebalances at once (each member rejoins at its next heartbeat)."""
        group_id = consumer_group.group_id
        members = list(consumer_group.members.values())
        epoch = consumer_group.group_epoch
        records = self.consumer.drop_records(consumer_group)
        group = self.manager.get_or_maybe_create_group(group_id, create=True)
        assert group is not None
        group.generation_id = epoch
        group.protocol_type = "consumer"
        for m in members:
            assert m.classic is not None
            group.add(MemberMetadata(member_id=m.member_id, group_instance_id=m.instance_id, client_id=m.client_id,
                                     client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
                                     session_timeout_ms=m.classic.session_timeout_ms, protocol_type="consumer",
                                     supported_protocols=list(m.classic.protocols)))
        self.consumer.write_records(group_id, records, None, lambda error: None)
        log.info("Consumer group {group} converted back to a classic group: its {n} member(s) use the classic "
                 "protocol", group=group_id, n=len(members))
        self._prepare_rebalance(group, "converted from a consumer group")
        for member in list(group.members.values()):
            self._complete_and_schedule_next_heartbeat_expiration(group, member)

    @staticmethod
    def _consumer_group_summary(description: ConsumerGroupDescription) -> GroupSummary:
        """A consumer group as DescribeGroups shows it (KIP-1043): protocol type "consumer", each member's
        subscription and assignment in the consumer protocol's formats, so classic tools read them."""
        return GroupSummary(description.state, "consumer", description.assignor, [
            MemberSummary(m.member_id, m.instance_id, m.client_id, m.client_host, _subscription_bytes(m),
                          _assignment_bytes(m, description)) for m in description.members])


def _subscription_bytes(member: ConsumerMember) -> bytes:
    """``ConsumerProtocolSubscription`` v0: the topic names the member subscribes to by name."""
    return encode_subscription(member.subscribed_topic_names)


def _assignment_bytes(member: ConsumerMember, description: ConsumerGroupDescription) -> bytes:
    """``ConsumerProtocolAssignment`` v0 of the member's current partitions (topic ids named)."""
    names = description.topic_names
    return encode_assignment({names.get(topic_id, str(topic_id)): sorted(parts)
                              for topic_id, parts in member.assigned.items()})


__all__ = ["GroupCoordinator", "ConsumerGroup", "HeartbeatRequest", "HeartbeatResult"]

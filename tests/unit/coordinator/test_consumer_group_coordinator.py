"""The consumer rebalance protocol's coordinator (KIP-848) on a ``task.Clock`` with an in-memory log."""

from __future__ import annotations

import uuid

from twisted.internet.defer import succeed

from twisted_kafka.coordinator.group.config import ConsumerGroupConfig, GroupConfig, OffsetConfig
from twisted_kafka.coordinator.group.consumer_coordinator import HeartbeatRequest, TopicInfo
from twisted_kafka.coordinator.group.consumer_member import MemberState
from twisted_kafka.coordinator.group.coordinator import GroupCoordinator
from twisted_kafka.protocol.errors import ErrorCode

from .helpers import START_MS, FakeWriter, Member, offsets, run

T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


class Topics:
    def __init__(self):
        self.known = {"t": TopicInfo(T1, 12, {})}

    def __call__(self):
        return dict(self.known)


def make(*, session_ms: int = 45_000, heartbeat_ms: int = 5_000, max_size: int = 2 ** 31 - 1):
    from twisted.internet.task import Clock
    clock = Clock()
    clock.advance(START_MS / 1000)
    writer = FakeWriter()
    topics = Topics()
    coordinator = GroupCoordinator(
        group_config=GroupConfig(min_session_timeout_ms=10, initial_rebalance_delay_ms=0),
        offset_config=OffsetConfig(topic_num_partitions=1),
        writer=writer, clock=clock,  # type: ignore[arg-type]
        consumer_config=ConsumerGroupConfig(session_timeout_ms=session_ms, heartbeat_interval_ms=heartbeat_ms,
                                            max_size=max_size),
        topics=topics)
    coordinator.startup()
    coordinator.on_election(0, 0, lambda: succeed(writer.replay(0)))
    return coordinator, writer, clock, topics


class Consumer:
    """A member as librdkafka drives it: it uses what it is assigned and reports what it owns."""

    def __init__(self, coordinator: GroupCoordinator, group: str = "g", *, topics=("t",), regex=None,
                 instance_id=None, assignor=None, rebalance_ms: int = 30_000):
        self.coordinator = coordinator
        self.group = group
        self.member_id = str(uuid.uuid4())
        self.epoch = 0
        self.owned: dict = {}
        self.topics = list(topics) if regex is None else None
        self.regex = regex
        self.instance_id = instance_id
        self.assignor = assignor
        self.rebalance_ms = rebalance_ms
        self.last = None

    def heartbeat(self, *, epoch: int | None = None, owned="current", apply: bool = True):
        joining = self.epoch == 0
        request = HeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=self.epoch if epoch is None else epoch,
            instance_id=self.instance_id, rebalance_timeout_ms=self.rebalance_ms if joining else -1,
            subscribed_topic_names=self.topics if joining else None,
            subscribed_topic_regex=self.regex if joining else None, server_assignor=self.assignor,
            owned=(dict(self.owned) if owned == "current" else owned), client_id="c", client_host="/127.0.0.1")
        d = self.coordinator.consumer_group_heartbeat(request)
        assert d.called
        result = d.result
        self.last = result
        if apply and result.error == ErrorCode.NONE:
            self.epoch = result.member_epoch
            if result.assignment is not None:
                self.owned = dict(result.assignment)
        return result

    def partitions(self) -> set[int]:
        return set(self.owned.get(T1, ()))

    def leave(self, epoch: int = -1):
        d = self.coordinator.consumer_group_heartbeat(HeartbeatRequest(
            group_id=self.group, member_id=self.member_id, member_epoch=epoch, instance_id=self.instance_id))
        return d.result


def settle(consumers, rounds: int = 6) -> None:
    for _ in range(rounds):
        for c in consumers:
            c.heartbeat()


def test_three_members_each_get_their_share_and_the_group_is_stable():
    coordinator, writer, clock, _ = make()
    members = [Consumer(coordinator) for _ in range(3)]
    settle(members)
    shares = [m.partitions() for m in members]
    assert sorted(len(s) for s in shares) == [4, 4, 4]
    assert set().union(*shares) == set(range(12))
    group = coordinator.consumer.get("g")
    assert group.group_epoch == 3 and group.assignment_epoch == 3
    assert str(group.state) == "Stable"
    assert all(m.epoch == 3 for m in members)
    assert members[0].last.heartbeat_interval_ms == 5000


def test_a_joining_member_waits_for_the_revocation_and_the_others_keep_what_they_keep():
    coordinator, _, _, _ = make()
    members = [Consumer(coordinator) for _ in range(3)]
    settle(members)
    before = [m.partitions() for m in members]
    new = Consumer(coordinator)
    new.heartbeat()
    # The target moved a partition from each member to the new one, but none was released yet.
    assert new.partitions() == set()
    assert coordinator.consumer.get("g").members[new.member_id].state is MemberState.UNRELEASED_PARTITIONS
    first = members[0]
    kept_epoch = first.epoch
    first.heartbeat(owned="current", apply=False)
    # It is asked to revoke one partition and keeps its epoch until it has.
    assert first.last.member_epoch == kept_epoch
    revoked = before[0] - set(first.last.assignment[T1])
    assert len(revoked) == 1 and set(first.last.assignment[T1]) < before[0]
    assert coordinator.consumer.get("g").members[first.member_id].state is MemberState.UNREVOKED_PARTITIONS
    first.owned = dict(first.last.assignment)      # the client revoked it
    first.heartbeat()
    assert first.epoch == 4
    new.heartbeat()
    assert new.partitions() == revoked
    settle(members + [new])
    shares = [m.partitions() for m in members + [new]]
    assert sorted(len(s) for s in shares) == [3, 3, 3, 3]
    for old, now in zip(before, shares[:3], strict=True):
        assert now <= old                       # sticky: only the new member gained partitions
    assert str(coordinator.consumer.get("g").state) == "Stable"


def test_epochs_are_checked_and_a_lost_answer_is_forgiven():
    coordinator, _, _, _ = make()
    a = Consumer(coordinator)
    settle([a])
    assert a.epoch == 1 and a.partitions() == set(range(12))
    assert a.heartbeat(epoch=2, apply=False).error == ErrorCode.FENCED_MEMBER_EPOCH
    b = Consumer(coordinator)
    b.heartbeat()
    a.heartbeat(apply=False)                     # asked to revoke six partitions, still at epoch 1
    assert a.last.member_epoch == 1
    a.owned = dict(a.last.assignment)
    a.heartbeat(apply=False)                     # revoked: now at epoch 2, but the answer is lost
    assert a.last.member_epoch == 2
    # Heartbeating with the previous epoch is fine while it owns no more than it is assigned ...
    assert a.heartbeat(epoch=1, apply=False).error == ErrorCode.NONE
    # ... not when it still claims partitions it gave up.
    assert a.heartbeat(epoch=1, owned={T1: frozenset(range(12))}, apply=False).error == \
        ErrorCode.FENCED_MEMBER_EPOCH
    unknown = Consumer(coordinator)
    assert unknown.heartbeat(epoch=5, apply=False).error == ErrorCode.UNKNOWN_MEMBER_ID


def test_a_silent_member_is_removed_after_the_session_timeout_and_its_partitions_move():
    coordinator, _, clock, _ = make(session_ms=45_000)
    a, b = Consumer(coordinator), Consumer(coordinator)
    settle([a, b])
    for _ in range(10):               # a keeps heartbeating for 50 s, b is silent
        run(clock, 5)
        a.heartbeat()
    group = coordinator.consumer.get("g")
    assert list(group.members) == [a.member_id]
    settle([a])
    assert a.partitions() == set(range(12))


def test_a_member_that_does_not_revoke_is_removed_after_its_rebalance_timeout():
    coordinator, _, clock, _ = make(session_ms=45_000)
    a = Consumer(coordinator, rebalance_ms=10_000)
    settle([a])
    b = Consumer(coordinator)
    b.heartbeat()
    a.heartbeat(apply=False)           # asked to revoke; keeps reporting all 12 partitions
    assert coordinator.consumer.get("g").members[a.member_id].state is MemberState.UNREVOKED_PARTITIONS
    for _ in range(3):
        run(clock, 4)
        a.heartbeat(apply=False)
        b.heartbeat()
    assert a.member_id not in coordinator.consumer.get("g").members
    settle([b])
    assert b.partitions() == set(range(12))


def test_leave_and_static_membership():
    coordinator, _, _, _ = make()
    a = Consumer(coordinator, instance_id="i-a")
    b = Consumer(coordinator)
    settle([a, b])
    epoch = coordinator.consumer.get("g").group_epoch
    held = a.partitions()
    # Another process with the same instance id while a is active: refused.
    twin = Consumer(coordinator, instance_id="i-a")
    assert twin.heartbeat(apply=False).error == ErrorCode.UNRELEASED_INSTANCE_ID
    assert a.leave(epoch=-2).member_epoch == -2
    # The restarted instance takes over the partitions, without a new group epoch.
    twin.heartbeat()
    assert twin.partitions() == held and coordinator.consumer.get("g").group_epoch == epoch
    assert a.member_id not in coordinator.consumer.get("g").members
    assert b.leave().member_epoch == -1
    settle([twin])
    assert twin.partitions() == set(range(12))
    assert coordinator.consumer.get("g").group_epoch == epoch + 1


def test_commits_carry_the_member_epoch():
    coordinator, _, _, _ = make()
    a = Consumer(coordinator)
    settle([a])
    d = coordinator.commit_offsets("g", a.member_id, None, a.epoch, offsets(("t", 0, 5)), api_version=9)
    assert d.result == {("t", 0): ErrorCode.NONE}
    d = coordinator.commit_offsets("g", a.member_id, None, a.epoch - 1, offsets(("t", 0, 6)), api_version=9)
    assert d.result == {("t", 0): ErrorCode.STALE_MEMBER_EPOCH}
    d = coordinator.commit_offsets("g", "someone", None, a.epoch, offsets(("t", 0, 6)), api_version=9)
    assert d.result == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    d = coordinator.commit_offsets("g", "", None, -1, offsets(("t", 0, 6)), api_version=9)
    assert d.result == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}       # only an Empty group takes admin commits
    assert coordinator.validate_consumer_offset_fetch("g", a.member_id, a.epoch - 1) == ErrorCode.STALE_MEMBER_EPOCH
    assert coordinator.validate_consumer_offset_fetch("g", a.member_id, a.epoch) == ErrorCode.NONE
    error, fetched = coordinator.fetch_offsets("g", False, [("t", 0)])
    assert error == ErrorCode.NONE and fetched[("t", 0)].offset == 5


def test_a_regular_expression_picks_up_a_topic_created_later():
    coordinator, _, _, topics = make()
    a = Consumer(coordinator, regex="t.*")
    settle([a])
    assert set(a.owned) == {T1}
    topics.known["t-later"] = TopicInfo(T2, 3, {})
    topics.known["other"] = TopicInfo(uuid.UUID(int=3), 3, {})
    settle([a])
    assert set(a.owned) == {T1, T2} and a.owned[T2] == frozenset({0, 1, 2})


def test_the_group_is_replayed_from_its_records():
    coordinator, writer, clock, topics = make()
    members = [Consumer(coordinator) for _ in range(3)]
    settle(members)
    coordinator.commit_offsets("g", members[0].member_id, None, members[0].epoch, offsets(("t", 0, 7)),
                               api_version=9)
    members[2].leave()
    settle(members[:2])
    original = coordinator.consumer.get("g")
    coordinator.on_resignation(0, 1)
    assert coordinator.consumer.get("g") is None
    coordinator.on_election(0, 2, lambda: succeed(writer.replay(0)))
    loaded = coordinator.consumer.get("g")
    assert loaded is not original
    assert (loaded.group_epoch, loaded.assignment_epoch) == (original.group_epoch, original.assignment_epoch)
    assert loaded.members == original.members and loaded.target == original.target
    assert loaded.subscription_metadata == original.subscription_metadata
    assert coordinator.fetch_offsets("g", False, [("t", 0)])[1][("t", 0)].offset == 7
    # The members carry on with their epochs; their sessions restarted at the load.
    settle(members[:2])
    assert all(m.last.error == ErrorCode.NONE for m in members[:2])


def test_classic_and_consumer_groups_side_by_side():
    coordinator, _, clock, _ = make()
    a = Consumer(coordinator)
    settle([a])
    other = Member(coordinator, "classic-group")
    other.join(require_known=False)
    run(clock, 0.1)
    error, listed = coordinator.list_groups()
    assert {(g.group_id, g.group_type) for g in listed} == {("g", "consumer"), ("classic-group", "classic")}
    assert [g.group_id for g in coordinator.list_groups(types=["consumer"])[1]] == ["g"]
    error, summary = coordinator.describe_group("g")
    assert (summary.state, summary.protocol_type, len(summary.members)) == ("Stable", "consumer", 1)
    assert coordinator.delete_groups(["g"]).result == {"g": ErrorCode.NON_EMPTY_GROUP}
    a.leave()
    assert coordinator.delete_groups(["g"]).result == {"g": ErrorCode.NONE}
    assert coordinator.consumer.get("g") is None


def test_bad_heartbeats_are_refused_with_kafkas_errors():
    coordinator, _, _, _ = make(max_size=1)
    a = Consumer(coordinator)
    a.heartbeat()
    assert Consumer(coordinator).heartbeat(apply=False).error == ErrorCode.GROUP_MAX_SIZE_REACHED
    bad_regex = Consumer(coordinator, group="h", regex="(")
    assert bad_regex.heartbeat(apply=False).error == ErrorCode.INVALID_REQUEST
    assert Consumer(coordinator, group="h", assignor="sticky").heartbeat(apply=False).error == \
        ErrorCode.UNSUPPORTED_ASSIGNOR
    no_sub = Consumer(coordinator, group="h")
    no_sub.topics = None
    assert no_sub.heartbeat(apply=False).error == ErrorCode.INVALID_REQUEST
    classic = Member(coordinator, "c-group")
    classic.join(require_known=False)
    # A classic group converts only once Stable; one of another protocol type never does.
    assert Consumer(coordinator, group="c-group").heartbeat(apply=False).error == ErrorCode.REBALANCE_IN_PROGRESS
    connect = Member(coordinator, "connect-group")
    connect.join(require_known=False)
    coordinator.manager.get_group("connect-group").protocol_type = "connect"
    assert Consumer(coordinator, group="connect-group").heartbeat(apply=False).error == ErrorCode.GROUP_ID_NOT_FOUND


def _assigned(result) -> set[int]:
    from twisted_kafka.coordinator.group.group import assigned_partitions_of
    return {p for _, p in assigned_partitions_of(result.assignment)}


def test_a_classic_group_converts_when_a_consumer_member_joins_and_back_when_it_leaves():
    from twisted_kafka.coordinator.group.consumer_protocol_formats import encode_assignment
    coordinator, writer, clock, _ = make()
    a, b = Member(coordinator, "m"), Member(coordinator, "m")
    a.join(require_known=False)
    b.join(require_known=False)
    run(clock, 0.1)
    leader = a if a.join_result.leader_id == a.member_id else b
    follower = b if leader is a else a
    leader.sync({leader.member_id: encode_assignment({"t": list(range(6))}),
                 follower.member_id: encode_assignment({"t": list(range(6, 12))})})
    follower.sync()
    classic_group = coordinator.manager.get_group("m")
    assert str(classic_group.state) == "Stable"
    generation = classic_group.generation_id
    # A consumer-protocol member joins: the group converts and takes it in.
    c = Consumer(coordinator, group="m")
    c.heartbeat()
    group = coordinator.consumer.get("m")
    assert group is not None and group.group_epoch == generation + 1
    assert {m for m, member in group.members.items() if member.classic is not None} == {a.member_id, b.member_id}
    assert [g.group_type for g in coordinator.list_groups()[1] if g.group_id == "m"] == ["consumer"]
    # The classic members learn of it from their heartbeats and reconcile by rejoining.
    for _ in range(4):
        for m in (a, b):
            if m.heartbeat() == ErrorCode.REBALANCE_IN_PROGRESS:
                m.join(require_known=False)
                assert m.join_result.error == ErrorCode.NONE
                m.generation = m.join_result.generation_id
                assert m.sync().result.error == ErrorCode.NONE
        c.heartbeat()
    assert a.heartbeat() == ErrorCode.NONE and b.heartbeat() == ErrorCode.NONE
    shares = [_assigned(a.sync_result), _assigned(b.sync_result), c.partitions()]
    assert sorted(len(s) for s in shares) == [4, 4, 4] and set().union(*shares) == set(range(12))
    assert str(coordinator.consumer.get("m").state) == "Stable"
    # A classic member commits with its generation, which is its member epoch.
    assert a.commit([("t", 0, 3)]).result == {("t", 0): ErrorCode.NONE}
    assert a.commit([("t", 0, 4)], generation=a.generation - 1).result == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    # The records replay to the same group.
    reloaded = GroupCoordinator(group_config=GroupConfig(min_session_timeout_ms=10),
                                offset_config=OffsetConfig(topic_num_partitions=1), writer=writer, clock=clock,
                                topics=coordinator.consumer.topics)  # type: ignore[arg-type]
    reloaded.startup()
    reloaded.on_election(0, 0, lambda: succeed(writer.replay(0)))
    assert reloaded.consumer.get("m").members == coordinator.consumer.get("m").members
    assert reloaded.manager.get_group("m").size == 0       # the classic record was deleted
    # The consumer member leaves: the group is classic again and rebalances.
    c.leave()
    assert coordinator.consumer.get("m") is None
    classic_group = coordinator.manager.get_group("m")
    assert str(classic_group.state) == "PreparingRebalance" and classic_group.size == 2
    # Either answer sends the member back to JoinGroup (its epoch may be older than the group's).
    assert a.heartbeat() in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.ILLEGAL_GENERATION)
    a.join(require_known=False)
    b.join(require_known=False)
    run(clock, 0.1)
    assert a.join_result.error == ErrorCode.NONE and b.join_result.error == ErrorCode.NONE
    assert a.join_result.generation_id > generation + 1
    assert coordinator.fetch_offsets("m", False, [("t", 0)])[1][("t", 0)].offset == 3


def test_the_consumer_protocol_is_served_only_when_configured():
    from types import SimpleNamespace

    from twisted_kafka.server.api_table import broker_handlers
    from twisted_kafka.server.authorization import ALLOW_ALL

    def served(enabled: bool) -> set[int]:
        coordinator = GroupCoordinator(group_config=GroupConfig(), offset_config=OffsetConfig(), writer=FakeWriter(),
                                       clock=None, consumer_config=ConsumerGroupConfig(enabled=enabled))
        return {int(h.api_key) for h in broker_handlers(
            advertised_keys=None, replica_manager=None, metadata_cache=None, admin_manager=None,  # type: ignore
            config_repository=None, dynamic_config=None, controller=None, controller_guard=None,  # type: ignore
            group_coordinator=coordinator, offsets_topic=None, producer_ids=None, clock=None,  # type: ignore
            transactions=SimpleNamespace(coordinator=None, marker_writer=None),  # type: ignore
            authorization=ALLOW_ALL)}

    assert {68, 69} <= served(True)
    assert not {68, 69} & served(False)


def test_a_failed_write_is_answered_with_kafkas_mapping():
    from twisted_kafka.protocol.errors import KafkaError
    coordinator, writer, _, _ = make()
    writer.fail_with = KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "moved")
    assert Consumer(coordinator).heartbeat(apply=False).error == ErrorCode.NOT_COORDINATOR
    writer.fail_with = KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS, "few")
    assert Consumer(coordinator).heartbeat(apply=False).error == ErrorCode.COORDINATOR_NOT_AVAILABLE


def test_regular_expressions_are_re2s():
    """KIP-848 specifies RE2/J: RE2's syntax (no backreferences or lookarounds) and linear-time
    matching, so a pattern that makes a backtracking engine run for ages is just no match."""
    coordinator, _, _, topics = make()
    topics.known["a" * 249] = TopicInfo(T2, 1, {})
    evil = Consumer(coordinator, regex="(a+)+b")
    evil.heartbeat()
    assert evil.last.error == ErrorCode.NONE and evil.owned == {}
    assert Consumer(coordinator, group="h", regex=r"(t)\1").heartbeat(apply=False).error == ErrorCode.INVALID_REQUEST
    assert Consumer(coordinator, group="h", regex="(?=t)t").heartbeat(apply=False).error == ErrorCode.INVALID_REQUEST
    anchored = Consumer(coordinator, group="h2", regex="^t$")
    settle([anchored])
    assert set(anchored.owned) == {T1}


def test_member_ids_handed_to_classic_joiners_of_a_consumer_group_expire():
    coordinator, _, clock, _ = make()
    settle([Consumer(coordinator)])
    joiner = Member(coordinator, "g", session_ms=10_000)
    assert joiner.join().result.error == ErrorCode.MEMBER_ID_REQUIRED
    assert coordinator.consumer.classic.pending["g"] == {joiner.member_id}
    run(clock, 10.5)
    assert coordinator.consumer.classic.pending["g"] == set()
    assert joiner.join().result.error == ErrorCode.UNKNOWN_MEMBER_ID

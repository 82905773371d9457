"""The group coordinator's state machine on a ``task.Clock``: joins, rebalances, sessions, static members.

Members drive the coordinator the way clients do (``helpers.Member``);
time only moves when a test advances the clock.
"""

from __future__ import annotations

from twisted_kafka.coordinator.group.state import GroupState
from twisted_kafka.protocol.errors import ErrorCode as E

from .helpers import Member, make_coordinator, run, subscription


def _stable_group(coordinator, clock, n: int, **kwargs) -> list[Member]:
    """n members joined (JoinGroup v4+ flow), the leader assigned, every member synced."""
    members = [Member(coordinator, client_id=f"c{i}", **kwargs) for i in range(n)]
    joins = [m.join_with_id() for m in members]
    clock.advance(0)
    assert all(d.called for d in joins), "the rebalance did not complete"
    leader = next(m for m in members if m.join_result.leader_id == m.member_id)
    assignment = {m.member_id: f"share-{m.member_id}".encode() for m in members}
    syncs = [leader.sync(assignment)] + [m.sync() for m in members if m is not leader]
    assert all(d.called and d.result.error == E.NONE for d in syncs)
    assert coordinator.group("g").is_state(GroupState.STABLE)
    return members


def test_member_id_required_then_join_completes_after_the_initial_delay():
    coordinator, _, clock = make_coordinator(initial_delay=3000)
    a = Member(coordinator)
    first = a.join()
    assert first.result.error == E.MEMBER_ID_REQUIRED and first.result.member_id.startswith("c-")
    second = a.join()
    assert not second.called
    run(clock, 2.9)
    assert not second.called
    b = Member(coordinator, client_id="d")
    b_join = b.join_with_id()
    run(clock, 2.9)                        # a new member during the delay extends it by another delay
    assert not second.called and not b_join.called
    run(clock, 0.3)
    assert second.called and b_join.called
    assert second.result.generation_id == 1 == b_join.result.generation_id
    assert second.result.leader_id == a.member_id
    assert {m.member_id for m in second.result.members} == {a.member_id, b.member_id}
    assert b_join.result.members == []     # only the leader gets the member list


def test_initial_delay_is_bounded_by_the_rebalance_timeout():
    coordinator, _, clock = make_coordinator(initial_delay=3000)
    members = [Member(coordinator, client_id=f"c{i}", rebalance_ms=5000) for i in range(3)]
    joins = [members[0].join_with_id()]
    run(clock, 2.5)
    joins.append(members[1].join_with_id())     # extends the delay past 3 s ...
    run(clock, 1.5)
    joins.append(members[2].join_with_id())     # ... and again, but only up to the 5 s rebalance timeout
    run(clock, 0.9)
    assert not any(d.called for d in joins)
    run(clock, 0.25)
    assert all(d.called for d in joins) and joins[0].result.generation_id == 1


def test_protocol_is_one_every_member_supports():
    coordinator, _, clock = make_coordinator()
    a = Member(coordinator, protocols=[("range", subscription("t")), ("roundrobin", subscription("t"))])
    b = Member(coordinator, client_id="d", protocols=[("roundrobin", subscription("t"))])
    da, db = a.join_with_id(), b.join_with_id()
    clock.advance(0)
    assert da.result.protocol_name == "roundrobin" == db.result.protocol_name
    c = Member(coordinator, client_id="e", protocols=[("cooperative-sticky", subscription("t"))])
    assert c.join().result.error == E.INCONSISTENT_GROUP_PROTOCOL


def test_majority_vote_with_ties_to_the_leader():
    coordinator, _, clock = make_coordinator()
    a = Member(coordinator, protocols=[("range", b"x"), ("roundrobin", b"x")])
    b = Member(coordinator, client_id="d", protocols=[("roundrobin", b"x"), ("range", b"x")])
    da, _ = a.join_with_id(), b.join_with_id()
    clock.advance(0)
    assert da.result.protocol_name == "range"


def test_session_timeout_bounds():
    coordinator, _, _ = make_coordinator(min_session=6000, max_session=300_000)
    assert Member(coordinator, session_ms=5999).join().result.error == E.INVALID_SESSION_TIMEOUT
    assert Member(coordinator, session_ms=300_001).join().result.error == E.INVALID_SESSION_TIMEOUT
    assert Member(coordinator, session_ms=6000).join().result.error == E.MEMBER_ID_REQUIRED


def test_session_expiry_removes_the_member_and_rebalances():
    coordinator, _, clock = make_coordinator()
    a, b = _stable_group(coordinator, clock, 2, session_ms=10_000)
    for _ in range(2):
        clock.advance(4)
        assert a.heartbeat() == E.NONE     # a keeps its session; b says nothing
    clock.advance(4)
    group = coordinator.group("g")
    assert group.is_state(GroupState.PREPARING_REBALANCE) and not group.has(b.member_id)
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    rejoin = a.join()
    assert rejoin.called and rejoin.result.generation_id == 2 and rejoin.result.members[0].member_id == a.member_id
    assert b.heartbeat() == E.UNKNOWN_MEMBER_ID          # the expelled member is told
    a.generation = 2
    assert a.sync({a.member_id: b"all"}).result.assignment == b"all"


def test_member_that_does_not_rejoin_is_removed_after_the_rebalance_timeout():
    coordinator, _, clock = make_coordinator()
    a, b = _stable_group(coordinator, clock, 2, session_ms=60_000, rebalance_ms=20_000)
    c = Member(coordinator, client_id="new", rebalance_ms=20_000, session_ms=60_000)
    c_join = c.join_with_id()
    a_join = a.join()                     # a hears of it (heartbeat) and rejoins; b does not
    clock.advance(19.9)
    assert not c_join.called and not a_join.called
    clock.advance(0.2)
    assert c_join.result.error == E.NONE and a_join.result.error == E.NONE
    assert set(coordinator.group("g").members) == {a.member_id, c.member_id}
    assert b.heartbeat() == E.UNKNOWN_MEMBER_ID


def test_leave_group_rebalances_the_others():
    coordinator, _, clock = make_coordinator()
    a, b, c = _stable_group(coordinator, clock, 3)
    result = b.leave()
    assert result.error == E.NONE and [m.error for m in result.members] == [E.NONE]
    assert coordinator.group("g").is_state(GroupState.PREPARING_REBALANCE)
    assert a.heartbeat() == E.REBALANCE_IN_PROGRESS
    ja, jc = a.join(), c.join()
    assert ja.called and jc.called and ja.result.generation_id == 2
    # batch leave (LeaveGroup v3+): one unknown member fails alone
    result = coordinator.leave_group("g", [(a.member_id, None, None), ("nobody", None, None)])
    assert [m.error for m in result.members] == [E.NONE, E.UNKNOWN_MEMBER_ID]


def test_last_member_leaving_empties_the_group_and_writes_it():
    coordinator, writer, clock = make_coordinator()
    (a,) = _stable_group(coordinator, clock, 1)
    a.leave()
    group = coordinator.group("g")
    assert group.is_state(GroupState.EMPTY) and group.generation_id == 2
    loaded = writer.replay(0)
    assert loaded.groups["g"].generation == 2 and loaded.groups["g"].members == []


def test_sync_checks_generation_member_and_protocol():
    coordinator, _, clock = make_coordinator()
    a, b = _stable_group(coordinator, clock, 2)
    assert coordinator.sync_group("g", a.generation + 1, a.member_id, None, None, None, {}).result.error == \
        E.ILLEGAL_GENERATION
    assert coordinator.sync_group("g", a.generation, "nobody", None, None, None, {}).result.error == \
        E.UNKNOWN_MEMBER_ID
    assert coordinator.sync_group("g", a.generation, a.member_id, "connect", None, None, {}).result.error == \
        E.INCONSISTENT_GROUP_PROTOCOL
    assert coordinator.sync_group("g", a.generation, a.member_id, "consumer", "roundrobin", None, {}).result.error \
        == E.INCONSISTENT_GROUP_PROTOCOL
    ok = coordinator.sync_group("g", a.generation, a.member_id, "consumer", "range", None, {}).result
    assert ok.error == E.NONE and ok.protocol_name == "range" and ok.assignment == f"share-{a.member_id}".encode()


def test_member_without_sync_is_removed_after_the_rebalance_timeout():
    coordinator, _, clock = make_coordinator()
    a = Member(coordinator, rebalance_ms=10_000, session_ms=60_000)
    b = Member(coordinator, client_id="d", rebalance_ms=10_000, session_ms=60_000)
    a.join_with_id(), b.join_with_id()
    clock.advance(0)
    leader, follower = (a, b) if a.join_result.leader_id == a.member_id else (b, a)
    assert leader.sync({leader.member_id: b"x", follower.member_id: b"y"}).result.error == E.NONE
    clock.advance(10.1)                    # the follower never syncs
    group = coordinator.group("g")
    assert not group.has(follower.member_id) and group.is_state(GroupState.PREPARING_REBALANCE)


def test_heartbeat_errors():
    coordinator, _, clock = make_coordinator()
    a, b = _stable_group(coordinator, clock, 2)
    assert coordinator.heartbeat("g", a.member_id, None, a.generation - 1) == E.ILLEGAL_GENERATION
    assert coordinator.heartbeat("g", "ghost", None, a.generation) == E.UNKNOWN_MEMBER_ID
    assert coordinator.heartbeat("unknown-group", "ghost", None, 1) == E.UNKNOWN_MEMBER_ID
    assert coordinator.heartbeat("", "ghost", None, 1) == E.INVALID_GROUP_ID
    assert a.heartbeat() == E.NONE


def test_group_max_size_refuses_extra_members_and_keeps_the_group_working():
    coordinator, _, clock = make_coordinator(max_size=2)
    a, b = _stable_group(coordinator, clock, 2)
    extra = Member(coordinator, client_id="extra")
    assert extra.join().result.error == E.GROUP_MAX_SIZE_REACHED
    assert coordinator.group("g").is_state(GroupState.STABLE)
    assert a.heartbeat() == E.NONE and b.heartbeat() == E.NONE
    assert a.commit([("t", 0, 5)]).result == {("t", 0): E.NONE}


def test_static_member_restart_within_the_session_needs_no_rebalance():
    coordinator, writer, clock = make_coordinator()
    a = Member(coordinator, instance_id="i-a", session_ms=30_000)
    b = Member(coordinator, instance_id="i-b", client_id="d", session_ms=30_000)
    ja, jb = a.join(), b.join()          # static members get no MEMBER_ID_REQUIRED
    clock.advance(0)
    assert ja.result.error == E.NONE == jb.result.error
    leader, follower = (a, b) if ja.result.leader_id == a.member_id else (b, a)
    leader.sync({a.member_id: b"A", b.member_id: b"B"})
    follower.sync()
    generation = coordinator.group("g").generation_id
    old_id = b.member_id
    # b restarts (no LeaveGroup: static members do not send one) and rejoins without its member id
    clock.advance(10)
    a.heartbeat()
    restarted = Member(coordinator, instance_id="i-b", client_id="d", session_ms=30_000)
    rejoin = restarted.join()
    assert rejoin.called and rejoin.result.error == E.NONE
    assert restarted.member_id != old_id and rejoin.result.generation_id == generation
    group = coordinator.group("g")
    assert group.is_state(GroupState.STABLE) and group.generation_id == generation
    restarted.generation = generation
    assert restarted.sync().result.assignment == b"B"      # its old assignment, no rebalance
    assert a.heartbeat() == E.NONE
    # the old incarnation is fenced
    assert coordinator.heartbeat("g", old_id, "i-b", generation) == E.FENCED_INSTANCE_ID
    fenced = coordinator.commit_offsets("g", old_id, "i-b", generation, {}).result
    assert fenced == {}
    assert coordinator.sync_group("g", generation, old_id, None, None, "i-b", {}).result.error == \
        E.FENCED_INSTANCE_ID
    # the new member id is in the log (the replaced static member's id persisted)
    assert {m.member_id for m in writer.replay(0).groups["g"].members} == {a.member_id, restarted.member_id}


def test_static_member_leader_restart_keeps_the_old_leader_id_in_the_answer():
    coordinator, _, clock = make_coordinator()
    a = Member(coordinator, instance_id="i-a", session_ms=30_000)
    a.join()
    clock.advance(0)
    a.sync({a.member_id: b"A"})
    old = a.member_id
    again = Member(coordinator, instance_id="i-a", session_ms=30_000)
    result = again.join().result
    assert result.error == E.NONE and result.leader_id == old != again.member_id and result.members == []


def test_static_member_that_does_not_come_back_expires():
    coordinator, _, clock = make_coordinator()
    a = Member(coordinator, instance_id="i-a", session_ms=10_000)
    b = Member(coordinator, instance_id="i-b", client_id="d", session_ms=10_000)
    a.join(), b.join()
    clock.advance(0)
    a.sync({a.member_id: b"A", b.member_id: b"B"}) if a.join_result.leader_id == a.member_id else None
    b.sync({a.member_id: b"A", b.member_id: b"B"}) if b.join_result.leader_id == b.member_id else None
    a.sync(), b.sync()
    for _ in range(4):
        clock.advance(3)
        a.heartbeat()
    group = coordinator.group("g")
    assert group.current_static_member_id("i-b") is None and group.is_state(GroupState.PREPARING_REBALANCE)


def test_offset_commit_checks():
    coordinator, _, clock = make_coordinator(metadata_max=10)
    a, b = _stable_group(coordinator, clock, 2)
    assert a.commit([("t", 0, 1)], generation=a.generation - 1).result == {("t", 0): E.ILLEGAL_GENERATION}
    assert coordinator.commit_offsets("g", "ghost", None, a.generation, {("t", 0): None}).result == \
        {("t", 0): E.UNKNOWN_MEMBER_ID}
    # generation -1 without a member id: only while the group has no members
    assert coordinator.commit_offsets("g", "", None, -1, {("t", 0): None}).result == {("t", 0): E.UNKNOWN_MEMBER_ID}
    result = a.commit([("t", 0, 1), ("t", 1, 2)], metadata="x" * 11).result
    assert result == {("t", 0): E.OFFSET_METADATA_TOO_LARGE, ("t", 1): E.OFFSET_METADATA_TOO_LARGE}
    from .helpers import offsets
    mixed = offsets(("t", 0, 1), metadata="ok")
    mixed.update(offsets(("t", 1, 2), metadata="y" * 11))
    result = coordinator.commit_offsets("g", a.member_id, None, a.generation, mixed).result
    assert result == {("t", 0): E.NONE, ("t", 1): E.OFFSET_METADATA_TOO_LARGE}
    error, fetched = coordinator.fetch_offsets("g", False, [("t", 0), ("t", 1)])
    assert error == E.NONE and fetched[("t", 0)].offset == 1 and fetched[("t", 0)].metadata == "ok"
    assert fetched[("t", 1)].offset == -1
    # the group keeps working for its members
    assert a.heartbeat() == E.NONE and b.heartbeat() == E.NONE


def test_simple_consumer_commits_with_generation_minus_one():
    coordinator, _, _ = make_coordinator()
    from .helpers import offsets
    result = coordinator.commit_offsets("simple", "", None, -1, offsets(("t", 0, 42), metadata="m")).result
    assert result == {("t", 0): E.NONE}
    error, fetched = coordinator.fetch_offsets("simple", True, None)
    assert error == E.NONE and fetched[("t", 0)].offset == 42 and fetched[("t", 0)].metadata == "m"
    assert coordinator.group("simple").is_state(GroupState.EMPTY)
    # an unknown group with a real generation: a member of a generation nobody knows
    assert coordinator.commit_offsets("other", "m", None, 3, offsets(("t", 0, 1))).result == \
        {("t", 0): E.ILLEGAL_GENERATION}


def test_require_stable_reports_commits_still_being_written():
    coordinator, writer, clock = make_coordinator()
    (a,) = _stable_group(coordinator, clock, 1)
    writer.hold = True
    pending = a.commit([("t", 0, 7)])
    assert not pending.called
    _, fetched = coordinator.fetch_offsets("g", True, [("t", 0)])
    assert fetched[("t", 0)].error == E.UNSTABLE_OFFSET_COMMIT
    _, fetched = coordinator.fetch_offsets("g", False, [("t", 0)])
    assert fetched[("t", 0)].offset == -1 and fetched[("t", 0)].error == E.NONE
    writer.release()
    assert pending.result == {("t", 0): E.NONE}
    _, fetched = coordinator.fetch_offsets("g", True, [("t", 0)])
    assert fetched[("t", 0)].offset == 7


def test_failed_write_fails_the_commit_and_keeps_the_old_offset():
    from twisted_kafka.protocol.errors import KafkaError
    coordinator, writer, clock = make_coordinator()
    (a,) = _stable_group(coordinator, clock, 1)
    assert a.commit([("t", 0, 3)]).result == {("t", 0): E.NONE}
    writer.fail_with = KafkaError(E.NOT_LEADER_OR_FOLLOWER, "moved")
    assert a.commit([("t", 0, 9)]).result == {("t", 0): E.NOT_COORDINATOR}
    writer.fail_with = KafkaError(E.REQUEST_TIMED_OUT, "slow")
    assert a.commit([("t", 0, 9)]).result == {("t", 0): E.REQUEST_TIMED_OUT}
    assert coordinator.fetch_offsets("g", True, [("t", 0)])[1][("t", 0)].offset == 3


def test_commit_during_completing_rebalance_is_rebalance_in_progress():
    coordinator, _, clock = make_coordinator()
    a = Member(coordinator)
    a.join_with_id()
    clock.advance(0)
    assert a.commit([("t", 0, 1)]).result == {("t", 0): E.REBALANCE_IN_PROGRESS}


def test_not_coordinator_and_loading():
    coordinator, _, _ = make_coordinator(partitions=2, own=False)
    from twisted.internet.defer import Deferred
    group_partition = coordinator.partition_for("g")
    assert Member(coordinator).join().result.error == E.NOT_COORDINATOR
    pending: Deferred = Deferred()
    coordinator.on_election(group_partition, 0, lambda: pending)
    assert Member(coordinator).join().result.error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert coordinator.heartbeat("g", "m", None, 1) == E.NONE          # answered blindly while loading
    assert coordinator.sync_group("g", 1, "m", None, None, None, {}).result.error == E.REBALANCE_IN_PROGRESS
    from twisted_kafka.coordinator.group.loader import LoadedPartition
    pending.callback(LoadedPartition())
    assert Member(coordinator).join().result.error == E.MEMBER_ID_REQUIRED
    coordinator.on_resignation(group_partition, 1)
    assert Member(coordinator).join().result.error == E.NOT_COORDINATOR


def test_resignation_answers_waiting_members_not_coordinator():
    coordinator, _, clock = make_coordinator(initial_delay=3000)
    a = Member(coordinator)
    waiting = a.join_with_id()
    assert not waiting.called
    coordinator.on_resignation(0, 1)
    assert waiting.result.error == E.NOT_COORDINATOR


def test_describe_list_and_delete():
    coordinator, _, clock = make_coordinator()
    a, b = _stable_group(coordinator, clock, 2)
    coordinator.commit_offsets("simple", "", None, -1, {})
    from .helpers import offsets
    coordinator.commit_offsets("simple", "", None, -1, offsets(("t", 0, 1)))
    error, summary = coordinator.describe_group("g")
    assert error == E.NONE and summary.state == "Stable" and summary.protocol == "range"
    assert {m.member_id for m in summary.members} == {a.member_id, b.member_id}
    assert all(m.metadata == subscription("t") and m.assignment.startswith(b"share-") for m in summary.members)
    assert coordinator.describe_group("nope")[1].state == "Dead"
    assert {g.group_id for g in coordinator.list_groups()[1]} == {"g", "simple"}
    assert [g.group_id for g in coordinator.list_groups(["stable"])[1]] == ["g"]
    assert [g.group_id for g in coordinator.list_groups(["Empty"])[1]] == ["simple"]
    assert coordinator.list_groups(types=["consumer"])[1] == []
    errors = coordinator.delete_groups(["g", "simple", "nope"]).result
    assert errors == {"g": E.NON_EMPTY_GROUP, "simple": E.NONE, "nope": E.GROUP_ID_NOT_FOUND}
    assert coordinator.group("simple") is None
    assert coordinator.fetch_offsets("simple", False, [("t", 0)])[1][("t", 0)].offset == -1


def test_offset_delete():
    coordinator, writer, clock = make_coordinator()
    a, _ = _stable_group(coordinator, clock, 2)
    a.commit([("t", 0, 1)])
    from .helpers import offsets
    coordinator.commit_offsets("simple", "", None, -1, offsets(("other", 0, 1)))
    error, errors = coordinator.delete_offsets("g", [("t", 0), ("unsubscribed", 0)]).result
    assert error == E.NONE and errors == {("t", 0): E.GROUP_SUBSCRIBED_TO_TOPIC, ("unsubscribed", 0): E.NONE}
    assert coordinator.delete_offsets("nope", [("t", 0)]).result == (E.GROUP_ID_NOT_FOUND, {})
    error, errors = coordinator.delete_offsets("simple", [("other", 0)]).result
    assert error == E.NONE and errors == {("other", 0): E.NONE}
    assert "simple" not in writer.replay(0).offsets


def test_expired_offsets_of_an_empty_group_are_removed():
    coordinator, writer, clock = make_coordinator()
    from .helpers import offsets
    coordinator.commit_offsets("simple", "", None, -1, offsets(("t", 0, 1), now=int(clock.seconds() * 1000)))
    retention = coordinator.offset_config.retention_ms / 1000
    clock.advance(retention - 1)
    assert coordinator.cleanup_expired_offsets() == 0
    clock.advance(2)
    assert coordinator.cleanup_expired_offsets() == 1
    assert coordinator.group("simple") is None and writer.replay(0).offsets == {}


def test_a_new_coordinator_loads_groups_and_offsets_from_the_log():
    coordinator, writer, clock = make_coordinator()
    a, b = _stable_group(coordinator, clock, 2, session_ms=10_000)
    assert a.commit([("t", 0, 10), ("t", 1, 20)], metadata="meta").result == {("t", 0): E.NONE, ("t", 1): E.NONE}
    assert b.commit([("t", 1, 21)]).result == {("t", 1): E.NONE}
    from .helpers import offsets
    coordinator.commit_offsets("simple", "", None, -1, offsets(("u", 0, 5)))
    generation = coordinator.group("g").generation_id

    # a restarted broker: a new coordinator replays the same log
    restarted, _, clock2 = make_coordinator(writer=writer)
    group = restarted.group("g")
    assert group.is_state(GroupState.STABLE) and group.generation_id == generation
    assert set(group.members) == {a.member_id, b.member_id} and group.protocol_name == "range"
    assert group.get(a.member_id).assignment == f"share-{a.member_id}".encode()
    _, fetched = restarted.fetch_offsets("g", True, None)
    assert {tp: (r.offset, r.metadata) for tp, r in fetched.items()} == {("t", 0): (10, "meta"), ("t", 1): (21, "")}
    assert restarted.fetch_offsets("simple", True, [("u", 0)])[1][("u", 0)].offset == 5
    # the members carry on where they were; one that does not come back expires
    a.coordinator = restarted
    for _ in range(3):
        clock2.advance(4)
        a.heartbeat()
    assert restarted.group("g").is_state(GroupState.PREPARING_REBALANCE)
    assert not restarted.group("g").has(b.member_id)


def test_shutdown_answers_every_waiting_join_and_sync_not_coordinator_and_stops_the_timers():
    """The broker stops reading requests, so nothing but a timer could end these waits (a rebalance
    timeout of 24 days, a leader that never syncs): the coordinator's shutdown answers them now."""
    coordinator, _, clock = make_coordinator(partitions=2)
    # group g: stable with a and b; c joins, and the rebalance waits for a and b to rejoin
    a, b = _stable_group(coordinator, clock, 2, session_ms=600_000, rebalance_ms=2**31 - 1)
    c = Member(coordinator, client_id="new", session_ms=600_000, rebalance_ms=2**31 - 1)
    joining = c.join_with_id()
    # group h: rebalanced, the follower waits in SyncGroup for its leader's assignment
    h = [Member(coordinator, "h", client_id=f"h{i}", session_ms=600_000, rebalance_ms=600_000) for i in range(2)]
    h_joins = [m.join_with_id() for m in h]
    clock.advance(0)
    assert all(d.called for d in h_joins)
    follower = next(m for m in h if m.join_result.leader_id != m.member_id)
    syncing = follower.sync()
    assert not joining.called and not syncing.called and clock.getDelayedCalls()

    coordinator.shutdown()
    assert joining.result.error == E.NOT_COORDINATOR and syncing.result.error == E.NOT_COORDINATOR
    assert clock.getDelayedCalls() == [] and coordinator.group("g") is None and coordinator.group("h") is None
    assert Member(coordinator).join().result.error == E.COORDINATOR_NOT_AVAILABLE
    coordinator.shutdown()                            # again: nothing changes

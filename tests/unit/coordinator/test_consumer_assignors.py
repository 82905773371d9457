"""The server-side assignors of KIP-848: every partition to one subscriber, balance, stickiness, racks."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from twisted_kafka.coordinator.group.assignors import MemberSpec, TopicSpec
from twisted_kafka.coordinator.group.assignors.range import assign as range_assign
from twisted_kafka.coordinator.group.assignors.uniform import assign as uniform_assign

TOPIC_IDS = [uuid.UUID(int=i + 1) for i in range(4)]


def topics_of(counts: list[int]) -> dict[uuid.UUID, TopicSpec]:
    return {TOPIC_IDS[i]: TopicSpec(f"t{i}", n) for i, n in enumerate(counts)}


def counts(result) -> list[int]:
    return [sum(len(p) for p in a.values()) for a in result.values()]


def owners(result) -> dict[tuple[uuid.UUID, int], list[str]]:
    found: dict[tuple[uuid.UUID, int], list[str]] = {}
    for member, assignment in result.items():
        for topic, parts in assignment.items():
            for p in parts:
                found.setdefault((topic, p), []).append(member)
    return found


homogeneous = st.tuples(st.lists(st.integers(0, 12), min_size=1, max_size=4), st.integers(1, 9))


@settings(max_examples=150, deadline=None)
@given(homogeneous)
def test_uniform_gives_every_partition_once_within_one_of_each_other(case):
    partition_counts, n_members = case
    topics = topics_of(partition_counts)
    members = {f"m{i}": MemberSpec(frozenset(topics)) for i in range(n_members)}
    result = uniform_assign(members, topics)
    found = owners(result)
    assert all(len(v) == 1 for v in found.values())
    assert len(found) == sum(partition_counts)
    assert max(counts(result)) - min(counts(result)) <= 1


@settings(max_examples=150, deadline=None)
@given(homogeneous, st.data())
def test_uniform_is_sticky_when_a_member_joins_or_leaves(case, data):
    partition_counts, n_members = case
    topics = topics_of(partition_counts)
    members = {f"m{i}": MemberSpec(frozenset(topics)) for i in range(n_members)}
    before = uniform_assign(members, topics)
    # A member joins: partitions only move to it, never between the others.
    joined = {m: MemberSpec(s.subscribed, current=before[m]) for m, s in members.items()}
    joined["new"] = MemberSpec(frozenset(topics))
    after = uniform_assign(joined, topics)
    for m in members:
        assert all(parts <= before[m].get(t, frozenset()) for t, parts in after[m].items()), \
            (m, before[m], after[m])
    assert max(counts(after)) - min(counts(after)) <= 1
    # A member leaves: the others keep what they had.
    if n_members > 1:
        gone = data.draw(st.sampled_from(sorted(members)))
        left = {m: MemberSpec(s.subscribed, current=before[m]) for m, s in members.items() if m != gone}
        after_leave = uniform_assign(left, topics)
        for m in left:
            assert all(before[m].get(t, frozenset()) <= after_leave[m].get(t, frozenset()) for t in before[m])
        assert len(owners(after_leave)) == sum(partition_counts)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=2, max_size=4), st.lists(st.sets(st.integers(0, 3), min_size=1),
                                                                      min_size=1, max_size=6))
def test_uniform_assigns_only_subscribed_topics_and_all_of_them(partition_counts, subscriptions):
    topics = topics_of(partition_counts)
    ids = list(topics)
    members = {f"m{i}": MemberSpec(frozenset(ids[j] for j in sub if j < len(ids)))
               for i, sub in enumerate(subscriptions)}
    result = uniform_assign(members, topics)
    subscribed = set().union(*(s.subscribed for s in members.values()))
    found = owners(result)
    assert set(found) == {(t, p) for t in subscribed for p in range(topics[t].num_partitions)}
    for (topic, _), holders in found.items():
        assert len(holders) == 1 and topic in members[holders[0]].subscribed


def test_uniform_prefers_a_member_in_the_partitions_rack():
    topic = uuid.UUID(int=9)
    racks = {p: frozenset({"a" if p % 2 == 0 else "b"}) for p in range(6)}
    topics = {topic: TopicSpec("t", 6, racks)}
    members = {"x": MemberSpec(frozenset({topic}), rack="a"), "y": MemberSpec(frozenset({topic}), rack="b")}
    result = uniform_assign(members, topics)
    assert result["x"] == {topic: frozenset({0, 2, 4})}
    assert result["y"] == {topic: frozenset({1, 3, 5})}


def test_range_splits_each_topic_in_contiguous_ranges_and_co_partitions():
    a, b = uuid.UUID(int=1), uuid.UUID(int=2)
    topics = {a: TopicSpec("a", 7), b: TopicSpec("b", 7)}
    members = {m: MemberSpec(frozenset({a, b})) for m in ("m1", "m2", "m3")}
    result = range_assign(members, topics)
    assert result["m1"] == {a: frozenset({0, 1, 2}), b: frozenset({0, 1, 2})}
    assert result["m2"] == {a: frozenset({3, 4}), b: frozenset({3, 4})}
    assert result["m3"] == {a: frozenset({5, 6}), b: frozenset({5, 6})}


@settings(max_examples=100, deadline=None)
@given(homogeneous)
def test_range_gives_every_partition_once(case):
    partition_counts, n_members = case
    topics = topics_of(partition_counts)
    members = {f"m{i}": MemberSpec(frozenset(topics)) for i in range(n_members)}
    found = owners(range_assign(members, topics))
    assert len(found) == sum(partition_counts) and all(len(v) == 1 for v in found.values())

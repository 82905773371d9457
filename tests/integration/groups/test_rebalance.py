"""Consumer groups with real clients: assignment, rebalances and exactly-once consumption with commits.

Each scenario runs one group of member processes (``support.Member``) over a
6-partition topic, through four phases; after each, the test waits until the
group has settled -- every partition held by exactly one live member, every
live member holding one -- then produces a batch and waits until the members
have consumed *and committed* all of it:

1. three members subscribe;
2. a fourth joins (a rebalance: the newcomer gets partitions);
3. one leaves (closes its consumer: LeaveGroup, a rebalance);
4. one is killed (SIGKILL: no LeaveGroup; its session expires, a rebalance).

At the end every produced (partition, offset) was reported exactly once
across the group: partitions that moved were resumed exactly at their last
committed offset, whoever held them before.

The scenarios mostly wait (for sessions to expire, members to notice a
rebalance at their next heartbeat), so they run side by side, each with its
own group and topic on the module's broker: the ``scenarios`` fixture starts
them all, and each test checks its own outcome.

Clients: confluent-kafka (librdkafka) with each of its assignors -- range,
roundrobin and cooperative-sticky (incremental rebalances) -- kafka-python,
aiokafka, and a group mixing all three Python clients, where roundrobin is
the only protocol every member offers and so the one the broker chooses.
kcat's balanced consumer (``-G``) commits and resumes.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import subprocess

import pytest
from confluent_kafka.admin import AdminClient

from support.groups import Group
from support.wait import wait_until

from .conftest import create_topic

PARTITIONS = 6
BATCH = 120
KILLED_SESSION_MS = 2500


def end_offsets(group: Group) -> dict[int, int]:
    per = group.produced // PARTITIONS
    return {p: per + (1 if p < group.produced % PARTITIONS else 0) for p in range(PARTITIONS)}


def stable_protocol(bootstrap: str, group_id: str, members: int) -> str:
    """The group's protocol once DescribeGroups shows it Stable with ``members`` members.

    A group between generations is described with no protocol (as in Kafka), and a
    kafka-python 3.0.12 leader sometimes rejoins right after a join it completed (when
    a poll's timeout expired just as the SyncGroup answer came, its next poll starts a
    new JoinGroup instead of taking the finished one): a rebalance more, then Stable again.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def described():
        (description,) = [f.result(10) for f in admin.describe_consumer_groups([group_id]).values()]
        stable = str(description.state).endswith("STABLE") and len(description.members) == members
        return description.partition_assignor if stable else None

    return wait_until(described, timeout=30, what=f"group {group_id} stable with {members} members")


def run_scenario(broker, clients: list[str], *, group_id: str, assignor: str | None = None) -> Group:
    """The four phases with members of ``clients`` (cycled in the order survivor, leaver, victim,
    newcomer); returns the group, all members stopped, with the protocol chosen while all four
    were members (``protocols[0]``) and at the end (``protocols[1]``)."""
    topic = f"{group_id}-topic"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    group = Group(broker.bootstrap, group_id, topic, PARTITIONS)
    kinds = itertools.cycle(clients)
    protocols = []
    try:
        survivor = group.add(next(kinds), assignor=assignor)
        leaver = group.add(next(kinds), assignor=assignor)
        victim = group.add(next(kinds), assignor=assignor, session_ms=KILLED_SESSION_MS)
        group.wait_settled(60)
        group.produce(BATCH)
        group.wait_consumed(group.produced)

        newcomer = group.add(next(kinds), assignor=assignor)
        group.wait_settled()
        assert newcomer.assignment, "the new member got no partitions"
        protocols.append(stable_protocol(broker.bootstrap, group_id, 4))
        group.produce(BATCH)
        group.wait_consumed(group.produced)

        assert leaver.stop() == 0 and leaver.closed.is_set()
        group.wait_settled()
        group.produce(BATCH)
        group.wait_consumed(group.produced)

        victim.kill()
        group.wait_settled(KILLED_SESSION_MS / 1000 + 20)
        group.produce(BATCH)
        group.wait_consumed(group.produced)

        assert {m.name for m in group.live} == {survivor.name, newcomer.name}
        group.assert_exactly_once(end_offsets(group))
        protocols.append(stable_protocol(broker.bootstrap, group_id, 2))
        group.protocols = protocols
    finally:
        group.stop_all()
    return group


#: scenario -> (member clients, assignor)
SCENARIOS = {
    "confluent-range": (["confluent"], "range"),
    "confluent-roundrobin": (["confluent"], "roundrobin"),
    "confluent-cooperative-sticky": (["confluent"], "cooperative-sticky"),
    "kafka-python": (["kafka-python"], None),
    "aiokafka": (["aiokafka"], None),
    "mixed": (["aiokafka", "confluent", "kafka-python", "confluent"], None),
}


@pytest.fixture(scope="module")
def scenarios(group_broker):
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(SCENARIOS)) as pool:
        yield {name: pool.submit(run_scenario, group_broker, clients, group_id=name, assignor=assignor)
               for name, (clients, assignor) in SCENARIOS.items()}


def outcome(scenarios, name: str) -> Group:
    return scenarios[name].result(timeout=240)


@pytest.mark.parametrize("assignor", ["range", "roundrobin", "cooperative-sticky"])
def test_confluent_group(scenarios, assignor):
    group = outcome(scenarios, f"confluent-{assignor}")
    assert group.protocols == [assignor, assignor]


def test_kafka_python_group(scenarios):
    group = outcome(scenarios, "kafka-python")
    assert group.protocols == ["range", "range"]        # kafka-python prefers range, then roundrobin


def test_aiokafka_group(scenarios):
    group = outcome(scenarios, "aiokafka")
    assert group.protocols == ["roundrobin", "roundrobin"]     # aiokafka offers roundrobin only


def test_mixed_python_clients_group(scenarios):
    """librdkafka and kafka-python offer range and roundrobin, aiokafka roundrobin alone:
    the broker picks the protocol all of them support."""
    group = outcome(scenarios, "mixed")
    assert [m.client for m in group.members] == ["aiokafka", "confluent", "kafka-python", "confluent"]
    assert group.protocols == ["roundrobin", "roundrobin"]


def test_kcat_balanced_consumer_commits_and_resumes(group_broker):
    topic = "kcat-group-topic"
    create_topic(group_broker.bootstrap, topic, PARTITIONS)
    group = Group(group_broker.bootstrap, "kcat", topic, PARTITIONS)
    group.produce(BATCH)

    def kcat_group() -> list[tuple[int, int]]:
        result = subprocess.run(
            ["kcat", "-b", group_broker.bootstrap, "-G", "kcat", topic, "-e", "-q", "-f", r"%p %o\n",
             "-X", "auto.offset.reset=earliest"], capture_output=True, timeout=60, text=True)
        assert result.returncode == 0, result.stderr[-2000:]
        return [tuple(map(int, line.split())) for line in result.stdout.splitlines() if line]

    first = kcat_group()
    assert sorted(first) == sorted((p, o) for p, end in end_offsets(group).items() for o in range(end))
    group.produce(BATCH)
    second = kcat_group()             # resumes after what the first run committed
    assert sorted(second) == sorted((p, o) for p, end in end_offsets(group).items()
                                    for o in range(end - BATCH // PARTITIONS, end))

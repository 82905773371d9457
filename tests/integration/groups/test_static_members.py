"""Static membership (KIP-345): a member that restarts within its session timeout takes its place back.

Members with ``group.instance.id`` send no LeaveGroup when they close; the
restarted process joins without a member id, under the same instance id,
and the coordinator gives it the old member's place: same generation, same
assignment, no rebalance -- the other members keep their partitions without
a revocation, and consumption continues exactly once from the commits.
"""

from __future__ import annotations

import time

import pytest

from support.groups import Group
from support.wait import wait_until

from .conftest import create_topic

PARTITIONS = 6
BATCH = 60
SESSION_MS = 15000


def quiet(broker, group_id: str, period: float = 2.0, timeout: float = 30) -> int:
    """Wait until ``group_id`` has not started a rebalance for ``period`` seconds; the rebalances so far."""
    pattern = f"Preparing to rebalance group {group_id} "
    last = {"count": broker.log_text().count(pattern), "since": time.monotonic()}

    def quiet_for_period() -> bool:
        now = broker.log_text().count(pattern)
        if now != last["count"]:
            last.update(count=now, since=time.monotonic())
        return time.monotonic() - last["since"] >= period

    wait_until(quiet_for_period, timeout=timeout, what=f"group {group_id} to stop rebalancing", interval=0.1)
    return last["count"]


@pytest.mark.parametrize("client", ["confluent", "kafka-python"])
def test_static_member_restart_causes_no_rebalance(group_broker, client):
    group_id = f"static-{client}"
    topic = f"{group_id}-topic"
    create_topic(group_broker.bootstrap, topic, PARTITIONS)
    group = Group(group_broker.bootstrap, group_id, topic, PARTITIONS)
    try:
        members = [group.add(client, instance_id=f"instance-{i}", session_ms=SESSION_MS, name=f"{client}-{i}")
                   for i in range(3)]
        group.wait_settled(60)
        group.produce(BATCH)
        group.wait_consumed(group.produced)
        # Members joining one by one rebalance the group several times, and a kafka-python leader
        # rejoins once the topic's metadata reaches it: wait until that is over.
        rebalances = quiet(group_broker, group_id)
        before = group.wait_settled()
        assignments_seen = [len([e for e in m.events if e[0] == "ASSIGN"]) for m in members]

        restarting = members[1]
        restarting.kill()                      # gone without a LeaveGroup, as a crash or a static close
        again = group.add(client, instance_id="instance-1", session_ms=SESSION_MS, name=f"{client}-1-again")
        group.wait_settled(SESSION_MS / 1000 - 2)
        assert again.assignment == before[restarting.name], "the restarted member has other partitions"
        group_broker.wait_for_log(f"Static member instance-1 of group {group_id} rejoined without changing "
                                  "the protocol: no rebalance")
        group.produce(BATCH)
        group.wait_consumed(group.produced)

        assert group_broker.log_text().count(f"Preparing to rebalance group {group_id} ") == rebalances, \
            group.describe()
        for member, seen in zip([members[0], members[2]], [assignments_seen[0], assignments_seen[2]], strict=True):
            assert len([e for e in member.events if e[0] == "ASSIGN"]) == seen, \
                f"{member.name} saw its assignment change"
        per = group.produced // PARTITIONS
        group.assert_exactly_once(dict.fromkeys(range(PARTITIONS), per))
    finally:
        group.stop_all()

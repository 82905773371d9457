"""A KIP-848 consumer group in a 3-broker cluster: its coordinator moves, the group and its offsets stay.

The group's ``__consumer_offsets`` partition has three replicas; the broker
leading it is stopped (a controlled shutdown moves the leadership), the new
leader replays the group's records, and the members -- librdkafka with
``group.protocol=consumer`` -- find it there and carry on with their
partitions and epochs: nothing consumed twice, nothing skipped.
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from support.cluster import Cluster
from support.groups import Group
from twisted_kafka.coordinator.group.topic import partition_for

OFFSETS_PARTITIONS = 3
OVERRIDES = {
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS), "group.initial.rebalance.delay.ms": "0",
    "group.consumer.heartbeat.interval.ms": "1000", "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "10000", "group.consumer.min.session.timeout.ms": "1000",
    "auto.leader.rebalance.enable": "false",
}


def test_the_coordinator_moving_keeps_the_group_and_its_offsets(tmp_path, zookeeper, zk_chroot):
    cluster = Cluster(tmp_path, zookeeper, zk_chroot, overrides=OVERRIDES).start()
    bootstrap = cluster.bootstrap(1, 2, 3)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("moving", 6, 3)])["moving"].result(30)
    group = Group(bootstrap, "moving", "moving", 6)
    members = [group.add("confluent", extra=("--protocol", "consumer")) for _ in range(2)]
    try:
        group.wait_settled(60)
        group.produce(60)
        group.wait_consumed(60, timeout=60)
        before = admin.describe_consumer_groups(["moving"])["moving"].result(20)
        index = partition_for("moving", OFFSETS_PARTITIONS)
        coordinator = cluster.metadata(1).leaders("__consumer_offsets")[index]
        assert before.coordinator.id == coordinator
        assert cluster.broker(coordinator).stop() == 0
        survivors = [b for b in (1, 2, 3) if b != coordinator]
        cluster.wait_consistent(lambda md: md.leaders("__consumer_offsets")[index] in survivors, timeout=60,
                                what="a new leader of the group's offsets partition")
        group.produce(60)
        group.wait_consumed(120, timeout=90)
        group.assert_exactly_once({p: 20 for p in range(6)})
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap(*survivors)})
        after = admin.describe_consumer_groups(["moving"])["moving"].result(20)
        assert after.coordinator.id in survivors
        assert sorted(m.member_id for m in after.members) == sorted(m.member_id for m in before.members)
        held = sorted(tp.partition for m in after.members for tp in m.assignment.topic_partitions)
        assert held == list(range(6))
        assert all(m.alive for m in members)
    finally:
        group.stop_all()
        cluster.stop()

"""Slow: the controller killed again and again (``make test-slow``)."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from support.cluster import Cluster

pytestmark = pytest.mark.slow


def test_repeated_controller_failures(tmp_path, zookeeper, zk_chroot):
    cluster = Cluster(tmp_path, zookeeper, zk_chroot, overrides={"auto.leader.rebalance.enable": "false"})
    cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        admin.create_topics([NewTopic("soak", 6, 3)], operation_timeout=10)["soak"].result(30)
        epochs = [cluster.controller_epoch()]
        for _ in range(8):
            old = cluster.wait_for_controller()
            cluster.broker(old).kill()
            new = cluster.wait_for_controller(other_than=old)
            epochs.append(cluster.controller_epoch())
            md = cluster.wait_consistent(lambda md, o=old, n=new: o not in md.broker_ids and md.controller == n and all(
                p.leader not in (o, -1) for p in md.partitions("soak").values()))
            assert len(md.partitions("soak")) == 6
            cluster.broker(old).start()
            cluster.wait_consistent(lambda md: md.broker_ids == [1, 2, 3] and all(
                len(p.isr) == 3 for p in md.partitions("soak").values()))
        assert epochs == sorted(epochs) and len(set(epochs)) == len(epochs)
    finally:
        cluster.kill_all()

"""A three-broker ZooKeeper cluster whose control plane and inter-broker listener are SASL_PLAINTEXT (PLAIN):
the controller's channels and the followers' replica fetchers authenticate as the brokers' own user, so
a topic replicated three times keeps all three in its ISR and acks=all with min.insync.replicas=3 succeeds."""

from __future__ import annotations

import pytest

from tests.integration.cluster.test_replication import consume_all, create_topic, produce, start_cluster
from tests.integration.sasl.test_inter_broker_sasl import plain_overrides

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def test_followers_replicate_over_a_sasl_inter_broker_listener(tmp_path, zookeeper, zk_chroot):
    cluster = start_cluster(tmp_path, zookeeper, zk_chroot, **plain_overrides(), **{
        "offsets.topic.replication.factor": "1"})
    try:
        create_topic(cluster, "sasl-replicated", [1, 2, 3], min_isr=3)
        values = [f"v{i}".encode() for i in range(20)]
        assert produce(cluster.bootstrap(), "sasl-replicated", values) == values
        assert sorted(consume_all(cluster.bootstrap(), "sasl-replicated", len(values))) == sorted(values)
        for broker in cluster.brokers.values():
            assert "Controller cannot reach" not in broker.log_text()
            assert "SASL authentication" not in broker.log_text()
    finally:
        statuses = cluster.stop()
    assert set(statuses.values()) == {0}, statuses

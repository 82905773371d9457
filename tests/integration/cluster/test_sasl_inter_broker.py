"""A three-broker ZooKeeper cluster whose control plane and inter-broker listener are SASL_PLAINTEXT:
the controller's channels and the followers' replica fetchers authenticate as the brokers' own user, so
a topic replicated three times keeps all three in its ISR and acks=all with min.insync.replicas=3 succeeds.
With PLAIN, and with SCRAM-SHA-512 whose credential is created in ZooKeeper before the brokers start
(``bin/twisted-kafka-scram --zookeeper``, as Kafka's ``kafka-configs.sh --zookeeper`` bootstrap)."""

from __future__ import annotations

import subprocess

import pytest

from tests.integration.cluster.test_replication import consume_all, create_topic, produce, start_cluster
from tests.integration.sasl.test_inter_broker_sasl import TOOL, plain_overrides, scram_overrides

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_followers_replicate_over_a_sasl_inter_broker_listener(tmp_path, zookeeper, zk_chroot, mechanism):
    if mechanism == "PLAIN":
        overrides = plain_overrides()
    else:
        overrides = scram_overrides("broker-secret")
        added = subprocess.run([str(TOOL), "--zookeeper", zookeeper.connect_string(zk_chroot), "--alter",
                                "--entity-type", "users", "--entity-name", "broker",
                                "--add-config", "SCRAM-SHA-512=[password=broker-secret]"],
                               capture_output=True, text=True, timeout=60)
        assert added.returncode == 0, added.stderr
    cluster = start_cluster(tmp_path, zookeeper, zk_chroot, **overrides, **{
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
    # The brokers that are not the controller asked it over its SASL control plane.
    succeeded = [b for b, broker in cluster.brokers.items() if "Controlled shutdown succeeded" in broker.log_text()]
    assert len(succeeded) >= 2, {b: broker.log_text()[-3000:] for b, broker in cluster.brokers.items()}
    for broker in cluster.brokers.values():
        assert "cannot reach controller" not in broker.log_text()

"""``EmbeddedCluster`` and the ``kafka_cluster`` fixture: ZooKeeper and three brokers, or a clear skip.

* where ZooKeeper is installed: a topic created with replication factor 3
  has every replica in sync on every broker, a producer with acks=all is
  acknowledged, and the cluster stops cleanly (every broker exits 0);
* where it is not: the fixture skips, saying what to install.
"""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.integration


def test_a_three_broker_cluster_replicates_and_stops_cleanly(pytester):
    pytester.makepyfile("""
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient

        def test_replicated(kafka_cluster):
            assert len(kafka_cluster.bootstrap_servers.split(",")) == 3
            topic = kafka_cluster.create_topic(partitions=2)
            metadata = AdminClient({"bootstrap.servers": kafka_cluster.bootstrap_servers}).list_topics(timeout=30)
            assert sorted(metadata.brokers) == [1, 2, 3]
            for partition in metadata.topics[topic].partitions.values():
                assert sorted(partition.replicas) == [1, 2, 3] and sorted(partition.isrs) == [1, 2, 3]
            reports = []
            producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all"})
            producer.produce(topic, b"replicated", on_delivery=lambda err, msg: reports.append(err))
            producer.flush(60)
            assert reports == [None]

        def test_stop(kafka_cluster):
            directory = kafka_cluster.brokers[0].directory
            assert kafka_cluster.stop() == {1: 0, 2: 0, 3: 0}
            assert not any(broker.running for broker in kafka_cluster.brokers)
            assert not kafka_cluster.zookeeper.running and directory.parent.exists()
    """)
    result = pytester.runpytest("-p", "no:randomly", "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=2)


def test_without_zookeeper_the_fixture_skips_saying_what_to_install(pytester):
    pytester.makeconftest("""
        import twisted_kafka.testing.zookeeper as zookeeper

        zookeeper.ZOOKEEPER_JAR = zookeeper.ZOOKEEPER_JAR.with_name("no-such-zookeeper.jar")
    """)
    pytester.makepyfile("""
        def test_needs_a_cluster(kafka_cluster):
            raise AssertionError("not reached")
    """)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*kafka_cluster needs ZooKeeper: *no-such-zookeeper.jar is missing: "
                                 "install Debian's zookeeper package*"])

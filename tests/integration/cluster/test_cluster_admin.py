"""Admin operations in a three-broker ZooKeeper cluster: any broker takes them, ZooKeeper holds Kafka's
layout, and after each change every broker answers Metadata identically."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from support.cluster import Cluster
from support.raw_client import RawClient
from support.wait import wait_until
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

CT = m.CreateTopicsRequest
DT = m.DeleteTopicsRequest
CP = m.CreatePartitionsRequest
DC = m.DescribeConfigsRequest
IAC = m.IncrementalAlterConfigsRequest
TOPIC, BROKER = 2, 4
ENCODER_SECRET = "the cluster's password encoder secret"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zookeeper):
    cluster = Cluster(tmp_path_factory.mktemp("admin-cluster"), zookeeper, "/admin-cluster",
                      overrides={"auto.leader.rebalance.enable": "false", "password.encoder.secret": ENCODER_SECRET})
    cluster.start()
    yield cluster
    statuses = cluster.stop()
    assert set(statuses.values()) == {0}, statuses


def raw(cluster, broker_id, body, version):
    with RawClient(cluster.broker(broker_id).data_port) as client:
        return client.request(body, version)


def non_controllers(cluster) -> list[int]:
    controller = cluster.wait_for_controller()
    return [b for b in cluster.running if b != controller]


def all_led(topic, count):
    return lambda md: topic in md.topics and len(md.partitions(topic)) == count and all(
        p.leader >= 0 for p in md.partitions(topic).values())


def describe_topic_config(cluster, broker_id, topic, key):
    response = raw(cluster, broker_id, DC(resources=[DC.DescribeConfigsResource(
        resource_type=TOPIC, resource_name=topic, configuration_keys=[key])], include_synonyms=False,
        include_documentation=False), 4)
    [result] = response.results
    assert result.error_code == 0, result
    return {c.name: c.value for c in result.configs}.get(key)


def test_create_on_a_broker_that_is_not_the_controller(cluster):
    broker = non_controllers(cluster)[0]
    response = raw(cluster, broker, CT(topics=[CT.CreatableTopic(
        name="raw", num_partitions=3, replication_factor=2, assignments=[],
        configs=[CT.CreatableTopic.CreatableTopicConfig(name="retention.ms", value="60000")])],
        timeout_ms=10000, validate_only=False), 7)
    [result] = response.topics
    assert (result.error_code, result.num_partitions, result.replication_factor) == (0, 3, 2)
    # Answered once the broker that took it knows the topic: its own Metadata already has it.
    assert all_led("raw", 3)(cluster.metadata(broker))
    md = cluster.wait_consistent(all_led("raw", 3))
    assert str(result.topic_id) == md.topics["raw"][0]
    for view in md.partitions("raw").values():
        assert len(view.replicas) == 2 and view.isr == view.replicas and view.leader == view.replicas[0]
    # Kafka's layout in ZooKeeper.
    with cluster.zk() as zk:
        topic = json.loads(zk.get("/brokers/topics/raw")[0])
        assert topic["version"] == 3 and sorted(topic["partitions"]) == ["0", "1", "2"] and "topic_id" in topic
        assert json.loads(zk.get("/config/topics/raw")[0]) == {"version": 1, "config": {"retention.ms": "60000"}}
        state, stat = zk.get("/brokers/topics/raw/partitions/0/state")
        state = json.loads(state)
        assert state["leader"] == md.partitions("raw")[0].leader and state["controller_epoch"] >= 1
        assert stat.version == 0
    # The same name again, through another broker: already exists.
    again = raw(cluster, non_controllers(cluster)[1], CT(topics=[CT.CreatableTopic(
        name="raw", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
        timeout_ms=5000, validate_only=False), 7)
    assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_admin_client_create_grow_configure_delete(cluster):
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap(non_controllers(cluster)[0])})
    admin.create_topics([NewTopic("conf", 2, 3)], operation_timeout=10)["conf"].result(30)
    cluster.wait_consistent(all_led("conf", 2))

    admin.create_partitions([NewPartitions("conf", 4)], operation_timeout=10)["conf"].result(30)
    md = cluster.wait_consistent(all_led("conf", 4))
    assert all(len(p.replicas) == 3 for p in md.partitions("conf").values())

    resource = ConfigResource("TOPIC", "conf", incremental_configs=[
        ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    for broker in cluster.running:        # every broker applied it
        wait_until(lambda b=broker: describe_topic_config(cluster, b, "conf", "retention.ms") == "123456", 10,
                   what=f"broker {broker} to know the new retention.ms")

    admin.delete_topics(["conf"], operation_timeout=10)["conf"].result(30)
    cluster.wait_consistent(lambda md: "conf" not in md.topics)
    with cluster.zk() as zk:
        wait_until(lambda: "conf" not in zk.get_children("/brokers/topics") and not zk.get_children(
            "/admin/delete_topics"), 10, what="the deletion to complete in ZooKeeper")
        assert not zk.exists("/config/topics/conf")
    for broker in cluster.brokers.values():      # every replica deleted its logs (renamed away at once)
        wait_until(lambda b=broker: not [d for d in (b.dir / "kafka-logs").glob("conf-*")
                                         if not d.name.endswith("-delete")], 10,
                   what="the replicas' logs to be deleted")


def test_raw_admin_requests_on_every_broker(cluster):
    first, second = non_controllers(cluster)[:2]
    raw(cluster, first, CT(topics=[CT.CreatableTopic(name="grow", num_partitions=1, replication_factor=3,
                                                     assignments=[], configs=[])],
                           timeout_ms=10000, validate_only=False), 7)
    grown = raw(cluster, second, CP(topics=[CP.CreatePartitionsTopic(name="grow", count=3, assignments=None)],
                                    timeout_ms=10000, validate_only=False), 3)
    assert [r.error_code for r in grown.results] == [0]
    cluster.wait_consistent(all_led("grow", 3))
    altered = raw(cluster, first, IAC(resources=[IAC.AlterConfigsResource(
        resource_type=TOPIC, resource_name="grow", configs=[IAC.AlterConfigsResource.AlterableConfig(
            name="segment.ms", config_operation=0, value="600000")])], validate_only=False), 1)
    assert [r.error_code for r in altered.responses] == [0]
    assert describe_topic_config(cluster, first, "grow", "segment.ms") == "600000"   # read-your-writes
    with cluster.zk() as zk:
        changes = [json.loads(zk.get(f"/config/changes/{c}")[0]) for c in zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "topics/grow"} in changes
    deleted = raw(cluster, second, DT(topic_names=["grow", "never"], timeout_ms=10000), 4)
    assert sorted((r.name, r.error_code) for r in deleted.responses) == [
        ("grow", 0), ("never", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert "grow" not in cluster.metadata(second).topics
    cluster.wait_consistent(lambda md: "grow" not in md.topics)


def test_dynamic_broker_configs_reach_every_broker(cluster):
    broker = non_controllers(cluster)[0]
    response = raw(cluster, broker, IAC(resources=[IAC.AlterConfigsResource(
        resource_type=BROKER, resource_name="", configs=[IAC.AlterConfigsResource.AlterableConfig(
            name="log.retention.bytes", config_operation=0, value="1048576")])], validate_only=False), 1)
    assert [r.error_code for r in response.responses] == [0]

    def cluster_default(b):
        result = raw(cluster, b, DC(resources=[DC.DescribeConfigsResource(
            resource_type=BROKER, resource_name="", configuration_keys=None)], include_synonyms=False,
            include_documentation=False), 4).results[0]
        return {c.name: c.value for c in result.configs}

    for b in cluster.running:
        wait_until(lambda b=b: cluster_default(b) == {"log.retention.bytes": "1048576"}, 10,
                   what=f"broker {b} to apply the cluster default")
    with cluster.zk() as zk:
        assert json.loads(zk.get("/config/brokers/<default>")[0])["config"] == {"log.retention.bytes": "1048576"}


def test_a_dynamic_password_is_stored_encrypted_in_zookeeper(cluster):
    """/config/brokers/<id> holds Kafka's encoded form (password.encoder.secret), never the password."""
    from twisted_kafka.config import ConfigSource
    from twisted_kafka.security.password_encoder import PasswordEncoder

    broker = non_controllers(cluster)[0]
    key, password = "listener.name.plaintext.ssl.key.password", "Zk-Stored-Pa55word"

    def alter(op, value):
        response = raw(cluster, broker, IAC(resources=[IAC.AlterConfigsResource(
            resource_type=BROKER, resource_name=str(broker), configs=[IAC.AlterConfigsResource.AlterableConfig(
                name=key, config_operation=op, value=value)])], validate_only=False), 1)
        assert [(r.error_code, r.error_message) for r in response.responses] == [(0, None)]

    alter(0, password)
    with cluster.zk() as zk:
        raw_znode = zk.get(f"/config/brokers/{broker}")[0]
    assert password.encode() not in raw_znode
    assert PasswordEncoder(ENCODER_SECRET).decode(json.loads(raw_znode)["config"][key]) == password
    [result] = raw(cluster, broker, DC(resources=[DC.DescribeConfigsResource(
        resource_type=BROKER, resource_name=str(broker), configuration_keys=[key])], include_synonyms=False,
        include_documentation=False), 4).results
    [entry] = result.configs
    assert (entry.value, entry.is_sensitive, entry.config_source) == (None, True,
                                                                      ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    alter(1, None)                                                                       # DELETE
    with cluster.zk() as zk:
        assert key not in json.loads(zk.get(f"/config/brokers/{broker}")[0])["config"]


def test_producers_auto_create_topics_on_any_broker(cluster):
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap(non_controllers(cluster)[1]),
                         "message.timeout.ms": 20000})
    delivered = []
    producer.produce("auto", b"v", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(30)
    assert delivered == [None]
    cluster.wait_consistent(all_led("auto", 1))

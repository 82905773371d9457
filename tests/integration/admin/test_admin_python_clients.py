"""Topic and config administration with kafka-python's KafkaAdminClient (CreateTopics v7,
DeleteTopics v6, DescribeConfigs v4, IncrementalAlterConfigs v1, CreatePartitions v3,
DeleteRecords v2, DescribeCluster v2) and aiokafka's AIOKafkaAdminClient (CreateTopics v3,
DeleteTopics v3, DescribeConfigs v2, CreatePartitions v1, DeleteRecords v2).
"""

from __future__ import annotations

import asyncio

import pytest

from tests.integration.admin.support import produce, topic_id, watermarks

pytestmark = pytest.mark.integration


@pytest.fixture
def kp_admin(admin_broker):
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=admin_broker.bootstrap, request_timeout_ms=10000)
    yield admin
    admin.close()


def test_kafka_python_create_describe_delete(kp_admin, admin_broker):
    from kafka.errors import InvalidReplicationFactorError, TopicAlreadyExistsError, UnknownTopicOrPartitionError

    created = kp_admin.create_topics({"kp-topic": {"num_partitions": 2, "replication_factor": 1,
                                                   "configs": {"retention.ms": "60000"}}}, timeout_ms=10000)
    [topic] = created["topics"]
    assert (topic["name"], topic["error_code"], topic["num_partitions"]) == ("kp-topic", 0, 2)
    assert topic["topic_id"] == str(topic_id(admin_broker, "kp-topic"))   # to_dict() gives strings
    assert topic["configs"]["retention.ms"]["value"] == "60000"
    assert topic["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics({"kp-topic": {"num_partitions": 1}})
    with pytest.raises(InvalidReplicationFactorError):
        kp_admin.create_topics({"kp-rf": {"num_partitions": 1, "replication_factor": 2}})
    assert "kp-topic" in kp_admin.list_topics()

    from kafka.admin import ConfigResource, ConfigResourceType

    described = kp_admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-topic")])
    modified = described["topic"]["kp-topic"]        # default filter: the topic's own settings only
    assert list(modified) == ["retention.ms"]
    assert (modified["retention.ms"]["value"], modified["retention.ms"]["config_type"]) == ("60000", "LONG")
    every = kp_admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-topic")], config_filter="all")
    assert every["topic"]["kp-topic"]["segment.bytes"]["config_source"] == "STATIC_BROKER_CONFIG"
    broker = kp_admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")], config_filter="all")
    assert broker["broker"]["0"]["num.io.threads"]["value"] == "8"

    kp_admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-topic", {"retention.bytes": "4096"})])
    described = kp_admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp-topic")])
    assert described["topic"]["kp-topic"]["retention.bytes"]["value"] == "4096"
    assert described["topic"]["kp-topic"]["retention.ms"]["value"] == "60000"   # incremental: kept

    deleted = kp_admin.delete_topics(["kp-topic"], timeout_ms=10000)       # DeleteTopics v6, by name
    assert [(t["name"], t["error_code"]) for t in deleted["topics"]] == [("kp-topic", 0)]
    with pytest.raises(UnknownTopicOrPartitionError):
        kp_admin.delete_topics(["kp-topic"])


def test_kafka_python_delete_by_topic_id(kp_admin, admin_broker):
    kp_admin.create_topics({"kp-by-id": {"num_partitions": 1}}, timeout_ms=10000)
    by_id = topic_id(admin_broker, "kp-by-id")
    deleted = kp_admin.delete_topics([by_id], timeout_ms=10000)
    assert [(t["name"], t["topic_id"], t["error_code"]) for t in deleted["topics"]] == [("kp-by-id", str(by_id), 0)]
    assert "kp-by-id" not in kp_admin.list_topics()


def test_kafka_python_partitions_records_and_cluster(kp_admin, admin_broker):
    kp_admin.create_topics({"kp-grow": {"num_partitions": 1}}, timeout_ms=10000)
    kp_admin.create_partitions({"kp-grow": 3}, timeout_ms=10000)
    assert sorted(kp_admin.describe_topics(["kp-grow"])[0]["partitions"], key=lambda p: p["partition_index"])[2][
        "partition_index"] == 2
    produce(admin_broker.bootstrap, "kp-grow", 10)
    from kafka import TopicPartition

    kp_admin.delete_records({TopicPartition("kp-grow", 0): 4})
    assert watermarks(admin_broker.bootstrap, "kp-grow") == (4, 10)

    cluster = kp_admin.describe_cluster()                  # DescribeCluster v2
    assert cluster["controller_id"] == 0
    assert [(b["broker_id"], b["port"]) for b in cluster["brokers"]] == [(0, admin_broker.data_port)]
    assert cluster["cluster_id"]


def test_aiokafka_create_describe_delete(admin_broker):
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.admin.records_to_delete import RecordsToDelete
    from aiokafka.structs import TopicPartition

    async def scenario():
        admin = AIOKafkaAdminClient(bootstrap_servers=admin_broker.bootstrap, request_timeout_ms=10000)
        await admin.start()
        try:
            response = await admin.create_topics([NewTopic("aio-topic", 2, 1, topic_configs={"retention.ms": "90000"}),
                                                  NewTopic("aio-topic-2", 1, 1)])
            errors = {name: code for name, code, *_ in response.topic_errors}
            assert errors == {"aio-topic": 0, "aio-topic-2": 0}
            response = await admin.create_topics([NewTopic("aio-topic", 2, 1)])
            assert [code for _, code, *_ in response.topic_errors] == [36]       # TOPIC_ALREADY_EXISTS
            assert {"aio-topic", "aio-topic-2"} <= set(await admin.list_topics())

            [described] = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "aio-topic")])
            [(error, message, kind, name, entries)] = [tuple(r)[:5] for r in described.resources]
            assert (error, name) == (0, "aio-topic")
            values = {entry[0]: entry[1] for entry in entries}
            assert values["retention.ms"] == "90000" and values["segment.bytes"] == "1073741824"
            [broker] = await admin.describe_configs([ConfigResource(ConfigResourceType.BROKER, "0")])
            assert {entry[0]: entry[1] for entry in tuple(broker.resources[0])[4]}["num.io.threads"] == "8"

            await admin.create_partitions({"aio-topic": NewPartitions(4)})
            await asyncio.to_thread(produce, admin_broker.bootstrap, "aio-topic", 5)
            low = await admin.delete_records({TopicPartition("aio-topic", 0): RecordsToDelete(3)})
            assert low == {TopicPartition("aio-topic", 0): 3}

            response = await admin.delete_topics(["aio-topic", "aio-missing"])
            assert {name: code for name, code, *_ in response.topic_error_codes} == {"aio-topic": 0, "aio-missing": 3}
            assert "aio-topic" not in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(scenario())

"""Topic administration with confluent-kafka's AdminClient (librdkafka: CreateTopics v4,
DeleteTopics v4, CreatePartitions v2, DeleteRecords v2).

Each error case is one topic of a batch: the others in the same request must
still succeed, as in Kafka.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError as CK
from confluent_kafka.admin import NewPartitions, NewTopic

from tests.integration.admin.support import (
    error_code,
    fetch_log_start_offset,
    outcomes,
    produce,
    produce_one,
    topic_id,
    watermarks,
)

pytestmark = pytest.mark.integration


def partitions_of(admin, topic: str) -> dict[int, list[int]]:
    metadata = admin.list_topics(topic, timeout=10)
    return {p.id: list(p.replicas) for p in metadata.topics[topic].partitions.values()}


def test_create_topics_with_configs_defaults_and_assignment(admin):
    results = outcomes(admin.create_topics([
        NewTopic("ct-plain", 3, 1),
        NewTopic("ct-defaults"),                                     # -1/-1: num.partitions=1 (etc/server.properties)
        NewTopic("ct-configs", 2, 1, config={"retention.ms": "3600000", "cleanup.policy": "delete"}),
        NewTopic("ct-assigned", num_partitions=2, replica_assignment=[[0], [0]]),
    ], operation_timeout=10))
    assert results == {"ct-plain": None, "ct-defaults": None, "ct-configs": None, "ct-assigned": None}
    # timeout_ms > 0: the topics are in the broker's metadata when the answer comes back
    assert partitions_of(admin, "ct-plain") == {0: [0], 1: [0], 2: [0]}
    assert partitions_of(admin, "ct-defaults") == {0: [0]}
    assert partitions_of(admin, "ct-assigned") == {0: [0], 1: [0]}
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    configs = outcomes(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "ct-configs")]))
    described = next(iter(configs.values()))
    assert described["retention.ms"].value == "3600000"
    assert described["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert described["segment.bytes"].source == ConfigSource.STATIC_BROKER_CONFIG.value  # log.segment.bytes


def test_create_topics_errors_fail_one_topic_each(admin):
    outcomes(admin.create_topics([NewTopic("ce-exists", 1, 1)], operation_timeout=10))
    results = outcomes(admin.create_topics([
        NewTopic("ce-exists", 1, 1),
        NewTopic("ce-zero-partitions", 0, 1),
        NewTopic("ce-rf-too-big", 1, 3),
        NewTopic("ce-bad-config", 1, 1, config={"retention.ms": "soon"}),
        NewTopic("ce-unknown-config", 1, 1, config={"no.such.key": "1"}),
        NewTopic("ce-unknown-broker", num_partitions=1, replica_assignment=[[7]]),
        NewTopic("ce-bad/name", 1, 1),
        NewTopic("ce-ok", 1, 1),
    ], operation_timeout=10))
    codes = {name: error_code(outcome) for name, outcome in results.items()}
    assert codes == {
        "ce-exists": CK.TOPIC_ALREADY_EXISTS,
        "ce-zero-partitions": CK.INVALID_PARTITIONS,
        "ce-rf-too-big": CK.INVALID_REPLICATION_FACTOR,
        "ce-bad-config": CK.INVALID_CONFIG,
        "ce-unknown-config": CK.INVALID_CONFIG,
        "ce-unknown-broker": CK.INVALID_REPLICA_ASSIGNMENT,
        "ce-bad/name": CK.TOPIC_EXCEPTION,
        "ce-ok": None,
    }
    # v1+ carries Kafka's messages, which name the problem
    assert "retention.ms" in results["ce-bad-config"].args[0].str()
    assert "larger than available brokers: 1" in results["ce-rf-too-big"].args[0].str()
    assert "ce-bad/name" not in admin.list_topics(timeout=10).topics


def test_validate_only_creates_nothing(admin):
    results = outcomes(admin.create_topics([NewTopic("vo-topic", 4, 1, config={"retention.ms": "1000"}),
                                            NewTopic("vo-bad", 1, 1, config={"retention.ms": "x"})],
                                           validate_only=True, operation_timeout=10))
    assert results["vo-topic"] is None
    assert error_code(results["vo-bad"]) == CK.INVALID_CONFIG
    assert "vo-topic" not in admin.list_topics(timeout=10).topics
    assert outcomes(admin.create_topics([NewTopic("vo-topic", 4, 1)], operation_timeout=10)) == {"vo-topic": None}


def test_delete_topics_then_produce_fails_and_the_name_can_be_reused(admin, admin_broker):
    outcomes(admin.create_topics([NewTopic("dt-topic", 2, 1)], operation_timeout=10))
    produce(admin_broker.bootstrap, "dt-topic", 5)
    first_id = topic_id(admin_broker, "dt-topic")
    results = outcomes(admin.delete_topics(["dt-topic", "dt-never-existed"], operation_timeout=10))
    assert results["dt-topic"] is None
    assert error_code(results["dt-never-existed"]) == CK.UNKNOWN_TOPIC_OR_PART
    assert "dt-topic" not in admin.list_topics(timeout=10).topics

    # A produce to the deleted topic is refused (raw request: a client would recreate it).
    assert produce_one(admin_broker, "dt-topic", 0) == CK.UNKNOWN_TOPIC_OR_PART

    assert outcomes(admin.create_topics([NewTopic("dt-topic", 1, 1)], operation_timeout=10)) == {"dt-topic": None}
    assert topic_id(admin_broker, "dt-topic") != first_id
    assert watermarks(admin_broker.bootstrap, "dt-topic") == (0, 0)   # an empty log, not the old one


def test_create_partitions(admin):
    outcomes(admin.create_topics([NewTopic("cp-topic", 1, 1), NewTopic("cp-other", 2, 1)], operation_timeout=10))
    results = outcomes(admin.create_partitions([
        NewPartitions("cp-topic", 3),
        NewPartitions("cp-other", 1),             # shrinking
        NewPartitions("cp-missing", 2),
    ], operation_timeout=10))
    assert results["cp-topic"] is None
    assert error_code(results["cp-other"]) == CK.INVALID_PARTITIONS
    assert error_code(results["cp-missing"]) == CK.UNKNOWN_TOPIC_OR_PART
    assert partitions_of(admin, "cp-topic") == {0: [0], 1: [0], 2: [0]}

    assert outcomes(admin.create_partitions([NewPartitions("cp-topic", 5, replica_assignment=[[0], [0]])],
                                            operation_timeout=10)) == {"cp-topic": None}
    assert len(partitions_of(admin, "cp-topic")) == 5
    results = outcomes(admin.create_partitions([NewPartitions("cp-topic", 7, replica_assignment=[[3], [0]])]))
    assert error_code(results["cp-topic"]) == CK.INVALID_REPLICA_ASSIGNMENT
    results = outcomes(admin.create_partitions([NewPartitions("cp-topic", 6, replica_assignment=[[0], [0]])]))
    assert error_code(results["cp-topic"]) == CK.INVALID_REPLICA_ASSIGNMENT   # 2 assignments for 1 partition

    assert outcomes(admin.create_partitions([NewPartitions("cp-topic", 9)], validate_only=True)) == {"cp-topic": None}
    assert len(partitions_of(admin, "cp-topic")) == 5


def test_delete_records(admin, admin_broker):
    from confluent_kafka import TopicPartition

    outcomes(admin.create_topics([NewTopic("dr-topic", 2, 1, config={"segment.bytes": "1024"})],
                                 operation_timeout=10))
    produce(admin_broker.bootstrap, "dr-topic", 30, flush_each=True)
    produce(admin_broker.bootstrap, "dr-topic", 3, partition=1)
    assert watermarks(admin_broker.bootstrap, "dr-topic") == (0, 30)

    results = outcomes(admin.delete_records([TopicPartition("dr-topic", 0, 17)]))
    [(tp, deleted)] = results.items()
    assert deleted.low_watermark == 17
    assert watermarks(admin_broker.bootstrap, "dr-topic") == (17, 30)          # ListOffsets earliest
    assert fetch_log_start_offset(admin_broker, "dr-topic", 0, 20) == (CK.NO_ERROR, 17)
    assert fetch_log_start_offset(admin_broker, "dr-topic", 0, 3)[0] == CK.OFFSET_OUT_OF_RANGE

    # An offset below the log start changes nothing; -1 means the high watermark.
    assert next(iter(outcomes(admin.delete_records([TopicPartition("dr-topic", 0, 5)])).values())).low_watermark == 17
    assert next(iter(outcomes(admin.delete_records([TopicPartition("dr-topic", 1, -1)])).values())).low_watermark == 3
    assert watermarks(admin_broker.bootstrap, "dr-topic", 1) == (3, 3)

    results = outcomes(admin.delete_records([TopicPartition("dr-topic", 0, 31)]))
    assert error_code(next(iter(results.values()))) == CK.OFFSET_OUT_OF_RANGE
    assert watermarks(admin_broker.bootstrap, "dr-topic") == (17, 30)

"""Kafka's BrokerTopicMetrics meters, the ReplicaManager/Log/group gauges and consumer lag, on one broker's
real ReplicaManager, handlers and group coordinator (no network)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet.defer import fail

from twisted_kafka.admin import prometheus, views
from twisted_kafka.coordinator.group.group import assigned_partitions_of
from twisted_kafka.metrics import MetricName, MetricsRegistry
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.server.broker_metrics import register_broker_metrics
from twisted_kafka.server.replica_manager import PartitionStateChange

from .helpers import BROKER_ID, records, result_of
from .test_fetch import fetch, partitions


@pytest.fixture
def registry(node) -> MetricsRegistry:
    registry = MetricsRegistry()
    register_broker_metrics(registry, replica_manager=node.replica_manager, metadata_cache=node.metadata_cache,
                            group_coordinator=node.group_coordinator.coordinator)
    return registry


def scrape(registry) -> dict[tuple[str, tuple], float]:
    """The registry through the Prometheus export and prometheus-client's parser: (name, labels) -> value."""
    text = prometheus.render(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def meter(registry, name: str, topic: str | None = None) -> float:
    labels = () if topic is None else (("topic", topic),)
    return scrape(registry).get((f"kafka_server_brokertopicmetrics_{name.lower()}_total", labels), 0.0)


def test_produce_marks_messages_and_bytes_in_per_topic_and_broker_wide(node, registry):
    node.create_topic("t", 2)
    node.create_topic("u")
    batch = records(b"a" * 100, b"b" * 100, b"c" * 100)
    node.produce("t", 0, b"a" * 100, b"b" * 100, b"c" * 100)
    node.produce("t", 1, b"d" * 100)
    node.produce("u", 0, b"e" * 10)
    assert meter(registry, "MessagesInPerSec", "t") == 4
    assert meter(registry, "MessagesInPerSec", "u") == 1
    assert meter(registry, "MessagesInPerSec") == 5
    assert meter(registry, "BytesInPerSec", "t") == len(batch) + len(records(b"d" * 100))
    assert meter(registry, "BytesInPerSec") == meter(registry, "BytesInPerSec", "t") + meter(
        registry, "BytesInPerSec", "u")
    assert meter(registry, "TotalProduceRequestsPerSec", "t") == 2
    assert meter(registry, "FailedProduceRequestsPerSec") == 0


def test_a_batch_over_max_message_bytes_is_rejected_bytes_not_a_failed_request(node, registry):
    node.create_topic("t", configs={"max.message.bytes": "200"})
    batch = records(b"x" * 500)
    partition = node.replica_manager.leader_partition("t", 0)
    failures: list = []
    node.replica_manager.append(partition, batch, 9).addErrback(failures.append)
    assert [f.value.code for f in failures] == [ErrorCode.MESSAGE_TOO_LARGE]
    assert meter(registry, "BytesRejectedPerSec", "t") == len(batch) == meter(registry, "BytesRejectedPerSec")
    assert meter(registry, "FailedProduceRequestsPerSec", "t") == 0      # Kafka: an expected error
    assert meter(registry, "TotalProduceRequestsPerSec", "t") == 1
    assert meter(registry, "MessagesInPerSec", "t") == 0


def test_acks_all_without_enough_replicas_is_a_failed_produce(node, registry):
    topic_id = node.create_topic("t", configs={"min.insync.replicas": "2"})
    partition = node.replica_manager.partition("t", 0)
    node.replica_manager.become_leader_or_follower([PartitionStateChange(
        "t", topic_id, 0, BROKER_ID, partition.leader_epoch + 1, partition.partition_epoch + 1,
        [BROKER_ID, 2], [BROKER_ID])])
    with pytest.raises(KafkaError) as raised:
        node.replica_manager.append(partition, records(b"a"), 9, acks=-1)
    assert raised.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert meter(registry, "FailedProduceRequestsPerSec", "t") == 1 == meter(registry, "FailedProduceRequestsPerSec")


def test_fetch_marks_bytes_out_and_a_follower_fetch_replication_bytes_out(node, registry):
    node.create_topic("t", 2)
    node.produce("t", 0, b"a" * 1000)
    got = partitions(node.call(fetch({"t": {0: 0, 1: 0}}), 12))
    sent = len(bytes(got[("t", 0)].records))
    assert sent > 1000
    assert meter(registry, "BytesOutPerSec", "t") == sent == meter(registry, "BytesOutPerSec")
    assert meter(registry, "TotalFetchRequestsPerSec", "t") == 2        # once per partition
    assert meter(registry, "ReplicationBytesOutPerSec") == 0

    # the same read by a follower (replica 2 of a partition led here) is replication, not consumption
    topic_id = node.metadata_cache.topics["t"].topic_id
    partition = node.replica_manager.partition("t", 0)
    node.replica_manager.become_leader_or_follower([PartitionStateChange(
        "t", topic_id, 0, BROKER_ID, partition.leader_epoch + 1, partition.partition_epoch + 1, [BROKER_ID, 2],
        [BROKER_ID, 2])])
    request = fetch({"t": {0: 0}})
    request.replica_id = 2
    node.call(request, 12)
    assert meter(registry, "ReplicationBytesOutPerSec", "t") == sent == meter(registry, "ReplicationBytesOutPerSec")
    assert meter(registry, "BytesOutPerSec", "t") == sent


def test_a_failed_read_is_a_failed_fetch(node, registry, monkeypatch):
    node.create_topic("t")
    node.produce("t", 0, b"a")          # records to read: a partition at its end is answered without a read
    monkeypatch.setattr(node.replica_manager, "read", lambda *args, **kwargs: fail(OSError(5, "I/O error")))
    got = partitions(node.call(fetch({"t": {0: 0}}), 12))
    assert got[("t", 0)].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert meter(registry, "FailedFetchRequestsPerSec", "t") == 1


def test_a_follower_append_is_replication_bytes_in(node, registry):
    topic_id = node.create_topic("t")
    partition = node.replica_manager.partition("t", 0)
    node.replica_manager.become_leader_or_follower([PartitionStateChange(
        "t", topic_id, 0, 2, partition.leader_epoch + 1, partition.partition_epoch + 1, [2, BROKER_ID],
        [2, BROKER_ID])])
    batch = records(b"r" * 300)
    node.replica_manager.append_as_follower(partition, batch, 1)
    assert meter(registry, "ReplicationBytesInPerSec", "t") == len(batch) == meter(registry, "ReplicationBytesInPerSec")
    assert meter(registry, "BytesInPerSec", "t") == 0


def test_topics_nobody_hosts_get_no_meters_and_a_deleted_topic_loses_them(node, registry):
    node.create_topic("t")
    node.produce("t", 0, b"a")
    node.call(fetch({"made-up": {0: 0}, "t": {7: 0}}), 12)       # unknown topic, unknown partition
    assert set(node.replica_manager.topic_stats.topics()) == {"t"}
    result_of(node.admin_manager.delete_topics(["t"], timeout_ms=1000))
    assert node.replica_manager.topic_stats.topics() == {}
    assert ("kafka_server_brokertopicmetrics_messagesinpersec_total", (("topic", "t"),)) not in scrape(registry)
    assert meter(registry, "MessagesInPerSec") == 1            # the broker-wide count stays


def test_replica_manager_and_log_gauges(node, registry):
    node.create_topic("t", 2)
    node.produce("t", 1, b"a", b"b", b"c")
    values = scrape(registry)
    assert values[("kafka_server_replicamanager_partitioncount", ())] >= 2
    assert values[("kafka_server_replicamanager_offlinereplicacount", ())] == 0
    labels = (("partition", "1"), ("topic", "t"))
    assert values[("kafka_log_log_logendoffset", labels)] == 3
    assert values[("kafka_log_log_logstartoffset", labels)] == 0
    assert values[("kafka_log_log_numlogsegments", labels)] == 1
    assert values[("kafka_log_log_size", labels)] == node.log("t", 1).size > 0


def test_a_replica_placed_here_without_a_log_is_offline(node, registry):
    node.create_topic("t")
    node.replica_manager.partitions.pop(("t", 0))      # as when its log could not be created (KAFKA_STORAGE_ERROR)
    assert registry.get(MetricName("kafka.server", "ReplicaManager", "OfflineReplicaCount")).value == 1


def test_consumer_lag_of_a_committed_group(node, registry):
    node.create_topic("t", 2)
    for _ in range(5):
        node.produce("t", 0, b"x")
    node.produce("t", 1, b"y")
    node.create_topic("__consumer_offsets")
    node.leader_and_isr("__consumer_offsets", 0, leader_epoch=1)
    C = m.OffsetCommitRequest
    commit = C(group_id="g", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
               retention_time_ms=-1, topics=[C.OffsetCommitRequestTopic(name="t", partitions=[
                   C.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                       partition_index=0, committed_offset=2, committed_leader_epoch=-1,
                       committed_metadata=""),
                   C.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                       partition_index=1, committed_offset=1, committed_leader_epoch=-1,
                       committed_metadata="")])])
    body = node.call(commit, 8)
    assert all(p.error_code == 0 for t in body.topics for p in t.partitions)
    values = scrape(registry)
    lag = {(dict(k[1])["topic"], dict(k[1])["partition"]): v for k, v in values.items()
           if k[0] == "kafka_consumergroup_group_lag"}
    assert lag == {("t", "0"): 3, ("t", "1"): 0}
    assert values[("kafka_consumergroup_group_sum_lag", (("group", "g"),))] == 3
    assert values[("kafka_consumergroup_group_max_lag", (("group", "g"),))] == 3
    assert values[("kafka_consumergroup_group_members", (("group", "g"),))] == 0
    assert values[("kafka_consumergroup_group_state", (("group", "g"), ("state", "Empty")))] == 1
    assert values[("kafka_partition_latest_offset", (("partition", "0"), ("topic", "t")))] == 5
    assert values[("kafka_coordinator_group_groupmetadatamanager_numoffsets", ())] == 2
    assert values[("kafka_coordinator_group_groupmetadatamanager_numgroupsempty", ())] == 1

    doc = views.groups(node.group_coordinator.coordinator, node.replica_manager)
    [group] = doc["groups"]
    assert (group["group_id"], group["state"], group["total_lag"], group["max_lag"]) == ("g", "Empty", 3, 3)
    assert [(p["partition"], p["committed_offset"], p["log_end_offset"], p["lag"]) for p in group["partitions"]] \
        == [(0, 2, 5, 3), (1, 1, 1, 0)]


def test_the_topics_view_has_the_cluster_and_this_brokers_logs(node, registry):
    node.create_topic("t", 2)
    node.produce("t", 0, b"a", b"b")
    doc = views.topics(node.metadata_cache, node.replica_manager, topic="t")
    [topic] = doc["topics"]
    assert (topic["partition_count"], topic["under_replicated"], topic["messages_in_total"]) == (2, 0, 2)
    p0 = topic["partitions"][0]
    assert (p0["leader"], p0["isr"], p0["hosted"], p0["log_end_offset"], p0["high_watermark"]) == (
        BROKER_ID, [BROKER_ID], True, 2, 2)
    assert p0["size"] == node.log("t", 0).size
    assert doc["totals"]["messages_in_total"] >= 2
    cluster = views.brokers(node.metadata_cache)
    assert [b["broker_id"] for b in cluster["brokers"]] == [BROKER_ID]
    assert cluster["brokers"][0]["is_controller"] and cluster["offline_partitions"] == 0


def test_assignments_parse_and_anything_else_is_empty():
    import struct
    body = struct.pack(">hi", 3, 2) + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 5) \
        + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 1) + struct.pack(">i", -1)
    assert assigned_partitions_of(body) == [("a", 0), ("a", 5), ("b", 1)]
    assert assigned_partitions_of(b"") == []
    assert assigned_partitions_of(body[:12]) == []
    assert assigned_partitions_of(struct.pack(">hi", 0, 2**31 - 1) + b"\x00") == []

"""``error_counts``: every error code a response carries at its version, as Kafka's ``errorCounts``."""

from __future__ import annotations

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.error_counts import error_counts
from twisted_kafka.protocol.errors import ErrorCode as E
from twisted_kafka.protocol.fetch_response import FetchableTopicResponse, FetchResponseData, PartitionData


def test_each_partition_of_a_produce_response_counts():
    P = m.ProduceResponse
    partitions = [P.TopicProduceResponse.PartitionProduceResponse(
        index=i, error_code=code, base_offset=-1, log_append_time_ms=-1, log_start_offset=-1,
        record_errors=[], error_message=None) for i, code in enumerate([0, 3, 3])]
    body = P(responses=[P.TopicProduceResponse(name="t", partition_responses=partitions)], throttle_time_ms=0)
    assert error_counts(body, 7) == {E.NONE: 1, E.UNKNOWN_TOPIC_OR_PARTITION: 2}


def test_metadata_counts_topics_and_their_partitions_not_brokers():
    R = m.MetadataResponse
    topic = R.MetadataResponseTopic(name="t", error_code=0, is_internal=False, partitions=[
        R.MetadataResponseTopic.MetadataResponsePartition(
            error_code=9, partition_index=0, leader_id=0, replica_nodes=[0], isr_nodes=[], offline_replicas=[])])
    body = R(throttle_time_ms=0, brokers=[R.MetadataResponseBroker(node_id=0, host="h", port=1, rack=None)],
             cluster_id="c", controller_id=0, topics=[topic, (3, "missing", False, [])])   # a struct as a tuple
    assert error_counts(body, 1) == {E.NONE: 1, E.REPLICA_NOT_AVAILABLE: 1, E.UNKNOWN_TOPIC_OR_PARTITION: 1}


def test_a_field_the_version_lacks_is_not_counted():
    F = m.FindCoordinatorResponse
    batched = F(throttle_time_ms=0, coordinators=[
        F.Coordinator(key=k, node_id=-1, host="", port=-1, error_code=15, error_message=None) for k in "ab"])
    assert error_counts(batched, 4) == {E.COORDINATOR_NOT_AVAILABLE: 2}        # no top-level code at v4
    single = F(throttle_time_ms=0, error_code=0, error_message=None, node_id=0, host="h", port=1)
    assert error_counts(single, 3) == {E.NONE: 1}


def test_only_error_code_fields_count():
    C = m.CreateTopicsResponse
    body = C(throttle_time_ms=0, topics=[C.CreatableTopicResult(
        name="t", topic_id=None, error_code=36, error_message=None, topic_config_error_code=40,
        num_partitions=1, replication_factor=1, configs=None)])
    assert error_counts(body, 5) == {E.TOPIC_ALREADY_EXISTS: 1}


def test_the_hand_encoded_fetch_response_counts_top_level_and_partitions():
    body = FetchResponseData(error_code=0, responses=[FetchableTopicResponse(topic="t", partitions=[
        PartitionData(partition_index=0, error_code=0, records=b"x"),
        PartitionData(partition_index=1, error_code=6, records=b"")])])
    assert error_counts(body, 12) == {E.NONE: 2, E.NOT_LEADER_OR_FOLLOWER: 1}

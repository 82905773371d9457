"""Admin APIs on the wire, for what the clients hide: exact fields, versions and error cases.

Requests are kafka-python message objects sent on a raw socket
(``support.raw_client``) at the versions the clients use and at the
layout thresholds (CreateTopics v5/v7, DeleteTopics v6, DescribeConfigs v3).
"""

from __future__ import annotations

import uuid

import pytest

from tests.integration.admin.support import ZERO_UUID, produce_one, raw_request, topic_id
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

pytestmark = pytest.mark.integration

CT = m.CreateTopicsRequest
DT = m.DeleteTopicsRequest
DC = m.DescribeConfigsRequest


def create_request(*topics, timeout_ms=10000, validate_only=False):
    """``topics``: (name, partitions, replication factor[, configs dict[, assignments dict]])."""
    entries = []
    for name, partitions, factor, *rest in topics:
        configs = rest[0] if rest else {}
        assignments = rest[1] if len(rest) > 1 else {}
        entries.append(CT.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=factor,
            assignments=[CT.CreatableTopic.CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                         for i, b in assignments.items()],
            configs=[CT.CreatableTopic.CreatableTopicConfig(name=k, value=v) for k, v in configs.items()]))
    return CT(topics=entries, timeout_ms=timeout_ms, validate_only=validate_only)


def create(broker, *topics, version=7, **kwargs):
    return {t.name: t for t in raw_request(broker, create_request(*topics, **kwargs), version).topics}


def test_create_topics_v7_returns_id_partitions_and_configs(admin_broker):
    result = create(admin_broker, ("raw-v7", 2, 1, {"retention.ms": "1000"}))["raw-v7"]
    assert (result.error_code, result.error_message) == (0, None)
    assert (result.num_partitions, result.replication_factor) == (2, 1)
    assert result.topic_id == topic_id(admin_broker, "raw-v7") != ZERO_UUID
    configs = {c.name: c for c in result.configs}
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("1000", 1)   # topic config
    assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == ("1073741824", 4)  # static
    assert configs["cleanup.policy"].config_source == 5 and not configs["cleanup.policy"].read_only

    defaults = create(admin_broker, ("raw-defaults", -1, -1), version=5)["raw-defaults"]
    assert (defaults.error_code, defaults.num_partitions, defaults.replication_factor) == (0, 1, 1)
    assigned = create(admin_broker, ("raw-assigned", -1, -1, {}, {0: [0], 1: [0], 2: [0]}))["raw-assigned"]
    assert (assigned.error_code, assigned.num_partitions) == (0, 3)


def test_create_topics_errors_and_messages(admin_broker):
    create(admin_broker, ("raw-taken", 1, 1), ("raw_coll", 1, 1))
    results = create(admin_broker,
                     ("raw-taken", 1, 1), ("raw-dup", 1, 1), ("raw-dup", 2, 1), ("raw-both", 1, -1, {}, {0: [0]}),
                     ("raw-gap", -1, -1, {}, {0: [0], 2: [0]}), ("raw-neg", -3, 1), ("raw-rf0", 1, 0),
                     ("raw-null", 1, 1, {"retention.ms": None}), ("raw.coll", 1, 1), ("raw-fine", 1, 1),
                     version=4)
    codes = {name: r.error_code for name, r in results.items()}
    assert codes == {
        "raw-taken": ErrorCode.TOPIC_ALREADY_EXISTS, "raw-dup": ErrorCode.INVALID_REQUEST,
        "raw-both": ErrorCode.INVALID_REQUEST, "raw-gap": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "raw-neg": ErrorCode.INVALID_PARTITIONS, "raw-rf0": ErrorCode.INVALID_REPLICATION_FACTOR,
        "raw-null": ErrorCode.INVALID_CONFIG, "raw.coll": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "raw-fine": ErrorCode.NONE,
    }
    assert "multiple entries" in results["raw-dup"].error_message and "raw-dup" in results["raw-dup"].error_message
    assert "already exists" in results["raw-taken"].error_message
    assert "collides with existing topic: raw_coll" in results["raw.coll"].error_message
    metadata = raw_request(admin_broker, m.MetadataRequest(topics=None, allow_auto_topic_creation=False), 4)
    assert "raw-dup" not in {t.name for t in metadata.topics}
    # v0 has no error messages, and no validate_only
    legacy = create(admin_broker, ("raw-taken", 1, 1), version=0)["raw-taken"]
    assert legacy.error_code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_create_topics_timeout_zero_and_validate_only(admin_broker):
    result = create(admin_broker, ("raw-nowait", 3, 1), timeout_ms=0)["raw-nowait"]
    assert result.error_code == 0
    checked = create(admin_broker, ("raw-validate", 3, 1, {"retention.ms": "5"}), validate_only=True)["raw-validate"]
    assert (checked.error_code, checked.num_partitions, checked.topic_id) == (0, 3, None)   # zero uuid: none yet
    assert {c.name: c.value for c in checked.configs}["retention.ms"] == "5"
    metadata = raw_request(admin_broker, m.MetadataRequest(topics=None, allow_auto_topic_creation=False), 4)
    names = {t.name for t in metadata.topics}
    assert "raw-validate" not in names
    # created, even though the answer did not wait: the metadata shows it at the latest a moment later
    from support.wait import wait_until
    wait_until(lambda: "raw-nowait" in {t.name for t in raw_request(
        admin_broker, m.MetadataRequest(topics=None, allow_auto_topic_creation=False), 4).topics})


def test_delete_topics_v6_by_id_and_by_name(admin_broker):
    create(admin_broker, ("raw-del-id", 1, 1), ("raw-del-name", 1, 1))
    by_id = topic_id(admin_broker, "raw-del-id")
    unknown = uuid.uuid4()
    response = raw_request(admin_broker, DT(topics=[
        DT.DeleteTopicState(name=None, topic_id=by_id),
        DT.DeleteTopicState(name="raw-del-name", topic_id=ZERO_UUID),
        DT.DeleteTopicState(name=None, topic_id=unknown),
        DT.DeleteTopicState(name="raw-del-missing", topic_id=ZERO_UUID),
        DT.DeleteTopicState(name="raw-del-both", topic_id=by_id),
    ], timeout_ms=10000), 6)
    got = [(r.name, r.topic_id or ZERO_UUID, r.error_code) for r in response.responses]   # zero uuid decodes as None
    name_id = got[1][1]
    assert got == [("raw-del-id", by_id, 0), ("raw-del-name", name_id, 0), (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID),
                   ("raw-del-missing", ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                   ("raw-del-both", by_id, ErrorCode.INVALID_REQUEST)]
    assert name_id != ZERO_UUID
    assert produce_one(admin_broker, "raw-del-id") == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # v1 layout (kcat): names only
    create(admin_broker, ("raw-del-v1", 1, 1))
    response = raw_request(admin_broker, DT(topic_names=["raw-del-v1"], timeout_ms=10000), 1)
    assert [(r.name, r.error_code) for r in response.responses] == [("raw-del-v1", 0)]


def test_delete_topics_disabled(broker_factory):
    broker = broker_factory({"delete.topic.enable": "false"})
    create(broker, ("kept", 1, 1))
    v4 = raw_request(broker, DT(topic_names=["kept"], timeout_ms=1000), 4)
    assert [(r.name, r.error_code) for r in v4.responses] == [("kept", ErrorCode.TOPIC_DELETION_DISABLED)]
    v2 = raw_request(broker, DT(topic_names=["kept"], timeout_ms=1000), 2)
    assert [r.error_code for r in v2.responses] == [ErrorCode.INVALID_REQUEST]
    assert produce_one(broker, "kept") == ErrorCode.NONE


def test_create_partitions_duplicates_and_messages(admin_broker):
    create(admin_broker, ("raw-cp", 1, 1))
    CP = m.CreatePartitionsRequest
    response = raw_request(admin_broker, CP(topics=[
        CP.CreatePartitionsTopic(name="raw-cp", count=2, assignments=None),
        CP.CreatePartitionsTopic(name="raw-cp", count=3, assignments=None),
    ], timeout_ms=10000, validate_only=False), 3)
    assert [(r.name, r.error_code, r.error_message) for r in response.results] == [
        ("raw-cp", ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")]
    response = raw_request(admin_broker, CP(topics=[CP.CreatePartitionsTopic(name="raw-cp", count=1, assignments=None)],
                                            timeout_ms=10000, validate_only=False), 1)
    assert [(r.error_code, r.error_message) for r in response.results] == [
        (ErrorCode.INVALID_PARTITIONS, "Topic already has 1 partitions.")]


def test_delete_records_errors(admin_broker):
    create(admin_broker, ("raw-dr", 1, 1), ("raw-compacted", 1, 1, {"cleanup.policy": "compact"}))
    for _ in range(3):
        assert produce_one(admin_broker, "raw-dr") == 0
    D = m.DeleteRecordsRequest
    response = raw_request(admin_broker, D(topics=[
        D.DeleteRecordsTopic(name="raw-dr", partitions=[
            D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=2),
            D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=5, offset=0)]),
        D.DeleteRecordsTopic(name="raw-compacted", partitions=[
            D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=0)]),
        D.DeleteRecordsTopic(name="raw-nothing", partitions=[
            D.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=0)]),
    ], timeout_ms=5000), 2)
    got = {(t.name, p.partition_index): (p.error_code, p.low_watermark) for t in response.topics for p in t.partitions}
    assert got == {("raw-dr", 0): (0, 2), ("raw-dr", 5): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
                   ("raw-compacted", 0): (ErrorCode.POLICY_VIOLATION, -1),
                   ("raw-nothing", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)}


def describe_request(*resources, synonyms=False, documentation=False):
    return DC(resources=[DC.DescribeConfigsResource(resource_type=kind, resource_name=name, configuration_keys=keys)
                         for kind, name, keys in resources],
              include_synonyms=synonyms, include_documentation=documentation)


def test_describe_configs_v3_types_docs_synonyms_and_filter(admin_broker):
    create(admin_broker, ("raw-dc", 1, 1, {"retention.ms": "1000"}))
    response = raw_request(admin_broker, describe_request((2, "raw-dc", ["retention.ms", "cleanup.policy"]),
                                                          (4, "0", ["log.retention.hours", "ssl.key.password"]),
                                                          synonyms=True, documentation=True), 4)
    topic, broker = response.results
    assert topic.error_code == 0 and broker.error_code == 0
    entries = {c.name: c for c in topic.configs}
    assert set(entries) == {"retention.ms", "cleanup.policy"}
    retention = entries["retention.ms"]
    assert (retention.value, retention.config_source, retention.config_type) == ("1000", 1, 5)   # LONG
    assert [(s.name, s.value, s.source) for s in retention.synonyms][:2] == [
        ("retention.ms", "1000", 1), ("log.retention.hours", "168", 4)]
    assert retention.documentation
    assert entries["cleanup.policy"].config_type == 7                                           # LIST
    entries = {c.name: c for c in broker.configs}
    assert (entries["log.retention.hours"].value, entries["log.retention.hours"].read_only) == ("168", True)
    assert entries["log.retention.hours"].config_type == 3                                      # INT
    password = entries["ssl.key.password"]
    assert (password.value, password.is_sensitive, password.config_type) == (None, True, 9)
    # v0: is_default instead of a source; no synonyms
    v0 = raw_request(admin_broker, describe_request((2, "raw-dc", ["retention.ms", "segment.ms"])), 0)
    assert {c.name: c.is_default for c in v0.results[0].configs} == {"retention.ms": False, "segment.ms": True}


def test_describe_configs_resource_errors(admin_broker):
    response = raw_request(admin_broker, describe_request((4, "5", None), (4, "zero", None), (8, "0", None),
                                                          (8, "", None), (2, "no-such-topic", None),
                                                          (2, "bad/name", None), (4, "", None), (16, "x", None)), 1)
    got = [(r.error_code, r.error_message, len(r.configs)) for r in response.results]
    assert got[0] == (ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 0 or empty string, but received 5", 0)
    assert got[1] == (ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: zero", 0)
    assert got[2][:2] == (0, None) and got[2][2] > 20                 # BROKER_LOGGER: every logger's level
    assert got[3][0] == ErrorCode.INVALID_REQUEST
    assert got[4] == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None, 0)
    assert got[5][0] == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert got[6][0] == 0                                            # the cluster default: its dynamic configs
    assert got[7][0] == ErrorCode.INVALID_REQUEST


def test_alter_configs_legacy_broker_and_duplicates(admin_broker):
    A = m.AlterConfigsRequest
    resource = A.AlterConfigsResource
    response = raw_request(admin_broker, A(validate_only=False, resources=[
        resource(resource_type=4, resource_name="0", configs=[
            resource.AlterableConfig(name="log.flush.interval.messages", value="1000"),
            resource.AlterableConfig(name="broker.id", value="3")]),
        resource(resource_type=2, resource_name="raw-twice", configs=[]),
        resource(resource_type=2, resource_name="raw-twice", configs=[]),
        resource(resource_type=8, resource_name="0", configs=[]),
    ]), 1)
    got = [(r.resource_name, r.error_code, r.error_message) for r in response.responses]
    assert got[0] == ("0", ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: broker.id")
    assert got[1][1] == got[2][1] == ErrorCode.INVALID_REQUEST
    assert got[3][1] == ErrorCode.INVALID_REQUEST
    response = raw_request(admin_broker, describe_request((4, "0", ["log.flush.interval.messages"])), 1)
    assert response.results[0].configs[0].config_source != 2     # the refused request changed nothing


def test_describe_cluster(admin_broker):
    request = m.DescribeClusterRequest(include_cluster_authorized_operations=True, endpoint_type=1,
                                       include_fenced_brokers=True)
    response = raw_request(admin_broker, request, 2)
    assert response.error_code == 0 and response.endpoint_type == 1
    assert [(b.broker_id, b.host, b.port, b.is_fenced) for b in response.brokers] == [
        (0, "127.0.0.1", admin_broker.data_port, False)]
    assert response.controller_id == 0 and response.cluster_id
    # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE: no authorizer
    assert response.authorized_operations == {5, 7, 8, 9, 10, 11, 12}
    v0 = raw_request(admin_broker, m.DescribeClusterRequest(include_cluster_authorized_operations=False), 0)
    assert v0.authorized_operations is None and v0.cluster_id == response.cluster_id   # INT32 min: not asked
    controllers = raw_request(admin_broker, m.DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                                     endpoint_type=2), 1)
    assert controllers.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE and not controllers.brokers
    unknown = raw_request(admin_broker, m.DescribeClusterRequest(include_cluster_authorized_operations=False,
                                                                 endpoint_type=7), 1)
    assert unknown.error_code == ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


def test_describe_cluster_lists_the_listener_the_request_came_in_on(broker_factory):
    broker = broker_factory({"listeners": "PLAINTEXT://127.0.0.1:{port:PLAINTEXT},"
                                          "OTHER://127.0.0.1:{port:OTHER},CONTROLLER://127.0.0.1:{port:CONTROLLER}",
                             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,OTHER:PLAINTEXT,"
                                                               "CONTROLLER:PLAINTEXT"})
    from support.raw_client import RawClient

    request = m.DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=1)
    with RawClient(broker.port("OTHER")) as client:
        response = client.request(request, 1)
    assert [(b.host, b.port) for b in response.brokers] == [("127.0.0.1", broker.port("OTHER"))]

"""Finding coordinators and administering groups: FindCoordinator, DescribeGroups, ListGroups,
DeleteGroups, OffsetFetch/OffsetCommit by admin clients, OffsetDelete; the offsets topic itself.

* FindCoordinator answers this broker for any group, in the single-key
  layout (v0-v3) and the batched one (v4+, what kafka-python sends); a
  transactional id (key type 1) finds its transaction coordinator (this
  broker, once ``__transaction_state`` is created), a share group (type 2)
  INVALID_REQUEST.
* ``__consumer_offsets`` is internal in Metadata, has
  ``offsets.topic.num.partitions`` partitions and is compacted; clients may
  not produce to it (INVALID_TOPIC_EXCEPTION).
* The admin clients of librdkafka and kafka-python list, describe and delete
  groups and read and set their offsets.
"""

from __future__ import annotations

import asyncio

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition

from support.groups import Group
from support.raw_client import RawClient
from support.wait import wait_until
from twisted_kafka.protocol import messages as m

from .conftest import create_topic

BROKER_OVERRIDES = {"offsets.topic.num.partitions": "7"}
PARTITIONS = 3


def find_coordinator(port: int, version: int, key: str = "g", key_type: int = 0):
    with RawClient(port) as client:
        if version >= 4:
            return client.request(m.FindCoordinatorRequest(version=version, key_type=key_type,
                                                           coordinator_keys=[key, key + "-2"]), version)
        return client.request(m.FindCoordinatorRequest(version=version, key=key, key_type=key_type), version)


def test_find_coordinator_every_version_and_the_offsets_topic(group_broker):
    port = group_broker.data_port
    for version in range(4):
        response = find_coordinator(port, version)
        assert (response.error_code, response.node_id, response.host, response.port) == (0, 0, "127.0.0.1", port)
    for version in (4, 5, 6):
        response = find_coordinator(port, version)
        assert [(c.key, c.error_code, c.node_id, c.port) for c in response.coordinators] == [
            ("g", 0, 0, port), ("g-2", 0, 0, port)]
    transactional = find_coordinator(port, 3, key="txn", key_type=1)
    assert (transactional.error_code, transactional.node_id, transactional.port) == (0, 0, port)
    share = find_coordinator(port, 6, key="share", key_type=2)
    assert {c.error_code for c in share.coordinators} == {42}                # INVALID_REQUEST

    with RawClient(port) as client:
        metadata = client.request(m.MetadataRequest(version=9, topics=[m.MetadataRequest.MetadataRequestTopic(
            name="__consumer_offsets")], allow_auto_topic_creation=False,
            include_topic_authorized_operations=False), 9)
        (topic,) = metadata.topics
        assert topic.error_code == 0 and topic.is_internal and len(topic.partitions) == 7
        produce = m.ProduceRequest
        response = client.request(produce(version=7, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
            produce.TopicProduceData(name="__consumer_offsets", partition_data=[
                produce.TopicProduceData.PartitionProduceData(index=0, records=None)])]), 7)
        assert response.responses[0].partition_responses[0].error_code in (17, 87)
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets")
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["cleanup.policy"].value == "compact"


async def aiokafka_view(bootstrap: str, topic: str):
    from aiokafka.admin import AIOKafkaAdminClient

    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        listed = await admin.list_consumer_groups()
        (response,) = await admin.describe_consumer_groups(["admin-live"])
        (described,) = response.groups
        offsets = await admin.list_consumer_group_offsets("admin-offsets")
        return listed, described, {tp.partition: o.offset for tp, o in offsets.items() if tp.topic == topic}
    finally:
        await admin.close()


def test_admin_clients_list_describe_delete_and_set_offsets(group_broker):
    topic = "admin-groups-topic"
    create_topic(group_broker.bootstrap, topic, PARTITIONS)
    group = Group(group_broker.bootstrap, "admin-live", topic, PARTITIONS)
    admin = AdminClient({"bootstrap.servers": group_broker.bootstrap})
    try:
        member = group.add("confluent")
        group.wait_settled()
        group.produce(30)
        group.wait_consumed(30)

        # an offsets-only group, set by the admin client
        result = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
            "admin-offsets", [TopicPartition(topic, p, 3 + p) for p in range(PARTITIONS)])])
        result["admin-offsets"].result(10)
        listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("admin-offsets")])
        offsets = listed["admin-offsets"].result(10).topic_partitions
        assert sorted((tp.partition, tp.offset) for tp in offsets) == [(p, 3 + p) for p in range(PARTITIONS)]

        groups = admin.list_consumer_groups().result(10)
        states = {g.group_id: g.state for g in groups.valid}
        assert states["admin-live"] == ConsumerGroupState.STABLE
        assert states["admin-offsets"] == ConsumerGroupState.EMPTY
        stable_only = admin.list_consumer_groups(states={ConsumerGroupState.STABLE}).result(10)
        assert "admin-live" in {g.group_id for g in stable_only.valid}
        assert "admin-offsets" not in {g.group_id for g in stable_only.valid}

        (description,) = [f.result(10) for f in admin.describe_consumer_groups(["admin-live"]).values()]
        assert description.partition_assignor == "range" and len(description.members) == 1
        (only,) = description.members
        assert sorted(tp.partition for tp in only.assignment.topic_partitions) == list(range(PARTITIONS))
        assert only.host.startswith("/127.0.0.1")

        # kafka-python's admin client: the same view
        kp = KafkaAdminClient(bootstrap_servers=group_broker.bootstrap)
        try:
            kp_groups = {g["group_id"]: g for g in kp.list_groups()}
            assert kp_groups["admin-live"]["group_state"] == "Stable"
            assert kp_groups["admin-offsets"]["group_state"] == "Empty"
            assert {g["group_type"] for g in kp_groups.values()} == {"classic"}
            assert [g["group_id"] for g in kp.list_groups(states_filter=["Stable"])] == ["admin-live"]
            kp_offsets = kp.list_group_offsets({"admin-offsets": None, "admin-live": None})     # OffsetFetch v8
            assert {tp.partition: o.offset for tp, o in kp_offsets["admin-offsets"].items()} == {0: 3, 1: 4, 2: 5}
            assert {tp.partition: o.offset for tp, o in kp_offsets["admin-live"].items()} == {0: 10, 1: 10, 2: 10}
            described = kp.describe_groups(["admin-live"])["admin-live"]
            assert (described["group_state"], described["protocol_data"]) == ("Stable", "range")
            assert described["members"][0]["member_assignment"]["assigned_partitions"] == [
                {"topic": topic, "partitions": [0, 1, 2]}]
            assert set(described["authorized_operations"]) == {"DESCRIBE", "READ", "DELETE"}
            # OffsetDelete: fine for the offsets-only group, refused for a topic the live group consumes
            deleted = kp.delete_group_offsets("admin-offsets", [KTopicPartition(topic, 0)])
            assert [e.__name__ for e in deleted.values()] == ["NoError"]
            refused = kp.delete_group_offsets("admin-live", [KTopicPartition(topic, 0)])
            assert [e.__name__ for e in refused.values()] == ["GroupSubscribedToTopicError"]
            remaining = kp.list_group_offsets({"admin-offsets": None})["admin-offsets"]
            assert sorted(tp.partition for tp in remaining) == [1, 2]
        finally:
            kp.close()

        # aiokafka's admin client (ListGroups v1, DescribeGroups v3 read with its v2 layout: one group
        # per request reads right, OffsetFetch v3)
        listed_ak, described_ak, offsets_ak = asyncio.run(aiokafka_view(group_broker.bootstrap, topic))
        assert {("admin-live", "consumer"), ("admin-offsets", "")} <= set(listed_ak)
        error_code, group_id, state, _, protocol, _ = described_ak[:6]
        assert (error_code, group_id, state, protocol) == (0, "admin-live", "Stable", "range")
        assert offsets_ak == {1: 4, 2: 5}

        # a live group cannot be deleted; an empty one can, with its offsets
        futures = admin.delete_consumer_groups(["admin-live", "admin-offsets", "no-such-group"])
        errors = {}
        for name, future in futures.items():
            try:
                future.result(10)
                errors[name] = None
            except Exception as exc:                     # KafkaException with the group's error
                errors[name] = exc.args[0].name()
        assert errors == {"admin-live": "NON_EMPTY_GROUP", "admin-offsets": None, "no-such-group": "GROUP_ID_NOT_FOUND"}
        listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("admin-offsets")])
        assert all(tp.offset < 0 for tp in listed["admin-offsets"].result(10).topic_partitions)

        assert member.stop() == 0
        wait_until(lambda: any(g.group_id == "admin-live" and g.state == ConsumerGroupState.EMPTY
                               for g in admin.list_consumer_groups().result(10).valid),
                   timeout=10, what="admin-live to be EMPTY after its member left", interval=0.1)
        admin.delete_consumer_groups(["admin-live"])["admin-live"].result(10)
    finally:
        group.stop_all()

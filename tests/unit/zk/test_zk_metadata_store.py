"""ZkMetadataStore against a real ZooKeeper: Kafka's znodes and JSON, the controller claim with its
epoch, writes fenced by the controller epoch, partition epochs as znode versions."""

from __future__ import annotations

import json
import uuid

from twisted_kafka.controller.metadata_store import NO_STATE, ControllerMovedError, PartitionRecord, topic_record
from twisted_kafka.controller.zk_metadata_store import ZkMetadataStore
from twisted_kafka.zk import data as z
from twisted_kafka.zk.registration import ensure_persistent_paths

from .helpers import ZkTestCase

TOPIC_ID = uuid.UUID("5e6d3b3c-7b0a-4cf0-9d2d-0a8f1c2e3d4f")


def raw_json(raw, path):
    return json.loads(raw.get(path)[0])


class ZkMetadataStoreTest(ZkTestCase):
    def setUp(self):
        with self.zookeeper.client(self.chroot) as raw:
            ensure_persistent_paths(raw)

    async def claimed(self, broker_id: int = 1) -> ZkMetadataStore:
        store = ZkMetadataStore(self.connect(), broker_id=broker_id)
        await store.increment_controller_epoch()
        return store

    async def test_the_claim_is_the_election_and_bumps_the_epoch(self):
        first = ZkMetadataStore(self.connect(), broker_id=1)
        second = ZkMetadataStore(self.connect(), broker_id=2)
        assert await first.increment_controller_epoch() == 1
        with self.assertRaises(ControllerMovedError):
            await second.increment_controller_epoch()
        with self.zookeeper.client(self.chroot) as raw:
            controller = raw_json(raw, "/controller")
            assert (controller["version"], controller["brokerid"], controller["kraftControllerEpoch"]) == (2, 1, -1)
            assert raw.get("/controller_epoch")[0] == b"1"
            assert raw.exists("/controller").ephemeralOwner != 0
            raw.delete("/controller")       # the first controller's session "expired"
        assert await second.increment_controller_epoch() == 2
        # The old controller's writes are refused: /controller_epoch moved on.
        with self.assertRaises(ControllerMovedError):
            await first.create_topics([topic_record("t", TOPIC_ID, {0: PartitionRecord((1,), 1, 0, (1,))})])
        await second.create_topics([topic_record("t", TOPIC_ID, {0: PartitionRecord((2,), 2, 0, (2,))})])

    async def test_topics_are_written_in_kafka_s_layout(self):
        store = await self.claimed()
        await store.create_topics([topic_record("orders", TOPIC_ID, {
            0: PartitionRecord((1, 2), 1, 0, (1, 2)), 1: PartitionRecord((2, 1), 2, 0, (2, 1))},
            {"retention.ms": "1000"})])
        with self.zookeeper.client(self.chroot) as raw:
            topic = raw_json(raw, "/brokers/topics/orders")
            assert topic == {"version": 3, "partitions": {"0": [1, 2], "1": [2, 1]}, "adding_replicas": {},
                             "removing_replicas": {}, "topic_id": "Xm07PHsKTPCdLQqPHC49Tw"}
            state = raw_json(raw, "/brokers/topics/orders/partitions/1/state")
            assert state == {"version": 1, "leader": 2, "leader_epoch": 0, "controller_epoch": 1, "isr": [2, 1]}
            assert raw_json(raw, "/config/topics/orders") == {"version": 1, "config": {"retention.ms": "1000"}}
        loaded = (await store.load()).topics["orders"]
        assert loaded.topic_id == TOPIC_ID and loaded.configs == {"retention.ms": "1000"}
        assert loaded.partitions[1] == PartitionRecord((2, 1), 2, 0, (2, 1), 0)

    async def test_the_partition_epoch_is_the_state_znode_version(self):
        store = await self.claimed()
        await store.create_topics([topic_record("t", TOPIC_ID, {0: PartitionRecord((1, 2), 1, 0, (1, 2))})])
        await store.set_partitions("t", {0: PartitionRecord((1, 2), 2, 1, (2,), partition_epoch=1)})
        with self.zookeeper.client(self.chroot) as raw:
            data, stat = raw.get("/brokers/topics/t/partitions/0/state")
            assert stat.version == 1 and json.loads(data)["leader"] == 2
        # A write that expects another version is refused.
        with self.assertRaises(Exception):      # noqa: B017 -- the conflict itself is the point
            fresh = ZkMetadataStore(store._zk, broker_id=1)
            fresh.epoch, fresh.epoch_version = store.epoch, store.epoch_version
            await fresh.set_partitions("t", {0: PartitionRecord((1, 2), 1, 2, (1,), partition_epoch=5)})
        # An assignment change (a reassignment) keeps the state as it is.
        await store.set_partitions("t", {0: PartitionRecord((3, 1, 2), 2, 1, (2,), 1, adding_replicas=(3,),
                                                            removing_replicas=(1, 2))})
        with self.zookeeper.client(self.chroot) as raw:
            topic = raw_json(raw, "/brokers/topics/t")
            assert topic["partitions"] == {"0": [3, 1, 2]} and topic["adding_replicas"] == {"0": [3]}
            assert topic["removing_replicas"] == {"0": [1, 2]}
            assert raw.get("/brokers/topics/t/partitions/0/state")[1].version == 1

    async def test_a_topic_written_by_an_admin_has_no_state_until_the_controller_writes_one(self):
        store = await self.claimed()
        with self.zookeeper.client(self.chroot) as raw:
            raw.create("/brokers/topics/new", z.encode_topic(z.TopicAssignment(TOPIC_ID, {0: (1,), 1: (2,)})),
                       makepath=True)
            raw.create("/brokers/topics/legacy", b'{"version":1,"partitions":{"0":[1]}}', makepath=True)
        assert await store.topic_names() == {"new", "legacy"}
        topics = await store.load_topics(["new", "legacy", "missing"])
        assert set(topics) == {"new", "legacy"}
        assert topics["new"].partitions[0].partition_epoch == NO_STATE
        # a topic without an id gets one, written back (Kafka's controller does the same)
        with self.zookeeper.client(self.chroot) as raw:
            assert "topic_id" in raw_json(raw, "/brokers/topics/legacy")
        await store.set_partitions("new", {0: PartitionRecord((1,), 1, 0, (1,), 0)})
        reloaded = (await store.load_topics(["new"]))["new"]
        assert reloaded.partitions[0].partition_epoch == 0 and reloaded.partitions[0].leader == 1
        assert reloaded.partitions[1].partition_epoch == NO_STATE

    async def test_new_partitions_written_by_an_admin_are_merged_not_overwritten(self):
        store = await self.claimed()
        await store.create_topics([topic_record("t", TOPIC_ID, {0: PartitionRecord((1,), 1, 0, (1,))})])
        with self.zookeeper.client(self.chroot) as raw:
            raw.set("/brokers/topics/t", z.encode_topic(z.TopicAssignment(TOPIC_ID, {0: (1,), 1: (1,)})))
        await store.set_partitions("t", {0: PartitionRecord((1, 2), 1, 1, (1,), 1)})
        with self.zookeeper.client(self.chroot) as raw:
            assert raw_json(raw, "/brokers/topics/t")["partitions"] == {"0": [1, 2], "1": [1]}

    async def test_deleting_a_topic_removes_its_znodes_config_and_request(self):
        store = await self.claimed()
        await store.create_topics([topic_record("t", TOPIC_ID, {0: PartitionRecord((1,), 1, 0, (1,))},
                                                {"retention.ms": "5"})])
        with self.zookeeper.client(self.chroot) as raw:
            raw.create("/admin/delete_topics/t", makepath=True)
            raw.create("/admin/delete_topics/ghost", makepath=True)
        assert sorted(await store.topics_queued_for_deletion()) == ["ghost", "t"]
        await store.cancel_deletions(["ghost"])
        await store.delete_topics(["t"])
        with self.zookeeper.client(self.chroot) as raw:
            assert raw.get_children("/brokers/topics") == []
            assert not raw.exists("/config/topics/t") and raw.get_children("/admin/delete_topics") == []

    async def test_configs_are_written_with_a_change_notification(self):
        store = await self.claimed()
        await store.set_broker_configs("", {"log.retention.ms": "7"})
        await store.set_broker_configs("3", {"log.retention.bytes": "9"})
        assert await store.broker_configs("") == {"log.retention.ms": "7"}
        assert (await store.load()).broker_configs == {"": {"log.retention.ms": "7"}, "3": {"log.retention.bytes": "9"}}
        with self.zookeeper.client(self.chroot) as raw:
            assert raw_json(raw, "/config/brokers/<default>") == {"version": 1, "config": {"log.retention.ms": "7"}}
            changes = sorted(raw.get_children("/config/changes"))
            assert changes == ["config_change_0000000000", "config_change_0000000001"]
            assert [raw_json(raw, f"/config/changes/{c}") for c in changes] == [
                {"version": 2, "entity_path": "brokers/<default>"}, {"version": 2, "entity_path": "brokers/3"}]
        await store.purge_change_notifications(now_ms=10**15)
        with self.zookeeper.client(self.chroot) as raw:
            assert raw.get_children("/config/changes") == []

    async def test_acls_are_written_in_kafka_s_layout_with_change_notifications(self):
        from twisted_kafka.security.acl import (
            AccessControlEntry,
            AclOperation,
            AclPermissionType,
            PatternType,
            ResourcePattern,
            ResourceType,
        )

        store = await self.claimed()
        literal = ResourcePattern(ResourceType.TOPIC, "orders", PatternType.LITERAL)
        prefixed = ResourcePattern(ResourceType.GROUP, "app-", PatternType.PREFIXED)
        write = AccessControlEntry("User:alice", "*", AclOperation.WRITE, AclPermissionType.ALLOW)
        deny = AccessControlEntry("User:bob", "10.0.0.1", AclOperation.READ, AclPermissionType.DENY)
        await store.set_acls(literal, frozenset({write}))
        await store.set_acls(prefixed, frozenset({deny}))
        assert (await store.load()).acls == {literal: {write}, prefixed: {deny}}
        with self.zookeeper.client(self.chroot) as raw:
            assert raw_json(raw, "/kafka-acl/Topic/orders") == {"version": 1, "acls": [
                {"principal": "User:alice", "permissionType": "Allow", "operation": "Write", "host": "*"}]}
            assert raw_json(raw, "/kafka-acl-extended/prefixed/Group/app-") == {"version": 1, "acls": [
                {"principal": "User:bob", "permissionType": "Deny", "operation": "Read", "host": "10.0.0.1"}]}
            (literal_change,) = raw.get_children("/kafka-acl-changes")
            assert raw.get(f"/kafka-acl-changes/{literal_change}")[0] == b"TOPIC:orders"
            (extended_change,) = raw.get_children("/kafka-acl-extended-changes")
            assert raw_json(raw, f"/kafka-acl-extended-changes/{extended_change}") == {
                "version": 1, "resourceType": "GROUP", "name": "app-", "patternType": "PREFIXED"}
        await store.set_acls(literal, frozenset())
        assert (await store.load()).acls == {prefixed: {deny}}
        await store.purge_change_notifications(now_ms=10**15)
        with self.zookeeper.client(self.chroot) as raw:
            assert not raw.exists("/kafka-acl/Topic/orders")
            assert raw.get_children("/kafka-acl-changes") == []
            assert raw.get_children("/kafka-acl-extended-changes") == []

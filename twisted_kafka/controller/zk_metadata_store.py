"""ZkMetadataStore: the controller's durable state in ZooKeeper, in Kafka's znodes.

The same ``ClusterMetadataStore`` a single node keeps in a JSON file, over
the layout ``twisted_kafka.zk.data`` describes: assignments and topic ids in
``/brokers/topics/<t>``, partition states in ``.../partitions/<p>/state``
(the znode's version is the partition epoch), configs in ``/config``, the
controller epoch in ``/controller_epoch``.

Becoming controller is Kafka's ``registerControllerAndIncrementControllerEpoch``:
``/controller`` (ephemeral, this broker's id) is created and
``/controller_epoch`` bumped in one transaction, conditional on the epoch
znode's version; losing the race is ``ControllerMovedError``.  Every later
write is a transaction that first checks ``/controller_epoch`` is still at
the version this controller wrote (Kafka's ``expectedControllerEpochZkVersion``),
so a controller that lost its session -- another was elected meanwhile --
cannot change anything: its writes fail with ``ControllerMovedError`` and it
resigns.  Partition states are written conditionally on their version too.

Topics created by any broker (``/brokers/topics/<t>`` written by its admin,
without partition states) are read with ``load_topics``: their partitions
have ``partition_epoch == NO_STATE`` until the controller writes a state.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import Iterable, Mapping
from types import MappingProxyType

from twisted.internet.defer import ensureDeferred, gatherResults
from twisted.logger import Logger

from twisted_kafka.security.acl import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    entries_from_json,
    entries_json,
)
from twisted_kafka.zk import data as z
from twisted_kafka.zk.client import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
    ZkClient,
)

from .metadata_store import (
    NO_LEADER,
    NO_STATE,
    ClusterMetadataStore,
    ClusterState,
    ControllerMovedError,
    PartitionRecord,
    TopicRecord,
    topic_record,
)

#: Kafka's ZkNodeChangeNotificationListener removes change notifications older than this (15 minutes).
CHANGE_NOTIFICATION_EXPIRY_MS = 15 * 60 * 1000


class ZkWriteConflict(Exception):
    """A conditional write found a znode at another version than expected."""


def _entity(entity: str) -> str:
    """Our broker config entity ("" is the cluster default) as ZooKeeper names it."""
    return z.DEFAULT_ENTITY if entity == "" else entity


class ZkMetadataStore(ClusterMetadataStore):
    log = Logger(namespace="twisted_kafka.controller.ZkMetadataStore")

    def __init__(self, zk: ZkClient, *, broker_id: int):
        self._zk = zk
        self.broker_id = broker_id
        self.epoch = 0
        self.epoch_version = -1            # /controller_epoch's version after this controller's claim
        # What this store last read or wrote: topic znode (assignment, version) and state versions.
        self._assignments: dict[str, tuple[z.TopicAssignment, int]] = {}
        self._state_versions: dict[tuple[str, int], int] = {}

    # -- becoming controller -----------------------------------------------------------

    async def increment_controller_epoch(self) -> int:
        zk = self._zk
        data, stat = await zk.get_or_none(z.CONTROLLER_EPOCH)
        if data is None:
            try:
                await zk.create(z.CONTROLLER_EPOCH, z.encode_controller_epoch(z.INITIAL_CONTROLLER_EPOCH),
                                makepath=True)
                current, version = z.INITIAL_CONTROLLER_EPOCH, 0
            except NodeExistsError:
                data, stat = await zk.get(z.CONTROLLER_EPOCH)
                current, version = z.decode_controller_epoch(data), stat.version
        else:
            current, version = z.decode_controller_epoch(data), stat.version
        new = current + 1

        def claim(t) -> None:
            t.create(z.CONTROLLER, z.encode_controller(self.broker_id), ephemeral=True)
            t.set_data(z.CONTROLLER_EPOCH, z.encode_controller_epoch(new), version)

        results = await zk.multi(claim)
        if not any(isinstance(r, Exception) for r in results):
            self.epoch, self.epoch_version = new, results[1].version
            self._assignments.clear()
            self._state_versions.clear()
            return new
        # Kafka's checkControllerAndEpoch: the transaction may have been ours (retried after a lost
        # connection); otherwise another broker won.
        controller, _ = await zk.get_or_none(z.CONTROLLER)
        if controller is not None and z.decode_controller(controller) == self.broker_id:
            data, stat = await zk.get(z.CONTROLLER_EPOCH)
            if z.decode_controller_epoch(data) == new:
                self.epoch, self.epoch_version = new, stat.version
                return new
        raise ControllerMovedError("another broker was elected controller")

    async def _guarded(self, build) -> list:
        """A transaction that first checks the controller epoch is still ours; the per-operation results."""
        def transaction(t) -> None:
            t.check(z.CONTROLLER_EPOCH, self.epoch_version)
            build(t)

        results = await self._zk.multi(transaction)
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            raise ControllerMovedError(f"/controller_epoch is no longer at version {self.epoch_version} "
                                       f"(epoch {self.epoch}): another controller was elected")
        # The operation that failed carries its error; the others say they were rolled back.
        failed = [r for r in results[1:] if isinstance(r, Exception)
                  and not isinstance(r, (RolledBackError, RuntimeInconsistency))]
        if failed:
            error = failed[0]
            if isinstance(error, BadVersionError):
                raise ZkWriteConflict(f"a znode changed under the controller: {error!r}")
            raise error
        return results[1:]

    # -- reading ----------------------------------------------------------------------

    async def load(self) -> ClusterState:
        names = await self.topic_names()
        topics = await self.load_topics(sorted(names))
        entities = await self._zk.children_or_empty(z.CONFIG_BROKERS)
        configs = await gatherResults([self._zk.get_or_none(z.config_path(z.BROKER_CONFIG, e)) for e in entities])
        broker_configs = {("" if entity == z.DEFAULT_ENTITY else entity): MappingProxyType(z.decode_config(d))
                          for entity, (d, _) in zip(entities, configs, strict=True) if d is not None}
        return ClusterState(self.epoch, MappingProxyType(topics),
                            MappingProxyType({k: v for k, v in broker_configs.items() if v}),
                            MappingProxyType(await self.load_acls()))

    async def load_acls(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every ACL under ``/kafka-acl`` and ``/kafka-acl-extended/prefixed``."""
        acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            root = z.acl_root(pattern_type.name)
            for type_name in await self._zk.children_or_empty(root):
                try:
                    resource_type = ResourceType.from_camel(type_name)
                except ValueError:
                    continue
                for name in await self._zk.children_or_empty(f"{root}/{type_name}"):
                    data, _ = await self._zk.get_or_none(f"{root}/{type_name}/{name}")
                    if not data:
                        continue
                    try:
                        entries = entries_from_json(json.loads(data))
                    except (ValueError, KeyError, TypeError):
                        self.log.warn("Ignoring unreadable ACLs in {path}", path=f"{root}/{type_name}/{name}")
                        continue
                    if entries:
                        acls[ResourcePattern(resource_type, name, pattern_type)] = frozenset(entries)
        return acls

    async def topic_names(self) -> set[str]:
        return set(await self._zk.children_or_empty(z.TOPICS))

    async def load_topics(self, names: Iterable[str]) -> dict[str, TopicRecord]:
        names = list(names)
        loaded = await gatherResults([ensureDeferred(self._load_topic(name)) for name in names])
        return {name: record for name, record in zip(names, loaded, strict=True) if record is not None}

    async def _load_topic(self, name: str) -> TopicRecord | None:
        zk = self._zk
        data, stat = await zk.get_or_none(z.topic_path(name))
        if data is None:
            return None
        assignment = z.decode_topic(data)
        if assignment.topic_id is None:
            # A topic written without an id (by an old tool): the controller gives it one, as Kafka's does.
            assignment = z.TopicAssignment(uuid.uuid4(), assignment.partitions, assignment.adding,
                                           assignment.removing)
            [stat] = await self._guarded(lambda t: t.set_data(z.topic_path(name), z.encode_topic(assignment),
                                                              stat.version))
        self._assignments[name] = (assignment, stat.version)
        indexes = sorted(assignment.partitions)
        states = await gatherResults([zk.get_or_none(z.partition_state_path(name, i)) for i in indexes])
        config, _ = await zk.get_or_none(z.config_path(z.TOPIC_CONFIG, name))
        partitions = {}
        for index, (state_data, state_stat) in zip(indexes, states, strict=True):
            replicas = assignment.partitions[index]
            adding = tuple(assignment.adding.get(index, ()))
            removing = tuple(assignment.removing.get(index, ()))
            if state_data is None:
                partitions[index] = PartitionRecord(replicas, NO_LEADER, -1, (), NO_STATE, adding, removing)
                self._state_versions.pop((name, index), None)
                continue
            state = z.decode_partition_state(state_data, state_stat.version)
            partitions[index] = PartitionRecord(replicas, state.leader, state.leader_epoch, state.isr, state.version,
                                                adding, removing, state.leader_recovery_state)
            self._state_versions[(name, index)] = state.version
        return topic_record(name, assignment.topic_id or uuid.uuid4(), partitions, z.decode_config(config))

    async def topic_configs(self, name: str) -> dict[str, str]:
        data, _ = await self._zk.get_or_none(z.config_path(z.TOPIC_CONFIG, name))
        return z.decode_config(data)

    async def broker_configs(self, entity: str) -> dict[str, str]:
        data, _ = await self._zk.get_or_none(z.config_path(z.BROKER_CONFIG, _entity(entity)))
        return z.decode_config(data)

    async def topics_queued_for_deletion(self) -> list[str]:
        return await self._zk.children_or_empty(z.DELETE_TOPICS)

    async def cancel_deletions(self, names) -> None:
        for name in names:
            with contextlib.suppress(NoNodeError):
                await self._guarded(lambda t, n=name: t.delete(z.delete_topic_path(n)))

    # -- writing ----------------------------------------------------------------------

    async def create_topics(self, topics: list[TopicRecord]) -> None:
        for topic in topics:
            if topic.configs:
                await self._zk.set_or_create(z.config_path(z.TOPIC_CONFIG, topic.name), z.encode_config(topic.configs))
            assignment = z.TopicAssignment(topic.topic_id, {i: r.replicas for i, r in topic.partitions.items()},
                                           {i: r.adding_replicas for i, r in topic.partitions.items()},
                                           {i: r.removing_replicas for i, r in topic.partitions.items()})

            def build(t, topic=topic, assignment=assignment) -> None:
                t.create(z.topic_path(topic.name), z.encode_topic(assignment))
                t.create(z.partitions_path(topic.name), b"")
                for index, record in sorted(topic.partitions.items()):
                    t.create(z.partition_path(topic.name, index), b"")
                    t.create(z.partition_state_path(topic.name, index), self._state_bytes(record))

            await self._guarded(build)
            self._assignments[topic.name] = (assignment, 0)
            for index in topic.partitions:
                self._state_versions[(topic.name, index)] = 0

    async def delete_topics(self, names: list[str]) -> None:
        """Kafka's topic deletion completion: the topic znode and everything under it, its config, and
        its deletion request."""
        zk = self._zk
        for name in names:
            indexes = await zk.children_or_empty(z.partitions_path(name))
            has_state = await gatherResults([zk.exists(z.partition_state_path(name, int(i))) for i in indexes])
            topic_exists = await zk.exists(z.topic_path(name)) is not None
            partitions_exist = await zk.exists(z.partitions_path(name)) is not None

            def build(t, name=name, indexes=indexes, has_state=has_state, topic_exists=topic_exists,
                      partitions_exist=partitions_exist) -> None:
                for index, stat in zip(indexes, has_state, strict=True):
                    if stat is not None:
                        t.delete(z.partition_state_path(name, int(index)))
                    t.delete(z.partition_path(name, int(index)))
                if partitions_exist:
                    t.delete(z.partitions_path(name))
                if topic_exists:
                    t.delete(z.topic_path(name))

            if topic_exists or partitions_exist:
                await self._guarded(build)
            for path in (z.config_path(z.TOPIC_CONFIG, name), z.delete_topic_path(name)):
                with contextlib.suppress(NoNodeError):
                    await self._guarded(lambda t, p=path: t.delete(p))
            self._assignments.pop(name, None)
            for key in [k for k in self._state_versions if k[0] == name]:
                del self._state_versions[key]

    async def set_partitions(self, topic: str, partitions: Mapping[int, PartitionRecord]) -> None:
        while not await self._set_partitions_once(topic, partitions):
            pass    # an admin changed the topic znode meanwhile (new partitions): merge again

    async def _set_partitions_once(self, topic: str, partitions: Mapping[int, PartitionRecord]) -> bool:
        """One attempt: the topic znode (merged with what it holds now) and the changed states in one
        guarded transaction; False if the topic znode changed under it."""
        zk = self._zk
        data, stat = await zk.get(z.topic_path(topic))
        current = z.decode_topic(data)
        cached = self._assignments.get(topic)
        merged = z.TopicAssignment(
            current.topic_id or (cached[0].topic_id if cached else None),
            {**current.partitions, **{i: r.replicas for i, r in partitions.items()}},
            {**{i: a for i, a in current.adding.items() if i not in partitions},
             **{i: r.adding_replicas for i, r in partitions.items() if r.adding_replicas}},
            {**{i: a for i, a in current.removing.items() if i not in partitions},
             **{i: r.removing_replicas for i, r in partitions.items() if r.removing_replicas}})
        assignment_changed = merged != current
        existing = set(await zk.children_or_empty(z.partitions_path(topic)))
        partitions_node = await zk.exists(z.partitions_path(topic)) is not None
        states: list[tuple[int, PartitionRecord, bool]] = []    # (index, record, create?)
        for index, record in sorted(partitions.items()):
            if not record.has_state:
                continue
            known = self._state_versions.get((topic, index))
            if known is not None and known == record.partition_epoch:
                continue                      # the state did not change (an assignment-only change)
            states.append((index, record, known is None and record.partition_epoch == 0))
        if not assignment_changed and not states:
            return True

        def build(t) -> None:
            if assignment_changed:
                t.set_data(z.topic_path(topic), z.encode_topic(merged), stat.version)
            if not partitions_node and any(create for _, _, create in states):
                t.create(z.partitions_path(topic), b"")
            for index, record, create in states:
                if create:
                    if str(index) not in existing:
                        t.create(z.partition_path(topic, index), b"")
                    t.create(z.partition_state_path(topic, index), self._state_bytes(record))
                else:
                    t.set_data(z.partition_state_path(topic, index), self._state_bytes(record),
                               record.partition_epoch - 1)

        try:
            await self._guarded(build)
        except ZkWriteConflict:
            if assignment_changed and (await zk.get(z.topic_path(topic)))[1].version != stat.version:
                return False
            raise
        self._assignments[topic] = (merged, stat.version + (1 if assignment_changed else 0))
        for index, record, _ in states:
            self._state_versions[(topic, index)] = record.partition_epoch
        return True

    def _state_bytes(self, record: PartitionRecord) -> bytes:
        return z.encode_partition_state(z.PartitionState(record.leader, record.leader_epoch, record.isr, self.epoch,
                                                         record.leader_recovery_state, record.partition_epoch))

    async def set_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        await self._set_config(z.TOPIC_CONFIG, topic, configs)

    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        await self._set_config(z.BROKER_CONFIG, _entity(entity), configs)

    async def _set_config(self, entity_type: str, entity: str, configs: Mapping[str, str]) -> None:
        """Kafka's ``AdminZkClient.changeEntityConfig``: the config znode, then a change notification."""
        await self._zk.set_or_create(z.config_path(entity_type, entity), z.encode_config(configs))
        await self._zk.create(f"{z.CONFIG_CHANGES}/{z.CONFIG_CHANGE_PREFIX}",
                              z.encode_config_change(entity_type, entity), sequence=True, makepath=True)

    async def set_acls(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        """Kafka's ``AclAuthorizer.updateResourceAcls``: the resource's znode, then a change notification."""
        path = f"{z.acl_root(pattern.pattern_type.name)}/{pattern.resource_type.camel}/{pattern.name}"
        if entries:
            await self._zk.set_or_create(path, json.dumps(entries_json(entries)).encode())
        else:
            with contextlib.suppress(NoNodeError):
                await self._zk.delete(path)
        prefix, data = z.encode_acl_change(pattern.resource_type.name, pattern.name, pattern.pattern_type.name)
        await self._zk.create(prefix, data, sequence=True, makepath=True)

    async def purge_change_notifications(self, now_ms: int | None = None) -> None:
        """Remove config and ACL change notifications older than Kafka's 15 minutes."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        for root in (z.CONFIG_CHANGES, z.ACL_CHANGES, z.EXTENDED_ACL_CHANGES):
            for name in await self._zk.children_or_empty(root):
                path = f"{root}/{name}"
                stat = await self._zk.exists(path)
                if stat is not None and now_ms - stat.ctime > CHANGE_NOTIFICATION_EXPIRY_MS:
                    with contextlib.suppress(NoNodeError):
                        await self._zk.delete(path)


__all__ = ["ZkMetadataStore", "ZkWriteConflict", "CHANGE_NOTIFICATION_EXPIRY_MS"]

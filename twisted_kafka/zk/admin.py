"""ZkAdmin: what any broker writes to ZooKeeper for the controller to act on (Kafka's ``AdminZkClient``).

In Kafka's ZooKeeper mode a topic is created by writing its config and its
assignment, deleted by asking for it under ``/admin/delete_topics``, grown by
rewriting its assignment, and reconfigured by writing ``/config/...`` plus a
sequential change notification; the controller's watches do the rest.  Any
broker can do these writes, so admin requests work against any broker.

The writes are Kafka's, in Kafka's order: a topic's config before its
assignment (so the controller finds the overrides when it creates the
partitions); a config before its change notification.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping

from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from . import data as z
from .client import BadVersionError, NodeExistsError, NoNodeError, ZkClient


class ZkAdmin:
    def __init__(self, zk: ZkClient):
        self._zk = zk

    async def topic_names(self) -> list[str]:
        return await self._zk.children_or_empty(z.TOPICS)

    async def read_topic(self, name: str) -> tuple[z.TopicAssignment, int] | None:
        """A topic's assignment and its znode's version, or None."""
        data, stat = await self._zk.get_or_none(z.topic_path(name))
        return None if data is None else (z.decode_topic(data), stat.version)

    async def create_topic(self, name: str, topic_id: uuid.UUID, assignment: Mapping[int, list[int]],
                           configs: Mapping[str, str]) -> None:
        """Kafka's ``createTopicWithAssignment``: the config znode, then the topic znode
        (TOPIC_ALREADY_EXISTS when another broker created it first)."""
        await self._zk.set_or_create(z.config_path(z.TOPIC_CONFIG, name), z.encode_config(configs))
        value = z.encode_topic(z.TopicAssignment(topic_id, {i: tuple(r) for i, r in assignment.items()}))
        try:
            await self._zk.create(z.topic_path(name), value, makepath=True)
        except NodeExistsError:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None

    async def add_partitions(self, name: str, added: Mapping[int, list[int]], version: int) -> bool:
        """Add ``added`` to the topic's assignment if its znode is still at ``version``; False if it changed."""
        found = await self.read_topic(name)
        if found is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        current, current_version = found
        if current_version != version:
            return False
        merged = z.TopicAssignment(current.topic_id, {**current.partitions, **{i: tuple(r) for i, r in added.items()}},
                                   current.adding, current.removing)
        try:
            await self._zk.set(z.topic_path(name), z.encode_topic(merged), version)
        except BadVersionError:
            return False
        return True

    async def queued_for_deletion(self, name: str) -> bool:
        return await self._zk.exists(z.delete_topic_path(name)) is not None

    async def request_deletion(self, name: str) -> None:
        """Kafka's ``deleteTopic``: ``/admin/delete_topics/<name>`` (already requested: nothing to do)."""
        with contextlib.suppress(NodeExistsError):
            await self._zk.create(z.delete_topic_path(name), makepath=True)

    async def topic_configs(self, name: str) -> dict[str, str]:
        data, _ = await self._zk.get_or_none(z.config_path(z.TOPIC_CONFIG, name))
        return z.decode_config(data)

    async def change_topic_config(self, name: str, configs: Mapping[str, str]) -> None:
        await self._change_config(z.TOPIC_CONFIG, name, configs)

    async def change_broker_config(self, entity: str, configs: Mapping[str, str]) -> None:
        """``entity``: a broker id, or "" for the cluster default (``<default>`` in ZooKeeper)."""
        await self._change_config(z.BROKER_CONFIG, entity or z.DEFAULT_ENTITY, configs)

    async def _change_config(self, entity_type: str, entity: str, configs: Mapping[str, str]) -> None:
        """Kafka's ``changeEntityConfig``: the config, then a change notification every broker's
        listener (here: the controller's) picks up."""
        await self._zk.set_or_create(z.config_path(entity_type, entity), z.encode_config(configs))
        await self._zk.create(f"{z.CONFIG_CHANGES}/{z.CONFIG_CHANGE_PREFIX}",
                              z.encode_config_change(entity_type, entity), sequence=True, makepath=True)

    async def controller_id(self) -> int | None:
        data, _ = await self._zk.get_or_none(z.CONTROLLER)
        return z.decode_controller(data)

    async def broker(self, broker_id: int) -> z.BrokerInfo | None:
        data, stat = await self._zk.get_or_none(z.broker_path(broker_id))
        if data is None:
            return None
        try:
            return z.decode_broker(broker_id, data, stat.czxid)
        except (ValueError, KeyError):
            return None

    async def topic_id(self, name: str) -> uuid.UUID | None:
        found = await self.read_topic(name)
        return found[0].topic_id if found is not None else None


__all__ = ["ZkAdmin", "NoNodeError"]

"""The controller's durable cluster state, behind an async interface.

In Kafka's ZooKeeper mode this state lives in ZooKeeper: topic assignments
and topic ids under ``/brokers/topics/<t>``, partition states (leader,
leader epoch, ISR, with the znode version as partition epoch) under
``.../partitions/<p>/state``, topic and broker configs under ``/config``,
and ``/controller_epoch``.  ``ClusterMetadataStore`` is that state as the
controller uses it: every read and write is asynchronous, every write is
durable when its Deferred fires, and the records handed out are immutable --
nobody changes the store except through its methods.  A single node keeps
the records in one JSON file (``JsonFileMetadataStore``); a ZooKeeper-backed
store implements the same methods over the znodes.

The controller keeps its own in-memory view (``ControllerContext``) and
writes through the store first, so a failed write changes nothing.
"""

from __future__ import annotations

import json
import os
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from collections.abc import Callable, Mapping

from twisted.internet.defer import DeferredLock
from twisted.internet.threads import deferToThreadPool

STORE_FILE = "cluster-metadata.json"
FORMAT_VERSION = 1


@dataclass(frozen=True)
class PartitionRecord:
    """A partition's state: ZooKeeper's ``/brokers/topics/<t>/partitions/<p>/state`` plus its assignment."""

    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int = 0      # the state znode's version in ZooKeeper mode


@dataclass(frozen=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRecord]
    configs: Mapping[str, str] = field(default_factory=dict)

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0

    def with_partitions(self, changes: Mapping[int, PartitionRecord]) -> TopicRecord:
        return replace(self, partitions=MappingProxyType({**self.partitions, **changes}))

    def with_configs(self, configs: Mapping[str, str]) -> TopicRecord:
        return replace(self, configs=MappingProxyType(dict(configs)))


def topic_record(name: str, topic_id: uuid.UUID, partitions: Mapping[int, PartitionRecord],
                 configs: Mapping[str, str] | None = None) -> TopicRecord:
    """A TopicRecord whose mappings cannot be changed in place."""
    return TopicRecord(name, topic_id, MappingProxyType(dict(partitions)), MappingProxyType(dict(configs or {})))


@dataclass(frozen=True)
class ClusterState:
    """Everything stored, as read at one moment."""

    controller_epoch: int
    topics: Mapping[str, TopicRecord]
    broker_configs: Mapping[str, Mapping[str, str]]   # "<broker id>" or "" (the cluster default)


class ClusterMetadataStore(ABC):
    """Durable cluster state; see the module docstring."""

    @abstractmethod
    async def load(self) -> ClusterState:
        """Everything stored (startup of a controller)."""

    @abstractmethod
    async def increment_controller_epoch(self) -> int:
        """Bump and persist the controller epoch; returns the new epoch."""

    @abstractmethod
    async def create_topics(self, topics: list[TopicRecord]) -> None:
        """Persist new topics (assignments, ids, partition states, configs)."""

    @abstractmethod
    async def delete_topics(self, names: list[str]) -> None:
        """Forget topics."""

    @abstractmethod
    async def set_partitions(self, topic: str, partitions: Mapping[int, PartitionRecord]) -> None:
        """Add partitions to ``topic`` or replace their states."""

    @abstractmethod
    async def set_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        """Replace a topic's config overrides."""

    @abstractmethod
    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        """Replace the dynamic configs of a broker id, or of "" (the cluster default)."""


class JsonFileMetadataStore(ClusterMetadataStore):
    """The single node's store: one JSON file under the first log directory.

    Written atomically (temporary file, fsync, rename, fsync of the directory)
    so a crash leaves either the old or the new state, never a torn one.
    Writes run in the I/O thread pool (an fsync can take milliseconds) and are
    serialised, so the file's last write is always the latest state.
    """

    def __init__(self, log_dir: str, *, reactor, threadpool):
        self.path = os.path.join(log_dir, STORE_FILE)
        self.reactor = reactor
        self.threadpool = threadpool
        self._state = ClusterState(0, MappingProxyType({}), MappingProxyType({}))
        self._loaded = False
        self._lock = DeferredLock()

    # -- reading ----------------------------------------------------------------------

    async def load(self) -> ClusterState:
        if not self._loaded:
            state = await deferToThreadPool(self.reactor, self.threadpool, self._read)
            # Another load may have finished first, and a write after it: keep the newer state.
            if not self._loaded:
                self._state = state
                self._loaded = True
        return self._state

    def _read(self) -> ClusterState:
        if not os.path.exists(self.path):
            return self._state
        with open(self.path, encoding="utf-8") as fh:
            data = json.load(fh)
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self.path}: unsupported format version {data.get('version')!r}")
        topics = {}
        for name, topic in data["topics"].items():
            partitions = {int(index): PartitionRecord(tuple(p["replicas"]), p["leader"], p["leader_epoch"],
                                                      tuple(p["isr"]), p.get("partition_epoch", 0))
                          for index, p in topic["partitions"].items()}
            topics[name] = topic_record(name, uuid.UUID(topic["topic_id"]), partitions, topic.get("configs", {}))
        broker_configs = {entity: MappingProxyType(dict(values))
                          for entity, values in data.get("broker_configs", {}).items()}
        return ClusterState(data["controller_epoch"], MappingProxyType(topics), MappingProxyType(broker_configs))

    # -- writing ----------------------------------------------------------------------

    async def increment_controller_epoch(self) -> int:
        state = await self._update(lambda s: replace(s, controller_epoch=s.controller_epoch + 1))
        return state.controller_epoch

    async def create_topics(self, topics: list[TopicRecord]) -> None:
        await self._update(lambda s: replace(s, topics=MappingProxyType(
            {**s.topics, **{t.name: t for t in topics}})))

    async def delete_topics(self, names: list[str]) -> None:
        doomed = set(names)
        await self._update(lambda s: replace(s, topics=MappingProxyType(
            {name: t for name, t in s.topics.items() if name not in doomed})))

    async def set_partitions(self, topic: str, partitions: Mapping[int, PartitionRecord]) -> None:
        await self._update(lambda s: replace(s, topics=MappingProxyType(
            {**s.topics, topic: s.topics[topic].with_partitions(partitions)})))

    async def set_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        await self._update(lambda s: replace(s, topics=MappingProxyType(
            {**s.topics, topic: s.topics[topic].with_configs(configs)})))

    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        def change(s: ClusterState) -> ClusterState:
            values = {k: v for k, v in s.broker_configs.items() if k != entity}
            if configs:
                values[entity] = MappingProxyType(dict(configs))
            return replace(s, broker_configs=MappingProxyType(values))
        await self._update(change)

    async def _update(self, change: Callable[[ClusterState], ClusterState]) -> ClusterState:
        """Apply ``change`` to the current state and make the result durable, one update at a time.

        The new state becomes current only once it is on disk: on failure nothing changes.
        """
        await self.load()
        await self._lock.acquire()
        try:
            state = change(self._state)
            await deferToThreadPool(self.reactor, self.threadpool, self._write, self._snapshot(state))
            self._state = state
            return state
        finally:
            self._lock.release()

    @staticmethod
    def _snapshot(state: ClusterState) -> bytes:
        data = {
            "version": FORMAT_VERSION,
            "controller_epoch": state.controller_epoch,
            "broker_configs": {entity: dict(values) for entity, values in state.broker_configs.items()},
            "topics": {
                name: {
                    "topic_id": str(topic.topic_id),
                    "configs": dict(topic.configs),
                    "partitions": {str(index): {"replicas": list(p.replicas), "leader": p.leader,
                                                "leader_epoch": p.leader_epoch, "isr": list(p.isr),
                                                "partition_epoch": p.partition_epoch}
                                   for index, p in sorted(topic.partitions.items())},
                }
                for name, topic in sorted(state.topics.items())
            },
        }
        return json.dumps(data, indent=1, sort_keys=True).encode("utf-8")

    def _write(self, payload: bytes) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(os.path.dirname(self.path), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


__all__ = ["ClusterMetadataStore", "JsonFileMetadataStore", "ClusterState", "TopicRecord", "PartitionRecord",
           "topic_record", "STORE_FILE"]

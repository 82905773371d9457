"""LocalClusterView: this broker's view of the cluster, for the cluster's ControllerClient to wait on.

In a ZooKeeper cluster an admin request is written to ZooKeeper and the
controller does the rest, telling every broker over its control plane.  Like
Kafka's delayed operations (``DelayedCreatePartitions``, ``DelayedDeleteTopics``,
``DelayedElectLeader``), the broker that took the request answers once its
own metadata shows the change -- the topic in its metadata cache, its
partitions, the new leader, the new configs -- or the request's timeout
passed.  This is what it waits on: the metadata cache, the topic configs and
the dynamic broker configs, all updated together by UpdateMetadata
(``MetadataCache.changed``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from twisted.internet.defer import Deferred

from .config_repository import ConfigRepository
from .dynamic_config import DynamicBrokerConfig
from .metadata_cache import MetadataCache


class LocalClusterView:
    def __init__(self, *, metadata_cache: MetadataCache, config_repository: ConfigRepository,
                 dynamic_config: DynamicBrokerConfig, reactor):
        self._cache = metadata_cache
        self._configs = config_repository
        self._dynamic = dynamic_config
        self._reactor = reactor

    def live_brokers(self) -> list[int]:
        return sorted(self._cache.brokers)

    def has_topic(self, name: str) -> bool:
        return name in self._cache.topics

    def partition_count(self, name: str) -> int:
        topic = self._cache.topics.get(name)
        return len(topic.partitions) if topic is not None else 0

    def topic_id(self, name: str) -> uuid.UUID | None:
        topic = self._cache.topics.get(name)
        return topic.topic_id if topic is not None else None

    def leader(self, topic: str, partition: int) -> int | None:
        state = self._cache.partition(topic, partition)
        return state.leader if state is not None else None

    def topic_overrides(self, name: str) -> dict[str, str]:
        return self._configs.topic_overrides(name)

    def dynamic_layer(self, entity: str) -> dict[str, str]:
        """The dynamic configs of ``entity`` ("" or this broker's id) as stored (passwords encoded) that this
        broker last received: what a write to ZooKeeper waits to see."""
        return self._dynamic.stored_layer(entity)

    def wait_until(self, predicate: Callable[[], bool], timeout_ms: int | None) -> Deferred:
        """Fires True once ``predicate()`` holds (checked after each UpdateMetadata), or False after
        ``timeout_ms`` (None or <= 0: at once, with whether it holds now)."""
        if not timeout_ms or timeout_ms <= 0:
            from twisted.internet.defer import succeed
            return succeed(bool(predicate()))
        return self._cache.wait_until(predicate, self._reactor, timeout_ms / 1000.0)


__all__ = ["LocalClusterView"]

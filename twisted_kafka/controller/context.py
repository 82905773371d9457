"""ControllerContext: what the active controller knows, in memory (Kafka's ``ControllerContext``).

The controller's view of the stored state -- topics with their partition
records, dynamic broker configs, ACLs -- and of the cluster as it is now:
the live brokers and their epochs, the brokers shutting down, the topics
being deleted, the controller epoch.  Only the controller's parts change it,
and only after the store has made a change durable; each part reads it
rather than keeping its own copy, so there is one answer to "what is
partition t-0's state".  The questions asked of it from several parts --
which brokers may lead, which partitions are online -- are answered here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping

from twisted_kafka.security.acl import AccessControlEntry, ResourcePattern

from .interface import LiveBroker
from .metadata_store import ClusterState, PartitionRecord, TopicRecord

#: Every part of the controller logs under this one namespace, so an operator's filter on the
#: controller sees all of it.
LOG_NAMESPACE = "twisted_kafka.controller.KafkaController"

TopicPartition = tuple[str, int]


class ControllerContext:
    def __init__(self) -> None:
        self.epoch = 0
        self.live_brokers: dict[int, LiveBroker] = {}
        #: Brokers in a controlled shutdown: alive, but no longer elected (Kafka's ``shuttingDownBrokerIds``).
        self.shutting_down: set[int] = set()
        self.topics: dict[str, TopicRecord] = {}
        self.broker_configs: dict[str, Mapping[str, str]] = {}
        self.acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        #: Topics being deleted -> the replicas (broker ids) that have not confirmed deleting their logs yet.
        self.deleting: dict[str, set[int]] = {}

    def load(self, state: ClusterState) -> None:
        """The stored state, as a newly elected controller reads it; it then registers the live brokers
        (a controller elected again starts from what is registered now)."""
        self.topics = dict(state.topics)
        self.broker_configs = dict(state.broker_configs)
        self.acls = dict(state.acls)
        self.live_brokers.clear()
        self.shutting_down.clear()
        self.deleting.clear()

    def forget_broker(self, broker_id: int) -> None:
        self.live_brokers.pop(broker_id, None)
        self.shutting_down.discard(broker_id)

    def electable_brokers(self) -> set[int]:
        """Brokers that may lead or join an ISR: live and not shutting down (Kafka's ``isReplicaOnline``)."""
        return {b for b in self.live_brokers if b not in self.shutting_down}

    def first_live(self, replicas: Iterable[int]) -> int:
        for broker in replicas:
            if broker in self.live_brokers:
                return broker
        return -1

    def partition(self, name: str, index: int) -> PartitionRecord | None:
        topic = self.topics.get(name)
        return topic.partitions.get(index) if topic is not None else None

    def all_partitions(self) -> list[TopicPartition]:
        return [(t.name, i) for t in self.topics.values() for i in t.partitions]

    def online_partitions(self, exclude: Collection[str] = frozenset()) -> list[tuple[TopicRecord, int]]:
        """Every partition that has a state (of the topics not in ``exclude``)."""
        return [(t, i) for t in self.topics.values() if t.name not in exclude
                for i, r in t.partitions.items() if r.has_state]

    def set_partitions(self, name: str, records: Mapping[int, PartitionRecord]) -> TopicRecord:
        topic = self.topics[name] = self.topics[name].with_partitions(records)
        return topic

    def hosted_replicas(self) -> Counter:
        """Replicas per broker of every existing partition (only counted when a broker has a budget)."""
        if all(b.partition_budget is None for b in self.live_brokers.values()):
            return Counter()
        return Counter(broker for topic in self.topics.values() for record in topic.partitions.values()
                       for broker in record.replicas)


__all__ = ["ControllerContext", "TopicPartition", "LOG_NAMESPACE"]

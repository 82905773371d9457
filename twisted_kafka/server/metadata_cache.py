"""MetadataCache: what this broker believes about the cluster, for answering Metadata.

Kafka brokers learn brokers, topics and partition leadership from the
controller's UpdateMetadata requests and answer every client Metadata request
from this cache.  Partition state carries what a cluster needs from the
start — leader, leader epoch, replicas, ISR, offline replicas, partition
epoch — so a single node and a ZooKeeper-coordinated cluster share one shape.

Topic entries are kept encoded per response version (see
``protocol.metadata_response``): clients refresh metadata every few seconds
and entries only change when the controller says so, so a response is a join
of cached fragments.  An update replaces a topic's state and drops its
fragments.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.defer import Deferred, succeed

from twisted_kafka.network.listeners import EndPoint, ListenerConfig
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.metadata_response import TopicMetadata, encode_topic_fragment

_PartitionMetadata = TopicMetadata.fields["partitions"].array_of.data_class

# Kafka's AclOperation codes, for the authorized-operations bit fields.
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 3, 4, 5, 6, 7, 8
CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 9, 10, 11, 12
TOPIC_OPERATIONS = frozenset({READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS})
CLUSTER_OPERATIONS = frozenset({CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS,
                                IDEMPOTENT_WRITE})


@dataclass(frozen=True, slots=True)
class PartitionState:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    partition_epoch: int = 0  # ZooKeeper's znode version of the partition state


@dataclass(frozen=True, slots=True)
class TopicState:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionState]
    is_internal: bool = False


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    endpoints: dict[str, EndPoint]  # listener name -> advertised endpoint
    rack: str | None = None


@dataclass(eq=False)
class _Waiter:
    predicate: Callable[[], bool]
    deferred: Deferred
    timer: Any = None


@dataclass
class MetadataCache:
    listeners: ListenerConfig
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    topics: dict[str, TopicState] = field(default_factory=dict)
    controller_id: int = -1
    local_broker_id: int = -1
    cluster_id: str | None = None
    _fragments: dict[tuple[str, int], bytes] = field(default_factory=dict)
    _fragment_errors: dict[str, dict[int, int]] = field(default_factory=dict)
    _topics_by_id: dict[uuid.UUID, str] = field(default_factory=dict)
    _waiters: list[_Waiter] = field(default_factory=list)

    def set_local_broker(self, broker) -> None:
        """This broker's identity (meta.properties).  Brokers, their endpoints and the
        controller are learnt from the controller's UpdateMetadata."""
        self.local_broker_id = broker.broker_id
        self.cluster_id = broker.cluster_id

    def broker_endpoint(self, broker_id: int, listener_name: str) -> EndPoint | None:
        """Where ``broker_id`` listens as ``listener_name``, as the controller announced it; None while
        unknown."""
        broker = self.brokers.get(broker_id)
        return broker.endpoints.get(listener_name) if broker is not None else None

    # -- updates (from the controller) ---------------------------------------------------

    def update_brokers(self, brokers: Iterable[BrokerRegistration], controller_id: int) -> None:
        self.brokers = {b.broker_id: b for b in brokers}
        self.controller_id = controller_id

    def update_partitions(self, states: Iterable[PartitionState], topic_ids: dict[str, uuid.UUID],
                          internal_topics: frozenset[str] = frozenset()) -> None:
        """Apply partition states (UpdateMetadata): replaces each named partition's state."""
        by_topic: dict[str, dict[int, PartitionState]] = {}
        for state in states:
            by_topic.setdefault(state.topic, {})[state.partition] = state
        for name, partitions in by_topic.items():
            existing = self.topics.get(name)
            merged = dict(existing.partitions) if existing is not None else {}
            merged.update(partitions)
            topic_id = topic_ids.get(name) or (existing.topic_id if existing else uuid.UUID(int=0))
            self._put(TopicState(name, topic_id, merged, name in internal_topics))

    def remove_topics(self, names: Iterable[str]) -> None:
        for name in names:
            topic = self.topics.pop(name, None)
            if topic is not None:
                self._topics_by_id.pop(topic.topic_id, None)
                self._drop_fragments(name)

    def _put(self, topic: TopicState) -> None:
        self.topics[topic.name] = topic
        self._topics_by_id[topic.topic_id] = topic.name
        self._drop_fragments(topic.name)

    def _drop_fragments(self, name: str) -> None:
        for key in [k for k in self._fragments if k[0] == name]:
            del self._fragments[key]
        self._fragment_errors.pop(name, None)

    # -- waiting for the controller ---------------------------------------------------------

    def wait_until(self, predicate: Callable[[], bool], clock, timeout_seconds: float | None) -> Deferred:
        """A Deferred firing True once ``predicate()`` holds after an update (at once if it holds
        now), or False after ``timeout_seconds`` (None: no limit).  The UpdateMetadata handler calls
        ``changed()`` once a request is applied -- partitions, brokers and configs alike."""
        if predicate():
            return succeed(True)
        waiter = _Waiter(predicate, Deferred())
        self._waiters.append(waiter)
        if timeout_seconds is not None:
            waiter.timer = clock.callLater(max(0.0, timeout_seconds), self._expire, waiter)
        return waiter.deferred

    def changed(self) -> None:
        for waiter in list(self._waiters):
            try:
                done = waiter.predicate()
            except Exception:
                done = False
            if done:
                self._waiters.remove(waiter)
                if waiter.timer is not None and waiter.timer.active():
                    waiter.timer.cancel()
                waiter.deferred.callback(True)

    def _expire(self, waiter: _Waiter) -> None:
        if waiter in self._waiters:
            self._waiters.remove(waiter)
            waiter.deferred.callback(False)

    # -- queries --------------------------------------------------------------------

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._topics_by_id.get(topic_id)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        state = self.topics.get(topic)
        return state.partitions.get(partition) if state is not None else None

    def alive_brokers(self, listener_name: str) -> list[tuple[int, str, int, str | None]]:
        """(node_id, host, port, rack) of every broker reachable on ``listener_name``."""
        return [(b.broker_id, ep.host, ep.port, b.rack)
                for b in sorted(self.brokers.values(), key=lambda b: b.broker_id)
                if (ep := b.endpoints.get(listener_name)) is not None]

    def topic_fragment(self, name: str, version: int, include_authorized_operations: bool = False,
                       operations: frozenset[int] | None = None) -> bytes:
        """The encoded Metadata entry of an existing topic at ``version`` (cached); with
        ``operations`` (an authorizer's answer for one principal) encoded with those, not cached."""
        key = (name, version if not include_authorized_operations else -1 - version)
        fragment = None if operations is not None else self._fragments.get(key)
        if fragment is None:
            topic = self.topics[name]
            partitions = []
            for index in sorted(topic.partitions):
                state = topic.partitions[index]
                error = ErrorCode.NONE if state.leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE
                partitions.append(_PartitionMetadata(
                    error_code=error, partition_index=index, leader_id=state.leader,
                    leader_epoch=state.leader_epoch, replica_nodes=list(state.replicas),
                    isr_nodes=list(state.isr), offline_replicas=list(state.offline_replicas)))
            fragment = encode_topic_fragment(version, TopicMetadata(
                error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id, is_internal=topic.is_internal,
                partitions=partitions,
                authorized_operations=(set(operations) if operations is not None else set(TOPIC_OPERATIONS))
                if include_authorized_operations else None))
            if operations is None:
                self._fragments[key] = fragment
        return fragment


    def fragment_errors(self, name: str) -> dict[int, int]:
        """The error codes an existing topic's entry carries (the topic's, each partition's):
        ``{code: count}`` for ErrorsPerSec, cached with its fragments."""
        errors = self._fragment_errors.get(name)
        if errors is None:
            partitions = self.topics[name].partitions.values()
            leaderless = sum(1 for state in partitions if state.leader < 0)
            errors = {ErrorCode.NONE: 1 + len(partitions) - leaderless}
            if leaderless:
                errors[ErrorCode.LEADER_NOT_AVAILABLE] = leaderless
            self._fragment_errors[name] = errors
        return errors


def error_fragment(version: int, name: str | None, error: ErrorCode, topic_id: uuid.UUID | None = None) -> bytes:
    """The Metadata entry of a topic that cannot be described (unknown, invalid, being created)."""
    return encode_topic_fragment(version, TopicMetadata(
        error_code=error, name=name, topic_id=topic_id or uuid.UUID(int=0), is_internal=False, partitions=[],
        authorized_operations=None))


# Without an authorizer every operation a resource supports is allowed.
CLUSTER_AUTHORIZED_OPERATIONS = frozenset(CLUSTER_OPERATIONS)

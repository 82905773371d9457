"""KafkaController: topic and partition state, pushed to brokers over their control planes.

This is Kafka's ZooKeeper-mode controller reduced to what a cluster of one
needs, with a cluster's shape: state lives in a ``MetadataStore``; every
change is persisted first, then announced to brokers with LeaderAndIsr
(replicas learn their role and create their logs), UpdateMetadata (every
broker's metadata cache) and StopReplica (replicas stop and delete) — sent
through the ``ControllerChannelManager`` to each broker's control-plane
listener, the controller's own broker included.

Changes are processed one at a time (Kafka's single controller event
thread), so concurrent CreateTopics and DeleteTopics never interleave.

Leader epochs only move forward: they are persisted with the partition and
bumped only when leadership changes, which on a single node it never does —
restarting the broker keeps every epoch, so clients see no spurious
leadership change (CLIENTS.md §5).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Iterable

from twisted.internet.defer import Deferred, DeferredLock, gatherResults
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.config import ConfigError
from twisted_kafka.config.topic import validate_topic_overrides
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey

from .channel_manager import ControllerChannelManager
from .metadata_store import MetadataStore, PartitionRecord, TopicRecord
from .replica_assignment import assign_replicas
from .topic_names import collision_key, validate_topic_name

LEADER_DURING_DELETE = -2  # Kafka's LeaderAndIsr.LeaderDuringDelete: "this partition is being deleted"
SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4


@dataclass(frozen=True)
class LiveBroker:
    """A registered broker: what the controller needs to reach and describe it."""

    broker_id: int
    epoch: int
    endpoints: tuple  # advertised EndPoints (listener_name, host, port, security_protocol)
    control_listener: str  # listener the controller talks to (control plane, else inter-broker)
    rack: str | None = None

    def endpoint(self, listener_name: str):
        for ep in self.endpoints:
            if ep.listener_name == listener_name:
                return ep
        return None


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] | None = None
    configs: dict[str, str | None] = field(default_factory=dict)  # None values are refused (INVALID_CONFIG)


@dataclass
class TopicResult:
    name: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)


class KafkaController:
    log = Logger(namespace="twisted_kafka.controller.KafkaController")

    def __init__(self, *, config, broker_id: int, store: MetadataStore, channels: ControllerChannelManager):
        self.config = config
        self.broker_id = broker_id
        self.store = store
        self.channels = channels
        self.live_brokers: dict[int, LiveBroker] = {}
        self.active = False
        # Called with (topic, overrides) after a topic's configs change; in ZooKeeper
        # mode brokers learn this from a config-change notification.
        self.topic_config_listeners: list = []
        self._lock = DeferredLock()

    @property
    def epoch(self) -> int:
        return self.store.controller_epoch

    # -- becoming controller -----------------------------------------------------------

    async def startup(self, brokers: Iterable[LiveBroker]) -> None:
        """Become the controller: bump the epoch, then tell every broker the whole state."""
        await self._lock.acquire()
        try:
            self.store.controller_epoch += 1
            await self.store.save()
            self.active = True
            for broker in brokers:
                self._register(broker)
            partitions = [(t, i) for t in self.store.topics.values() for i in t.partitions]
            await self._send_update_metadata(self.live_brokers, partitions)
            await self._send_leader_and_isr(partitions, is_new=False)
            self.log.info("Controller {broker_id} active with epoch {epoch}: {topics} topic(s), "
                          "{partitions} partition(s)", broker_id=self.broker_id, epoch=self.epoch,
                          topics=len(self.store.topics), partitions=len(partitions))
        finally:
            self._lock.release()

    def _register(self, broker: LiveBroker) -> None:
        self.live_brokers[broker.broker_id] = broker
        ep = broker.endpoint(broker.control_listener)
        self.channels.add_broker(broker.broker_id, ep.host, ep.port)

    def shutdown(self) -> None:
        self.active = False
        self.channels.close()

    def require_active(self) -> None:
        if not self.active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "This broker is not the active controller")

    # -- topics ---------------------------------------------------------------------------
    #
    # Every change follows one pattern: plan and validate under the controller
    # lock (a bad topic fails alone), persist, queue the requests that tell the
    # brokers, release the lock, then (optionally) wait for the brokers to have
    # applied it.  The requests are queued before the lock is released, and each
    # broker's channel is a FIFO, so a later change never overtakes an earlier
    # one on any broker; waiting outside the lock lets a caller give up after its
    # timeout (Kafka's REQUEST_TIMED_OUT) without holding up the next change.

    async def create_topics(self, topics: list[NewTopic], *, validate_only: bool = False,
                            wait_for_brokers: bool = True, timeout_ms: int | None = None) -> list[TopicResult]:
        """Create ``topics``; one result per spec, in order.

        With ``wait_for_brokers`` the call returns once every replica and every
        broker's metadata cache has the new topics, or after ``timeout_ms``
        (None or <= 0: no limit) with REQUEST_TIMED_OUT for them -- they exist
        all the same, as in Kafka.
        """
        self.require_active()
        await self._lock.acquire()
        try:
            results: list[TopicResult] = []
            created: list[TopicRecord] = []
            collisions = {collision_key(name): name for name in self.store.topics}
            for spec in topics:
                try:
                    record = self._plan_topic(spec, collisions)
                except KafkaError as exc:
                    results.append(TopicResult(spec.name, exc.code, exc.message))
                    continue
                collisions[collision_key(record.name)] = record.name
                results.append(TopicResult(record.name, topic_id=None if validate_only else record.topic_id,
                                           num_partitions=len(record.partitions),
                                           replication_factor=record.replication_factor,
                                           configs=dict(record.configs)))
                created.append(record)
            if validate_only or not created:
                return results
            for record in created:
                self.store.topics[record.name] = record
            try:
                await self.store.save()
            except BaseException:
                for record in created:
                    self.store.topics.pop(record.name, None)
                raise
            partitions = [(t, i) for t in created for i in t.partitions]
            propagated = gatherResults([self._send_leader_and_isr(partitions, is_new=True),
                                        self._send_update_metadata(self.live_brokers, partitions)],
                                       consumeErrors=True)
            self.log.info("Created topic(s) {topics}", topics=", ".join(r.name for r in created))
        finally:
            self._lock.release()
        if wait_for_brokers and not await self._within(propagated, timeout_ms):
            for result in results:
                if result.error == ErrorCode.NONE:
                    result.error = ErrorCode.REQUEST_TIMED_OUT
                    result.message = (f"Topic '{result.name}' was created, but its metadata did not reach "
                                      f"every broker within {timeout_ms} ms")
        return results

    def _plan_topic(self, spec: NewTopic, collisions: dict[str, str]) -> TopicRecord:
        validate_topic_name(spec.name)
        if spec.name in self.store.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' already exists.")
        clash = collisions.get(collision_key(spec.name))
        if clash is not None:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Topic '{spec.name}' collides with existing topic: {clash}")
        if spec.assignments:
            if spec.num_partitions != -1 or spec.replication_factor != -1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Both numPartitions or replicationFactor and "
                                                            "replicasAssignments were set. Both cannot be used at the same time.")
        else:
            if spec.num_partitions == 0 or spec.num_partitions < -1:
                raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                                 "Number of partitions was set to an invalid non-positive value.")
            if spec.replication_factor == 0 or spec.replication_factor < -1:
                raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 "Replication factor must be larger than 0, or -1 to use the default value.")
        null_configs = sorted(name for name, value in spec.configs.items() if value is None)
        if null_configs:
            raise KafkaError(ErrorCode.INVALID_CONFIG,
                             f"Null value not supported for topic configs: {','.join(null_configs)}")
        try:
            validate_topic_overrides(spec.configs)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        brokers = sorted(self.live_brokers)
        if spec.assignments:
            assignment = self._check_assignment(spec.assignments, start=0)
        else:
            partitions = spec.num_partitions if spec.num_partitions != -1 else self.config["num.partitions"]
            factor = (spec.replication_factor if spec.replication_factor != -1
                      else self.config["default.replication.factor"])
            assignment = assign_replicas(brokers, partitions, factor)
        return TopicRecord(spec.name, uuid.uuid4(), {
            index: PartitionRecord(replicas=replicas, leader=self._first_live(replicas), leader_epoch=0,
                                   isr=[b for b in replicas if b in self.live_brokers])
            for index, replicas in assignment.items()}, dict(spec.configs))

    def _check_assignment(self, assignments: dict[int, list[int]], start: int) -> dict[int, list[int]]:
        indexes = sorted(assignments)
        if indexes != list(range(start, start + len(indexes))):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Partitions should be a consecutive 0-based integer sequence, given {indexes}")
        sizes = {len(replicas) for replicas in assignments.values()}
        if 0 in sizes:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Replica assignment of partition {min(i for i, r in assignments.items() if not r)} "
                             "is empty")
        if len(sizes) != 1:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             "All partitions should have the same number of replicas")
        for index, replicas in assignments.items():
            if len(set(replicas)) != len(replicas):
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Duplicate brokers not allowed in replica assignment: "
                                 f"{', '.join(map(str, replicas))} for partition id {index}.")
            unknown = [b for b in replicas if b not in self.live_brokers]
            if unknown:
                raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                 f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
        return {index: list(replicas) for index, replicas in assignments.items()}

    def _first_live(self, replicas: list[int]) -> int:
        for broker in replicas:
            if broker in self.live_brokers:
                return broker
        return -1

    def plan_partitions(self, name: str, count: int,
                        assignments: list[list[int]] | None) -> dict[int, list[int]]:
        """The replicas of the partitions that growing ``name`` to ``count`` adds; raises KafkaError."""
        topic = self.store.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        current = len(topic.partitions)
        if count < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        if assignments is None:
            return assign_replicas(sorted(self.live_brokers), count - current, topic.replication_factor,
                                   start_partition=current)
        if len(assignments) != count - current:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Increasing the number of partitions by {count - current} but "
                             f"{len(assignments)} assignments provided.")
        new = self._check_assignment({current + i: list(r) for i, r in enumerate(assignments)}, current)
        mismatched = sorted(i for i, r in new.items() if len(r) != topic.replication_factor)
        if mismatched:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Inconsistent replication factor between partitions, partition 0 has "
                             f"{topic.replication_factor} while partitions {mismatched} have replication factors "
                             f"{[len(new[i]) for i in mismatched]}, respectively.")
        return new

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None, *,
                                validate_only: bool = False, wait_for_brokers: bool = True,
                                timeout_ms: int | None = None) -> None:
        """Grow ``name`` to ``count`` partitions (Kafka never shrinks a topic); raises KafkaError."""
        self.require_active()
        await self._lock.acquire()
        try:
            new = self.plan_partitions(name, count, assignments)
            if validate_only:
                return
            topic = self.store.topics[name]
            for index, replicas in new.items():
                topic.partitions[index] = PartitionRecord(replicas=replicas, leader=self._first_live(replicas),
                                                          leader_epoch=0,
                                                          isr=[b for b in replicas if b in self.live_brokers])
            try:
                await self.store.save()
            except BaseException:
                for index in new:
                    topic.partitions.pop(index, None)
                raise
            partitions = [(topic, i) for i in new]
            propagated = gatherResults([self._send_leader_and_isr(partitions, is_new=True),
                                        self._send_update_metadata(self.live_brokers, partitions)],
                                       consumeErrors=True)
            self.log.info("Topic {topic} grew to {count} partitions", topic=name, count=count)
        finally:
            self._lock.release()
        if wait_for_brokers and not await self._within(propagated, timeout_ms):
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                             f"The partitions of '{name}' were created, but their metadata did not reach every "
                             f"broker within {timeout_ms} ms")

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with ``topic_id``, if it exists."""
        for topic in self.store.topics.values():
            if topic.topic_id == topic_id:
                return topic.name
        return None

    async def delete_topics(self, names: list[str], *, wait_for_brokers: bool = True,
                            timeout_ms: int | None = None) -> dict[str, TopicResult]:
        """Delete topics: replicas stop and delete their logs, then the topic is forgotten.

        One result per distinct name (with the deleted topic's id).  Waiting
        works as for ``create_topics``.
        """
        self.require_active()
        if not self.config["delete.topic.enable"]:
            return {name: TopicResult(name, ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
                    for name in names}
        await self._lock.acquire()
        try:
            results: dict[str, TopicResult] = {}
            doomed: list[TopicRecord] = []
            for name in names:
                if name in results:
                    continue
                topic = self.store.topics.get(name)
                if topic is None:
                    results[name] = TopicResult(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                "This server does not host this topic-partition.")
                    continue
                doomed.append(topic)
                results[name] = TopicResult(name, topic_id=topic.topic_id, num_partitions=len(topic.partitions),
                                            replication_factor=topic.replication_factor)
            if not doomed:
                return results
            partitions = [(t, i) for t in doomed for i in t.partitions]
            for topic in doomed:
                del self.store.topics[topic.name]
            try:
                await self.store.save()
            except BaseException:
                for topic in doomed:
                    self.store.topics[topic.name] = topic
                raise
            propagated = gatherResults([self._send_update_metadata(self.live_brokers, partitions, deleting=True),
                                        self._send_stop_replica(partitions, delete=True)], consumeErrors=True)
            self.log.info("Deleted topic(s) {topics}", topics=", ".join(t.name for t in doomed))
        finally:
            self._lock.release()
        if wait_for_brokers and not await self._within(propagated, timeout_ms):
            for topic in doomed:
                result = results[topic.name]
                result.error = ErrorCode.REQUEST_TIMED_OUT
                result.message = (f"Topic '{topic.name}' was deleted, but not every broker confirmed it "
                                  f"within {timeout_ms} ms")
        return results

    def _within(self, d: Deferred, timeout_ms: int | None) -> Deferred:
        """A Deferred firing True once ``d`` has succeeded, False if it failed or ``timeout_ms``
        (None or <= 0: no limit) passed first.  ``d`` itself is never cancelled: the brokers
        still apply the change, only the caller stops waiting."""
        waiter: Deferred = Deferred()
        timer = None

        def finished(result):
            ok = not isinstance(result, Failure)
            if not ok:
                self.log.failure("Brokers did not confirm a controller change", result)
            if not waiter.called:
                if timer is not None and timer.active():
                    timer.cancel()
                waiter.callback(ok)
            return None

        d.addBoth(finished)
        if not waiter.called and timeout_ms is not None and timeout_ms > 0:
            timer = self.channels.reactor.callLater(timeout_ms / 1000.0,
                                                    lambda: waiter.called or waiter.callback(False))
        return waiter

    # -- configs ----------------------------------------------------------------------

    async def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        """Replace a topic's overrides (as ZooKeeper's /config/topics/<name> is replaced)."""
        self.require_active()
        await self._lock.acquire()
        try:
            topic = self.store.topics.get(name)
            if topic is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
            try:
                validate_topic_overrides(configs)
            except ConfigError as exc:
                raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
            if validate_only:
                return
            previous = topic.configs
            topic.configs = dict(configs)
            try:
                await self.store.save()
            except BaseException:
                topic.configs = previous
                raise
        finally:
            self._lock.release()
        for listener in self.topic_config_listeners:
            listener(name, dict(configs))

    def topic_configs(self, name: str) -> dict[str, str]:
        topic = self.store.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        return dict(topic.configs)

    def broker_configs(self, entity: str) -> dict[str, str]:
        """Stored dynamic broker configs of ``entity``: a broker id, or "" for the cluster default."""
        return dict(self.store.broker_configs.get(entity, {}))

    async def alter_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of ``entity`` (ZooKeeper's /config/brokers/<id|<default>>).

        The caller has validated them; this persists them.  Brokers apply them
        from the store (a single node reads its own).
        """
        self.require_active()
        await self._lock.acquire()
        try:
            previous = self.store.broker_configs.get(entity)
            if configs:
                self.store.broker_configs[entity] = dict(configs)
            else:
                self.store.broker_configs.pop(entity, None)
            try:
                await self.store.save()
            except BaseException:
                if previous is None:
                    self.store.broker_configs.pop(entity, None)
                else:
                    self.store.broker_configs[entity] = previous
                raise
            self.log.info("Dynamic configs of broker {entity} are now {keys}",
                          entity=entity or "<default>", keys=", ".join(sorted(configs)) or "none")
        finally:
            self._lock.release()

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """Move leadership off a broker that is shutting down; return the partitions it still leads.

        As in Kafka, partitions whose only replica is the broker cannot move
        and are not reported as remaining (the broker may stop regardless).
        """
        self.require_active()
        broker = self.live_brokers.get(broker_id)
        if broker is None:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"Broker {broker_id} is not registered")
        if broker_epoch not in (-1, broker.epoch):
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH, f"Broker epoch {broker_epoch} is not {broker.epoch}")
        remaining = []
        for topic in self.store.topics.values():
            for index, record in topic.partitions.items():
                if record.leader == broker_id and len(record.replicas) > 1:
                    remaining.append((topic.name, index))
        return remaining

    # -- requests to brokers -----------------------------------------------------------

    def _partition_state(self, cls, topic: TopicRecord, index: int, *, is_new: bool = False, deleting: bool = False):
        record = topic.partitions[index]
        fields = dict(partition_index=index, controller_epoch=self.epoch,
                      leader=LEADER_DURING_DELETE if deleting else record.leader,
                      leader_epoch=record.leader_epoch, isr=list(record.isr), replicas=list(record.replicas))
        if cls is m.LeaderAndIsrRequest.LeaderAndIsrTopicState.LeaderAndIsrPartitionState:
            fields.update(partition_epoch=record.partition_epoch, adding_replicas=[], removing_replicas=[],
                          is_new=is_new, leader_recovery_state=0)
        else:
            fields.update(zk_version=record.partition_epoch,
                          offline_replicas=[b for b in record.replicas if b not in self.live_brokers])
        return cls(**fields)

    def _send_leader_and_isr(self, partitions: list[tuple[TopicRecord, int]], *, is_new: bool):
        """LeaderAndIsr to every replica of ``partitions``; fires when all brokers answered."""
        per_broker: dict[int, dict[str, list[int]]] = {}
        topics = {t.name: t for t, _ in partitions}
        for topic, index in partitions:
            for replica in topic.partitions[index].replicas:
                if replica in self.live_brokers:
                    per_broker.setdefault(replica, {}).setdefault(topic.name, []).append(index)
        R = m.LeaderAndIsrRequest
        sends = []
        for broker_id, by_topic in per_broker.items():
            leaders = {topics[name].partitions[i].leader for name, idx in by_topic.items() for i in idx}
            live_leaders = []
            for leader in sorted(leaders):
                broker = self.live_brokers.get(leader)
                if broker is not None:
                    ep = broker.endpoint(self.config_inter_broker_listener(broker))
                    live_leaders.append(R.LeaderAndIsrLiveLeader(broker_id=leader, host_name=ep.host, port=ep.port))
            request = R(controller_id=self.broker_id, is_k_raft_controller=False, controller_epoch=self.epoch,
                        broker_epoch=self.live_brokers[broker_id].epoch, request_type=0,
                        topic_states=[R.LeaderAndIsrTopicState(
                            topic_name=name, topic_id=topics[name].topic_id,
                            partition_states=[self._partition_state(
                                R.LeaderAndIsrTopicState.LeaderAndIsrPartitionState, topics[name], i, is_new=is_new)
                                for i in sorted(idx)])
                            for name, idx in by_topic.items()],
                        live_leaders=live_leaders)
            sends.append(self.channels.send(broker_id, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, request)
                         .addCallback(self._check_response, "LeaderAndIsr", broker_id))
        return gatherResults(sends, consumeErrors=True)

    def _send_update_metadata(self, brokers: Iterable[int], partitions: list[tuple[TopicRecord, int]], *,
                              deleting: bool = False):
        U = m.UpdateMetadataRequest
        by_topic: dict[str, tuple[TopicRecord, list[int]]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic.name, (topic, []))[1].append(index)
        live = [U.UpdateMetadataBroker(
            id=b.broker_id, rack=b.rack,
            endpoints=[U.UpdateMetadataBroker.UpdateMetadataEndpoint(
                port=ep.port, host=ep.host, listener=ep.listener_name,
                security_protocol=SECURITY_PROTOCOL_IDS[ep.security_protocol]) for ep in b.endpoints])
            for b in self.live_brokers.values()]
        sends = []
        for broker_id in list(brokers):
            request = U(controller_id=self.broker_id, is_k_raft_controller=False, controller_epoch=self.epoch,
                        broker_epoch=self.live_brokers[broker_id].epoch,
                        topic_states=[U.UpdateMetadataTopicState(
                            topic_name=name, topic_id=topic.topic_id,
                            partition_states=[self._partition_state(
                                U.UpdateMetadataTopicState.UpdateMetadataPartitionState, topic, i, deleting=deleting)
                                for i in sorted(indexes)])
                            for name, (topic, indexes) in by_topic.items()],
                        live_brokers=live)
            sends.append(self.channels.send(broker_id, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, request)
                         .addCallback(self._check_response, "UpdateMetadata", broker_id))
        return gatherResults(sends, consumeErrors=True)

    def _send_stop_replica(self, partitions: list[tuple[TopicRecord, int]], *, delete: bool):
        S = m.StopReplicaRequest
        per_broker: dict[int, dict[str, list[tuple[int, int]]]] = {}
        for topic, index in partitions:
            record = topic.partitions[index]
            for replica in record.replicas:
                if replica in self.live_brokers:
                    per_broker.setdefault(replica, {}).setdefault(topic.name, []).append((index, record.leader_epoch))
        sends = []
        for broker_id, by_topic in per_broker.items():
            request = S(controller_id=self.broker_id, is_k_raft_controller=False, controller_epoch=self.epoch,
                        broker_epoch=self.live_brokers[broker_id].epoch,
                        topic_states=[S.StopReplicaTopicState(
                            topic_name=name,
                            partition_states=[S.StopReplicaTopicState.StopReplicaPartitionState(
                                partition_index=i, leader_epoch=LEADER_DURING_DELETE if delete else epoch,
                                delete_partition=delete) for i, epoch in sorted(entries)])
                            for name, entries in by_topic.items()])
            sends.append(self.channels.send(broker_id, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, request)
                         .addCallback(self._check_response, "StopReplica", broker_id))
        return gatherResults(sends, consumeErrors=True)

    def config_inter_broker_listener(self, broker: LiveBroker) -> str:
        return self.config["inter.broker.listener.name"] or self.config["security.inter.broker.protocol"]

    def _check_response(self, response, name: str, broker_id: int):
        if response.error_code:
            self.log.warn("{name} to broker {broker_id} failed: {error}", name=name, broker_id=broker_id,
                          error=ErrorCode(response.error_code).name)
        return response

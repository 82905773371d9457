"""KafkaController: topic and partition state, pushed to brokers over their control planes.

This is Kafka's ZooKeeper-mode controller reduced to what a cluster of one
needs, with a cluster's shape: state lives in a ``ClusterMetadataStore``
(the controller keeps its own in-memory view, Kafka's ControllerContext);
every change is persisted first, then announced to brokers with
LeaderAndIsr (replicas learn their role and create their logs),
UpdateMetadata (every broker's metadata cache, and the topic and dynamic
broker configs brokers apply) and StopReplica (replicas stop and delete) —
sent through the ``ControllerChannelManager`` to each broker's control-plane
listener, the controller's own broker included, at the endpoint the broker
registered.  Every request carries the receiver's broker epoch (KIP-380),
broker id and cluster id (this project's tagged fields 1002/1003), so a broker
refuses one meant for another; if the controller's own broker refuses its
first UpdateMetadata, startup fails (its advertised control plane is someone
else's).  Brokers reach the controller only through a ``ControllerClient``.

Changes are processed one at a time (Kafka's single controller event
thread), so concurrent CreateTopics and DeleteTopics never interleave.

Leader epochs only move forward: they are persisted with the partition and
bumped only when leadership changes, which on a single node it never does —
restarting the broker keeps every epoch, so clients see no spurious
leadership change (librdkafka ignores metadata whose leader epoch is lower
than one it has seen, and revalidates positions with OffsetForLeaderEpoch
whenever it grows, KIP-320).
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from collections.abc import Iterable, Mapping

from twisted.internet.defer import Deferred, DeferredLock, gatherResults
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.config import ConfigError, StartupError
from twisted_kafka.config.topic import validate_topic_overrides, warn_deprecated_topic_configs
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.waiting import fired_within

from .channel_manager import ControllerChannelManager
from .client import MAX_PARTITIONS_PER_REQUEST, NewTopic, TopicResult, excessive_batch_error
from .metadata_store import ClusterMetadataStore, PartitionRecord, TopicRecord, topic_record
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
    #: Most partitions the broker takes on (derived from its open-file limit); None: no limit.
    partition_budget: int | None = None

    def endpoint(self, listener_name: str):
        for ep in self.endpoints:
            if ep.listener_name == listener_name:
                return ep
        return None


def _in_time(timeout_ms: int | None) -> str:
    return f" within {timeout_ms} ms" if timeout_ms and timeout_ms > 0 else ""


class KafkaController:
    log = Logger(namespace="twisted_kafka.controller.KafkaController")

    def __init__(self, *, config, broker_id: int, cluster_id: str, store: ClusterMetadataStore,
                 channels: ControllerChannelManager):
        self.config = config
        self.broker_id = broker_id
        self.cluster_id = cluster_id  # sent with every request, so a broker of another cluster refuses it
        self._store = store
        self._channels = channels
        self.live_brokers: dict[int, LiveBroker] = {}
        self.active = False
        self.epoch = 0
        # The controller's in-memory view of the stored state (Kafka's ControllerContext);
        # changed only after the store has made the change durable.
        self.topics: dict[str, TopicRecord] = {}
        self.broker_configs: dict[str, Mapping[str, str]] = {}
        self._lock = DeferredLock()

    # -- becoming controller -----------------------------------------------------------

    async def startup(self, brokers: Iterable[LiveBroker]) -> None:
        """Become the controller: bump the epoch, then tell every broker the whole state."""
        await self._lock.acquire()
        try:
            state = await self._store.load()
            self.topics = dict(state.topics)
            self.broker_configs = dict(state.broker_configs)
            self.epoch = await self._store.increment_controller_epoch()
            self.active = True
            for broker in brokers:
                self._register(broker)
            partitions = [(t, i) for t in self.topics.values() for i in t.partitions]
            # Configs first, so every log is created with its topic's overrides.
            receivers = list(self.live_brokers)
            responses = await self._send_update_metadata(receivers, partitions,
                                                         topic_configs=list(self.topics.values()),
                                                         dynamic_broker_configs=True)
            self._check_own_broker_accepted(dict(zip(receivers, responses, strict=True)).get(self.broker_id))
            await self._send_leader_and_isr(partitions, is_new=False)
            self.log.info("Controller {broker_id} active with epoch {epoch}: {topics} topic(s), "
                          "{partitions} partition(s)", broker_id=self.broker_id, epoch=self.epoch,
                          topics=len(self.topics), partitions=len(partitions))
        finally:
            self._lock.release()

    def _check_own_broker_accepted(self, response) -> None:
        """The controller's own broker refused its state: the endpoint it registered leads to
        another broker (or another cluster's), which must not be managed from here."""
        if response is None or not response.error_code:
            return
        broker = self.live_brokers[self.broker_id]
        ep = broker.endpoint(broker.control_listener)
        self.active = False
        # A setting the running cluster refuses: startup fails naming it (key, value, reason).
        raise StartupError("advertised.listeners", ep.connection_string,
                           f"{ErrorCode(response.error_code).name}: the broker at {ep.host}:{ep.port} (listener "
                           f"{ep.listener_name}, as this broker advertises it) refused this broker's controller; "
                           f"advertised.listeners must name this broker's own listeners")

    def _register(self, broker: LiveBroker) -> None:
        self.live_brokers[broker.broker_id] = broker
        ep = broker.endpoint(broker.control_listener)
        self._channels.add_broker(broker.broker_id, ep.host, ep.port)
        # As Kafka's broker registration logs it ("czxid (broker epoch)"): for the operator, whose
        # log this is; clients never see it.
        self.log.info("Registered broker {broker_id} with addresses: {endpoints}, broker epoch: {epoch}",
                      broker_id=broker.broker_id, epoch=broker.epoch,
                      endpoints=", ".join(e.connection_string for e in broker.endpoints))

    def shutdown(self) -> None:
        self.active = False
        self._channels.close()

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

        A request that would create more than ``MAX_PARTITIONS_PER_REQUEST``
        partitions in all is refused whole with POLICY_VIOLATION before any
        topic is planned (Kafka's controller fails the whole operation); a
        topic that would take a broker past its partition budget is refused
        alone, with POLICY_VIOLATION too.
        """
        self.require_active()
        requested = sum(self._requested_partitions(spec) for spec in topics)
        if requested > MAX_PARTITIONS_PER_REQUEST:
            error = excessive_batch_error(requested)
            return [TopicResult(spec.name, error.code, error.message) for spec in topics]
        await self._lock.acquire()
        try:
            results: list[TopicResult] = []
            created: list[TopicRecord] = []
            collisions = {collision_key(name): name for name in self.topics}
            hosted = self._hosted_replicas()
            for spec in topics:
                try:
                    record = self._plan_topic(spec, collisions, hosted)
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
            await self._store.create_topics(created)
            for record in created:
                self.topics[record.name] = record
                warn_deprecated_topic_configs(record.name, record.configs)
            partitions = [(t, i) for t in created for i in t.partitions]
            # Per broker the channel is a FIFO: the configs arrive before LeaderAndIsr
            # creates the logs, and the partition states last.
            propagated = gatherResults([self._send_topic_configs(self.live_brokers, created),
                                        self._send_leader_and_isr(partitions, is_new=True),
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
                                      f"every broker{_in_time(timeout_ms)}")
        return results

    def _requested_partitions(self, spec: NewTopic) -> int:
        """How many partitions ``spec`` asks for, without planning any."""
        if spec.assignments:
            return len(spec.assignments)
        if spec.num_partitions == -1:
            return self.config["num.partitions"]
        return max(0, spec.num_partitions)

    def _hosted_replicas(self) -> Counter:
        """Replicas per broker of every existing partition (only counted when a broker has a budget)."""
        if all(b.partition_budget is None for b in self.live_brokers.values()):
            return Counter()
        return Counter(broker for topic in self.topics.values() for record in topic.partitions.values()
                       for broker in record.replicas)

    def _check_budgets(self, assignment: Mapping[int, list[int]], hosted: Counter) -> None:
        """POLICY_VIOLATION if adding ``assignment`` takes a broker past its partition budget;
        else counts it in ``hosted``."""
        adding = Counter(broker for replicas in assignment.values() for broker in replicas)
        for broker_id, count in sorted(adding.items()):
            live = self.live_brokers.get(broker_id)
            budget = live.partition_budget if live is not None else None
            if budget is not None and hosted[broker_id] + count > budget:
                raise KafkaError(ErrorCode.POLICY_VIOLATION,
                                 f"Broker {broker_id} hosts {hosted[broker_id]} partition(s); {count} more would "
                                 f"exceed its partition budget of {budget}, set by its open-file limit "
                                 f"(raise the limit to raise the budget).")
        hosted.update(adding)

    def _plan_topic(self, spec: NewTopic, collisions: dict[str, str], hosted: Counter) -> TopicRecord:
        validate_topic_name(spec.name)
        if spec.name in self.topics:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' already exists.")
        clash = collisions.get(collision_key(spec.name))
        if clash is not None:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Topic '{spec.name}' collides with existing topic: {clash}")
        if spec.assignments:
            if spec.num_partitions != -1 or spec.replication_factor != -1:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 "Both numPartitions or replicationFactor and replicasAssignments were set. "
                                 "Both cannot be used at the same time.")
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
        self._check_budgets(assignment, hosted)
        return topic_record(spec.name, uuid.uuid4(), {
            index: self._new_partition(replicas) for index, replicas in assignment.items()},
            {name: value for name, value in spec.configs.items() if value is not None})

    def _new_partition(self, replicas: list[int]) -> PartitionRecord:
        return PartitionRecord(replicas=tuple(replicas), leader=self._first_live(replicas), leader_epoch=0,
                               isr=tuple(b for b in replicas if b in self.live_brokers))

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
        """The replicas of the partitions that growing ``name`` to ``count`` adds; raises KafkaError.

        More than ``MAX_PARTITIONS_PER_REQUEST`` new partitions are refused
        (POLICY_VIOLATION) before any is planned; so is going past a broker's
        partition budget.
        """
        topic = self.topics.get(name)
        if topic is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        current = len(topic.partitions)
        if count < current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic currently has {current} partitions, which is higher than the requested {count}.")
        if count == current:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
        if count - current > MAX_PARTITIONS_PER_REQUEST:
            raise excessive_batch_error(count - current)
        new = self._assign_partitions(topic, count, assignments)
        self._check_budgets(new, self._hosted_replicas())
        return new

    def _assign_partitions(self, topic: TopicRecord, count: int,
                           assignments: list[list[int]] | None) -> dict[int, list[int]]:
        current = len(topic.partitions)
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
            added = {index: self._new_partition(replicas) for index, replicas in new.items()}
            await self._store.set_partitions(name, added)
            topic = self.topics[name] = self.topics[name].with_partitions(added)
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
                             f"broker{_in_time(timeout_ms)}")

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
                topic = self.topics.get(name)
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
            await self._store.delete_topics([t.name for t in doomed])
            for topic in doomed:
                del self.topics[topic.name]
            propagated = gatherResults([self._send_update_metadata(self.live_brokers, partitions, deleting=True),
                                        self._send_stop_replica(partitions, delete=True)], consumeErrors=True)
            self.log.info("Deleted topic(s) {topics}", topics=", ".join(t.name for t in doomed))
        finally:
            self._lock.release()
        if wait_for_brokers and not await self._within(propagated, timeout_ms):
            for topic in doomed:
                result = results[topic.name]
                result.error = ErrorCode.REQUEST_TIMED_OUT
                result.message = (f"Topic '{topic.name}' was deleted, but not every broker confirmed it"
                                  f"{_in_time(timeout_ms)}")
        return results

    def _within(self, d: Deferred, timeout_ms: int | None) -> Deferred[bool]:
        """Whether the brokers confirmed a change (``d``) within ``timeout_ms`` (None or <= 0: no
        limit).  ``d`` is never cancelled: the brokers still apply the change, only the caller
        stops waiting."""
        d.addErrback(self._unconfirmed)
        return fired_within(self._channels.reactor, d, timeout_ms / 1000.0 if timeout_ms else None)

    def _unconfirmed(self, failure: Failure) -> Failure:
        self.log.failure("Brokers did not confirm a controller change", failure)
        return failure

    # -- configs ----------------------------------------------------------------------

    async def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        """Replace a topic's overrides (as ZooKeeper's /config/topics/<name> is replaced).

        Every broker has applied them when this returns (they travel in
        UpdateMetadata, as a config-change notification would in ZooKeeper mode).
        """
        self.require_active()
        await self._lock.acquire()
        try:
            topic = self.topics.get(name)
            if topic is None:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
            try:
                validate_topic_overrides(configs)
            except ConfigError as exc:
                raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
            if validate_only:
                return
            warn_deprecated_topic_configs(name, configs)
            await self._store.set_topic_configs(name, configs)
            topic = self.topics[name] = topic.with_configs(configs)
            propagated = self._send_topic_configs(self.live_brokers, [topic])
        finally:
            self._lock.release()
        await propagated

    async def alter_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of ``entity`` (ZooKeeper's /config/brokers/<id|<default>>).

        The caller has validated them; this persists them and tells the
        brokers they apply to (all for the cluster default, else that one),
        which have applied them when this returns.
        """
        self.require_active()
        await self._lock.acquire()
        try:
            await self._store.set_broker_configs(entity, configs)
            if configs:
                self.broker_configs[entity] = dict(configs)
            else:
                self.broker_configs.pop(entity, None)
            self.log.info("Dynamic configs of broker {entity} are now {keys}",
                          entity=entity or "<default>", keys=", ".join(sorted(configs)) or "none")
            targets = [b for b in self.live_brokers if entity == "" or str(b) == entity]
            propagated = self._send_update_metadata(targets, [], dynamic_broker_configs=True)
        finally:
            self._lock.release()
        await propagated

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """Move leadership off a broker that is shutting down; return the partitions it still leads.

        As in Kafka, partitions whose only replica is the broker cannot move
        and are not reported as remaining (the broker may stop regardless).
        """
        self.require_active()
        broker = self.live_brokers.get(broker_id)
        if broker is None:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"Broker {broker_id} is not registered")
        if broker_epoch != broker.epoch:   # KIP-380; "no epoch" (-1) included: it cannot be checked
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH,
                             f"Broker epoch {broker_epoch} is not broker {broker_id}'s current epoch")
        remaining = []
        for topic in self.topics.values():
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
                        broker_epoch=self.live_brokers[broker_id].epoch, broker_id=broker_id,
                        cluster_id=self.cluster_id, request_type=0,
                        topic_states=[R.LeaderAndIsrTopicState(
                            topic_name=name, topic_id=topics[name].topic_id,
                            partition_states=[self._partition_state(
                                R.LeaderAndIsrTopicState.LeaderAndIsrPartitionState, topics[name], i, is_new=is_new)
                                for i in sorted(idx)])
                            for name, idx in by_topic.items()],
                        live_leaders=live_leaders)
            sends.append(self._channels.send(broker_id, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, request)
                         .addCallback(self._check_response, "LeaderAndIsr", broker_id))
        return gatherResults(sends, consumeErrors=True)

    @staticmethod
    def _configs(values: Mapping[str, str]) -> list:
        C = m.UpdateMetadataRequest.UpdateMetadataTopicState.UpdateMetadataConfig
        return [C(name=name, value=value) for name, value in sorted(values.items())]

    def _dynamic_broker_configs_for(self, broker_id: int) -> list:
        """The cluster default and ``broker_id``'s own dynamic configs (an empty list: none)."""
        B = m.UpdateMetadataRequest.UpdateMetadataBrokerConfigs
        return [B(entity=entity, configs=[B.UpdateMetadataConfig(name=k, value=v)
                                          for k, v in sorted(self.broker_configs.get(entity, {}).items())])
                for entity in ("", str(broker_id))]

    def _send_topic_configs(self, brokers: Iterable[int], topics: list[TopicRecord]):
        """UpdateMetadata carrying only ``topics``' config overrides (no partition states)."""
        return self._send_update_metadata(brokers, [], topic_configs=topics)

    def _send_update_metadata(self, brokers: Iterable[int], partitions: list[tuple[TopicRecord, int]], *,
                              deleting: bool = False, topic_configs: Iterable[TopicRecord] = (),
                              dynamic_broker_configs: bool = False):
        """UpdateMetadata to ``brokers``: the states of ``partitions``, plus the config overrides of
        ``topic_configs`` and (``dynamic_broker_configs``) each receiver's dynamic broker configs."""
        U = m.UpdateMetadataRequest
        by_topic: dict[str, tuple[TopicRecord, list[int]]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic.name, (topic, []))[1].append(index)
        topic_configs = list(topic_configs)
        for topic in topic_configs:
            by_topic.setdefault(topic.name, (topic, []))
        live = [U.UpdateMetadataBroker(
            id=b.broker_id, rack=b.rack,
            endpoints=[U.UpdateMetadataBroker.UpdateMetadataEndpoint(
                port=ep.port, host=ep.host, listener=ep.listener_name,
                security_protocol=SECURITY_PROTOCOL_IDS[ep.security_protocol]) for ep in b.endpoints])
            for b in self.live_brokers.values()]
        sends = []
        for broker_id in list(brokers):
            with_configs = {t.name for t in topic_configs}
            request = U(controller_id=self.broker_id, is_k_raft_controller=False, controller_epoch=self.epoch,
                        broker_epoch=self.live_brokers[broker_id].epoch, broker_id=broker_id,
                        cluster_id=self.cluster_id,
                        topic_states=[U.UpdateMetadataTopicState(
                            topic_name=name, topic_id=topic.topic_id,
                            partition_states=[self._partition_state(
                                U.UpdateMetadataTopicState.UpdateMetadataPartitionState, topic, i, deleting=deleting)
                                for i in sorted(indexes)],
                            topic_configs=self._configs(topic.configs) if name in with_configs else None)
                            for name, (topic, indexes) in by_topic.items()],
                        dynamic_broker_configs=(self._dynamic_broker_configs_for(broker_id)
                                                if dynamic_broker_configs else None),
                        live_brokers=live)
            sends.append(self._channels.send(broker_id, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, request)
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
                        broker_epoch=self.live_brokers[broker_id].epoch, broker_id=broker_id,
                        cluster_id=self.cluster_id,
                        topic_states=[S.StopReplicaTopicState(
                            topic_name=name,
                            partition_states=[S.StopReplicaTopicState.StopReplicaPartitionState(
                                partition_index=i, leader_epoch=LEADER_DURING_DELETE if delete else epoch,
                                delete_partition=delete) for i, epoch in sorted(entries)])
                            for name, entries in by_topic.items()])
            sends.append(self._channels.send(broker_id, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, request)
                         .addCallback(self._check_response, "StopReplica", broker_id))
        return gatherResults(sends, consumeErrors=True)

    def config_inter_broker_listener(self, broker: LiveBroker) -> str:
        return self.config["inter.broker.listener.name"] or self.config["security.inter.broker.protocol"]

    def _check_response(self, response, name: str, broker_id: int):
        if response.error_code:
            self.log.warn("{name} to broker {broker_id} failed: {error}", name=name, broker_id=broker_id,
                          error=ErrorCode(response.error_code).name)
        return response

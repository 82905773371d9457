"""KafkaController: topic and partition state, pushed to brokers over their control planes.

This is Kafka's ZooKeeper-mode controller, one code path for a single node
and a cluster: state lives in a ``ClusterMetadataStore`` (a JSON file on a
single node, ZooKeeper's znodes in a cluster; the controller keeps its own
in-memory view, Kafka's ControllerContext); every change is persisted
first, then announced to brokers with LeaderAndIsr (replicas learn their
role and create their logs), UpdateMetadata (every broker's metadata cache,
and the topic and dynamic broker configs brokers apply) and StopReplica
(replicas stop and delete) -- sent through the ``ControllerChannelManager``
to each broker's control-plane listener, the controller's own broker
included, at the endpoint the broker registered.  Every request carries the
receiver's broker epoch (KIP-380), broker id and cluster id (this project's
tagged fields 1002/1003), so a broker refuses one meant for another; if the
controller's own broker refuses its first UpdateMetadata, startup fails
(its advertised control plane is someone else's).  Brokers reach the
controller only through a ``ControllerClient``.

Changes are processed one at a time (Kafka's single controller event
thread, here a ``DeferredLock``), so concurrent events never interleave:

* on a single node, the admin operations (``create_topics``,
  ``delete_topics``, ``create_partitions``, ``alter_*_configs``) come from
  this broker's ``LocalControllerClient``;
* in a cluster, brokers write those to ZooKeeper, and the controller learns
  them from its watches (``topics_changed``, ``topic_changed``,
  ``deletions_requested``, ``config_changed``), as does broker registration
  (``brokers_changed``: a broker started, stopped or came back);
* everywhere: ``controlled_shutdown``, ``elect_leaders``, partition
  reassignments and the automatic preferred-leader rebalance.

Leadership is decided by ``election`` (Kafka's algorithms: the first
assigned replica that is alive and in the ISR, and so on).  Leader epochs
only move forward: they are persisted with the partition and bumped only
when leadership changes -- restarting a single node keeps every epoch, so
clients see no spurious leadership change (librdkafka ignores metadata
whose leader epoch is lower than one it has seen, and revalidates positions
with OffsetForLeaderEpoch whenever it grows, KIP-320).

The ISR is the leaders' business: a leader shrinks and expands it with
AlterPartition (``alter_partition``, KIP-497) as its followers fall behind
and catch up; the controller only takes a failed broker out of every ISR
(and, with ``isr_follows_liveness``, an ISR that follows which replicas are
alive -- the stand-in used before replication existed, kept for tests of
the controller alone).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import replace
from functools import partial

from twisted.internet.defer import Deferred, DeferredLock, ensureDeferred, gatherResults
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.config import StartupError
from twisted_kafka.config.topic import warn_deprecated_topic_configs
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.waiting import fired_within
from twisted_kafka.security.acl import AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern

from . import election
from .admin_rules import (
    check_assignment, check_topic_config_change, created_topic_result, plan_partitions, plan_topic, refused_deletions,
    unknown_deletion, unknown_topic,
)
from .channel_manager import ControllerChannelManager
from .election import ElectionType
from .interface import (
    LEADER_DURING_DELETE, MAX_PARTITIONS_PER_REQUEST, ElectionOutcome, IsrChange, LiveBroker, NewTopic,
    ReassignmentState, TopicResult, excessive_batch_error,
)
from .metadata_store import (
    NO_LEADER, NO_STATE, RECOVERED, RECOVERING, ClusterMetadataStore, ControllerMovedError, PartitionRecord,
    TopicRecord, topic_record,
)
from .topic_names import collision_key

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4

#: Seconds after becoming controller before the first preferred-leader check (Kafka's 5 s).
FIRST_REBALANCE_CHECK_SECONDS = 5.0

TopicPartition = tuple[str, int]
#: One step of a partition's state change (``election.compose``).
Step = Callable[[PartitionRecord], "PartitionRecord | None"]


def _in_time(timeout_ms: int | None) -> str:
    return f" within {timeout_ms} ms" if timeout_ms and timeout_ms > 0 else ""


def _is_true(value) -> bool:
    return value is True or str(value).strip().lower() == "true"


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
        self.shutting_down: set[int] = set()
        self.active = False
        self.epoch = 0
        # The controller's in-memory view of the stored state (Kafka's ControllerContext);
        # changed only after the store has made the change durable.
        self.topics: dict[str, TopicRecord] = {}
        self.broker_configs: dict[str, Mapping[str, str]] = {}
        self.acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        #: Topics being deleted -> the replicas (broker ids) that have not confirmed deleting their logs yet.
        self.deleting: dict[str, set[int]] = {}
        self._lock = DeferredLock()
        self._rebalance_call = None
        #: Called when this controller learns another one took over (a refused write); the cluster's
        #: ControllerService then goes back to watching ``/controller``.
        self.on_resign: Callable[[], None] | None = None
        #: True: the ISR is kept to the assigned replicas that are alive (``election.expand_isr`` /
        #: ``shrink_isr``), for a controller without replicating brokers (its unit tests).  A cluster's
        #: controller turns it off: leaders report their ISR with AlterPartition (``alter_partition``).
        self.isr_follows_liveness = True

    @property
    def reactor(self):
        return self._channels.reactor

    # -- becoming controller -----------------------------------------------------------

    async def startup(self, brokers: Iterable[LiveBroker] | Callable[[], Awaitable[Iterable[LiveBroker]]]) -> None:
        """Become the controller: bump the epoch, then tell every broker the whole state.

        ``brokers`` are the live brokers, or an async function returning them
        once the controllership is claimed (a cluster reads ``/brokers/ids``).
        ControllerMovedError: another broker is the controller.
        """
        await self._lock.acquire()
        try:
            self.epoch = await self._store.increment_controller_epoch()
            self.active = True
            try:
                live = list(await brokers() if callable(brokers) else brokers)
                state = await self._store.load()
            except BaseException:
                self._deactivate()
                raise
            self.topics = dict(state.topics)
            self.broker_configs = dict(state.broker_configs)
            self.acls = dict(state.acls)
            self.live_brokers.clear()           # a controller elected again starts from what is registered now
            self.shutting_down.clear()
            self.deleting.clear()
            for broker in live:
                self._register(broker)
            queued = [t for t in await self._store.topics_queued_for_deletion() if t in self.topics]
            partitions = self._online_partitions(exclude=set(queued))
            # Configs first, so every log is created with its topic's overrides.
            receivers = list(self.live_brokers)
            sent = self._send_update_metadata(receivers, partitions, topic_configs=list(self.topics.values()),
                                              dynamic_broker_configs=True, acls=True)
            if self.broker_id in sent.brokers:
                self._check_own_broker_accepted(await sent.response(self.broker_id))
            led = self._send_leader_and_isr(partitions, is_new=False)
            if self.broker_id in led.brokers:
                await led.response(self.broker_id)
            # A cluster's controller may find what its predecessor left unfinished (nothing, on a single
            # node): partitions never given a state or without a live leader, replicas back in service,
            # reassignments, deletions.
            await self._partitions_online(self.topics)
            await self._resume_reassignments(lambda record: True)
            await self._start_deletions(queued)
            self._schedule_rebalance()
            self.log.info("Controller {broker_id} active with epoch {epoch}: {topics} topic(s), "
                          "{partitions} partition(s), live brokers {brokers}", broker_id=self.broker_id,
                          epoch=self.epoch, topics=len(self.topics), partitions=len(partitions),
                          brokers=sorted(self.live_brokers))
        finally:
            self._lock.release()

    def _check_own_broker_accepted(self, response) -> None:
        """The controller's own broker refused its state: the endpoint it registered leads to
        another broker (or another cluster's), which must not be managed from here."""
        if response is None or not response.error_code:
            return
        broker = self.live_brokers[self.broker_id]
        ep = broker.endpoint(broker.control_listener)
        self._deactivate()
        # A setting the running cluster refuses: startup fails naming it (key, value, reason).
        error = ErrorCode(response.error_code)
        if error == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
            # The broker's authorizer refused the principal the controller connects as.
            raise StartupError("super.users", self.config["super.users"] or "",
                               f"{error.name}: the broker at {ep.host}:{ep.port} (listener {ep.listener_name}) "
                               f"refused this broker's controller; its principal needs CLUSTER_ACTION on the "
                               f"cluster (an ACL, or super.users)")
        raise StartupError("advertised.listeners", ep.connection_string,
                           f"{error.name}: the broker at {ep.host}:{ep.port} (listener "
                           f"{ep.listener_name}, as this broker advertises it) refused this broker's controller; "
                           f"advertised.listeners must name this broker's own listeners")

    def _register(self, broker: LiveBroker) -> None:
        self.live_brokers[broker.broker_id] = broker
        ep = broker.endpoint(broker.control_listener)
        self._channels.add_broker(broker.broker_id, ep.host, ep.port, security_protocol=ep.security_protocol,
                                  listener_name=ep.listener_name)
        # As Kafka's broker registration logs it ("czxid (broker epoch)"): for the operator, whose
        # log this is; clients never see it.
        self.log.info("Registered broker {broker_id} with addresses: {endpoints}, broker epoch: {epoch}",
                      broker_id=broker.broker_id, epoch=broker.epoch,
                      endpoints=", ".join(e.connection_string for e in broker.endpoints))

    def shutdown(self) -> None:
        self._deactivate()

    def _deactivate(self) -> None:
        self.active = False
        if self._rebalance_call is not None and self._rebalance_call.active():
            self._rebalance_call.cancel()
        self._rebalance_call = None
        self._channels.close()

    def require_active(self) -> None:
        if not self.active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "This broker is not the active controller")

    async def _persist(self, write: Awaitable) -> None:
        """A store write; when another controller has taken over, resign (NOT_CONTROLLER to the caller)."""
        try:
            await write
        except ControllerMovedError as exc:
            self.log.warn("Controller {broker_id} (epoch {epoch}) resigns: {reason}", broker_id=self.broker_id,
                          epoch=self.epoch, reason=exc)
            self._deactivate()
            if self.on_resign is not None:
                self.on_resign()
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "The controller moved to another broker") from None

    # -- topics (a single node: from this broker's admin) ------------------------------------
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
                    plan = plan_topic(spec, existing=self.topics, collisions=collisions,
                                      live_brokers=self.live_brokers, config=self.config)
                    self._check_budgets(plan.assignment, hosted)
                except KafkaError as exc:
                    results.append(TopicResult(spec.name, exc.code, exc.message))
                    continue
                record = topic_record(plan.name, plan.topic_id, {
                    index: self._new_partition(replicas) for index, replicas in plan.assignment.items()},
                    plan.configs)
                collisions[collision_key(record.name)] = record.name
                results.append(created_topic_result(plan, validate_only=validate_only))
                created.append(record)
            if validate_only or not created:
                return results
            await self._persist(self._store.create_topics(created))
            for record in created:
                self.topics[record.name] = record
                warn_deprecated_topic_configs(record.name, record.configs)
            propagated = self._announce_new_partitions(created,
                                                       [(t, i) for t in created for i in t.partitions]).all()
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

    def _announce_new_partitions(self, topics: list[TopicRecord], partitions: list[tuple[TopicRecord, int]]) -> Sent:
        """Tell every broker about new partitions (of new ``topics``, whose configs go first)."""
        # Per broker the channel is a FIFO: the configs arrive before LeaderAndIsr
        # creates the logs, and the partition states last.
        sends = []
        if topics:
            sends.append(self._send_topic_configs(self.live_brokers, topics))
        sends.append(self._send_leader_and_isr(partitions, is_new=True))
        sends.append(self._send_update_metadata(self.live_brokers, partitions))
        return Sent.combine(*sends)

    def _new_partition(self, replicas: list[int]) -> PartitionRecord:
        return PartitionRecord(replicas=tuple(replicas), leader=self._first_live(replicas), leader_epoch=0,
                               isr=tuple(b for b in replicas if b in self.live_brokers))

    def _check_assignment(self, assignments: dict[int, list[int]], start: int) -> dict[int, list[int]]:
        return check_assignment(assignments, start, self.live_brokers)

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
            raise unknown_topic(name)
        new = plan_partitions(name, len(topic.partitions), topic.replication_factor, count, assignments,
                              self.live_brokers)
        self._check_budgets(new, self._hosted_replicas())
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
            await self._persist(self._store.set_partitions(name, added))
            topic = self.topics[name] = self.topics[name].with_partitions(added)
            propagated = self._announce_new_partitions([], [(topic, i) for i in new]).all()
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
        refused = refused_deletions(self.config, names)
        if refused is not None:
            return refused
        await self._lock.acquire()
        try:
            results: dict[str, TopicResult] = {}
            doomed: list[TopicRecord] = []
            for name in names:
                if name in results:
                    continue
                topic = self.topics.get(name)
                if topic is None:
                    results[name] = unknown_deletion(name)
                    continue
                doomed.append(topic)
                results[name] = TopicResult(name, topic_id=topic.topic_id, num_partitions=len(topic.partitions),
                                            replication_factor=topic.replication_factor)
            if not doomed:
                return results
            partitions = [(t, i) for t in doomed for i in t.partitions]
            await self._persist(self._store.delete_topics([t.name for t in doomed]))
            for topic in doomed:
                del self.topics[topic.name]
            propagated = Sent.combine(self._send_update_metadata(self.live_brokers, partitions, deleting=True),
                                      self._send_stop_replica(partitions, delete=True)).all()
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

    # -- configs (a single node: from this broker's admin) -----------------------------

    async def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        """Replace a topic's overrides (as ZooKeeper's /config/topics/<name> is replaced).

        Every broker has applied them when this returns (they travel in
        UpdateMetadata, as a config-change notification would in ZooKeeper mode).
        """
        self.require_active()
        await self._lock.acquire()
        try:
            check_topic_config_change(name, name in self.topics, configs)
            if validate_only:
                return
            warn_deprecated_topic_configs(name, configs)
            await self._persist(self._store.set_topic_configs(name, configs))
            propagated = self._topic_configs_changed(self.topics[name], configs).all()
        finally:
            self._lock.release()
        await propagated

    def _topic_configs_changed(self, topic: TopicRecord, configs: Mapping[str, str]) -> Sent:
        topic = self.topics[topic.name] = topic.with_configs(configs)
        return self._send_topic_configs(self.live_brokers, [topic])

    async def alter_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of ``entity`` (ZooKeeper's /config/brokers/<id|<default>>).

        The caller has validated them; this persists them and tells the
        brokers they apply to (all for the cluster default, else that one),
        which have applied them when this returns.
        """
        self.require_active()
        await self._lock.acquire()
        try:
            await self._persist(self._store.set_broker_configs(entity, configs))
            propagated = self._broker_configs_changed(entity, configs).all()
        finally:
            self._lock.release()
        await propagated

    def _broker_configs_changed(self, entity: str, configs: Mapping[str, str]) -> Sent:
        if configs:
            self.broker_configs[entity] = dict(configs)
        else:
            self.broker_configs.pop(entity, None)
        self.log.info("Dynamic configs of broker {entity} are now {keys}",
                      entity=entity or "<default>", keys=", ".join(sorted(configs)) or "none")
        targets = [b for b in self.live_brokers if entity == "" or str(b) == entity]
        return self._send_update_metadata(targets, [], dynamic_broker_configs=True)

    # -- ACLs (Kafka's AclAuthorizer.createAcls / deleteAcls, here the controller's) -----

    async def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        """Add ``bindings``; per binding NONE or INVALID_REQUEST with Kafka's message.  Every broker
        holds the new ACL set when this returns."""
        self.require_active()
        results: list[tuple[ErrorCode, str | None]] = []
        await self._lock.acquire()
        try:
            added: dict[ResourcePattern, set[AccessControlEntry]] = {}
            for binding in bindings:
                reason = binding.invalid_reason()
                if reason is not None:
                    results.append((ErrorCode.INVALID_REQUEST, reason))
                    continue
                added.setdefault(binding.pattern, set()).add(binding.entry)
                results.append((ErrorCode.NONE, None))
            for pattern, entries in sorted(added.items()):
                new = self.acls.get(pattern, frozenset()) | entries
                if new != self.acls.get(pattern):
                    await self._persist(self._store.set_acls(pattern, new))
                    self.acls[pattern] = new
            propagated = self._acls_changed().all() if added else None
        finally:
            self._lock.release()
        if propagated is not None:
            await propagated
        return results

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove every binding each filter matches; per filter the bindings it removed."""
        self.require_active()
        await self._lock.acquire()
        try:
            deleted: list[list[AclBinding]] = []
            doomed: dict[ResourcePattern, set[AccessControlEntry]] = {}
            for selector in filters:
                matched = [AclBinding(p, e) for p, entries in sorted(self.acls.items()) for e in sorted(entries)
                           if selector.matches_pattern(p) and selector.matches_entry(e)]
                deleted.append(matched)
                for binding in matched:
                    doomed.setdefault(binding.pattern, set()).add(binding.entry)
            for pattern, entries in sorted(doomed.items()):
                remaining = self.acls[pattern] - entries
                await self._persist(self._store.set_acls(pattern, remaining))
                if remaining:
                    self.acls[pattern] = remaining
                else:
                    del self.acls[pattern]
            propagated = self._acls_changed().all() if doomed else None
        finally:
            self._lock.release()
        if propagated is not None:
            await propagated
        return deleted

    async def acls_changed(self) -> None:
        """ACLs written by another broker (a cluster's ACL change notifications): reload and propagate."""
        await self._locked(self._reload_acls)

    async def _reload_acls(self) -> None:
        acls = await self._store.load_acls()
        if acls != self.acls:
            self.acls = acls
            self._acls_changed()

    def _acls_changed(self) -> Sent:
        self.log.info("ACLs changed: {n} binding(s) on {r} resource pattern(s)",
                      n=sum(len(e) for e in self.acls.values()), r=len(self.acls))
        return self._send_update_metadata(list(self.live_brokers), [], acls=True)

    def _acl_list(self) -> list:
        A = m.UpdateMetadataRequest.UpdateMetadataAcl
        return [A(resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type,
                  principal=e.principal, host=e.host, operation=e.operation, permission_type=e.permission)
                for p, entries in sorted(self.acls.items()) for e in sorted(entries)]

    # -- what the cluster changed (a cluster's watches on ZooKeeper) ---------------------

    async def brokers_changed(self, current: Mapping[int, LiveBroker]) -> None:
        """The registered brokers are now ``current`` (``/brokers/ids``): handle the ones that started,
        stopped, or came back with a new epoch (Kafka's ``processBrokerChange``)."""
        await self._locked(self._brokers_changed, current)

    async def _brokers_changed(self, current: Mapping[int, LiveBroker]) -> None:
        known = self.live_brokers
        new = sorted(b for b in current if b not in known)
        dead = sorted(b for b in known if b not in current)
        bounced = sorted(b for b in current if b in known and current[b].epoch > known[b].epoch)
        if not (new or dead or bounced):
            return
        self.log.info("Brokers started: {new}, stopped: {dead}, restarted: {bounced}; live brokers: {live}",
                      new=new or "none", dead=dead or "none", bounced=bounced or "none", live=sorted(current))
        for broker_id in dead + bounced:
            self._forget_broker(broker_id)
        if dead or bounced:
            await self._brokers_failed(dead + bounced)
        for broker_id in new + bounced:
            self._register(current[broker_id])
        if new or bounced:
            await self._brokers_started(new + bounced)

    def _forget_broker(self, broker_id: int) -> None:
        self.live_brokers.pop(broker_id, None)
        self.shutting_down.discard(broker_id)
        self._channels.remove_broker(broker_id)

    async def _brokers_failed(self, failed: list[int]) -> None:
        """Kafka's ``onBrokerFailure``: new leaders for what the failed brokers led, and out of the ISRs."""
        changes: dict[TopicPartition, PartitionRecord] = {}
        affected: list[TopicPartition] = []
        electable = self._electable_brokers()
        for topic in self.topics.values():
            if topic.name in self.deleting:
                continue
            unclean = self._unclean_allowed(topic.name)
            for index, record in topic.partitions.items():
                if not record.has_state or not any(b in failed for b in record.replicas):
                    continue
                affected.append((topic.name, index))
                steps: list[Step] = []
                if record.leader in failed:
                    steps.append(partial(election.offline, live=electable, unclean=unclean))
                steps += [partial(election.without_replica, replica=b) for b in failed]
                updated = election.compose(record, *steps)
                if updated is not None:
                    changes[(topic.name, index)] = updated
        await self._write(changes)
        self._announce(changes, also_update=[tp for tp in affected if tp not in changes], always=True)

    async def _brokers_started(self, started: list[int]) -> None:
        """Kafka's ``onBrokerStartup``: the other brokers learn of them, they learn everything, their
        replicas come online, partitions without a live leader are elected, reassignments resume."""
        others = [b for b in self.live_brokers if b not in started]
        deleting = set(self.deleting)
        hosted = [(t, i) for t, i in self._online_partitions(exclude=deleting)
                  if any(b in started for b in t.partitions[i].replicas)]
        if others:
            # Their replicas come online: the partitions they host are no longer offline anywhere.
            self._send_update_metadata(others, hosted)
        self._send_update_metadata(started, self._online_partitions(exclude=deleting),
                                   topic_configs=list(self.topics.values()), dynamic_broker_configs=True, acls=True)
        self._send_leader_and_isr(hosted, is_new=False, only=started)
        for name in list(self.deleting):
            topic = self.topics[name]
            doomed = [(topic, i) for i, r in topic.partitions.items() if any(b in started for b in r.replicas)]
            if doomed:
                self._stop_replicas_of_deleted(name, doomed, only=started)
        await self._partitions_online(self.topics)
        await self._resume_reassignments(lambda record: any(b in started for b in record.target_replicas))
        self._schedule_rebalance()

    async def _partitions_online(self, topics: Mapping[str, TopicRecord]) -> None:
        """Kafka's ``triggerOnlinePartitionStateChange``: partitions without a state get one, partitions
        without a live leader get one from the ISR (or, if the topic allows it, uncleanly); then live
        replicas on dead brokers leave the ISR, and (``isr_follows_liveness``) live ones rejoin it
        (``election.expand_isr``)."""
        electable = self._electable_brokers()
        created: dict[str, dict[int, PartitionRecord]] = {}
        changes: dict[TopicPartition, PartitionRecord] = {}
        for topic in topics.values():
            if topic.name in self.deleting:
                continue
            for index, record in topic.partitions.items():
                if not record.has_state:
                    first = election.initial_state(record.replicas, electable)
                    if first is None:
                        self.log.warn("No replica of {topic}-{partition} is alive ({replicas}): it stays offline",
                                      topic=topic.name, partition=index, replicas=list(record.replicas))
                        continue
                    created.setdefault(topic.name, {})[index] = replace(
                        first, replicas=record.replicas, adding_replicas=record.adding_replicas,
                        removing_replicas=record.removing_replicas)
                    continue
                steps: list[Step] = []
                if record.leader == NO_LEADER or record.leader not in self.live_brokers:
                    steps.append(partial(election.offline, live=electable, unclean=self._unclean_allowed(topic.name)))
                    # No replica could take over from a dead leader: the partition is offline.
                    steps.append(partial(election.without_dead_leader, live=self.live_brokers))
                # Replicas on brokers that are not alive leave the ISR (Kafka's OfflineReplica transition, which
                # a new controller applies to the failures it did not see happen).
                steps.append(partial(election.shrink_isr, live=self.live_brokers))
                if self.isr_follows_liveness:
                    steps.append(partial(election.expand_isr, live=electable))
                updated = election.compose(record, *steps)
                if updated is not None:
                    changes[(topic.name, index)] = updated
        if created:
            for name, states in created.items():
                await self._persist(self._store.set_partitions(name, states))
                self.topics[name] = self.topics[name].with_partitions(states)
            new_topics = [self.topics[name] for name in created
                          if all(i in created[name] for i in self.topics[name].partitions)]
            self._announce_new_partitions(new_topics, [(self.topics[n], i) for n, s in created.items() for i in s])
            self.log.info("Partitions given a leader: {partitions}",
                          partitions=", ".join(f"{n}-{i}" for n, s in created.items() for i in sorted(s)))
        await self._write(changes)
        self._announce(changes)

    async def topics_changed(self) -> None:
        await self._locked(self._topics_changed)

    async def _topics_changed(self) -> None:
        """``/brokers/topics`` changed (Kafka's ``processTopicChange``): a broker created topics."""
        names = await self._store.topic_names()
        new = sorted(n for n in names if n not in self.topics)
        for gone in [n for n in self.topics if n not in names]:
            self.topics.pop(gone, None)
            self.deleting.pop(gone, None)
        if not new:
            return
        loaded = await self._store.load_topics(new)
        for name, record in loaded.items():
            self.topics[name] = record
            warn_deprecated_topic_configs(name, record.configs)
        self.log.info("New topic(s) {topics}", topics=", ".join(loaded))
        await self._partitions_online(loaded)

    async def topic_changed(self, name: str) -> None:
        """``/brokers/topics/<name>`` changed (Kafka's ``processPartitionModifications``): new partitions."""
        await self._locked(self._topic_changed, name)

    async def _topic_changed(self, name: str) -> None:
        topic = self.topics.get(name)
        if topic is None:
            return
        loaded = (await self._store.load_topics([name])).get(name)
        if loaded is None:
            return
        added = {i: r for i, r in loaded.partitions.items() if i not in topic.partitions}
        if not added:
            return
        if name in self.deleting:
            self.log.warn("Not adding partitions {partitions} to topic {topic}: it is being deleted",
                          partitions=sorted(added), topic=name)
            return
        self.topics[name] = topic.with_partitions(added)
        self.log.info("Topic {topic} has new partitions {partitions}", topic=name, partitions=sorted(added))
        await self._partitions_online({name: replace(self.topics[name], partitions=added)})

    async def deletions_requested(self) -> None:
        """``/admin/delete_topics`` changed (Kafka's ``processTopicDeletion``)."""
        await self._locked(self._deletions_requested)

    async def _deletions_requested(self) -> None:
        queued = await self._store.topics_queued_for_deletion()
        unknown = [t for t in queued if t not in self.topics]
        if unknown:
            self.log.warn("Ignoring deletion of topics that do not exist: {topics}", topics=", ".join(unknown))
            await self._persist(self._store.cancel_deletions(unknown))
        wanted = [t for t in queued if t in self.topics]
        if not self.config["delete.topic.enable"]:
            if wanted:
                self.log.warn("Topic deletion is disabled (delete.topic.enable): not deleting {topics}",
                              topics=", ".join(wanted))
                await self._persist(self._store.cancel_deletions(wanted))
            return
        await self._start_deletions([t for t in wanted if t not in self.deleting])

    async def _start_deletions(self, names: list[str]) -> None:
        """Kafka's TopicDeletionManager: every broker forgets the topics, every replica deletes its log;
        the topic leaves the store once every replica -- including those of brokers down now -- has."""
        names = [n for n in names if n in self.topics and n not in self.deleting]
        if not names:
            return
        partitions = []
        for name in names:
            topic = self.topics[name]
            self.deleting[name] = {b for r in topic.partitions.values() for b in r.replicas}
            partitions += [(topic, i) for i in topic.partitions]
        self._send_update_metadata(self.live_brokers, partitions, deleting=True)
        self.log.info("Deleting topic(s) {topics}", topics=", ".join(names))
        for name in names:
            topic = self.topics[name]
            self._stop_replicas_of_deleted(name, [(topic, i) for i in topic.partitions])
        for name in names:
            if not self.deleting.get(name):
                await self._complete_deletion(name)

    def _stop_replicas_of_deleted(self, name: str, partitions: list[tuple[TopicRecord, int]],
                                  only: Iterable[int] | None = None) -> None:
        sent = self._send_stop_replica(partitions, delete=True, only=only)
        for broker_id in sent.brokers:
            d = sent.response(broker_id)
            d.addCallback(self._replica_deleted, name, broker_id)
            d.addErrback(lambda f: None)    # retried when the broker comes back

    def _replica_deleted(self, response, name: str, broker_id: int) -> None:
        if response.error_code or not self.active:
            return
        pending = self.deleting.get(name)
        if pending is None:
            return
        pending.discard(broker_id)
        if not pending:
            self._run(self._complete_deletion, name)

    async def _complete_deletion(self, name: str) -> None:
        if self.deleting.get(name) or name not in self.deleting:
            return
        await self._persist(self._store.delete_topics([name]))
        self.topics.pop(name, None)
        self.deleting.pop(name, None)
        self.log.info("Deleted topic {topic}", topic=name)

    async def config_changed(self, entity_type: str, entity: str) -> None:
        """A config change notification (``/config/changes``): ``entity_type`` "topics" (a topic name) or
        "brokers" (a broker id, or "" for the cluster default)."""
        await self._locked(self._config_changed, entity_type, entity)

    async def _config_changed(self, entity_type: str, entity: str) -> None:
        if entity_type == "topics":
            topic = self.topics.get(entity)
            if topic is None:
                return
            configs = await self._store.topic_configs(entity)
            if configs == dict(topic.configs):
                return
            was_unclean = self._unclean_allowed(entity)
            warn_deprecated_topic_configs(entity, configs)
            self._topic_configs_changed(topic, configs)
            self.log.info("Configs of topic {topic} are now {keys}", topic=entity,
                          keys=", ".join(sorted(configs)) or "none")
            if self._unclean_allowed(entity) and not was_unclean:
                # Kafka's processTopicUncleanLeaderElectionEnable: offline partitions may now get a leader.
                await self._partitions_online({entity: self.topics[entity]})
        elif entity_type == "brokers":
            configs = await self._store.broker_configs(entity)
            if configs == dict(self.broker_configs.get(entity, {})):
                return
            self._broker_configs_changed(entity, configs)

    # -- controlled shutdown ------------------------------------------------------------

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """Move leadership off a broker that is shutting down; return the partitions it still leads.

        As in Kafka (``doControlledShutdown``): the broker is marked shutting
        down (no longer elected), each partition it leads gets the first other
        live ISR member as leader, each it follows drops it from the ISR and
        stops it (StopReplica without deletion).  Partitions whose only replica
        is the broker cannot move and are not reported as remaining (the
        broker may stop regardless).
        """
        self.require_active()
        broker = self.live_brokers.get(broker_id)
        if broker is None:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"Broker {broker_id} is not registered")
        if broker_epoch != broker.epoch:   # KIP-380; "no epoch" (-1) included: it cannot be checked
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH,
                             f"Broker epoch {broker_epoch} is not broker {broker_id}'s current epoch")
        return await self._locked(self._controlled_shutdown, broker_id)

    async def _controlled_shutdown(self, broker_id: int) -> list[tuple[str, int]]:
        if broker_id not in self.live_brokers:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"Broker {broker_id} is not registered")
        self.shutting_down.add(broker_id)
        self.log.info("Broker {broker_id} is shutting down", broker_id=broker_id)
        changes: dict[TopicPartition, PartitionRecord] = {}
        followed: list[tuple[TopicRecord, int]] = []
        for topic in self.topics.values():
            if topic.name in self.deleting:
                continue
            for index, record in topic.partitions.items():
                if broker_id not in record.replicas or len(record.replicas) <= 1 or not record.has_state:
                    continue
                if record.leader == broker_id:
                    elected = election.controlled_shutdown(record, self.live_brokers, self.shutting_down)
                    if elected is not None:
                        changes[(topic.name, index)] = elected
                else:
                    followed.append((topic, index))
                    shrunk = election.without_replica(record, broker_id)
                    if shrunk is not None:
                        changes[(topic.name, index)] = shrunk
        if followed:
            self._send_stop_replica(followed, delete=False, only=[broker_id])
        await self._write(changes)
        self._announce(changes)
        return [(topic.name, index) for topic in self.topics.values() if topic.name not in self.deleting
                for index, record in topic.partitions.items()
                if record.leader == broker_id and len(record.replicas) > 1]

    # -- leader elections ---------------------------------------------------------------

    async def elect_leaders(self, election_type: ElectionType,
                            partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, ElectionOutcome]:
        """ElectLeaders (KIP-460): a preferred or unclean election for each partition (None: all).

        Per partition, as Kafka's ``processReplicaLeaderElection``: unknown
        ones UNKNOWN_TOPIC_OR_PARTITION, topics being deleted
        INVALID_TOPIC_EXCEPTION, those that already have the leader asked for
        (the preferred replica; any live leader for an unclean election)
        ELECTION_NOT_NEEDED, failed elections PREFERRED_LEADER_NOT_AVAILABLE /
        ELIGIBLE_LEADERS_NOT_AVAILABLE, and the new leader otherwise.
        """
        self.require_active()
        return await self._locked(self._elect_leaders, election_type, partitions)

    async def _elect_leaders(self, election_type: ElectionType,
                             partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, ElectionOutcome]:
        if partitions is None:
            partitions = [(t.name, i) for t in self.topics.values() for i in t.partitions]
        results: dict[TopicPartition, ElectionOutcome] = {}
        changes: dict[TopicPartition, PartitionRecord] = {}
        electable = self._electable_brokers()
        for name, index in partitions:
            topic = self.topics.get(name)
            record = topic.partitions.get(index) if topic is not None else None
            if record is None or not record.has_state:
                results[(name, index)] = ElectionOutcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                        "The partition does not exist.")
                continue
            if name in self.deleting:
                results[(name, index)] = ElectionOutcome(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                                        "The topic is being deleted")
                continue
            if election_type == ElectionType.PREFERRED:
                if record.leader == record.replicas[0]:
                    results[(name, index)] = ElectionOutcome(ErrorCode.ELECTION_NOT_NEEDED)
                    continue
                elected = election.preferred(record, electable)
                failure = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                strategy = "PreferredReplicaPartitionLeaderElectionStrategy"
            else:
                if record.leader != NO_LEADER and record.leader in self.live_brokers:
                    results[(name, index)] = ElectionOutcome(ErrorCode.ELECTION_NOT_NEEDED)
                    continue
                elected = election.offline(record, electable, unclean=True)
                failure = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                strategy = "OfflinePartitionLeaderElectionStrategy(true)"
            if elected is None:
                results[(name, index)] = ElectionOutcome(
                    failure, f"Failed to elect leader for partition {name}-{index} under strategy {strategy}")
                continue
            changes[(name, index)] = elected
            results[(name, index)] = ElectionOutcome(ErrorCode.NONE, None, elected.leader)
        await self._write(changes)
        self._announce(changes)
        if changes:
            self.log.info("{kind} leader election: {partitions}", kind=election_type.name.capitalize(),
                          partitions=", ".join(f"{t}-{p} -> {r.leader}" for (t, p), r in sorted(changes.items())))
        return results

    def _schedule_rebalance(self, delay: float = FIRST_REBALANCE_CHECK_SECONDS) -> None:
        """The periodic preferred-leader check (``auto.leader.rebalance.enable``, every
        ``leader.imbalance.check.interval.seconds``), once there are brokers to balance across: a
        single broker leads all its partitions already."""
        if (not self.config["auto.leader.rebalance.enable"] or not self.active or len(self.live_brokers) < 2
                or self._rebalance_call is not None):
            return
        self._rebalance_call = self.reactor.callLater(delay, self._rebalance_tick)

    def _rebalance_tick(self) -> None:
        self._rebalance_call = None
        d = self._run(self._check_leader_balance)
        d.addBoth(lambda _: self._schedule_rebalance(self.config["leader.imbalance.check.interval.seconds"]))

    async def _check_leader_balance(self) -> None:
        """Kafka's ``checkAndTriggerAutoLeaderRebalance``: for each preferred broker whose share of
        partitions led by someone else exceeds ``leader.imbalance.per.broker.percentage``, a preferred
        election for those whose preferred replica may lead."""
        threshold = self.config["leader.imbalance.per.broker.percentage"] / 100.0
        by_preferred: dict[int, list[TopicPartition]] = {}
        for topic in self.topics.values():
            if topic.name in self.deleting:
                continue
            for index, record in topic.partitions.items():
                if record.replicas and record.has_state:
                    by_preferred.setdefault(record.replicas[0], []).append((topic.name, index))
        electable = self._electable_brokers()
        candidates: list[TopicPartition] = []
        for broker_id, owned in sorted(by_preferred.items()):
            elsewhere = [tp for tp in owned if self.topics[tp[0]].partitions[tp[1]].leader != broker_id]
            if len(elsewhere) / len(owned) > threshold:
                candidates += [tp for tp in elsewhere
                               if election.preferred(self.topics[tp[0]].partitions[tp[1]], electable) is not None]
        if candidates:
            self.log.info("Leader imbalance above leader.imbalance.per.broker.percentage: preferred election for "
                          "{count} partition(s)", count=len(candidates))
            await self._elect_leaders(ElectionType.PREFERRED, candidates)

    # -- ISR changes from leaders (AlterPartition, API 56) ------------------------------------

    async def alter_partition(self, broker_id: int, broker_epoch: int,
                              changes: Mapping[TopicPartition, IsrChange]) -> dict[TopicPartition, ErrorCode]:
        """A leader's new ISR (Kafka's ``tryProcessAlterPartition``): the per-partition error, NONE when
        written (or already so).  Refused whole: NOT_CONTROLLER, STALE_BROKER_EPOCH (unknown broker or
        another epoch).  Per partition: UNKNOWN_TOPIC_OR_PARTITION; NOT_CONTROLLER when the leader is
        ahead (a newer controller exists); FENCED_LEADER_EPOCH behind; INVALID_UPDATE_VERSION for an
        older partition epoch; INVALID_REQUEST for a RECOVERING leader with more than itself in the ISR,
        or going back to RECOVERING; INELIGIBLE_REPLICA for a replica that is not alive (KIP-841).
        An accepted change completes a reassignment waiting for its targets to be in sync."""
        self.require_active()
        known = self.live_brokers.get(broker_id)
        if known is None or known.epoch != broker_epoch:
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH, f"Broker {broker_id} epoch {broker_epoch} is not current")
        return await self._locked(self._alter_partition, broker_id, changes)

    async def _alter_partition(self, broker_id: int, changes: Mapping[TopicPartition, IsrChange]):
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, PartitionRecord] = {}
        for (name, index), change in changes.items():
            topic = self.topics.get(name)
            record = topic.partitions.get(index) if topic is not None else None
            if record is None or not record.has_state:
                results[(name, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif change.partition_epoch > record.partition_epoch or change.leader_epoch > record.leader_epoch:
                results[(name, index)] = ErrorCode.NOT_CONTROLLER
            elif change.leader_epoch < record.leader_epoch:
                results[(name, index)] = ErrorCode.FENCED_LEADER_EPOCH
            elif (broker_id == record.leader and tuple(change.isr) == record.isr
                  and change.leader_recovery_state == record.leader_recovery_state):
                results[(name, index)] = ErrorCode.NONE            # already so
            elif change.partition_epoch < record.partition_epoch:
                results[(name, index)] = ErrorCode.INVALID_UPDATE_VERSION
            elif change.leader_recovery_state == RECOVERING and (
                    len(change.isr) > 1 or record.leader_recovery_state == RECOVERED):
                # a recovering leader is alone in the ISR, and nothing goes back to recovering
                results[(name, index)] = ErrorCode.INVALID_REQUEST
            elif any(b not in self.live_brokers for b in change.isr):
                results[(name, index)] = ErrorCode.INELIGIBLE_REPLICA
            else:
                accepted[(name, index)] = election.next_epoch(record, isr=tuple(change.isr),
                                                              leader_recovery_state=change.leader_recovery_state)
                results[(name, index)] = ErrorCode.NONE
        await self._write(accepted)
        if accepted:
            self._send_update_metadata(self.live_brokers, [(self.topics[n], i) for n, i in accepted])
        for name, index in accepted:
            await self._maybe_complete_reassignment(name, index)
        return results

    # -- partition reassignment -----------------------------------------------------------

    async def alter_partition_reassignments(self, targets: Mapping[TopicPartition, list[int] | None], *,
                                            allow_replication_factor_change: bool = True,
                                            ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments (KIP-455): move each partition to its target replicas, or (None)
        cancel its ongoing reassignment.  Per partition (error, message); as Kafka's
        ``processApiPartitionReassignment``, a reassignment is started here and completes once the
        target replicas are in the ISR."""
        self.require_active()
        return await self._locked(self._alter_reassignments, targets, allow_replication_factor_change)

    async def _alter_reassignments(self, targets, allow_rf_change: bool):
        results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        for (name, index), target in targets.items():
            topic = self.topics.get(name)
            record = topic.partitions.get(index) if topic is not None else None
            if record is None or name in self.deleting:
                results[(name, index)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            if target is None:
                if not record.is_being_reassigned:
                    results[(name, index)] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
                    continue
                target = list(record.origin_replicas)
            else:
                error = self._invalid_target(record, target, allow_rf_change)
                if error is not None:
                    results[(name, index)] = error
                    continue
            try:
                await self._reassign(name, index, tuple(target))
                results[(name, index)] = (ErrorCode.NONE, None)
            except KafkaError as exc:
                if exc.code == ErrorCode.NOT_CONTROLLER:
                    raise
                results[(name, index)] = (exc.code, exc.message)
        return results

    def _invalid_target(self, record: PartitionRecord, target: list[int],
                        allow_rf_change: bool) -> tuple[ErrorCode, str] | None:
        """Kafka's ``validateReplicas``."""
        if not target:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
        if len(set(target)) != len(target):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Duplicate replica ids in partition reassignment replica list: {target}")
        if any(b < 0 for b in target):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {target}"
        adding = [b for b in target if b not in record.origin_replicas]
        if any(b not in self.live_brokers for b in adding):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Replica assignment has brokers that are not alive. Replica list: {adding}, live broker "
                    f"list: {sorted(self.live_brokers)}")
        if not allow_rf_change and len(target) != len(record.origin_replicas):
            return (ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"The replication factor is changed from {len(record.origin_replicas)} to {len(target)}")
        return None

    async def _reassign(self, name: str, index: int, target: tuple[int, ...]) -> None:
        """Kafka's ``onPartitionReassignment``, phases U and A (see ``_maybe_complete_reassignment``)."""
        record = self.topics[name].partitions[index]
        origin = record.origin_replicas
        full = tuple(dict.fromkeys(target + origin))
        adding = tuple(b for b in full if b not in origin)
        removing = tuple(b for b in full if b not in target)
        unneeded = [b for b in record.replicas if b not in full]   # adding replicas of a replaced reassignment
        # U: the assignment in the store first, so a new controller resumes the reassignment.
        # A: the leader epoch moves on, so every replica learns the new assignment.
        updated = replace(record, replicas=full, adding_replicas=adding, removing_replicas=removing)
        if updated.has_state:
            updated = election.with_leader(updated, updated.leader, tuple(b for b in updated.isr if b in full))
        await self._write({(name, index): updated})
        topic = self.topics[name]
        if unneeded:
            self._send_stop_replica([(topic, index)], delete=True, only=unneeded)
        self.log.info("Reassigning {topic}-{partition}: replicas {replicas}, adding {adding}, removing {removing}",
                      topic=name, partition=index, replicas=list(full), adding=list(adding),
                      removing=list(removing))
        self._announce({(name, index): updated})
        # The new replicas start (phase A2); with the ISR tracking liveness they are in sync at once.
        await self._partitions_online({name: replace(topic, partitions={index: topic.partitions[index]})})
        await self._maybe_complete_reassignment(name, index)

    async def _maybe_complete_reassignment(self, name: str, index: int) -> None:
        """Phase B of Kafka's ``onPartitionReassignment``, once the target replicas are all in the ISR:
        the assignment becomes the target, the leader moves if it is not a target replica, and the
        removed replicas leave the ISR and delete their logs."""
        topic = self.topics.get(name)
        record = topic.partitions.get(index) if topic is not None else None
        if record is None or not record.is_being_reassigned or not record.has_state:
            return
        target = record.target_replicas
        if not set(target) <= set(record.isr):
            return
        removing = record.removing_replicas
        final = replace(record, replicas=target, adding_replicas=(), removing_replicas=())
        isr = tuple(b for b in record.isr if b in target)
        electable = self._electable_brokers()
        if record.leader in target and record.leader in electable:
            final = election.with_leader(final, record.leader, isr)
        else:
            elected = election.reassign(replace(final, isr=isr), electable)
            if elected is None:
                self.log.warn("Reassignment of {topic}-{partition}: no target replica can lead yet",
                              topic=name, partition=index)
                return
            final = elected
        await self._write({(name, index): final})
        topic = self.topics[name]
        self._announce({(name, index): final})
        if removing:
            self._send_stop_replica([(topic, index)], delete=True, only=removing)
        self.log.info("Reassignment of {topic}-{partition} completed: replicas {replicas}, leader {leader}",
                      topic=name, partition=index, replicas=list(target), leader=final.leader)

    async def _resume_reassignments(self, which: Callable[[PartitionRecord], bool]) -> None:
        for topic in list(self.topics.values()):
            if topic.name in self.deleting:
                continue
            for index, record in topic.partitions.items():
                if record.is_being_reassigned and which(record):
                    await self._maybe_complete_reassignment(topic.name, index)

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None,
                                     ) -> dict[TopicPartition, ReassignmentState]:
        """ListPartitionReassignments: the ongoing reassignments among ``partitions`` (None: all)."""
        self.require_active()
        if partitions is None:
            partitions = [(t.name, i) for t in self.topics.values() for i in t.partitions]
        ongoing = {}
        for name, index in partitions:
            topic = self.topics.get(name)
            record = topic.partitions.get(index) if topic is not None else None
            if record is not None and record.is_being_reassigned:
                ongoing[(name, index)] = ReassignmentState(record.replicas, record.adding_replicas,
                                                      record.removing_replicas)
        return ongoing

    # -- the state machinery ----------------------------------------------------------------

    def _run(self, fn, *args) -> Deferred:
        """Run ``fn`` as one controller event (under the lock), if this controller is still active;
        failures are logged."""
        async def event():
            if self.active:
                await self._locked(fn, *args)

        d = ensureDeferred(event())
        d.addErrback(self._event_failed, getattr(fn, "__name__", "event"))
        return d

    def _event_failed(self, failure: Failure, name: str) -> None:
        if isinstance(failure.value, KafkaError) and failure.value.code == ErrorCode.NOT_CONTROLLER:
            return
        self.log.failure("Controller event {name} failed", failure, name=name)

    async def _locked(self, fn, *args):
        self.require_active()
        await self._lock.acquire()
        try:
            self.require_active()
            return await fn(*args)
        finally:
            self._lock.release()

    def _electable_brokers(self) -> set[int]:
        """Brokers that may lead or join an ISR: live and not shutting down (Kafka's ``isReplicaOnline``)."""
        return {b for b in self.live_brokers if b not in self.shutting_down}

    def _unclean_allowed(self, topic: str) -> bool:
        """``unclean.leader.election.enable`` for ``topic``: its override, else the dynamic cluster default,
        else the broker configuration."""
        record = self.topics.get(topic)
        if record is not None and "unclean.leader.election.enable" in record.configs:
            return _is_true(record.configs["unclean.leader.election.enable"])
        default = self.broker_configs.get("", {})
        if "unclean.leader.election.enable" in default:
            return _is_true(default["unclean.leader.election.enable"])
        return bool(self.config["unclean.leader.election.enable"])

    def _online_partitions(self, exclude: Collection[str] = frozenset()) -> list[tuple[TopicRecord, int]]:
        return [(t, i) for t in self.topics.values() if t.name not in exclude
                for i, r in t.partitions.items() if r.has_state]

    async def _write(self, changes: Mapping[TopicPartition, PartitionRecord]) -> None:
        """Persist partition records (one write per topic), then make them the controller's view."""
        by_topic: dict[str, dict[int, PartitionRecord]] = {}
        for (name, index), record in changes.items():
            by_topic.setdefault(name, {})[index] = record
        for name, records in by_topic.items():
            await self._persist(self._store.set_partitions(name, records))
            self.topics[name] = self.topics[name].with_partitions(records)

    def _announce(self, changes: Mapping[TopicPartition, PartitionRecord],
                  also_update: Iterable[TopicPartition] = (), *, always: bool = False) -> Sent:
        """LeaderAndIsr to the live replicas of changed partitions, UpdateMetadata for them (and for
        ``also_update``) to every live broker; with ``always`` UpdateMetadata goes even when nothing
        changed, so brokers learn the live brokers."""
        partitions = [(self.topics[n], i) for n, i in changes]
        update = partitions + [(self.topics[n], i) for n, i in also_update if n in self.topics]
        if not update and not always:
            return Sent()
        sends = []
        if partitions:
            sends.append(self._send_leader_and_isr(partitions, is_new=False))
        sends.append(self._send_update_metadata(self.live_brokers, update))
        return Sent.combine(*sends)

    # -- requests to brokers -----------------------------------------------------------

    def _partition_state(self, cls, topic: TopicRecord, index: int, *, is_new: bool = False, deleting: bool = False):
        record = topic.partitions[index]
        fields = dict(partition_index=index, controller_epoch=self.epoch,
                      leader=LEADER_DURING_DELETE if deleting else record.leader,
                      leader_epoch=record.leader_epoch, isr=list(record.isr), replicas=list(record.replicas))
        if cls is m.LeaderAndIsrRequest.LeaderAndIsrTopicState.LeaderAndIsrPartitionState:
            fields.update(partition_epoch=record.partition_epoch, adding_replicas=list(record.adding_replicas),
                          removing_replicas=list(record.removing_replicas), is_new=is_new,
                          leader_recovery_state=record.leader_recovery_state)
        else:
            fields.update(zk_version=record.partition_epoch,
                          offline_replicas=[b for b in record.replicas if b not in self.live_brokers])
        return cls(**fields)

    def _send_leader_and_isr(self, partitions: list[tuple[TopicRecord, int]], *, is_new: bool,
                             only: Iterable[int] | None = None) -> Sent:
        """LeaderAndIsr to every live replica of ``partitions`` (of ``only`` those brokers, if given)."""
        per_broker: dict[int, dict[str, list[int]]] = {}
        topics = {t.name: t for t, _ in partitions}
        wanted = None if only is None else set(only)
        for topic, index in partitions:
            for replica in topic.partitions[index].replicas:
                if replica in self.live_brokers and (wanted is None or replica in wanted):
                    per_broker.setdefault(replica, {}).setdefault(topic.name, []).append(index)
        R = m.LeaderAndIsrRequest
        sent = Sent()
        for broker_id, by_topic in per_broker.items():
            leaders = {topics[name].partitions[i].leader for name, idx in by_topic.items() for i in idx}
            live_leaders = []
            for leader in sorted(leaders):
                broker = self.live_brokers.get(leader)
                if broker is not None:
                    ep = broker.endpoint(self.config_inter_broker_listener(broker))
                    if ep is not None:
                        live_leaders.append(R.LeaderAndIsrLiveLeader(broker_id=leader, host_name=ep.host,
                                                                     port=ep.port))
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
            sent.add(broker_id, self._channels.send(
                broker_id, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, request).addCallback(
                self._check_response, "LeaderAndIsr", broker_id))
        return sent

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

    def _send_topic_configs(self, brokers: Iterable[int], topics: list[TopicRecord]) -> Sent:
        """UpdateMetadata carrying only ``topics``' config overrides (no partition states)."""
        return self._send_update_metadata(brokers, [], topic_configs=topics)

    def _send_update_metadata(self, brokers: Iterable[int], partitions: list[tuple[TopicRecord, int]], *,
                              deleting: bool = False, topic_configs: Iterable[TopicRecord] = (),
                              dynamic_broker_configs: bool = False, acls: bool = False) -> Sent:
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
            for b in sorted(self.live_brokers.values(), key=lambda b: b.broker_id)]
        sent = Sent()
        with_configs = {t.name for t in topic_configs}
        acl_list = self._acl_list() if acls else None
        for broker_id in list(brokers):
            if broker_id not in self.live_brokers:
                continue
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
                        acls=acl_list, live_brokers=live)
            sent.add(broker_id, self._channels.send(
                broker_id, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, request).addCallback(
                self._check_response, "UpdateMetadata", broker_id))
        return sent

    def _send_stop_replica(self, partitions: list[tuple[TopicRecord, int]], *, delete: bool,
                           only: Iterable[int] | None = None) -> Sent:
        S = m.StopReplicaRequest
        per_broker: dict[int, dict[str, list[tuple[int, int]]]] = {}
        wanted = None if only is None else set(only)
        for topic, index in partitions:
            record = topic.partitions[index]
            # ``only`` may name brokers no longer among the replicas (a reassignment removed them).
            for replica in (record.replicas if wanted is None else sorted(wanted)):
                if replica in self.live_brokers:
                    per_broker.setdefault(replica, {}).setdefault(topic.name, []).append((index, record.leader_epoch))
        sent = Sent()
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
            sent.add(broker_id, self._channels.send(
                broker_id, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, request).addCallback(
                self._check_response, "StopReplica", broker_id))
        return sent

    def config_inter_broker_listener(self, broker: LiveBroker) -> str:
        return self.config["inter.broker.listener.name"] or self.config["security.inter.broker.protocol"]

    def _check_response(self, response, name: str, broker_id: int):
        if response.error_code:
            self.log.warn("{name} to broker {broker_id} failed: {error}", name=name, broker_id=broker_id,
                          error=ErrorCode(response.error_code).name)
        return response


class Sent:
    """Requests sent to brokers: each broker's outcome, kept until someone asks.

    A change is announced whether or not anybody waits for the brokers to
    confirm it; a channel that closes (the controller resigned, the broker
    died) fails its requests, and such an outcome is only reported to those
    who asked (``response``, ``all``) -- never left as an unhandled failure.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[int, Callable[[], Deferred]]] = []

    def add(self, broker_id: int, d: Deferred) -> None:
        outcome: list = []
        waiters: list[Deferred] = []

        def done(result):
            outcome.append(result)
            for waiter in waiters:
                if isinstance(result, Failure):
                    waiter.errback(result)
                else:
                    waiter.callback(result)
            waiters.clear()
            return None      # consumed here; reported to whoever asks

        def response() -> Deferred:
            waiter: Deferred = Deferred()
            if outcome:
                if isinstance(outcome[0], Failure):
                    waiter.errback(outcome[0])
                else:
                    waiter.callback(outcome[0])
            else:
                waiters.append(waiter)
            return waiter

        d.addBoth(done)
        self._pending.append((broker_id, response))

    @property
    def brokers(self) -> list[int]:
        return [b for b, _ in self._pending]

    def response(self, broker_id: int) -> Deferred:
        """The response of ``broker_id`` (the first one sent to it)."""
        for b, response in self._pending:
            if b == broker_id:
                return response()
        raise KeyError(broker_id)

    def all(self) -> Deferred:
        """Fires when every broker answered (fails if one could not be reached before its channel closed)."""
        return gatherResults([response() for _, response in self._pending], consumeErrors=True)

    @classmethod
    def combine(cls, *sents: Sent) -> Sent:
        combined = cls()
        for sent in sents:
            combined._pending.extend(sent._pending)
        return combined


__all__ = ["KafkaController", "SECURITY_PROTOCOL_IDS", "LEADER_AND_ISR_VERSION", "UPDATE_METADATA_VERSION",
           "STOP_REPLICA_VERSION", "NO_STATE"]

"""KafkaController: becoming the controller, and handing each event to the part that handles it.

This is Kafka's ZooKeeper-mode controller, one code path for a single node
and a cluster, split as Kafka splits it:

* ``ControllerContext`` (``context.py``) -- what the controller knows: the
  state read from its ``ClusterMetadataStore`` (a JSON file on a single
  node, ZooKeeper's znodes in a cluster), live brokers, epochs;
* ``ControllerEventManager`` (``event_manager.py``) -- one event at a time;
* ``ControllerBrokerRequestBatch`` (``broker_request_batch.py``) --
  LeaderAndIsr, UpdateMetadata and StopReplica to each broker's control plane;
* ``PartitionStateMachine`` and ``ReplicaStateMachine`` -- leaders and ISRs,
  by the algorithms of ``election.py``;
* ``TopicCreationManager``, ``TopicDeletionManager``, ``ReassignmentManager``
  (``onPartitionReassignment``), ``DynamicConfigManager``, ``AclManager``.

Every change is persisted first, then the context changes, then brokers are
told.  This class is the controller's face: it becomes the controller
(``startup``, Kafka's ``onControllerFailover``: bump the controller epoch,
read the state, tell every broker everything), resigns when a write finds
another controller took over, coordinates what spans parts (a broker
starting or failing, a leader's AlterPartition completing a reassignment),
and schedules the automatic preferred-leader rebalance.  Brokers reach it
only through a ``ControllerClient``: on a single node the admin operations
come from this broker's ``LocalControllerClient``; in a cluster brokers
write those to ZooKeeper and the controller learns them from its watches
(``topics_changed``, ``topic_changed``, ``deletions_requested``,
``config_changed``, ``acls_changed``), as it does broker registration
(``brokers_changed``); everywhere it is asked ``controlled_shutdown``,
``elect_leaders``, ``alter_partition`` and partition reassignments.

Leader epochs only move forward: they are persisted with the partition and
bumped only when leadership changes -- restarting a single node keeps every
epoch, so clients see no spurious leadership change (KIP-320).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping

from twisted.logger import Logger

from twisted_kafka.config import StartupError
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.security.acl import AclBinding, AclBindingFilter

from .acl_manager import AclManager
from .broker_request_batch import ControllerBrokerRequestBatch
from .channel_manager import ControllerChannelManager
from .context import LOG_NAMESPACE, ControllerContext, TopicPartition
from .dynamic_config_manager import DynamicConfigManager
from .election import ElectionType
from .event_manager import ControllerEventManager
from .interface import ElectionOutcome, IsrChange, LiveBroker, NewTopic, ReassignmentState, TopicResult
from .metadata_store import ClusterMetadataStore, ControllerMovedError
from .partition_state_machine import PartitionStateMachine
from .reassignment import ReassignmentManager
from .replica_state_machine import ReplicaStateMachine
from .topic_creation import TopicCreationManager
from .topic_deletion import TopicDeletionManager

#: Seconds after becoming controller before the first preferred-leader check (Kafka's 5 s).
FIRST_REBALANCE_CHECK_SECONDS = 5.0


class KafkaController:
    log = Logger(namespace=LOG_NAMESPACE)

    def __init__(self, *, config, broker_id: int, cluster_id: str, store: ClusterMetadataStore,
                 channels: ControllerChannelManager):
        self.config = config
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self._store = store
        self._channels = channels
        self.context = ControllerContext()
        self.events = ControllerEventManager()
        requests = self.requests = ControllerBrokerRequestBatch(
            config=config, broker_id=broker_id, cluster_id=cluster_id, context=self.context, channels=channels)
        context, events, persist = self.context, self.events, self._persist
        partitions = self.partition_state_machine = PartitionStateMachine(
            config=config, context=context, store=store, persist=persist, requests=requests)
        self.replica_state_machine = ReplicaStateMachine(context=context, requests=requests, partitions=partitions)
        self.topic_creation = TopicCreationManager(config=config, context=context, store=store, persist=persist,
                                                   requests=requests, partitions=partitions, events=events)
        self.topic_deletion = TopicDeletionManager(config=config, context=context, store=store, persist=persist,
                                                   requests=requests, events=events)
        self.reassignment = ReassignmentManager(context=context, requests=requests, partitions=partitions)
        self.dynamic_config = DynamicConfigManager(context=context, store=store, persist=persist, requests=requests,
                                                   partitions=partitions, events=events)
        self.acl_manager = AclManager(context=context, store=store, persist=persist, requests=requests, events=events)
        self._rebalance_call = None
        #: Called when this controller learns another one took over (a refused write); the cluster's
        #: ControllerService then goes back to watching ``/controller``.
        self.on_resign: Callable[[], None] | None = None

    # What the controller knows, as its services (and tests) read it.

    @property
    def active(self) -> bool:
        return self.events.active

    @property
    def epoch(self) -> int:
        return self.context.epoch

    @property
    def topics(self):
        return self.context.topics

    @property
    def live_brokers(self) -> dict[int, LiveBroker]:
        return self.context.live_brokers

    @property
    def broker_configs(self):
        return self.context.broker_configs

    @property
    def isr_follows_liveness(self) -> bool:
        return self.partition_state_machine.isr_follows_liveness

    @isr_follows_liveness.setter
    def isr_follows_liveness(self, value: bool) -> None:
        self.partition_state_machine.isr_follows_liveness = value

    # -- becoming controller, resigning ---------------------------------------------------------

    async def startup(self, brokers: Iterable[LiveBroker] | Callable[[], Awaitable[Iterable[LiveBroker]]]) -> None:
        """Become the controller: bump the epoch, then tell every broker the whole state.

        ``brokers`` are the live brokers, or an async function returning them
        once the controllership is claimed (a cluster reads ``/brokers/ids``).
        ControllerMovedError: another broker is the controller.
        """
        context = self.context
        async with self.events.lock:
            context.epoch = await self._store.increment_controller_epoch()
            self.events.active = True
            try:
                live = list(await brokers() if callable(brokers) else brokers)
                state = await self._store.load()
            except BaseException:
                self._deactivate()
                raise
            context.load(state)
            for broker in live:
                self._register(broker)
            queued = [t for t in await self._store.topics_queued_for_deletion() if t in context.topics]
            partitions = context.online_partitions(exclude=set(queued))
            # Configs first, so every log is created with its topic's overrides.
            sent = self.requests.send_update_metadata(list(context.live_brokers), partitions,
                                                      topic_configs=list(context.topics.values()),
                                                      dynamic_broker_configs=True, acls=True)
            if self.broker_id in sent.brokers:
                self._check_own_broker_accepted(await sent.response(self.broker_id))
            led = self.requests.send_leader_and_isr(partitions, is_new=False)
            if self.broker_id in led.brokers:
                await led.response(self.broker_id)
            # A cluster's controller may find what its predecessor left unfinished (nothing, on a single
            # node): partitions never given a state or without a live leader, replicas back in service,
            # reassignments, deletions.
            await self.partition_state_machine.trigger_online_partition_state_change(context.topics)
            await self.reassignment.resume(lambda record: True)
            await self.topic_deletion.start_deletions(queued)
            self._schedule_rebalance()
            self.log.info("Controller {broker_id} active with epoch {epoch}: {topics} topic(s), "
                          "{partitions} partition(s), live brokers {brokers}", broker_id=self.broker_id,
                          epoch=context.epoch, topics=len(context.topics), partitions=len(partitions),
                          brokers=sorted(context.live_brokers))

    def _check_own_broker_accepted(self, response) -> None:
        """The controller's own broker refused its state: the endpoint it registered leads to
        another broker (or another cluster's), which must not be managed from here."""
        if response is None or not response.error_code:
            return
        broker = self.context.live_brokers[self.broker_id]
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
        self.context.live_brokers[broker.broker_id] = broker
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
        self.events.active = False
        if self._rebalance_call is not None and self._rebalance_call.active():
            self._rebalance_call.cancel()
        self._rebalance_call = None
        self._channels.close()

    async def _persist(self, write: Awaitable) -> None:
        """A store write; when another controller has taken over, resign (NOT_CONTROLLER to the caller)."""
        try:
            await write
        except ControllerMovedError as exc:
            self.log.warn("Controller {broker_id} (epoch {epoch}) resigns: {reason}", broker_id=self.broker_id,
                          epoch=self.context.epoch, reason=exc)
            self._deactivate()
            if self.on_resign is not None:
                self.on_resign()
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "The controller moved to another broker") from None

    # -- admin operations (a single node: from this broker's admin) ------------------------------------

    async def create_topics(self, topics: list[NewTopic], *, validate_only: bool = False,
                            wait_for_brokers: bool = True, timeout_ms: int | None = None) -> list[TopicResult]:
        """Create ``topics``; one result per spec, in order (``TopicCreationManager.create_topics``)."""
        return await self.topic_creation.create_topics(topics, validate_only=validate_only,
                                                       wait_for_brokers=wait_for_brokers, timeout_ms=timeout_ms)

    def plan_partitions(self, name: str, count: int, assignments: list[list[int]] | None) -> dict[int, list[int]]:
        """The replicas of the partitions that growing ``name`` to ``count`` adds; raises KafkaError."""
        return self.topic_creation.plan_partitions(name, count, assignments)

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None, *,
                                validate_only: bool = False, wait_for_brokers: bool = True,
                                timeout_ms: int | None = None) -> None:
        """Grow ``name`` to ``count`` partitions (Kafka never shrinks a topic); raises KafkaError."""
        await self.topic_creation.create_partitions(name, count, assignments, validate_only=validate_only,
                                                    wait_for_brokers=wait_for_brokers, timeout_ms=timeout_ms)

    async def delete_topics(self, names: list[str], *, wait_for_brokers: bool = True,
                            timeout_ms: int | None = None) -> dict[str, TopicResult]:
        """Delete topics: replicas stop and delete their logs, then the topic is forgotten.  One result
        per distinct name (with the deleted topic's id); waiting works as for ``create_topics``."""
        return await self.topic_deletion.delete_topics(names, wait_for_brokers=wait_for_brokers,
                                                       timeout_ms=timeout_ms)

    async def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        """Replace a topic's overrides (as ZooKeeper's /config/topics/<name> is replaced); every broker has
        applied them when this returns."""
        await self.dynamic_config.alter_topic_configs(name, configs, validate_only=validate_only)

    async def alter_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of ``entity`` (ZooKeeper's /config/brokers/<id|<default>>), which the
        caller validated; the brokers they apply to (all, for the cluster default) have them on return."""
        await self.dynamic_config.alter_broker_configs(entity, configs)

    async def create_acls(self, bindings: list[AclBinding]) -> list[tuple[ErrorCode, str | None]]:
        """Add ``bindings``; per binding NONE or INVALID_REQUEST with Kafka's message.  Every broker
        holds the new ACL set when this returns."""
        return await self.acl_manager.create_acls(bindings)

    async def delete_acls(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove every binding each filter matches; per filter the bindings it removed."""
        return await self.acl_manager.delete_acls(filters)

    # -- what the cluster changed (a cluster's watches on ZooKeeper) -----------------------------------

    async def brokers_changed(self, current: Mapping[int, LiveBroker]) -> None:
        """The registered brokers are now ``current`` (``/brokers/ids``): handle the ones that started,
        stopped, or came back with a new epoch (Kafka's ``processBrokerChange``)."""
        await self.events.locked(self._brokers_changed, current)

    async def _brokers_changed(self, current: Mapping[int, LiveBroker]) -> None:
        known = self.context.live_brokers
        new = sorted(b for b in current if b not in known)
        dead = sorted(b for b in known if b not in current)
        bounced = sorted(b for b in current if b in known and current[b].epoch > known[b].epoch)
        if not (new or dead or bounced):
            return
        self.log.info("Brokers started: {new}, stopped: {dead}, restarted: {bounced}; live brokers: {live}",
                      new=new or "none", dead=dead or "none", bounced=bounced or "none", live=sorted(current))
        for broker_id in dead + bounced:
            self.context.forget_broker(broker_id)
            self._channels.remove_broker(broker_id)
        if dead or bounced:
            await self.replica_state_machine.replicas_offline(dead + bounced)
        for broker_id in new + bounced:
            self._register(current[broker_id])
        if new or bounced:
            await self._brokers_started(new + bounced)

    async def _brokers_started(self, started: list[int]) -> None:
        """Kafka's ``onBrokerStartup``: the other brokers learn of them, they learn everything, their
        replicas come online, partitions without a live leader are elected, reassignments resume."""
        self.replica_state_machine.replicas_online(started)
        self.topic_deletion.resume_for(started)
        await self.partition_state_machine.trigger_online_partition_state_change(self.context.topics)
        await self.reassignment.resume(lambda record: any(b in started for b in record.target_replicas))
        self._schedule_rebalance()

    async def topics_changed(self) -> None:
        await self.events.locked(self.topic_creation.topics_changed)

    async def topic_changed(self, name: str) -> None:
        await self.events.locked(self.topic_creation.topic_changed, name)

    async def deletions_requested(self) -> None:
        await self.events.locked(self.topic_deletion.deletions_requested)

    async def config_changed(self, entity_type: str, entity: str) -> None:
        await self.events.locked(self.dynamic_config.config_changed, entity_type, entity)

    async def acls_changed(self) -> None:
        await self.events.locked(self.acl_manager.acls_changed)

    # -- the controller's own operations ------------------------------------------------------------

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """Move leadership off a broker that is shutting down; return the partitions it still leads
        (``ReplicaStateMachine.controlled_shutdown``).  The broker must be registered, with this epoch."""
        self.events.require_active()
        broker = self.context.live_brokers.get(broker_id)
        if broker is None:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"Broker {broker_id} is not registered")
        if broker_epoch != broker.epoch:   # KIP-380; "no epoch" (-1) included: it cannot be checked
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH,
                             f"Broker epoch {broker_epoch} is not broker {broker_id}'s current epoch")
        return await self.events.locked(self.replica_state_machine.controlled_shutdown, broker_id)

    async def elect_leaders(self, election_type: ElectionType,
                            partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, ElectionOutcome]:
        """ElectLeaders (KIP-460): a preferred or unclean election for each partition (None: all);
        per partition the outcome (``PartitionStateMachine.elect_leaders``)."""
        self.events.require_active()
        return await self.events.locked(self.partition_state_machine.elect_leaders, election_type, partitions)

    async def alter_partition(self, broker_id: int, broker_epoch: int,
                              changes: Mapping[TopicPartition, IsrChange]) -> dict[TopicPartition, ErrorCode]:
        """A leader's new ISR (AlterPartition): refused whole with NOT_CONTROLLER or STALE_BROKER_EPOCH
        (unknown broker or another epoch), else per partition the error, NONE when written or already so
        (``PartitionStateMachine.alter_partition``).  An accepted change completes a reassignment waiting
        for its targets to be in sync."""
        self.events.require_active()
        known = self.context.live_brokers.get(broker_id)
        if known is None or known.epoch != broker_epoch:
            raise KafkaError(ErrorCode.STALE_BROKER_EPOCH, f"Broker {broker_id} epoch {broker_epoch} is not current")
        return await self.events.locked(self._alter_partition, broker_id, changes)

    async def _alter_partition(self, broker_id: int, changes: Mapping[TopicPartition, IsrChange]):
        results, accepted = await self.partition_state_machine.alter_partition(broker_id, changes)
        for name, index in accepted:
            await self.reassignment.maybe_complete(name, index)
        return results

    async def alter_partition_reassignments(self, targets: Mapping[TopicPartition, list[int] | None], *,
                                            allow_replication_factor_change: bool = True,
                                            ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments (KIP-455): move each partition to its target replicas, or (None)
        cancel its ongoing reassignment.  Per partition (error, message); as Kafka's
        ``processApiPartitionReassignment``, a reassignment is started here and completes once the
        target replicas are in the ISR."""
        self.events.require_active()
        return await self.events.locked(self.reassignment.alter_reassignments, targets,
                                        allow_replication_factor_change)

    def list_partition_reassignments(self, partitions: Iterable[TopicPartition] | None,
                                     ) -> dict[TopicPartition, ReassignmentState]:
        """ListPartitionReassignments: the ongoing reassignments among ``partitions`` (None: all)."""
        self.events.require_active()
        return self.reassignment.list_reassignments(partitions)

    # -- the automatic preferred-leader rebalance -------------------------------------------------------

    def _schedule_rebalance(self, delay: float = FIRST_REBALANCE_CHECK_SECONDS) -> None:
        """The periodic preferred-leader check (``auto.leader.rebalance.enable``, every
        ``leader.imbalance.check.interval.seconds``), once there are brokers to balance across: a
        single broker leads all its partitions already."""
        if (not self.config["auto.leader.rebalance.enable"] or not self.active
                or len(self.context.live_brokers) < 2 or self._rebalance_call is not None):
            return
        self._rebalance_call = self._channels.reactor.callLater(delay, self._rebalance_tick)

    def _rebalance_tick(self) -> None:
        self._rebalance_call = None
        d = self.events.run(self.partition_state_machine.check_leader_balance)
        d.addBoth(lambda _: self._schedule_rebalance(self.config["leader.imbalance.check.interval.seconds"]))


__all__ = ["KafkaController", "FIRST_REBALANCE_CHECK_SECONDS"]

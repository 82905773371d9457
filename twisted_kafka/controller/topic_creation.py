"""TopicCreationManager: new topics and partitions come online (Kafka's ``onNewPartitionCreation``).

Two ways in, as in Kafka's ZooKeeper mode:

* a single node creates them itself (``create_topics``,
  ``create_partitions``, from this broker's admin): checked and planned by
  the admin rules, and against each broker's partition budget (derived
  from its open-file limit), written to the store, then announced -- the
  topic configs first, so every log is created with its overrides;
* in a cluster a broker writes them to ZooKeeper (``cluster_client.py``)
  and the controller's watches call ``topics_changed`` (Kafka's
  ``processTopicChange``) and ``topic_changed`` (``processPartitionModifications``):
  the new partitions have no state yet, and the partition state machine
  gives them one.

Every change follows one pattern: plan and validate under the controller
lock (a bad topic fails alone), persist, queue the requests that tell the
brokers, release the lock, then (optionally) wait for the brokers to have
applied it.  The requests are queued before the lock is released, and each
broker's channel is a FIFO, so a later change never overtakes an earlier
one on any broker; waiting outside the lock lets a caller give up after its
timeout (Kafka's REQUEST_TIMED_OUT) without holding up the next change.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace

from twisted.logger import Logger

from twisted_kafka.config.topic import warn_deprecated_topic_configs
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .admin_rules import created_topic_result, plan_partitions, plan_topic, unknown_topic
from .broker_request_batch import ControllerBrokerRequestBatch, in_time
from .context import LOG_NAMESPACE, ControllerContext
from .event_manager import ControllerEventManager
from .interface import MAX_PARTITIONS_PER_REQUEST, NewTopic, TopicResult, excessive_batch_error
from .metadata_store import ClusterMetadataStore, TopicRecord, topic_record
from .partition_state_machine import PartitionStateMachine
from .topic_names import collision_key


class TopicCreationManager:
    log = Logger(namespace=LOG_NAMESPACE)

    def __init__(self, *, config, context: ControllerContext, store: ClusterMetadataStore,
                 persist: Callable[[Awaitable], Awaitable[None]], requests: ControllerBrokerRequestBatch,
                 partitions: PartitionStateMachine, events: ControllerEventManager):
        self.config = config
        self._context = context
        self._store = store
        self._persist = persist
        self._requests = requests
        self._partitions = partitions
        self._events = events

    # -- a single node: from this broker's admin -------------------------------------------------

    async def create_topics(self, topics: list[NewTopic], *, validate_only: bool = False,
                            wait_for_brokers: bool = True, timeout_ms: int | None = None) -> list[TopicResult]:
        """Create ``topics``; one result per spec, in order.

        With ``wait_for_brokers`` the call returns once every replica and every
        broker's metadata cache has the new topics, or after ``timeout_ms``
        (None or <= 0: no limit) with REQUEST_TIMED_OUT for them -- they exist
        all the same, as in Kafka.  A request that would create more than
        ``MAX_PARTITIONS_PER_REQUEST`` partitions in all is refused whole with
        POLICY_VIOLATION before any topic is planned (Kafka's controller fails
        the whole operation); a topic that would take a broker past its
        partition budget is refused alone, with POLICY_VIOLATION too.
        """
        self._events.require_active()
        requested = sum(self._requested_partitions(spec) for spec in topics)
        if requested > MAX_PARTITIONS_PER_REQUEST:
            error = excessive_batch_error(requested)
            return [TopicResult(spec.name, error.code, error.message) for spec in topics]
        context = self._context
        async with self._events.lock:
            results: list[TopicResult] = []
            created: list[TopicRecord] = []
            collisions = {collision_key(name): name for name in context.topics}
            hosted = context.hosted_replicas()
            for spec in topics:
                try:
                    plan = plan_topic(spec, existing=context.topics, collisions=collisions,
                                      live_brokers=context.live_brokers, config=self.config)
                    self._check_budgets(plan.assignment, hosted)
                except KafkaError as exc:
                    results.append(TopicResult(spec.name, exc.code, exc.message))
                    continue
                record = topic_record(plan.name, plan.topic_id, {
                    index: self._partitions.new_partition(replicas) for index, replicas in plan.assignment.items()},
                    plan.configs)
                collisions[collision_key(record.name)] = record.name
                results.append(created_topic_result(plan, validate_only=validate_only))
                created.append(record)
            if validate_only or not created:
                return results
            await self._persist(self._store.create_topics(created))
            for record in created:
                context.topics[record.name] = record
                warn_deprecated_topic_configs(record.name, record.configs)
            propagated = self._partitions.announce_new_partitions(
                created, [(t, i) for t in created for i in t.partitions]).all()
            self.log.info("Created topic(s) {topics}", topics=", ".join(r.name for r in created))
        if wait_for_brokers and not await self._requests.confirmed_within(propagated, timeout_ms):
            for result in results:
                if result.error == ErrorCode.NONE:
                    result.error = ErrorCode.REQUEST_TIMED_OUT
                    result.message = (f"Topic '{result.name}' was created, but its metadata did not reach "
                                      f"every broker{in_time(timeout_ms)}")
        return results

    def _requested_partitions(self, spec: NewTopic) -> int:
        """How many partitions ``spec`` asks for, without planning any."""
        if spec.assignments:
            return len(spec.assignments)
        if spec.num_partitions == -1:
            return self.config["num.partitions"]
        return max(0, spec.num_partitions)

    def _check_budgets(self, assignment: Mapping[int, list[int]], hosted: Counter) -> None:
        """POLICY_VIOLATION if adding ``assignment`` takes a broker past its partition budget;
        else counts it in ``hosted``."""
        adding = Counter(broker for replicas in assignment.values() for broker in replicas)
        for broker_id, count in sorted(adding.items()):
            live = self._context.live_brokers.get(broker_id)
            budget = live.partition_budget if live is not None else None
            if budget is not None and hosted[broker_id] + count > budget:
                raise KafkaError(ErrorCode.POLICY_VIOLATION,
                                 f"Broker {broker_id} hosts {hosted[broker_id]} partition(s); {count} more would "
                                 f"exceed its partition budget of {budget}, set by its open-file limit "
                                 f"(raise the limit to raise the budget).")
        hosted.update(adding)

    def plan_partitions(self, name: str, count: int,
                        assignments: list[list[int]] | None) -> dict[int, list[int]]:
        """The replicas of the partitions that growing ``name`` to ``count`` adds; raises KafkaError.

        More than ``MAX_PARTITIONS_PER_REQUEST`` new partitions are refused
        (POLICY_VIOLATION) before any is planned; so is going past a broker's
        partition budget.
        """
        topic = self._context.topics.get(name)
        if topic is None:
            raise unknown_topic(name)
        new = plan_partitions(name, len(topic.partitions), topic.replication_factor, count, assignments,
                              self._context.live_brokers)
        self._check_budgets(new, self._context.hosted_replicas())
        return new

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None, *,
                                validate_only: bool = False, wait_for_brokers: bool = True,
                                timeout_ms: int | None = None) -> None:
        """Grow ``name`` to ``count`` partitions (Kafka never shrinks a topic); raises KafkaError."""
        self._events.require_active()
        async with self._events.lock:
            new = self.plan_partitions(name, count, assignments)
            if validate_only:
                return
            added = {index: self._partitions.new_partition(replicas) for index, replicas in new.items()}
            await self._persist(self._store.set_partitions(name, added))
            topic = self._context.set_partitions(name, added)
            propagated = self._partitions.announce_new_partitions([], [(topic, i) for i in new]).all()
            self.log.info("Topic {topic} grew to {count} partitions", topic=name, count=count)
        if wait_for_brokers and not await self._requests.confirmed_within(propagated, timeout_ms):
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                             f"The partitions of '{name}' were created, but their metadata did not reach every "
                             f"broker{in_time(timeout_ms)}")

    # -- a cluster: what the controller's watches saw in ZooKeeper ------------------------------------

    async def topics_changed(self) -> None:
        """``/brokers/topics`` changed (Kafka's ``processTopicChange``): a broker created topics."""
        context = self._context
        names = await self._store.topic_names()
        new = sorted(n for n in names if n not in context.topics)
        for gone in [n for n in context.topics if n not in names]:
            context.topics.pop(gone, None)
            context.deleting.pop(gone, None)
        if not new:
            return
        loaded = await self._store.load_topics(new)
        for name, record in loaded.items():
            context.topics[name] = record
            warn_deprecated_topic_configs(name, record.configs)
        self.log.info("New topic(s) {topics}", topics=", ".join(loaded))
        await self._partitions.trigger_online_partition_state_change(loaded)

    async def topic_changed(self, name: str) -> None:
        """``/brokers/topics/<name>`` changed (Kafka's ``processPartitionModifications``): new partitions."""
        context = self._context
        topic = context.topics.get(name)
        if topic is None:
            return
        loaded = (await self._store.load_topics([name])).get(name)
        if loaded is None:
            return
        added = {i: r for i, r in loaded.partitions.items() if i not in topic.partitions}
        if not added:
            return
        if name in context.deleting:
            self.log.warn("Not adding partitions {partitions} to topic {topic}: it is being deleted",
                          partitions=sorted(added), topic=name)
            return
        context.topics[name] = topic.with_partitions(added)
        self.log.info("Topic {topic} has new partitions {partitions}", topic=name, partitions=sorted(added))
        await self._partitions.trigger_online_partition_state_change(
            {name: replace(context.topics[name], partitions=added)})


__all__ = ["TopicCreationManager"]

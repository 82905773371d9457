"""TopicDeletionManager: topics are deleted once every replica has deleted its log (Kafka's class of that name).

Two ways in, as in Kafka:

* a single node deletes at once (``delete_topics``, from this broker's
  admin): the topic leaves the store, every broker forgets it
  (UpdateMetadata with ``LEADER_DURING_DELETE``) and every replica deletes
  its log (StopReplica with ``delete_partition``);
* in a cluster, a broker queues the deletion in ZooKeeper
  (``/admin/delete_topics``) and the controller's watch calls
  ``deletions_requested``: every broker forgets the topic, every replica is
  told to delete its log, and the topic leaves the store only once each
  replica -- those of brokers down now included, when they come back
  (``resume_for``) -- has confirmed it.  Until then the topic is in the
  ``ControllerContext``'s ``deleting``: it gets no leader, no new partition,
  no reassignment.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

from twisted.logger import Logger

from twisted_kafka.protocol.errors import ErrorCode

from .admin_rules import refused_deletions, unknown_deletion
from .broker_request_batch import ControllerBrokerRequestBatch, Sent, in_time
from .context import LOG_NAMESPACE, ControllerContext
from .event_manager import ControllerEventManager
from .interface import TopicResult
from .metadata_store import ClusterMetadataStore, TopicRecord


class TopicDeletionManager:
    log = Logger(namespace=LOG_NAMESPACE)

    def __init__(self, *, config, context: ControllerContext, store: ClusterMetadataStore,
                 persist: Callable[[Awaitable], Awaitable[None]], requests: ControllerBrokerRequestBatch,
                 events: ControllerEventManager):
        self.config = config
        self._context = context
        self._store = store
        self._persist = persist
        self._requests = requests
        self._events = events

    async def delete_topics(self, names: list[str], *, wait_for_brokers: bool = True,
                            timeout_ms: int | None = None) -> dict[str, TopicResult]:
        """A single node's deletion: replicas stop and delete their logs, and the topic is forgotten.
        One result per distinct name (with the deleted topic's id); waiting works as for ``create_topics``."""
        self._events.require_active()
        refused = refused_deletions(self.config, names)
        if refused is not None:
            return refused
        context = self._context
        async with self._events.lock:
            results: dict[str, TopicResult] = {}
            doomed: list[TopicRecord] = []
            for name in names:
                if name in results:
                    continue
                topic = context.topics.get(name)
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
                del context.topics[topic.name]
            propagated = Sent.combine(
                self._requests.send_update_metadata(context.live_brokers, partitions, deleting=True),
                self._requests.send_stop_replica(partitions, delete=True)).all()
            self.log.info("Deleted topic(s) {topics}", topics=", ".join(t.name for t in doomed))
        if wait_for_brokers and not await self._requests.confirmed_within(propagated, timeout_ms):
            for topic in doomed:
                result = results[topic.name]
                result.error = ErrorCode.REQUEST_TIMED_OUT
                result.message = (f"Topic '{topic.name}' was deleted, but not every broker confirmed it"
                                  f"{in_time(timeout_ms)}")
        return results

    async def deletions_requested(self) -> None:
        """``/admin/delete_topics`` changed (Kafka's ``processTopicDeletion``)."""
        queued = await self._store.topics_queued_for_deletion()
        unknown = [t for t in queued if t not in self._context.topics]
        if unknown:
            self.log.warn("Ignoring deletion of topics that do not exist: {topics}", topics=", ".join(unknown))
            await self._persist(self._store.cancel_deletions(unknown))
        wanted = [t for t in queued if t in self._context.topics]
        if not self.config["delete.topic.enable"]:
            if wanted:
                self.log.warn("Topic deletion is disabled (delete.topic.enable): not deleting {topics}",
                              topics=", ".join(wanted))
                await self._persist(self._store.cancel_deletions(wanted))
            return
        await self.start_deletions([t for t in wanted if t not in self._context.deleting])

    async def start_deletions(self, names: list[str]) -> None:
        """Every broker forgets the topics, every replica deletes its log; the topic leaves the store once
        every replica -- including those of brokers down now -- has."""
        context = self._context
        names = [n for n in names if n in context.topics and n not in context.deleting]
        if not names:
            return
        partitions = []
        for name in names:
            topic = context.topics[name]
            context.deleting[name] = {b for r in topic.partitions.values() for b in r.replicas}
            partitions += [(topic, i) for i in topic.partitions]
        self._requests.send_update_metadata(context.live_brokers, partitions, deleting=True)
        self.log.info("Deleting topic(s) {topics}", topics=", ".join(names))
        for name in names:
            topic = context.topics[name]
            self._stop_replicas_of_deleted(name, [(topic, i) for i in topic.partitions])
        for name in names:
            if not context.deleting.get(name):
                await self._complete_deletion(name)

    def resume_for(self, started: list[int]) -> None:
        """Brokers ``started`` came back: their replicas of topics being deleted delete their logs now."""
        for name in list(self._context.deleting):
            topic = self._context.topics[name]
            doomed = [(topic, i) for i, r in topic.partitions.items() if any(b in started for b in r.replicas)]
            if doomed:
                self._stop_replicas_of_deleted(name, doomed, only=started)

    def _stop_replicas_of_deleted(self, name: str, partitions: list[tuple[TopicRecord, int]],
                                  only: Iterable[int] | None = None) -> None:
        sent = self._requests.send_stop_replica(partitions, delete=True, only=only)
        for broker_id in sent.brokers:
            d = sent.response(broker_id)
            d.addCallback(self._replica_deleted, name, broker_id)
            d.addErrback(lambda f: None)    # retried when the broker comes back

    def _replica_deleted(self, response, name: str, broker_id: int) -> None:
        if response.error_code or not self._events.active:
            return
        pending = self._context.deleting.get(name)
        if pending is None:
            return
        pending.discard(broker_id)
        if not pending:
            self._events.run(self._complete_deletion, name)

    async def _complete_deletion(self, name: str) -> None:
        context = self._context
        if context.deleting.get(name) or name not in context.deleting:
            return
        await self._persist(self._store.delete_topics([name]))
        context.topics.pop(name, None)
        context.deleting.pop(name, None)
        self.log.info("Deleted topic {topic}", topic=name)


__all__ = ["TopicDeletionManager"]

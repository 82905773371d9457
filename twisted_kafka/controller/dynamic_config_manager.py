"""DynamicConfigManager: topic config overrides and dynamic broker configs reach every broker.

In Kafka's ZooKeeper mode each broker reads ``/config/topics/<t>`` and
``/config/brokers/<id|<default>>`` itself when a notification appears under
``/config/changes`` (its ``DynamicConfigManager``).  Here the controller
stores them and sends them to brokers in UpdateMetadata (this project's
tagged fields), so a single node and a cluster apply them the same way:

* a single node changes them itself (``alter_topic_configs``,
  ``alter_broker_configs``, from this broker's admin), and every broker has
  applied them when the call returns;
* in a cluster a broker writes them to ZooKeeper with a change
  notification, and the controller's watch calls ``config_changed``.

A topic that now allows unclean leader election gets its offline
partitions a leader at once (Kafka's ``processTopicUncleanLeaderElectionEnable``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from twisted.logger import Logger

from twisted_kafka.config.topic import warn_deprecated_topic_configs

from .admin_rules import check_topic_config_change
from .broker_request_batch import ControllerBrokerRequestBatch, Sent
from .context import LOG_NAMESPACE, ControllerContext
from .event_manager import ControllerEventManager
from .metadata_store import ClusterMetadataStore, TopicRecord
from .partition_state_machine import PartitionStateMachine


class DynamicConfigManager:
    log = Logger(namespace=LOG_NAMESPACE)

    def __init__(self, *, context: ControllerContext, store: ClusterMetadataStore,
                 persist: Callable[[Awaitable], Awaitable[None]], requests: ControllerBrokerRequestBatch,
                 partitions: PartitionStateMachine, events: ControllerEventManager):
        self._context = context
        self._store = store
        self._persist = persist
        self._requests = requests
        self._partitions = partitions
        self._events = events

    async def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        """Replace a topic's overrides (as ZooKeeper's /config/topics/<name> is replaced); every broker has
        applied them when this returns."""
        self._events.require_active()
        async with self._events.lock:
            check_topic_config_change(name, name in self._context.topics, configs)
            if validate_only:
                return
            warn_deprecated_topic_configs(name, configs)
            await self._persist(self._store.set_topic_configs(name, configs))
            propagated = self._topic_configs_changed(self._context.topics[name], configs).all()
        await propagated

    def _topic_configs_changed(self, topic: TopicRecord, configs: Mapping[str, str]) -> Sent:
        topic = self._context.topics[topic.name] = topic.with_configs(configs)
        return self._requests.send_topic_configs(self._context.live_brokers, [topic])

    async def alter_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of ``entity`` (ZooKeeper's /config/brokers/<id|<default>>).

        The caller has validated them; this persists them and tells the
        brokers they apply to (all for the cluster default, else that one),
        which have applied them when this returns.
        """
        self._events.require_active()
        async with self._events.lock:
            await self._persist(self._store.set_broker_configs(entity, configs))
            propagated = self._broker_configs_changed(entity, configs).all()
        await propagated

    def _broker_configs_changed(self, entity: str, configs: Mapping[str, str]) -> Sent:
        if configs:
            self._context.broker_configs[entity] = dict(configs)
        else:
            self._context.broker_configs.pop(entity, None)
        self.log.info("Dynamic configs of broker {entity} are now {keys}",
                      entity=entity or "<default>", keys=", ".join(sorted(configs)) or "none")
        targets = [b for b in self._context.live_brokers if entity == "" or str(b) == entity]
        return self._requests.send_update_metadata(targets, [], dynamic_broker_configs=True)

    async def config_changed(self, entity_type: str, entity: str) -> None:
        """A config change notification (``/config/changes``): ``entity_type`` "topics" (a topic name) or
        "brokers" (a broker id, or "" for the cluster default)."""
        if entity_type == "topics":
            topic = self._context.topics.get(entity)
            if topic is None:
                return
            configs = await self._store.topic_configs(entity)
            if configs == dict(topic.configs):
                return
            was_unclean = self._partitions.unclean_allowed(entity)
            warn_deprecated_topic_configs(entity, configs)
            self._topic_configs_changed(topic, configs)
            self.log.info("Configs of topic {topic} are now {keys}", topic=entity,
                          keys=", ".join(sorted(configs)) or "none")
            if self._partitions.unclean_allowed(entity) and not was_unclean:
                # Kafka's processTopicUncleanLeaderElectionEnable: offline partitions may now get a leader.
                await self._partitions.trigger_online_partition_state_change({entity: self._context.topics[entity]})
        elif entity_type == "brokers":
            configs = await self._store.broker_configs(entity)
            if configs == dict(self._context.broker_configs.get(entity, {})):
                return
            self._broker_configs_changed(entity, configs)


__all__ = ["DynamicConfigManager"]

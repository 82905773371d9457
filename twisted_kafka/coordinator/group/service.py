"""The group coordinator as one of the broker's services.

``GroupCoordinatorService`` ties the coordinator to the broker:

* it listens to the ``ReplicaManager`` for ``__consumer_offsets`` partitions
  this broker starts or stops leading (the narrow leadership-listener
  interface the replica manager offers), and loads or unloads their groups;
* it drops the committed offsets of deleted topics;
* it looks for expired offsets every ``offsets.retention.check.interval.ms``;
* it creates ``__consumer_offsets`` when a client first looks for a
  coordinator (``ensure_offsets_topic``): ``offsets.topic.num.partitions``
  partitions, replication factor ``offsets.topic.replication.factor`` capped
  at the brokers alive, compacted, with ``offsets.topic.segment.bytes``
  segments -- through the ``AdminManager`` and the controller, like any topic.

It starts before the controller sends its first LeaderAndIsr (so no offsets
partition's election is missed) and stops after the network is closed.  Its
coordinator shuts down earlier, when the broker starts draining requests
(``BrokerLifecycleManager``): members waiting in JoinGroup or SyncGroup are
answered then, while their connections are still open.
"""

from __future__ import annotations

from twisted.application.service import Service
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from twisted_kafka.controller.interface import NewTopic
from twisted_kafka.protocol.errors import ErrorCode

from .config import ConsumerGroupConfig, GroupConfig, OffsetConfig
from .consumer_coordinator import TopicInfo
from .coordinator import GroupCoordinator
from .internal_topic import InternalTopic
from .loader import read_partition
from .topic import OFFSETS_TOPIC, offsets_topic_configs
from .writer import CoordinatorWriter

log = Logger(namespace="twisted_kafka.coordinator.group.GroupCoordinatorService")


class GroupCoordinatorService(Service):
    def __init__(self, *, config, replica_manager, admin_manager, metadata_cache, reactor, broker_id: int):
        self.group_config = GroupConfig.from_broker_config(config)
        self.offset_config = OffsetConfig.from_broker_config(config)
        self.metadata_cache = metadata_cache
        self.admin_manager = admin_manager
        self.reactor = reactor
        writer = CoordinatorWriter(replica_manager, clock=reactor, timeout_ms=self.offset_config.commit_timeout_ms,
                                   compression=self.offset_config.topic_compression)
        self.consumer_config = ConsumerGroupConfig.from_broker_config(config)
        self.coordinator = GroupCoordinator(group_config=self.group_config, offset_config=self.offset_config,
                                            writer=writer, clock=reactor, broker_id=broker_id,
                                            consumer_config=self.consumer_config, topics=self._topics)
        replica_manager.add_leadership_listener(self)
        admin_manager.register_internal_topic(OFFSETS_TOPIC, self.offsets_topic_spec)
        self._expiration: LoopingCall | None = None
        self._offsets_topic = InternalTopic(OFFSETS_TOPIC, spec=self.offsets_topic_spec,
                                            exists=self.offsets_topic_exists, admin_manager=admin_manager,
                                            timeout_ms=self.offset_config.commit_timeout_ms)

    # -- Service -------------------------------------------------------------------------------

    def startService(self) -> None:
        super().startService()
        self.coordinator.startup()
        loop = self._expiration = LoopingCall(self._expire_offsets)
        loop.clock = self.reactor
        loop.start(self.offset_config.retention_check_interval_ms / 1000.0, now=False).addErrback(
            lambda f: log.failure("The offset expiration task stopped", f))

    def stopService(self) -> None:
        super().stopService()
        if self._expiration is not None and self._expiration.running:
            self._expiration.stop()
        self.coordinator.shutdown()

    def _expire_offsets(self) -> None:
        try:
            self.coordinator.cleanup_expired_offsets()
        except Exception:
            log.failure("Looking for expired offsets failed")

    # -- the ReplicaManager's leadership listener ------------------------------------------------

    def on_leader(self, partition) -> None:
        if partition.topic != OFFSETS_TOPIC:
            return
        self._follow_partition_count()
        partition_log = partition.log
        buffer_size = self.offset_config.load_buffer_size
        self.coordinator.on_election(
            partition.index, partition.leader_epoch,
            lambda: ensureDeferred(read_partition(partition_log, buffer_size)))

    def on_follower(self, partition) -> None:
        if partition.topic == OFFSETS_TOPIC:
            self.coordinator.on_resignation(partition.index, partition.leader_epoch)

    def on_stopped(self, topic: str, index: int, deleted: bool) -> None:
        if topic == OFFSETS_TOPIC:
            self.coordinator.on_resignation(index, None)
        elif deleted:
            self.coordinator.on_partitions_deleted([(topic, index)])

    def _topics(self) -> dict[str, TopicInfo]:
        """The topics consumer-protocol groups may subscribe to: every topic but the internal ones, with
        the racks of each partition's replicas (for rack-aware assignment)."""
        cache = self.metadata_cache
        racks = {broker_id: b.rack for broker_id, b in cache.brokers.items() if b.rack}
        return {name: TopicInfo(topic.topic_id, len(topic.partitions),
                                {index: frozenset(racks[r] for r in state.replicas if r in racks)
                                 for index, state in topic.partitions.items()} if racks else {})
                for name, topic in cache.topics.items() if not topic.is_internal}

    # -- the offsets topic --------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return self.coordinator.partition_for(group_id)

    def offsets_topic_exists(self) -> bool:
        return OFFSETS_TOPIC in self.metadata_cache.topics

    def _follow_partition_count(self) -> None:
        """Groups map to the partitions the offsets topic has, as in Kafka: once created, its
        partition count wins over a changed ``offsets.topic.num.partitions``."""
        topic = self.metadata_cache.topics.get(OFFSETS_TOPIC)
        if topic is not None and topic.partitions and len(topic.partitions) != self.coordinator.manager.num_partitions:
            log.warn("{topic} has {n} partitions (offsets.topic.num.partitions is {configured}); groups follow the "
                     "topic", topic=OFFSETS_TOPIC, n=len(topic.partitions),
                     configured=self.offset_config.topic_num_partitions)
            self.coordinator.manager.num_partitions = len(topic.partitions)

    def offsets_topic_spec(self) -> NewTopic:
        """``__consumer_offsets`` as it is created: ``offsets.topic.num.partitions``, replication factor
        ``offsets.topic.replication.factor`` capped at the brokers alive, compacted."""
        alive = max(1, len(self.metadata_cache.brokers))
        factor = min(self.offset_config.topic_replication_factor, alive)
        return NewTopic(OFFSETS_TOPIC, self.offset_config.topic_num_partitions, factor,
                        configs=dict(offsets_topic_configs(self.offset_config.topic_segment_bytes)))

    async def ensure_offsets_topic(self) -> ErrorCode:
        """Create ``__consumer_offsets`` unless it exists; NONE once it does (concurrent callers
        share one creation)."""
        return await self._offsets_topic.ensure()



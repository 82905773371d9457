"""The transaction coordinator as one of the broker's services.

``TransactionCoordinatorService`` ties the coordinator to the broker, as
``GroupCoordinatorService`` does for groups:

* it listens to the ``ReplicaManager`` for ``__transaction_state``
  partitions this broker starts or stops leading, and loads or unloads their
  transactional ids (the partition's leader epoch is the coordinator epoch);
* it aborts transactions past their timeout every
  ``transaction.abort.timed.out.transaction.cleanup.interval.ms`` and removes
  expired transactional ids every
  ``transaction.remove.expired.transaction.cleanup.interval.ms``;
* it creates ``__transaction_state`` when a client first looks for a
  transaction coordinator (``ensure_topic``):
  ``transaction.state.log.num.partitions`` partitions, replication factor
  ``transaction.state.log.replication.factor`` capped at the brokers alive,
  ``min.insync.replicas`` = ``transaction.state.log.min.isr`` capped at that
  replication factor (Kafka does not cap it: a single broker with the default
  2 could never write), compacted, with ``transaction.state.log.segment.bytes``
  segments.
"""

from __future__ import annotations

from twisted.application.service import Service
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from twisted_kafka.controller.interface import NewTopic
from twisted_kafka.coordinator.group.internal_topic import InternalTopic
from twisted_kafka.coordinator.group.loader import batches_of
from twisted_kafka.coordinator.group.writer import CoordinatorWriter
from twisted_kafka.log import FetchIsolation, PartitionLog
from twisted_kafka.protocol.errors import ErrorCode

from .coordinator import TransactionConfig, TransactionCoordinator
from .log_records import TransactionLogValue, decode_key, decode_value
from .marker_writer import TxnMarkerWriter
from .markers import TxnMarkerChannel

log = Logger(namespace="twisted_kafka.coordinator.transaction.TransactionCoordinatorService")

TRANSACTION_STATE_TOPIC = "__transaction_state"


async def read_transaction_log(partition_log: PartitionLog, load_buffer_size: int) -> dict[str, TransactionLogValue]:
    """Replay a ``__transaction_state`` partition: the last value of each transactional id (a
    tombstone removes it; records of unknown key versions are skipped)."""
    values: dict[str, TransactionLogValue] = {}
    offset = partition_log.log_start_offset
    end = partition_log.log_end_offset
    while offset < end:
        info = await partition_log.read(offset, load_buffer_size, isolation=FetchIsolation.LOG_END, max_offset=end,
                                        min_one_message=True)
        if not info.records:
            break
        next_offset = offset
        for header, records in batches_of(info.records):
            next_offset = header.next_offset
            if header.is_control:
                continue
            for record in records:
                if record.key is None:
                    continue
                tid = decode_key(record.key)
                if tid is None:
                    continue
                if record.value is None:
                    values.pop(tid, None)
                else:
                    values[tid] = decode_value(record.value)
        if next_offset <= offset:
            break
        offset = next_offset
    return values


class TransactionCoordinatorService(Service):
    def __init__(self, *, config, replica_manager, admin_manager, metadata_cache, producer_ids, group_coordinator,
                 sender, reactor, broker_id: int):
        self.config = TransactionConfig.from_broker_config(config)
        self.metadata_cache = metadata_cache
        self.admin_manager = admin_manager
        self.reactor = reactor
        writer = CoordinatorWriter(replica_manager, clock=reactor, timeout_ms=self.config.request_timeout_ms,
                                   topic=TRANSACTION_STATE_TOPIC)
        self.marker_writer = TxnMarkerWriter(replica_manager, group_coordinator, clock=reactor,
                                             timeout_ms=self.config.request_timeout_ms)
        markers = TxnMarkerChannel(broker_id=broker_id, metadata_cache=metadata_cache, local=self.marker_writer,
                                   sender=sender, clock=reactor, timeout_ms=self.config.request_timeout_ms)
        self.coordinator = TransactionCoordinator(config=self.config, writer=writer, producer_ids=producer_ids,
                                                  markers=markers, clock=reactor, broker_id=broker_id)
        replica_manager.add_leadership_listener(self)
        admin_manager.register_internal_topic(TRANSACTION_STATE_TOPIC, self.topic_spec)
        self._loops: list[LoopingCall] = []
        self._topic = InternalTopic(TRANSACTION_STATE_TOPIC, spec=self.topic_spec, exists=self.topic_exists,
                                    admin_manager=admin_manager, timeout_ms=self.config.request_timeout_ms)

    def startService(self) -> None:
        super().startService()
        self.coordinator.startup()
        for interval_ms, task, what in (
                (self.config.abort_interval_ms, self.coordinator.abort_timed_out_transactions,
                 "aborting timed-out transactions"),
                (self.config.remove_expired_interval_ms, self.coordinator.remove_expired_transactional_ids,
                 "removing expired transactional ids")):
            loop = LoopingCall(_guarded, task, what)
            loop.clock = self.reactor
            loop.start(interval_ms / 1000.0, now=False).addErrback(_stopped, what)
            self._loops.append(loop)

    def stopService(self) -> None:
        super().stopService()
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops.clear()
        self.coordinator.shutdown()

    # -- the ReplicaManager's leadership listener ------------------------------------------------

    def on_leader(self, partition) -> None:
        if partition.topic != TRANSACTION_STATE_TOPIC:
            return
        topic = self.metadata_cache.topics.get(TRANSACTION_STATE_TOPIC)
        if topic is not None and topic.partitions and len(topic.partitions) != self.coordinator.num_partitions:
            self.coordinator.num_partitions = len(topic.partitions)      # the topic wins, as in Kafka
        partition_log = partition.log
        buffer_size = self.config.load_buffer_size
        self.coordinator.on_election(partition.index, partition.leader_epoch,
                                     lambda: ensureDeferred(read_transaction_log(partition_log, buffer_size)))

    def on_follower(self, partition) -> None:
        if partition.topic == TRANSACTION_STATE_TOPIC:
            self.coordinator.on_resignation(partition.index, partition.leader_epoch)

    def on_stopped(self, topic: str, index: int, deleted: bool) -> None:
        if topic == TRANSACTION_STATE_TOPIC:
            self.coordinator.on_resignation(index, None)

    # -- the topic ------------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return self.coordinator.partition_for(transactional_id)

    def topic_exists(self) -> bool:
        return TRANSACTION_STATE_TOPIC in self.metadata_cache.topics

    def topic_spec(self) -> NewTopic:
        alive = max(1, len(self.metadata_cache.brokers))
        factor = min(self.config.replication_factor, alive)
        return NewTopic(TRANSACTION_STATE_TOPIC, self.config.num_partitions, factor, configs={
            "cleanup.policy": "compact", "segment.bytes": str(self.config.segment_bytes),
            "min.insync.replicas": str(min(self.config.min_isr, factor)),
            "unclean.leader.election.enable": "false"})

    async def ensure_topic(self) -> ErrorCode:
        """Create ``__transaction_state`` unless it exists; NONE once it does (callers share one creation)."""
        return await self._topic.ensure()


def _stopped(failure, what: str) -> None:
    log.failure("The task {what} stopped", failure, what=what)


def _guarded(task, what: str) -> None:
    try:
        task()
    except Exception:
        log.failure("{what} failed", what=what)




__all__ = ["TRANSACTION_STATE_TOPIC", "TransactionCoordinatorService", "read_transaction_log"]

"""IsrManager: a leader's in-sync replica set, changed through the controller (AlterPartition, KIP-497).

Kafka's ``Partition.maybeShrinkIsr`` / ``maybeExpandIsr`` and its
AlterPartition manager:

* **shrink** -- every ``replica.lag.time.max.ms`` / 2 (Kafka's
  isr-expiration task) each led partition drops the followers that have not
  caught up to its log end for longer than ``replica.lag.time.max.ms``
  (a paused or dead follower, or one that cannot keep up);
* **expand** -- a follower outside the ISR whose fetch reaches the high
  watermark (and the start of the current leader epoch) joins it.

A change is sent to the controller with the leader epoch and partition
epoch the leader knows; until the controller answers, the change is
pending and the high watermark counts the larger of the two ISRs
(``Partition.maximal_isr``), so no record is acknowledged on the strength
of a replica the controller may refuse.  An accepted change becomes the
partition's ISR and partition epoch; a refused one (a newer leader epoch
or partition epoch, a moving controller) is dropped, and tried again at
the next check no sooner than ``RETRY_SECONDS`` later, as is one not
answered within ``request.timeout.ms``.

It is a child service of the ``ReplicaManager``, which builds it in a
cluster: starting it starts the periodic shrink check; stopping it (when the
broker drains its requests) ends that check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.application.service import Service
from twisted.internet.defer import ensureDeferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from twisted_kafka.controller.client import ControllerClient
from twisted_kafka.controller.interface import IsrChange
from twisted_kafka.metrics.registry import MetricName
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .broker_epoch import BrokerEpoch
from .partition import Partition

if TYPE_CHECKING:
    from .replica_manager import ReplicaManager

#: After a refused or failed AlterPartition, the partition's ISR is not changed again for this long.
RETRY_SECONDS = 0.5


class IsrManager(Service):
    name = "isr-manager"
    log = Logger(namespace="twisted_kafka.server.IsrManager")

    def __init__(self, *, broker_id: int, broker_epoch: BrokerEpoch, config, reactor,
                 controller: ControllerClient, replica_manager: ReplicaManager, metrics=None):
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.config = config
        self.reactor = reactor
        self.controller = controller
        self.replicas = replica_manager
        self._retry_after: dict[tuple[str, int], float] = {}
        self._task: LoopingCall | None = None
        self._shrinks = self._expands = None
        if metrics is not None:
            # Kafka's kafka.server:type=ReplicaManager meters.
            self._shrinks = metrics.meter(MetricName("kafka.server", "ReplicaManager", "IsrShrinksPerSec"))
            self._expands = metrics.meter(MetricName("kafka.server", "ReplicaManager", "IsrExpandsPerSec"))

    @property
    def max_lag_ms(self) -> int:
        return self.config["replica.lag.time.max.ms"]

    def startService(self) -> None:
        super().startService()
        self._task = LoopingCall(self.shrink_all)
        self._task.clock = self.reactor
        self._task.start(self.max_lag_ms / 2000.0, now=False)

    def stopService(self) -> None:
        super().stopService()
        if self._task is not None and self._task.running:
            self._task.stop()
        self._task = None

    # -- shrink and expand ---------------------------------------------------------------

    def shrink_all(self) -> None:
        now_ms = int(self.reactor.seconds() * 1000)
        for partition in list(self.replicas.partitions.values()):
            if not partition.is_leader or not partition.followers or not self._may_change(partition):
                continue
            lagging = partition.out_of_sync_replicas(now_ms, self.max_lag_ms)
            if lagging:
                new_isr = [b for b in partition.isr if b not in lagging]
                self.log.info("Shrinking the ISR of {topic}-{partition} from {isr} to {new_isr}: {lagging} not "
                              "caught up within replica.lag.time.max.ms={lag}", topic=partition.topic,
                              partition=partition.index, isr=partition.isr, new_isr=new_isr, lagging=lagging,
                              lag=self.max_lag_ms)
                self._alter(partition, new_isr)

    def follower_fetched(self, partition: Partition, replica_id: int) -> None:
        if replica_id in partition.isr or replica_id not in partition.replicas or not self._may_change(partition):
            return
        if partition.is_caught_up(replica_id):
            new_isr = [b for b in partition.replicas if b in partition.isr or b == replica_id]
            self.log.info("Expanding the ISR of {topic}-{partition} from {isr} to {new_isr}: broker {replica} "
                          "caught up", topic=partition.topic, partition=partition.index, isr=partition.isr,
                          new_isr=new_isr, replica=replica_id)
            self._alter(partition, new_isr)

    def _may_change(self, partition: Partition) -> bool:
        if partition.pending_isr is not None:
            return False
        return self._retry_after.get((partition.topic, partition.index), 0.0) <= self.reactor.seconds()

    # -- the AlterPartition round ---------------------------------------------------------

    def _alter(self, partition: Partition, new_isr: list[int]) -> None:
        partition.pending_isr = list(new_isr)
        change = IsrChange(partition.leader_epoch, partition.partition_epoch, tuple(new_isr))
        d = ensureDeferred(self._send(partition, partition.leader_epoch, change))
        d.addErrback(lambda f: self.log.failure("AlterPartition for {topic}-{partition} failed", f,
                                                topic=partition.topic, partition=partition.index))

    async def _send(self, partition: Partition, leader_epoch: int, change: IsrChange) -> None:
        key = (partition.topic, partition.index)
        try:
            sent = ensureDeferred(self.controller.alter_partition(self.broker_id, self.broker_epoch.current,
                                                                   {key: change}))
            # Never pending for ever: the next check tries again (request.timeout.ms).
            sent.addTimeout(self.config["request.timeout.ms"] / 1000.0, self.reactor)
            results = await sent
            result = results.get(key)
            error = result.error if result is not None else ErrorCode.UNKNOWN_SERVER_ERROR
        except KafkaError as exc:
            result, error = None, exc.code
        except Exception as exc:       # a lost connection, a timeout
            self.log.warn("AlterPartition for {topic}-{partition} failed: {error}", topic=partition.topic,
                          partition=partition.index, error=exc)
            result, error = None, ErrorCode.UNKNOWN_SERVER_ERROR
        if partition.leader_epoch != leader_epoch or not partition.is_leader:
            return            # a LeaderAndIsr replaced this leadership meanwhile: its state stands
        partition.pending_isr = None
        if error == ErrorCode.NONE and result is not None:
            if result.leader_epoch == partition.leader_epoch and result.partition_epoch >= partition.partition_epoch:
                meter = self._shrinks if len(result.isr) < len(partition.isr) else self._expands
                if meter is not None and len(result.isr) != len(partition.isr):
                    meter.mark()
                partition.isr = list(result.isr)
                partition.partition_epoch = result.partition_epoch
                self.log.info("The ISR of {topic}-{partition} is now {isr} (partition epoch {epoch})",
                              topic=partition.topic, partition=partition.index, isr=partition.isr,
                              epoch=partition.partition_epoch)
            self.replicas.isr_changed(partition)
            return
        self._retry_after[key] = self.reactor.seconds() + RETRY_SECONDS
        self.log.info("AlterPartition for {topic}-{partition} ({isr}) refused: {error}", topic=partition.topic,
                      partition=partition.index, isr=list(change.isr), error=ErrorCode(error).name)
        self.replicas.isr_changed(partition)


__all__ = ["IsrManager", "RETRY_SECONDS"]

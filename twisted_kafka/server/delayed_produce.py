"""DelayedProduce: an acks=all append waiting for the ISR to have its records (Kafka's ``DelayedProduce``).

A Produce with acks=all is answered once every in-sync replica has the
records, i.e. once the partition's high watermark passes the append's last
offset.  If by then the ISR has fewer members than ``min.insync.replicas``
the answer is NOT_ENOUGH_REPLICAS_AFTER_APPEND: the records are written,
but not as durably as asked.  If the request's ``timeout_ms`` passes first,
the answer is REQUEST_TIMED_OUT (after one last look: the replicas may have
caught up in the same instant); if the broker stops leading the partition
(even if it leads it again since: its log may have been truncated
meanwhile), NOT_LEADER_OR_FOLLOWER; a new leader epoch with this broker
still the leader (the controller took a failed follower out of the ISR)
keeps the wait.  When the broker shuts the produce purgatory (it is
draining), a waiting append is answered NOT_LEADER_OR_FOLLOWER: the
producer retries where the partition's leadership went.

Each append waits in the produce purgatory (``twisted_kafka.purgatory``)
watching its partition; the replica manager checks the partition's watchers
when its high watermark, ISR or leadership changes.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred

from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.purgatory import DelayedOperation

from .partition import Partition

_WAITING = object()       # the condition does not hold yet
_UNDECIDED = object()     # no outcome decided before completion (the timeout)


class DelayedProduce(DelayedOperation):
    """One acks=all append; ``deferred`` fires with ``result`` (the ``LogAppendInfo``) or a ``KafkaError``."""

    def __init__(self, partition: Partition, required_offset: int, result, timeout_ms: int):
        super().__init__(timeout_ms)
        self.partition = partition
        self.generation = partition.follower_generation
        self.required_offset = required_offset    # the high watermark that covers the append
        self.result = result
        self.deferred: Deferred = Deferred()
        self._outcome: object = _UNDECIDED         # None: success; a KafkaError: the failure

    @property
    def key(self) -> tuple[str, int]:
        return (self.partition.topic, self.partition.index)

    def _status(self) -> object:
        """None (the replicas have it), a ``KafkaError``, or ``_WAITING``."""
        partition = self.partition
        if not partition.is_leader or partition.follower_generation != self.generation or partition.log.deleted:
            return KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                              f"Leadership of {partition.topic}-{partition.index} changed before the in-sync "
                              f"replicas had the records")
        if partition.high_watermark < self.required_offset:
            return _WAITING
        min_isr = partition.log.config.min_insync_replicas
        if len(partition.isr) < min_isr:
            return KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
                              f"The size of the current ISR {partition.isr} is insufficient to satisfy the min.isr "
                              f"requirement of {min_isr} for partition {partition.topic}-{partition.index}")
        return None

    def try_complete(self) -> bool:
        status = self._status()
        if status is _WAITING:
            return False
        self._outcome = status
        return self.force_complete()

    def on_shutdown(self) -> None:
        self._outcome = KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER, "The broker is shutting down")
        self.force_complete()

    def on_complete(self) -> None:
        outcome = self._outcome
        if outcome is _UNDECIDED:                 # the timeout: one last look
            outcome = self._status()
            if outcome is _WAITING:
                partition = self.partition
                outcome = KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                                     f"The in-sync replicas of {partition.topic}-{partition.index} did not have "
                                     f"offset {self.required_offset - 1} within the request timeout")
        if isinstance(outcome, KafkaError):
            self.deferred.errback(outcome)
        else:
            self.deferred.callback(self.result)


__all__ = ["DelayedProduce"]

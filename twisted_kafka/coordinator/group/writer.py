"""Appending the coordinator's records to ``__consumer_offsets`` (Kafka's ``CoordinatorPartitionWriter``).

The coordinator writes through the same path as a producer with acks=all:
``ReplicaManager.append`` on the partition's leader, as the COORDINATOR
origin (the stored-data checks, no client rules), and the Deferred it gets
back fires only once the batch is in the log as acks=all requires -- the
partition's in-sync replicas have it and, when the topic's flush policy asks
for it, it is fsynced.  Only then does the coordinator answer the commit:
an acknowledged commit is in the log, so a restart or a ``kill -9`` replays
it.

A write that has not completed within ``offsets.commit.timeout.ms`` fails
with REQUEST_TIMED_OUT (the append itself may still land, as in Kafka).
The errors are the log's ``KafkaError`` codes; the coordinator maps them to
what group clients understand.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

from twisted_kafka.log import AppendOrigin
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.records.builder import build_batch

from .topic import OFFSETS_TOPIC


class ReplicaAppender(Protocol):
    """What the writer needs from the broker's ``ReplicaManager``."""

    def leader_partition(self, topic: str, index: int): ...

    def append(self, partition, records, produce_version: int | None, acks: int = 1, *,
               origin: AppendOrigin = AppendOrigin.CLIENT, timeout_ms: int = 30000) -> Deferred: ...


class CoordinatorWriter:
    """Writes record batches to offsets partitions this broker leads."""

    def __init__(self, replica_manager: ReplicaAppender, *, clock, timeout_ms: int, compression: int = 0,
                 topic: str = OFFSETS_TOPIC):
        self.replica_manager = replica_manager
        self.clock = clock
        self.timeout_ms = timeout_ms
        self.compression = compression
        self.topic = topic

    def append(self, partition_index: int, records: Sequence[tuple[bytes, bytes | None]],
               timestamp_ms: int, *, producer_id: int = -1, producer_epoch: int = -1) -> Deferred:
        """Append ``(key, value)`` records as one batch; fires with the batch's base offset once
        durable as acks=all requires, fails with ``KafkaError``.  With a ``producer_id`` the batch is
        transactional, part of that producer's transaction (TxnOffsetCommit), without sequence numbers."""
        result: Deferred = Deferred()
        try:
            partition = self.replica_manager.leader_partition(self.topic, partition_index)
            batch = build_batch([(key, value, None, timestamp_ms) for key, value in records],
                                compression=self.compression, producer_id=producer_id,
                                producer_epoch=producer_epoch, transactional=producer_id >= 0)
            appended = self.replica_manager.append(partition, batch, None, -1, origin=AppendOrigin.COORDINATOR,
                                                   timeout_ms=self.timeout_ms)
        except KafkaError as exc:
            result.errback(Failure(exc))
            return result
        except Exception:
            result.errback(Failure())
            return result
        if appended.called:
            appended.addBoth(self._deliver, result, None)
            return result
        timer = self.clock.callLater(self.timeout_ms / 1000.0, self._timed_out, result, partition_index)
        appended.addBoth(self._deliver, result, timer)
        return result

    @staticmethod
    def _deliver(outcome, result: Deferred, timer) -> None:
        if timer is not None and timer.active():
            timer.cancel()
        if result.called:
            return None         # timed out already; the outcome was answered as REQUEST_TIMED_OUT
        if isinstance(outcome, Failure):
            result.errback(outcome)
        else:
            result.callback(outcome.first_offset)
        return None

    def _timed_out(self, result: Deferred, partition_index: int) -> None:
        if not result.called:
            result.errback(Failure(KafkaError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"The write to {self.topic}-{partition_index} did not complete within {self.timeout_ms} ms")))

"""Writing transaction markers into the partitions this broker leads (the leader's side of WriteTxnMarkers).

For each partition the marker -- a control batch with the producer's id and
epoch and the coordinator's epoch (``protocol.records.build_end_txn_marker``)
-- is appended as the COORDINATOR origin with acks=all, so the answer says
the marker is on every in-sync replica.  The log checks it against the
producer's state (an older epoch is INVALID_PRODUCER_EPOCH, an older
coordinator epoch TRANSACTION_COORDINATOR_FENCED).  For a partition of
``__consumer_offsets`` the group coordinator then makes the transaction's
offset commits visible (COMMIT) or drops them (ABORT), as Kafka's
``onTransactionCompleted``.

The WriteTxnMarkers handler calls this for a coordinator on another broker;
the transaction coordinator calls it directly for the partitions its own
broker leads.
"""

from __future__ import annotations

from collections.abc import Iterable

from twisted.internet.defer import Deferred, DeferredList, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.coordinator.group.topic import OFFSETS_TOPIC
from twisted_kafka.log import AppendOrigin
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.records.builder import ControlRecordType
from twisted_kafka.protocol.records.control import build_end_txn_marker

log = Logger(namespace="twisted_kafka.coordinator.transaction.TxnMarkerWriter")

TopicPartition = tuple[str, int]


class TxnMarkerWriter:
    def __init__(self, replica_manager, group_coordinator, *, clock, timeout_ms: int):
        self.replica_manager = replica_manager
        self.group_coordinator = group_coordinator
        self.clock = clock
        self.timeout_ms = timeout_ms

    def write(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
              partitions: Iterable[TopicPartition]) -> Deferred:
        """Append the marker to each partition; fires with ``{partition: ErrorCode}``."""
        control = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
        now_ms = int(self.clock.seconds() * 1000)
        results: dict[TopicPartition, ErrorCode] = {}
        waits: list[Deferred] = []
        for tp in partitions:
            try:
                partition = self.replica_manager.leader_partition(*tp)
                marker = build_end_txn_marker(producer_id, producer_epoch, coordinator_epoch, control, now_ms)
                d = self.replica_manager.append(partition, marker, None, -1, origin=AppendOrigin.COORDINATOR,
                                                timeout_ms=self.timeout_ms)
            except KafkaError as exc:
                results[tp] = exc.code
                continue
            d.addCallbacks(self._written, self._failed, callbackArgs=(tp, results), errbackArgs=(tp, results))
            waits.append(d)
        done = DeferredList(waits) if waits else succeed(None)
        done.addCallback(lambda _: self._complete_offsets(producer_id, commit, results))
        return done

    @staticmethod
    def _written(_info, tp: TopicPartition, results: dict) -> None:
        results[tp] = ErrorCode.NONE

    @staticmethod
    def _failed(failure: Failure, tp: TopicPartition, results: dict) -> None:
        if isinstance(failure.value, KafkaError):
            results[tp] = failure.value.code
        else:
            log.failure("Writing a transaction marker to {topic}-{partition} failed", failure, topic=tp[0],
                        partition=tp[1])
            results[tp] = ErrorCode.UNKNOWN_SERVER_ERROR

    def _complete_offsets(self, producer_id: int, commit: bool,
                          results: dict[TopicPartition, ErrorCode]) -> dict[TopicPartition, ErrorCode]:
        offsets_partitions = {index for (topic, index), error in results.items()
                              if topic == OFFSETS_TOPIC and error is ErrorCode.NONE}
        if offsets_partitions:
            self.group_coordinator.transactional_offsets.complete(producer_id, offsets_partitions, commit)
        return results


__all__ = ["TxnMarkerWriter"]

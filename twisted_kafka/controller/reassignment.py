"""Partition reassignment (KIP-455): Kafka's ``onPartitionReassignment``, in its phases.

AlterPartitionReassignments moves a partition to target replicas, or
cancels a move in progress (back to the original replicas).  As in Kafka,
a reassignment runs in phases, each written to the store first, so a new
controller resumes it where it stopped (``resume``):

* U: the full replica set -- targets and originals -- with the adding and
  removing replicas, in the store;
* A: the leader epoch moves on, so every replica learns the new assignment,
  and the adding replicas start (LeaderAndIsr) and catch up;
* B (``maybe_complete``, once every target replica is in the ISR, which a
  leader's AlterPartition reports): the assignment becomes the targets, the
  leader moves if it is not among them, and the removed replicas leave the
  ISR and delete their logs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace

from twisted.logger import Logger

from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from . import election
from .broker_request_batch import ControllerBrokerRequestBatch
from .context import LOG_NAMESPACE, ControllerContext, TopicPartition
from .interface import ReassignmentState
from .metadata_store import PartitionRecord
from .partition_state_machine import PartitionStateMachine


class ReassignmentManager:
    log = Logger(namespace=LOG_NAMESPACE)

    def __init__(self, *, context: ControllerContext, requests: ControllerBrokerRequestBatch,
                 partitions: PartitionStateMachine):
        self._context = context
        self._requests = requests
        self._partitions = partitions

    async def alter_reassignments(self, targets: Mapping[TopicPartition, list[int] | None], allow_rf_change: bool,
                                  ) -> dict[TopicPartition, tuple[ErrorCode, str | None]]:
        """Kafka's ``processApiPartitionReassignment``: per partition (error, message)."""
        results: dict[TopicPartition, tuple[ErrorCode, str | None]] = {}
        for (name, index), target in targets.items():
            record = self._context.partition(name, index)
            if record is None or name in self._context.deleting:
                results[(name, index)] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            if target is None:
                if not record.is_being_reassigned:
                    results[(name, index)] = (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)
                    continue
                target = list(record.origin_replicas)
            else:
                error = self._invalid_target(record, target, allow_rf_change)
                if error is not None:
                    results[(name, index)] = error
                    continue
            try:
                await self._reassign(name, index, tuple(target))
                results[(name, index)] = (ErrorCode.NONE, None)
            except KafkaError as exc:
                if exc.code == ErrorCode.NOT_CONTROLLER:
                    raise
                results[(name, index)] = (exc.code, exc.message)
        return results

    def _invalid_target(self, record: PartitionRecord, target: list[int],
                        allow_rf_change: bool) -> tuple[ErrorCode, str] | None:
        """Kafka's ``validateReplicas``."""
        if not target:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Empty replica list specified in partition reassignment."
        if len(set(target)) != len(target):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Duplicate replica ids in partition reassignment replica list: {target}")
        if any(b < 0 for b in target):
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {target}"
        adding = [b for b in target if b not in record.origin_replicas]
        live_brokers = self._context.live_brokers
        if any(b not in live_brokers for b in adding):
            return (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                    f"Replica assignment has brokers that are not alive. Replica list: {adding}, live broker "
                    f"list: {sorted(live_brokers)}")
        if not allow_rf_change and len(target) != len(record.origin_replicas):
            return (ErrorCode.INVALID_REPLICATION_FACTOR,
                    f"The replication factor is changed from {len(record.origin_replicas)} to {len(target)}")
        return None

    async def _reassign(self, name: str, index: int, target: tuple[int, ...]) -> None:
        """Phases U and A (see ``maybe_complete`` for B)."""
        context = self._context
        record = context.topics[name].partitions[index]
        origin = record.origin_replicas
        full = tuple(dict.fromkeys(target + origin))
        adding = tuple(b for b in full if b not in origin)
        removing = tuple(b for b in full if b not in target)
        unneeded = [b for b in record.replicas if b not in full]   # adding replicas of a replaced reassignment
        # U: the assignment in the store first, so a new controller resumes the reassignment.
        # A: the leader epoch moves on, so every replica learns the new assignment.
        updated = replace(record, replicas=full, adding_replicas=adding, removing_replicas=removing)
        if updated.has_state:
            updated = election.with_leader(updated, updated.leader, tuple(b for b in updated.isr if b in full))
        await self._partitions.write({(name, index): updated})
        topic = context.topics[name]
        if unneeded:
            self._requests.send_stop_replica([(topic, index)], delete=True, only=unneeded)
        self.log.info("Reassigning {topic}-{partition}: replicas {replicas}, adding {adding}, removing {removing}",
                      topic=name, partition=index, replicas=list(full), adding=list(adding),
                      removing=list(removing))
        self._partitions.announce({(name, index): updated})
        # The new replicas start (phase A2); with the ISR tracking liveness they are in sync at once.
        await self._partitions.trigger_online_partition_state_change(
            {name: replace(topic, partitions={index: topic.partitions[index]})})
        await self.maybe_complete(name, index)

    async def maybe_complete(self, name: str, index: int) -> None:
        """Phase B, once the target replicas are all in the ISR: the assignment becomes the target, the
        leader moves if it is not a target replica, and the removed replicas leave the ISR and delete
        their logs."""
        record = self._context.partition(name, index)
        if record is None or not record.is_being_reassigned or not record.has_state:
            return
        target = record.target_replicas
        if not set(target) <= set(record.isr):
            return
        removing = record.removing_replicas
        final = replace(record, replicas=target, adding_replicas=(), removing_replicas=())
        isr = tuple(b for b in record.isr if b in target)
        electable = self._context.electable_brokers()
        if record.leader in target and record.leader in electable:
            final = election.with_leader(final, record.leader, isr)
        else:
            elected = election.reassign(replace(final, isr=isr), electable)
            if elected is None:
                self.log.warn("Reassignment of {topic}-{partition}: no target replica can lead yet",
                              topic=name, partition=index)
                return
            final = elected
        await self._partitions.write({(name, index): final})
        topic = self._context.topics[name]
        self._partitions.announce({(name, index): final})
        if removing:
            self._requests.send_stop_replica([(topic, index)], delete=True, only=removing)
        self.log.info("Reassignment of {topic}-{partition} completed: replicas {replicas}, leader {leader}",
                      topic=name, partition=index, replicas=list(target), leader=final.leader)

    async def resume(self, which: Callable[[PartitionRecord], bool]) -> None:
        """Phase B for the reassignments in progress that ``which`` selects (failover, brokers back)."""
        context = self._context
        for topic in list(context.topics.values()):
            if topic.name in context.deleting:
                continue
            for index, record in topic.partitions.items():
                if record.is_being_reassigned and which(record):
                    await self.maybe_complete(topic.name, index)

    def list_reassignments(self, partitions: Iterable[TopicPartition] | None,
                           ) -> dict[TopicPartition, ReassignmentState]:
        """The ongoing reassignments among ``partitions`` (None: all)."""
        if partitions is None:
            partitions = self._context.all_partitions()
        ongoing = {}
        for name, index in partitions:
            record = self._context.partition(name, index)
            if record is not None and record.is_being_reassigned:
                ongoing[(name, index)] = ReassignmentState(record.replicas, record.adding_replicas,
                                                           record.removing_replicas)
        return ongoing


__all__ = ["ReassignmentManager"]

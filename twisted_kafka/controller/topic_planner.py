"""Planning new topics and partitions: Kafka's validation and replica assignment, without state.

Whoever creates a topic -- the single node's controller, or in a cluster the
broker that received CreateTopics and writes the assignment to ZooKeeper
(Kafka's ``AdminZkClient.validateTopicCreate`` and
``createTopicWithAssignment``) -- checks and plans it the same way: name,
collisions, partition count and replication factor or explicit assignments,
config overrides; then an assignment over the live brokers
(``assign_replicas``).  The functions here take what they need (the
existing names, the live brokers, the broker config) and raise
``KafkaError`` with Kafka's code and message.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from twisted_kafka.config import ConfigError
from twisted_kafka.config.topic import validate_topic_overrides
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .interface import MAX_PARTITIONS_PER_REQUEST, NewTopic, excessive_batch_error
from .replica_assignment import assign_replicas
from .topic_names import collision_key, validate_topic_name


@dataclass(frozen=True)
class TopicPlan:
    name: str
    topic_id: uuid.UUID
    assignment: dict[int, list[int]]
    configs: dict[str, str]

    @property
    def replication_factor(self) -> int:
        return len(self.assignment[0]) if self.assignment else 0


def plan_topic(spec: NewTopic, *, existing: Collection[str], collisions: Mapping[str, str],
               live_brokers: Collection[int], config) -> TopicPlan:
    """Validate ``spec`` and assign its replicas; ``collisions`` maps ``collision_key`` to a taken name."""
    validate_topic_name(spec.name)
    if spec.name in existing:
        raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{spec.name}' already exists.")
    clash = collisions.get(collision_key(spec.name))
    if clash is not None:
        raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                         f"Topic '{spec.name}' collides with existing topic: {clash}")
    if spec.assignments:
        if spec.num_partitions != -1 or spec.replication_factor != -1:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "Both numPartitions or replicationFactor and replicasAssignments were set. "
                             "Both cannot be used at the same time.")
    else:
        if spec.num_partitions == 0 or spec.num_partitions < -1:
            raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                             "Number of partitions was set to an invalid non-positive value.")
        if spec.replication_factor == 0 or spec.replication_factor < -1:
            raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             "Replication factor must be larger than 0, or -1 to use the default value.")
    null_configs = sorted(name for name, value in spec.configs.items() if value is None)
    if null_configs:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"Null value not supported for topic configs: {','.join(null_configs)}")
    try:
        validate_topic_overrides(spec.configs)
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    brokers = sorted(live_brokers)
    if spec.assignments:
        assignment = check_assignment(spec.assignments, start=0, live_brokers=brokers)
    else:
        partitions = spec.num_partitions if spec.num_partitions != -1 else config["num.partitions"]
        factor = spec.replication_factor if spec.replication_factor != -1 else config["default.replication.factor"]
        assignment = assign_replicas(brokers, partitions, factor)
    return TopicPlan(spec.name, uuid.uuid4(), assignment,
                     {name: value for name, value in spec.configs.items() if value is not None})


def check_assignment(assignments: Mapping[int, list[int]], start: int,
                     live_brokers: Collection[int]) -> dict[int, list[int]]:
    """Explicit replica assignments: consecutive partitions from ``start``, one size, no duplicates,
    live brokers only."""
    indexes = sorted(assignments)
    if indexes != list(range(start, start + len(indexes))):
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Partitions should be a consecutive 0-based integer sequence, given {indexes}")
    sizes = {len(replicas) for replicas in assignments.values()}
    if 0 in sizes:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Replica assignment of partition {min(i for i, r in assignments.items() if not r)} "
                         "is empty")
    if len(sizes) != 1:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "All partitions should have the same number of replicas")
    for index, replicas in assignments.items():
        if len(set(replicas)) != len(replicas):
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Duplicate brokers not allowed in replica assignment: "
                             f"{', '.join(map(str, replicas))} for partition id {index}.")
        unknown = [b for b in replicas if b not in live_brokers]
        if unknown:
            raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.")
    return {index: list(replicas) for index, replicas in assignments.items()}


def plan_partitions(name: str, current: int, replication_factor: int, count: int,
                    assignments: list[list[int]] | None, live_brokers: Collection[int]) -> dict[int, list[int]]:
    """The replicas of the partitions that growing ``name`` from ``current`` to ``count`` adds."""
    if count < current:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS,
                         f"Topic currently has {current} partitions, which is higher than the requested {count}.")
    if count == current:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
    if count - current > MAX_PARTITIONS_PER_REQUEST:
        raise excessive_batch_error(count - current)
    if assignments is None:
        return assign_replicas(sorted(live_brokers), count - current, replication_factor, start_partition=current)
    if len(assignments) != count - current:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Increasing the number of partitions by {count - current} but "
                         f"{len(assignments)} assignments provided.")
    new = check_assignment({current + i: list(r) for i, r in enumerate(assignments)}, current, live_brokers)
    mismatched = sorted(i for i, r in new.items() if len(r) != replication_factor)
    if mismatched:
        raise KafkaError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         f"Inconsistent replication factor between partitions, partition 0 has "
                         f"{replication_factor} while partitions {mismatched} have replication factors "
                         f"{[len(new[i]) for i in mismatched]}, respectively.")
    return new


__all__ = ["TopicPlan", "plan_topic", "check_assignment", "plan_partitions"]

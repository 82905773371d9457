"""The admin rules: Kafka's validation of topic, partition and config changes, in one copy.

Whoever takes an admin request checks it the same way -- the single node's
controller, or in a cluster the broker that received it and writes it to
ZooKeeper (Kafka's ``AdminZkClient``: ``validateTopicCreate``,
``createTopicWithAssignment``, ``addPartitions``, ``changeTopicConfig``,
``deleteTopic``): topic name and collisions, partition count and
replication factor or explicit assignments, config overrides, the topic
existing, deletion being enabled; then an assignment over the live brokers
(``assign_replicas``).  The functions here take what they need (the
existing names, the live brokers, the broker config) and raise
``KafkaError`` (or return results) with Kafka's code and message.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from twisted_kafka.config import ConfigError
from twisted_kafka.config.topic import validate_topic_overrides
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .interface import MAX_PARTITIONS_PER_REQUEST, NewTopic, TopicResult, excessive_batch_error
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
    check_topic_configs(spec.configs)
    brokers = sorted(live_brokers)
    if spec.assignments:
        assignment = check_assignment(spec.assignments, start=0, live_brokers=brokers)
    else:
        partitions = spec.num_partitions if spec.num_partitions != -1 else config["num.partitions"]
        factor = spec.replication_factor if spec.replication_factor != -1 else config["default.replication.factor"]
        assignment = assign_replicas(brokers, partitions, factor)
    return TopicPlan(spec.name, uuid.uuid4(), assignment,
                     {name: value for name, value in spec.configs.items() if value is not None})


def created_topic_result(plan: TopicPlan, *, validate_only: bool) -> TopicResult:
    """CreateTopics' answer for a planned topic (no topic id when it was only validated)."""
    return TopicResult(plan.name, topic_id=None if validate_only else plan.topic_id,
                       num_partitions=len(plan.assignment), replication_factor=plan.replication_factor,
                       configs=dict(plan.configs))


def unknown_topic(name: str) -> KafkaError:
    """UNKNOWN_TOPIC_OR_PARTITION for a change to a topic that does not exist."""
    return KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")


def check_topic_configs(configs: Mapping[str, str | None]) -> None:
    """INVALID_CONFIG (naming the key) when ``configs`` are not valid topic overrides."""
    try:
        validate_topic_overrides(configs)
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None


def check_topic_config_change(name: str, exists: bool, configs: Mapping[str, str]) -> None:
    """Kafka's ``AdminZkClient.changeTopicConfig`` checks: the topic exists, the overrides are valid."""
    if not exists:
        raise unknown_topic(name)
    check_topic_configs(configs)


def refused_deletions(config, names: list[str]) -> dict[str, TopicResult] | None:
    """TOPIC_DELETION_DISABLED for every name when ``delete.topic.enable`` is false, else None."""
    if config["delete.topic.enable"]:
        return None
    return {name: TopicResult(name, ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            for name in names}


def unknown_deletion(name: str) -> TopicResult:
    """DeleteTopics' answer for a topic that does not exist."""
    return TopicResult(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")


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


__all__ = ["TopicPlan", "plan_topic", "created_topic_result", "unknown_topic", "check_topic_configs",
           "check_topic_config_change", "refused_deletions", "unknown_deletion", "check_assignment", "plan_partitions"]

"""Kafka's rack-unaware replica assignment (``AdminUtils.assignReplicasToBrokers``).

Replicas of consecutive partitions start on consecutive brokers and followers
are shifted, so leadership and replicas spread evenly.  With one broker every
partition's single replica is on it; the same function serves clusters.
"""

from __future__ import annotations

import random

from twisted_kafka.protocol.errors import ErrorCode, KafkaError


def assign_replicas(brokers: list[int], num_partitions: int, replication_factor: int, *,
                    start_partition: int = 0, rng: random.Random | None = None) -> dict[int, list[int]]:
    if num_partitions <= 0:
        raise KafkaError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise KafkaError(ErrorCode.INVALID_REPLICATION_FACTOR,
                         f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.")
    rng = rng or random.Random()
    ordered = sorted(brokers)
    n = len(ordered)
    start_index = rng.randrange(n)
    shift = rng.randrange(n)
    assignment: dict[int, list[int]] = {}
    for i in range(num_partitions):
        partition = start_partition + i
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start_index) % n
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            replicas.append(ordered[(first + 1 + (shift + j) % (n - 1)) % n])
        assignment[partition] = replicas
    return assignment

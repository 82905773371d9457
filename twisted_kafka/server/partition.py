"""Partition: one topic partition as this broker hosts it — its log and its role.

The role comes from the controller's LeaderAndIsr: leader or follower, the
leader epoch, replicas, ISR and partition epoch — everything a replicated
partition needs, so replication adds a fetcher, not a new shape.  A single
node is the leader of every partition, its ISR is itself, and so the high
watermark is the log end offset.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from twisted_kafka.log import UnifiedLog
from twisted_kafka.protocol.errors import ErrorCode, KafkaError


@dataclass
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: UnifiedLog
    local_broker_id: int
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        # No transactions yet: nothing is unstable below the high watermark.  It must equal the
        # high watermark then: librdkafka reads read_committed by default and hides records at
        # or past a smaller last stable offset.
        return self.log.high_watermark

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320 fencing: a client naming an older epoch is fenced, a newer one is ahead of us."""
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < self.leader_epoch:
            raise KafkaError(ErrorCode.FENCED_LEADER_EPOCH,
                             f"Leader epoch {current_leader_epoch} is older than the current {self.leader_epoch}")
        if current_leader_epoch > self.leader_epoch:
            raise KafkaError(ErrorCode.UNKNOWN_LEADER_EPOCH,
                             f"Leader epoch {current_leader_epoch} is newer than the current {self.leader_epoch}")

    def make_leader(self, leader_epoch: int, partition_epoch: int, replicas: list[int], isr: list[int]) -> None:
        self.leader_id = self.local_broker_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        # Kafka records where each leader epoch starts when the leadership begins,
        # so OffsetForLeaderEpoch answers correctly even before the first append.
        self.log.epoch_cache.assign(leader_epoch, self.log.log_end_offset)

    def make_follower(self, leader_id: int, leader_epoch: int, partition_epoch: int, replicas: list[int],
                      isr: list[int]) -> None:
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)

"""Partition: one topic partition as this broker hosts it — its log and its role.

The role comes from the controller's LeaderAndIsr: leader or follower, the
leader epoch, replicas, ISR and partition epoch.  A partition with one
replica (every partition of a single node) has the high watermark follow
the log end offset.  With more replicas, the leader keeps each follower's
position (``ReplicaState``: the offset its last fetch asked for, when it
last caught up) and the high watermark is the smallest log end offset of
the ISR -- or, while an ISR change is waiting for the controller, of the
larger of the old and the new ISR (KIP-497's "maximal ISR"), so the high
watermark never counts a replica the controller has not accepted as in
sync yet, and never loses one it has not removed.  A follower takes the
high watermark from the leader's fetch responses.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from twisted_kafka.log import PartitionLog
from twisted_kafka.protocol.errors import ErrorCode, KafkaError


@dataclass
class ReplicaState:
    """A follower as its leader sees it (Kafka's ``Replica``): where it is, and since when in sync."""

    log_end_offset: int = -1
    #: The last time (ms) the follower's fetch reached the leader's log end (Kafka's lastCaughtUpTimeMs).
    last_caught_up_ms: int = 0
    #: The leader's log end when the follower fetched last, and that fetch's time.
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0


@dataclass
class Partition:
    topic: str
    index: int
    topic_id: uuid.UUID
    log: PartitionLog
    local_broker_id: int
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = 0
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)
    #: Leader: the followers' positions, by broker id.
    followers: dict[int, ReplicaState] = field(default_factory=dict)
    #: Leader: an ISR sent to the controller and not answered yet (AlterPartition), else None.
    pending_isr: list[int] | None = None
    #: The reactor (its ``seconds()``), for the followers' fetch times.
    clock: Any = None
    #: Bumped each time this broker becomes a follower: a leader epoch may move on with the same leader
    #: (the controller took a failed follower out of the ISR), which leaves its log as it was.
    follower_generation: int = 0
    #: Bumped whenever the controller changes this partition here (a LeaderAndIsr applied, a StopReplica):
    #: a fetch waiting on it answers now (``DelayedFetch``).
    state_version: int = 0
    #: What fetches could read here, in bytes appended since the partition was made: a follower's fetch
    #: reads to the log end (every append counts at once), a consumer's to the high watermark (an append
    #: counts once the high watermark passes it).  Waiting fetches compare them with what they were when
    #: they started waiting (``DelayedFetch``); they only grow.
    follower_fetchable_bytes: int = 0
    consumer_fetchable_bytes: int = 0

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

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
        kept = self.followers if self.is_leader else {}
        self.state_version += 1
        self.leader_id = self.local_broker_id
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.pending_isr = None
        now = self._now_ms()
        # A new leader starts every follower's position afresh (Kafka's makeLeader): the ISR members count
        # as caught up now (they get replica.lag.time.max.ms to fetch), the others not.  A leader that stays
        # the leader under a new epoch keeps what it knows of its followers.
        self.followers = {b: kept.get(b) or ReplicaState(last_caught_up_ms=now if b in self.isr else 0)
                          for b in self.replicas if b != self.local_broker_id}
        # Without followers the high watermark is the log end, after every append.
        self.log.high_watermark_follows_log_end(not self.followers)
        # Kafka records where each leader epoch starts when the leadership begins,
        # so OffsetForLeaderEpoch answers correctly even before the first append.
        self.log.assign_epoch_start_offset(leader_epoch, self.log.log_end_offset)

    def make_follower(self, leader_id: int, leader_epoch: int, partition_epoch: int, replicas: list[int],
                      isr: list[int]) -> None:
        self.leader_id = leader_id
        self.follower_generation += 1
        self.state_version += 1
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.replicas = list(replicas)
        self.isr = list(isr)
        self.followers = {}
        self.pending_isr = None
        self.log.high_watermark_follows_log_end(False)

    def stop(self) -> None:
        """This broker no longer hosts the partition (StopReplica): no leader here any more."""
        self.leader_id = -1
        self.state_version += 1

    def fetchable_bytes(self, follower: bool) -> int:
        """``follower_fetchable_bytes`` or ``consumer_fetchable_bytes``."""
        return self.follower_fetchable_bytes if follower else self.consumer_fetchable_bytes

    # -- leader: followers and the high watermark ------------------------------------------

    def _now_ms(self) -> int:
        return int(self.clock.seconds() * 1000) if self.clock is not None else 0

    @property
    def maximal_isr(self) -> list[int]:
        """The ISR the high watermark waits for: the current one and any pending change together."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + [b for b in self.pending_isr if b not in self.isr]

    def update_follower(self, replica_id: int, fetch_offset: int, now_ms: int) -> bool:
        """A follower fetched from ``fetch_offset`` (so its log ends there); True if the high watermark moved.

        Kafka's ``Replica.updateFetchState``: a fetch reaching the leader's log end
        makes the follower caught up now; one reaching where the log ended at its
        previous fetch makes it caught up as of that previous fetch.
        """
        state = self.followers.get(replica_id)
        if state is None:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"Broker {replica_id} is not a replica of {self.topic}-{self.index}")
        log = self.log
        leader_leo = log.committed_end_offset
        if fetch_offset >= leader_leo:
            if now_ms > state.last_caught_up_ms:
                state.last_caught_up_ms = now_ms
        elif fetch_offset >= state.last_fetch_leader_leo >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_leader_leo = leader_leo
        state.last_fetch_ms = now_ms
        if log.high_watermark >= leader_leo:
            return False        # already at the committed end, the most it can be
        return self.maybe_increase_high_watermark()

    def maybe_increase_high_watermark(self) -> bool:
        """Move the high watermark to the smallest log end of the (maximal) ISR; True if it moved."""
        if not self.followers:
            return False
        log = self.log
        end = log.committed_end_offset
        for broker in self.maximal_isr:
            if broker == self.local_broker_id:
                continue
            state = self.followers.get(broker)
            if state is None:
                continue
            end = min(end, state.log_end_offset)
        return log.maybe_increment_high_watermark(end)

    def out_of_sync_replicas(self, now_ms: int, max_lag_ms: int) -> list[int]:
        """ISR followers that have not caught up for more than ``max_lag_ms`` (replica.lag.time.max.ms)."""
        return [b for b in self.isr if b != self.local_broker_id and (state := self.followers.get(b)) is not None
                and now_ms - state.last_caught_up_ms > max_lag_ms]

    def is_caught_up(self, replica_id: int) -> bool:
        """Kafka's ``isFollowerInSync`` for an ISR expansion: the follower reached the high watermark and
        the start of this leader epoch."""
        state = self.followers.get(replica_id)
        if state is None or state.log_end_offset < 0:
            return False
        epoch_start = next((start for epoch, start in self.log.epoch_entries() if epoch == self.leader_epoch), 0)
        return state.log_end_offset >= self.log.high_watermark and state.log_end_offset >= epoch_start

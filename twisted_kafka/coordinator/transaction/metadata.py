"""One transactional id's state (Kafka's ``TransactionMetadata`` and ``TransactionState``).

The states and their ids are Kafka's, as stored in ``__transaction_state``::

    Empty(0) -> Ongoing(1) -> PrepareCommit(2) -> CompleteCommit(4)
                           -> PrepareAbort(3)  -> CompleteAbort(5)
    Dead(6): the id expired (``transactional.id.expiration.ms``);
    PrepareEpochFence(7): the epoch was bumped to abort an ongoing transaction
    (a new producer's InitProducerId, or the transaction's timeout) -- only
    in memory: what reaches the log is the PrepareAbort that follows it.

A change is made in two steps, as in Kafka: ``prepare_transition`` checks it
and returns the target state (``TxnTransit``), which is written to the log
while ``pending_state`` keeps other requests out (CONCURRENT_TRANSACTIONS);
``complete_transition`` applies it once the write is durable, and
``clear_pending`` drops it when the write failed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum

from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .log_records import TransactionLogValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: Kafka's ``Short.MaxValue``; an epoch at or above MAX_EPOCH - 1 is exhausted (a new producer id is taken).
MAX_EPOCH = 32767


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH - 1


class TransactionState(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display(self) -> str:
        """Kafka's name of the state (DescribeTransactions, ListTransactions, the logs)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


S = TransactionState
#: The states a transition into each state may come from (Kafka's ``validPreviousStates``).
VALID_PREVIOUS: dict[TransactionState, frozenset[TransactionState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}
#: States in which the transaction's partitions are kept (the others have none).
_KEEPS_PARTITIONS = frozenset({S.ONGOING, S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE})

TopicPartition = tuple[str, int]


@dataclass
class TxnTransit:
    """A transition's target: what is written to the log, and then becomes the state."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int

    def log_value(self) -> TransactionLogValue:
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(self.partitions):
            by_topic.setdefault(topic, []).append(index)
        return TransactionLogValue(
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.txn_timeout_ms, transaction_status=int(self.state),
            transaction_partitions=None if self.state is S.EMPTY else by_topic,
            transaction_last_update_timestamp_ms=self.txn_last_update_timestamp,
            transaction_start_timestamp_ms=self.txn_start_timestamp)


@dataclass(eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    partitions: set[TopicPartition] = field(default_factory=set)
    txn_start_timestamp: int = -1
    txn_last_update_timestamp: int = -1
    pending_state: TransactionState | None = None
    #: A PrepareEpochFence whose abort could not be written: the next fence reuses its epoch (Kafka's rule).
    has_failed_epoch_fence: bool = False

    @classmethod
    def from_log(cls, transactional_id: str, value: TransactionLogValue) -> TransactionMetadata:
        partitions = {(topic, index) for topic, ids in (value.transaction_partitions or {}).items() for index in ids}
        return cls(transactional_id, value.producer_id, value.previous_producer_id, value.producer_epoch,
                   NO_PRODUCER_EPOCH, value.transaction_timeout_ms, TransactionState(value.transaction_status),
                   partitions, value.transaction_start_timestamp_ms, value.transaction_last_update_timestamp_ms)

    def _transit(self, state: TransactionState, now_ms: int, *, producer_id: int | None = None,
                 producer_epoch: int | None = None, last_producer_epoch: int | None = None,
                 timeout_ms: int | None = None, partitions: frozenset[TopicPartition] | None = None,
                 start_ms: int | None = None) -> TxnTransit:
        if self.pending_state is not None:
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS,
                             f"{self.transactional_id} is moving to {self.pending_state.display} already")
        if self.state not in VALID_PREVIOUS[state]:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                             f"{self.transactional_id} cannot go from {self.state.display} to {state.display}")
        if partitions is None:
            partitions = frozenset(self.partitions) if state in _KEEPS_PARTITIONS else frozenset()
        self.pending_state = state
        return TxnTransit(
            producer_id=self.producer_id if producer_id is None else producer_id,
            last_producer_id=self.last_producer_id,
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            last_producer_epoch=self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch,
            txn_timeout_ms=self.txn_timeout_ms if timeout_ms is None else timeout_ms,
            state=state, partitions=partitions,
            txn_start_timestamp=self.txn_start_timestamp if start_ms is None else start_ms,
            txn_last_update_timestamp=now_ms)

    # -- the transitions (Kafka's prepare* methods) ------------------------------------------------

    def prepare_increment_epoch(self, timeout_ms: int, expected_epoch: int | None, now_ms: int) -> TxnTransit:
        """InitProducerId on a finished (or new) transaction: the epoch goes up by one (KIP-360: a
        retried bump, naming the epoch before it, gets the current epoch again)."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None or self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch
        else:
            raise KafkaError(ErrorCode.PRODUCER_FENCED,
                             f"{self.transactional_id}: epoch {expected_epoch} is not the current one")
        return self._transit(S.EMPTY, now_ms, producer_epoch=epoch, last_producer_epoch=last, timeout_ms=timeout_ms,
                             partitions=frozenset(), start_ms=-1)

    def prepare_producer_id_rotation(self, new_producer_id: int, timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransit:
        """The epoch is exhausted: a new producer id at epoch 0."""
        transit = self._transit(S.EMPTY, now_ms, producer_id=new_producer_id, producer_epoch=0,
                                last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                                timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1)
        transit.last_producer_id = self.producer_id
        return transit

    def prepare_add_partitions(self, partitions: set[TopicPartition], now_ms: int) -> TxnTransit:
        start = now_ms if self.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) else self.txn_start_timestamp
        return self._transit(S.ONGOING, now_ms, partitions=frozenset(self.partitions | partitions), start_ms=start)

    def prepare_abort_or_commit(self, state: TransactionState, now_ms: int) -> TxnTransit:
        return self._transit(state, now_ms)

    def prepare_complete(self, now_ms: int) -> TxnTransit:
        state = S.COMPLETE_COMMIT if self.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        return self._transit(state, now_ms)

    def prepare_dead(self, now_ms: int) -> TxnTransit:
        return self._transit(S.DEAD, now_ms)

    def fence_producer_epoch(self) -> None:
        """Bump the epoch in memory to abort the ongoing transaction (PrepareEpochFence): the old
        producer's requests are fenced from now on.  An exhausted epoch is not bumped (Kafka's rule)."""
        if self.pending_state is not None:
            raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS,
                             f"{self.transactional_id} is moving to {self.pending_state.display} already")
        if not self.has_failed_epoch_fence and not is_epoch_exhausted(self.producer_epoch):
            self.producer_epoch += 1
        self.last_producer_epoch = NO_PRODUCER_EPOCH
        self.state = S.PREPARE_EPOCH_FENCE

    # -- completing ---------------------------------------------------------------------------

    def complete_transition(self, transit: TxnTransit) -> None:
        self.pending_state = None
        self.producer_id = transit.producer_id
        self.last_producer_id = transit.last_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.state = transit.state
        self.partitions = set(transit.partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.has_failed_epoch_fence = False

    def clear_pending(self) -> None:
        self.pending_state = None


__all__ = ["MAX_EPOCH", "NO_PRODUCER_EPOCH", "NO_PRODUCER_ID", "TransactionMetadata", "TransactionState",
           "TxnTransit", "VALID_PREVIOUS", "is_epoch_exhausted"]

"""The transaction coordinator (Kafka's ``TransactionCoordinator`` and ``TransactionStateManager``).

Transactional id ``t`` belongs to partition ``abs(hashCode(t)) %
transaction.state.log.num.partitions`` of ``__transaction_state``; the
broker leading that partition is its coordinator, and the partition's
leader epoch is the *coordinator epoch* written into every marker.  While a
partition is being loaded its ids answer COORDINATOR_LOAD_IN_PROGRESS, and
ids of partitions this broker does not lead NOT_COORDINATOR.

Every change of a transaction is written to its partition (acks=all, the
COORDINATOR origin) before it takes effect or is answered
(``TransactionMetadata``'s two steps); a write that fails leaves the state
as it was.  A write answered after this broker lost the partition is
NOT_COORDINATOR.

* InitProducerId: a new id gets a producer id at epoch 0; a known one has
  its epoch bumped (which fences the previous producer: its requests get
  PRODUCER_FENCED), or a new producer id once the epoch is exhausted.  An
  ongoing transaction is first aborted with the epoch bumped (the producer
  is answered CONCURRENT_TRANSACTIONS and retries).  KIP-360: a producer
  naming its producer id and epoch may bump its own epoch to recover; a
  retry of a bump that was done gets the same epoch again.
* AddPartitionsToTxn / AddOffsetsToTxn: the partitions (the group's
  ``__consumer_offsets`` partition) join the transaction, which becomes
  Ongoing and starts its timeout.
* EndTxn: PrepareCommit or PrepareAbort is written and answered; then the
  markers are sent (``TxnMarkerChannel``) and, once every partition has its
  marker, CompleteCommit or CompleteAbort is written.
* A transaction Ongoing for longer than its timeout is aborted by the
  coordinator (every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``)
  with its epoch bumped, so the producer is fenced.
* An id whose last transaction ended more than ``transactional.id.expiration.ms``
  ago is removed (a tombstone), every
  ``transaction.remove.expired.transaction.cleanup.interval.ms``.
* When this broker becomes the leader of a partition it replays it; the
  transactions it finds in PrepareCommit or PrepareAbort get their markers
  sent again and are completed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from time import monotonic

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import deferLater
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.coordinator.group.topic import partition_for
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .log_records import encode_key, encode_value
from .markers import TxnMarkerChannel
from .metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TransactionMetadata,
    TransactionState,
    TxnTransit,
    is_epoch_exhausted,
)

log = Logger(namespace="twisted_kafka.coordinator.transaction.TransactionCoordinator")

S = TransactionState
TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class TransactionConfig:
    num_partitions: int
    max_timeout_ms: int
    id_expiration_ms: int
    abort_interval_ms: int
    remove_expired_interval_ms: int
    replication_factor: int
    min_isr: int
    segment_bytes: int
    load_buffer_size: int
    request_timeout_ms: int

    @classmethod
    def from_broker_config(cls, config) -> TransactionConfig:
        return cls(num_partitions=config["transaction.state.log.num.partitions"],
                   max_timeout_ms=config["transaction.max.timeout.ms"],
                   id_expiration_ms=config["transactional.id.expiration.ms"],
                   abort_interval_ms=config["transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                   remove_expired_interval_ms=config["transaction.remove.expired.transaction.cleanup.interval.ms"],
                   replication_factor=config["transaction.state.log.replication.factor"],
                   min_isr=config["transaction.state.log.min.isr"],
                   segment_bytes=config["transaction.state.log.segment.bytes"],
                   load_buffer_size=config["transaction.state.log.load.buffer.size"],
                   request_timeout_ms=config["request.timeout.ms"])


def _write_error(failure: Failure) -> ErrorCode:
    """What a failed write of the coordinator's state is to a client (Kafka's ``appendTransactionToLog``)."""
    if not isinstance(failure.value, KafkaError):
        log.failure("Writing to __transaction_state failed", failure)
        return ErrorCode.UNKNOWN_SERVER_ERROR
    code = failure.value.code
    if code in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if code in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR


def _log_failure(failure: Failure, what: str, tid: str) -> None:
    log.failure(what, failure, tid=tid)


@dataclass
class InitPidResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator:
    def __init__(self, *, config: TransactionConfig, writer, producer_ids, markers: TxnMarkerChannel, clock,
                 broker_id: int):
        self.config = config
        self.writer = writer
        self.producer_ids = producer_ids
        self.markers = markers
        self.clock = clock
        self.broker_id = broker_id
        self.num_partitions = config.num_partitions
        #: partition -> coordinator epoch, for the partitions loaded and led here
        self.owned: dict[int, int] = {}
        self.loading: dict[int, int] = {}
        self.transactions: dict[str, TransactionMetadata] = {}
        self.active = False

    def now_ms(self) -> int:
        return int(self.clock.seconds() * 1000)

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def startup(self) -> None:
        self.active = True

    def shutdown(self) -> None:
        self.active = False
        self.owned.clear()
        self.loading.clear()
        self.transactions.clear()

    # -- ownership and state lookup ----------------------------------------------------------------

    def _lookup(self, transactional_id: str) -> tuple[ErrorCode, int]:
        """``(error, coordinator epoch)`` of the id's partition here."""
        partition = self.partition_for(transactional_id)
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, -1
        epoch = self.owned.get(partition)
        if epoch is None or not self.active:
            return ErrorCode.NOT_COORDINATOR, -1
        return ErrorCode.NONE, epoch

    def _still_coordinator(self, transactional_id: str, epoch: int) -> bool:
        return self.active and self.owned.get(self.partition_for(transactional_id)) == epoch

    async def _write(self, txn: TransactionMetadata, transit: TxnTransit, coordinator_epoch: int) -> ErrorCode:
        """Write ``transit``; apply it once durable (NONE), or drop it (the error for the client)."""
        key = encode_key(txn.transactional_id)
        value = None if transit.state is S.DEAD else encode_value(transit.log_value())
        try:
            await self.writer.append(self.partition_for(txn.transactional_id), [(key, value)], self.now_ms())
        except Exception:
            txn.clear_pending()
            return _write_error(Failure())
        if not self._still_coordinator(txn.transactional_id, coordinator_epoch):
            txn.clear_pending()
            return ErrorCode.NOT_COORDINATOR
        txn.complete_transition(transit)
        if transit.state is S.DEAD:
            self.transactions.pop(txn.transactional_id, None)
        return ErrorCode.NONE

    # -- InitProducerId ----------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> InitPidResult:
        """``expected``: the producer id and epoch a KIP-360 producer sends (v3+), or None."""
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitPidResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        error, coordinator_epoch = self._lookup(transactional_id)
        if error is not ErrorCode.NONE:
            return InitPidResult(error)
        txn = self.transactions.get(transactional_id)
        if txn is None:
            try:
                producer_id = await self.producer_ids.generate_producer_id()
            except KafkaError as exc:
                return InitPidResult(exc.code)
            error, coordinator_epoch = self._lookup(transactional_id)
            if error is not ErrorCode.NONE:
                return InitPidResult(error)
            txn = self.transactions.setdefault(transactional_id, TransactionMetadata(
                transactional_id, producer_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH, timeout_ms,
                S.EMPTY, txn_last_update_timestamp=self.now_ms()))
        if txn.pending_state is not None:
            return InitPidResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if expected is not None and not (txn.producer_epoch == NO_PRODUCER_EPOCH or expected[0] == txn.producer_id
                                         or (expected[0] == txn.last_producer_id
                                             and is_epoch_exhausted(expected[1]))):
            return InitPidResult(ErrorCode.PRODUCER_FENCED)
        state = txn.state
        if state in (S.PREPARE_ABORT, S.PREPARE_COMMIT, S.PREPARE_EPOCH_FENCE):
            return InitPidResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state is S.DEAD:
            return InitPidResult(ErrorCode.CONCURRENT_TRANSACTIONS)
        if state is S.ONGOING:
            # Abort it with the epoch bumped (the old producer is fenced); the producer retries.
            txn.fence_producer_epoch()
            error = await self._end_transaction(txn, txn.producer_id, txn.producer_epoch, False,
                                                coordinator_epoch, from_client=False)
            return InitPidResult(ErrorCode.CONCURRENT_TRANSACTIONS if error is ErrorCode.NONE else error)
        now = self.now_ms()
        try:
            if is_epoch_exhausted(txn.producer_epoch):
                new_id = await self.producer_ids.generate_producer_id()
                transit = txn.prepare_producer_id_rotation(new_id, timeout_ms, now,
                                                           record_last_epoch=expected is not None)
            else:
                transit = txn.prepare_increment_epoch(timeout_ms, None if expected is None else expected[1], now)
        except KafkaError as exc:
            return InitPidResult(exc.code)
        error = await self._write(txn, transit, coordinator_epoch)
        if error is not ErrorCode.NONE:
            return InitPidResult(error)
        log.debug("{tid}: producer id {pid} epoch {epoch}", tid=transactional_id, pid=txn.producer_id,
                  epoch=txn.producer_epoch)
        return InitPidResult(ErrorCode.NONE, txn.producer_id, txn.producer_epoch)

    # -- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------------

    def _check_producer(self, transactional_id: str, producer_id: int,
                        producer_epoch: int) -> tuple[ErrorCode, TransactionMetadata | None, int]:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None, -1
        error, coordinator_epoch = self._lookup(transactional_id)
        if error is not ErrorCode.NONE:
            return error, None, -1
        txn = self.transactions.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None, -1
        if txn.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None, -1
        if txn.pending_state is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS, None, -1
        return ErrorCode.NONE, txn, coordinator_epoch

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition]) -> ErrorCode:
        error, txn, coordinator_epoch = self._check_producer(transactional_id, producer_id, producer_epoch)
        if txn is None:
            return error
        if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE):
            return ErrorCode.CONCURRENT_TRANSACTIONS
        if txn.state is S.DEAD:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        wanted = set(partitions)
        if txn.state is S.ONGOING and wanted <= txn.partitions:
            return ErrorCode.NONE
        try:
            transit = txn.prepare_add_partitions(wanted, self.now_ms())
        except KafkaError as exc:
            return exc.code
        return await self._write(txn, transit, coordinator_epoch)

    # -- EndTxn ----------------------------------------------------------------------------------

    async def end_transaction(self, transactional_id: str, producer_id: int, producer_epoch: int,
                              commit: bool) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        error, coordinator_epoch = self._lookup(transactional_id)
        if error is not ErrorCode.NONE:
            return error
        txn = self.transactions.get(transactional_id)
        if txn is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        return await self._end_transaction(txn, producer_id, producer_epoch, commit, coordinator_epoch,
                                           from_client=True)

    async def _end_transaction(self, txn: TransactionMetadata, producer_id: int, producer_epoch: int, commit: bool,
                               coordinator_epoch: int, *, from_client: bool) -> ErrorCode:
        if txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if (from_client and producer_epoch != txn.producer_epoch) or producer_epoch < txn.producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if txn.pending_state is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = txn.state
        if state is S.ONGOING or (state is S.PREPARE_EPOCH_FENCE and not commit):
            target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        elif state is S.COMPLETE_COMMIT:
            return ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE
        elif state is S.COMPLETE_ABORT:
            return ErrorCode.NONE if not commit else ErrorCode.INVALID_TXN_STATE
        elif state is S.PREPARE_COMMIT:
            return ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE
        elif state is S.PREPARE_ABORT:
            return ErrorCode.CONCURRENT_TRANSACTIONS if not commit else ErrorCode.INVALID_TXN_STATE
        else:
            return ErrorCode.INVALID_TXN_STATE
        fencing = state is S.PREPARE_EPOCH_FENCE
        try:
            transit = txn.prepare_abort_or_commit(target, self.now_ms())
        except KafkaError as exc:
            return exc.code
        error = await self._write(txn, transit, coordinator_epoch)
        if error is not ErrorCode.NONE:
            if fencing and txn.state is S.PREPARE_EPOCH_FENCE:
                txn.state, txn.has_failed_epoch_fence = S.ONGOING, True
            return error
        self._send_markers(txn, coordinator_epoch)
        return ErrorCode.NONE

    def _send_markers(self, txn: TransactionMetadata, coordinator_epoch: int) -> Deferred:
        """Send the markers of a prepared transaction, then write its completion."""
        commit = txn.state is S.PREPARE_COMMIT
        tid, producer_id, epoch = txn.transactional_id, txn.producer_id, txn.producer_epoch

        def valid() -> bool:
            return (self._still_coordinator(tid, coordinator_epoch) and self.transactions.get(tid) is txn
                    and txn.producer_epoch == epoch)

        d = self.markers.send(tid, producer_id, epoch, commit, coordinator_epoch, sorted(txn.partitions), valid)
        d.addCallback(self._markers_written, txn, coordinator_epoch, valid)
        d.addErrback(lambda f: log.failure("Completing the transaction of {tid} failed", f, tid=tid))
        return d

    def _markers_written(self, done: bool, txn: TransactionMetadata, coordinator_epoch: int,
                         valid: Callable[[], bool]) -> Deferred | None:
        if not done or not valid():
            return None
        return ensureDeferred(self._complete(txn, coordinator_epoch))

    async def _complete(self, txn: TransactionMetadata, coordinator_epoch: int) -> None:
        while self._still_coordinator(txn.transactional_id, coordinator_epoch):
            try:
                transit = txn.prepare_complete(self.now_ms())
            except KafkaError as exc:
                log.warn("Cannot complete the transaction of {tid}: {error}", tid=txn.transactional_id,
                         error=exc)
                return
            error = await self._write(txn, transit, coordinator_epoch)
            if error is ErrorCode.NONE or error is ErrorCode.NOT_COORDINATOR:
                return
            log.info("Writing the completion of {tid} failed ({error}); retrying", tid=txn.transactional_id,
                     error=error.name)
            await deferLater(self.clock, 0.1, lambda: None)

    # -- timeouts and expiration ----------------------------------------------------------------

    def abort_timed_out_transactions(self) -> list[str]:
        """Abort (epoch bumped) every Ongoing transaction past its timeout; the ids aborted."""
        now = self.now_ms()
        aborted = []
        for tid, txn in list(self.transactions.items()):
            if (txn.state is not S.ONGOING or txn.pending_state is not None
                    or txn.txn_start_timestamp + txn.txn_timeout_ms > now):
                continue
            error, coordinator_epoch = self._lookup(tid)
            if error is not ErrorCode.NONE:
                continue
            log.info("Aborting the transaction of {tid} (producer id {pid}, epoch {epoch}): it has been open "
                     "longer than its timeout of {timeout} ms", tid=tid, pid=txn.producer_id,
                     epoch=txn.producer_epoch, timeout=txn.txn_timeout_ms)
            txn.fence_producer_epoch()
            ensureDeferred(self._end_transaction(txn, txn.producer_id, txn.producer_epoch, False, coordinator_epoch,
                                                 from_client=False)).addErrback(_log_failure, "Aborting the timed-out "
                                                                                "transaction of {tid} failed", tid)
            aborted.append(tid)
        return aborted

    def remove_expired_transactional_ids(self) -> list[str]:
        """Write tombstones for the ids idle longer than ``transactional.id.expiration.ms``."""
        now = self.now_ms()
        expired = []
        for tid, txn in list(self.transactions.items()):
            if (txn.state not in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) or txn.pending_state is not None
                    or txn.txn_last_update_timestamp + self.config.id_expiration_ms > now):
                continue
            error, coordinator_epoch = self._lookup(tid)
            if error is not ErrorCode.NONE:
                continue
            transit = txn.prepare_dead(now)
            ensureDeferred(self._write(txn, transit, coordinator_epoch)).addErrback(
                _log_failure, "Removing expired transactional id {tid} failed", tid)
            expired.append(tid)
        if expired:
            log.info("Removing {n} expired transactional id(s)", n=len(expired))
        return expired

    # -- loading and unloading (the partition's leadership) ------------------------------------------

    def on_election(self, partition: int, epoch: int, read: Callable[[], Deferred]) -> Deferred | None:
        """This broker leads ``partition`` at ``epoch``: replay it (``read()`` fires with
        ``{transactional id: TransactionLogValue}``) and take its transactions."""
        current = self.owned.get(partition, self.loading.get(partition))
        if current is not None and current >= epoch:
            return None
        self._drop_partition(partition)
        self.loading[partition] = epoch
        began = monotonic()
        d = read()

        def loaded(values: dict) -> None:
            if self.loading.get(partition) != epoch:
                return
            del self.loading[partition]
            self.owned[partition] = epoch
            prepared = []
            for tid, value in values.items():
                txn = self.transactions[tid] = TransactionMetadata.from_log(tid, value)
                if txn.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                    prepared.append(txn)
            log.info("Loaded {n} transactional id(s) of __transaction_state-{partition} (epoch {epoch}) in "
                     "{ms:.1f} ms; {p} transaction(s) to complete", n=len(values), partition=partition, epoch=epoch,
                     ms=(monotonic() - began) * 1000, p=len(prepared))
            for txn in prepared:
                self._send_markers(txn, epoch)

        def failed(failure: Failure) -> None:
            log.failure("Loading __transaction_state-{partition} failed", failure, partition=partition)
            if self.loading.get(partition) == epoch:
                del self.loading[partition]

        d.addCallbacks(loaded, failed)
        return d

    def on_resignation(self, partition: int, epoch: int | None) -> None:
        current = self.owned.get(partition, self.loading.get(partition))
        if current is None or (epoch is not None and epoch < current):
            return
        self._drop_partition(partition)

    def _drop_partition(self, partition: int) -> None:
        self.owned.pop(partition, None)
        self.loading.pop(partition, None)
        for tid in [tid for tid in self.transactions if self.partition_for(tid) == partition]:
            del self.transactions[tid]

    # -- DescribeTransactions / ListTransactions ----------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        error, _ = self._lookup(transactional_id)
        if error is not ErrorCode.NONE:
            return error, None
        txn = self.transactions.get(transactional_id)
        return (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None) if txn is None else (ErrorCode.NONE, txn)

    def list(self, states: set[TransactionState] | None, producer_ids: set[int] | None,
             min_duration_ms: int) -> tuple[ErrorCode, list[TransactionMetadata]]:
        """The transactions this broker coordinates (Kafka's ``listTransactionStates``):
        COORDINATOR_LOAD_IN_PROGRESS while a partition loads."""
        if not self.active:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        if self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        now = self.now_ms()
        found = [txn for tid, txn in sorted(self.transactions.items())
                 if (states is None or txn.state in states)
                 and (producer_ids is None or txn.producer_id in producer_ids)
                 and (min_duration_ms < 0 or (txn.state is S.ONGOING
                                              and now - txn.txn_start_timestamp >= min_duration_ms))]
        return ErrorCode.NONE, found


__all__ = ["InitPidResult", "TransactionConfig", "TransactionCoordinator"]

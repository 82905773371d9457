"""``PartitionLog``: one partition's log as the rest of the broker sees it.

This is the storage seam.  ``Partition``, ``ReplicaManager``, the request
handlers, the replica fetcher and the coordinators' loaders hold a
``PartitionLog`` and nothing else of the storage: they append (as leader or
as follower), read, ask for offsets, move the high watermark, truncate,
record leader epochs and look at producer state through these methods, in
partition terms.  How the log is kept -- segment files, indexes, descriptors,
the thread pool -- stays behind it.  Today's implementation is the file log,
``unified_log.UnifiedLog`` (over ``log.Log``, Kafka's ``LocalLog``); a
second backend (an in-memory log, a tiered one in the manner of KIP-405's
``RemoteStorageManager``) implements this class and ``LogStore`` below, and
nothing above ``twisted_kafka/log/`` changes.

``LogStore`` is the other half of the seam: where the logs of the partitions
a broker hosts are created, looked up, configured and deleted
(``log_manager.LogManager`` is the file store; ``ReplicaManager`` holds a
``LogStore``).

The types a caller needs come from here too: ``AppendOrigin``,
``LogAppendInfo``, ``FetchDataInfo``, ``TimestampAndOffset``,
``FetchIsolation``, ``AbortedTransaction``, ``OffsetsListener`` and
``ProducerStateEntry``.

Transactions (KIP-98), as the log keeps them (docs/transactions.md):

* ``append_as_leader(..., origin=AppendOrigin.COORDINATOR)`` takes the
  transaction markers the broker writes for WriteTxnMarkers
  (``protocol.records.control.build_end_txn_marker``); a client's control
  batch is INVALID_RECORD.  Transactional batches are checked as Kafka's
  ``ProducerAppendInfo`` checks them (INVALID_TXN_STATE,
  INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED);
* ``last_stable_offset``: min(first offset of the earliest open transaction,
  or of a completed one whose marker the high watermark has not passed;
  high watermark) -- the high watermark when no transaction is open;
* ``aborted_transactions(start, end)``: from the segments' transaction
  indexes (``.txnindex``);
* ``read(..., isolation=FetchIsolation.TXN_COMMITTED)``: bounded by the last
  stable offset, with the aborted transactions of what it returns
  (``FetchDataInfo.aborted_transactions``);
* ``set_offsets_listener``: told when the high watermark or the last stable
  offset moves.  The last stable offset moves forward only when the high
  watermark does (``maybe_increment_high_watermark`` answering True, or an
  append of a log whose high watermark follows its end) or the log start
  does (DeleteRecords, retention): a caller waking read_committed fetches on
  those wakes them when the last stable offset moves; the listener says so
  exactly.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from twisted.internet.defer import Deferred

from twisted_kafka.log.log_config import LogConfig
from twisted_kafka.log.producer_state import ProducerStateEntry

__all__ = [
    "AbortedTransaction",
    "AppendOrigin",
    "FetchDataInfo",
    "FetchIsolation",
    "LogAppendInfo",
    "LogStore",
    "OffsetsListener",
    "PartitionLog",
    "ProducerStateEntry",
    "TimestampAndOffset",
]


class AppendOrigin(enum.Enum):
    """Who is appending: the rules differ (Kafka's ``AppendOrigin``)."""

    CLIENT = "client"              # Produce: no control batches, counts must match offsets
    COORDINATOR = "coordinator"    # the broker's own writes (group offsets, txn markers): control batches allowed


class FetchIsolation(enum.Enum):
    """How far a read may go (Kafka's ``FetchIsolation``)."""

    LOG_END = "log_end"                  # a follower's fetch, a coordinator's load: all that is written
    HIGH_WATERMARK = "high_watermark"    # a read_uncommitted consumer
    TXN_COMMITTED = "txn_committed"      # a read_committed consumer: up to the last stable offset

    @classmethod
    def of(cls, *, follower: bool, read_committed: bool) -> FetchIsolation:
        """The isolation of a Fetch: a replica's reads the log end, a consumer's its isolation level."""
        if follower:
            return cls.LOG_END
        return cls.TXN_COMMITTED if read_committed else cls.HIGH_WATERMARK


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """What an append did (the Produce response is built from it)."""

    first_offset: int              # base offset of the first batch (-1: nothing appended)
    last_offset: int               # last offset of the last batch (-1: nothing appended)
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int           # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    num_records: int
    num_batches: int
    valid_bytes: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    """What a read returned.

    ``records`` are bytes-like chunks holding whole batches back to back (a
    read may span segments); ``first_offset`` is the base offset of the first
    batch, which is below ``fetch_offset`` when the fetch offset falls inside
    a batch (clients skip the earlier records, as with Kafka).
    ``aborted_transactions`` (a ``FetchIsolation.TXN_COMMITTED`` read only,
    else None): the transactions aborted in what the read returned, oldest
    first -- what a read_committed Fetch answers with the records.
    """

    fetch_offset: int
    records: list = field(default_factory=list)
    size: int = 0
    first_offset: int = -1
    next_offset: int = -1
    aborted_transactions: list[AbortedTransaction] | None = None

    @property
    def empty(self) -> bool:
        return self.size == 0


class TimestampAndOffset(NamedTuple):
    """A ListOffsets answer: the record's offset, its timestamp, its batch's leader epoch."""

    offset: int
    timestamp: int
    leader_epoch: int      # -1 when unknown


@dataclass(frozen=True, slots=True)
class AbortedTransaction:
    """A transaction aborted in a fetched range (Fetch's ``AbortedTransaction``, KIP-98):
    a read_committed consumer drops this producer's records from ``first_offset`` on
    until it meets the abort marker."""

    producer_id: int
    first_offset: int


#: ``listener(high_watermark, last_stable_offset)``: see ``PartitionLog.set_offsets_listener``.
OffsetsListener = Callable[[int, int], None]


class PartitionLog(ABC):
    """One partition's log (see the module docstring).

    Offsets: ``log_start_offset`` <= ``high_watermark`` <= ``committed_end_offset``
    <= ``log_end_offset``.  Methods that may wait for the disk return a
    Deferred; the rest answer at once, on the reactor.  Errors a client
    should see are ``KafkaError``s with Kafka's codes (KAFKA_STORAGE_ERROR
    for a log that cannot be written or read, OFFSET_OUT_OF_RANGE, ...).
    """

    __slots__ = ()

    # -- what it is ------------------------------------------------------------------

    @property
    @abstractmethod
    def topic(self) -> str: ...

    @property
    @abstractmethod
    def partition(self) -> int: ...

    @property
    @abstractmethod
    def topic_id(self) -> Any:
        """The topic id (a ``uuid.UUID``) the log was created for, None if it has none."""

    @property
    @abstractmethod
    def config(self) -> LogConfig:
        """The effective topic configuration (broker defaults and the topic's overrides)."""

    @abstractmethod
    def update_config(self, config: LogConfig) -> None:
        """New effective settings (AlterConfigs); they apply from the next append or check."""

    @property
    @abstractmethod
    def deleted(self) -> bool:
        """True once the partition was deleted: appends are refused, reads may fail."""

    # -- offsets ---------------------------------------------------------------------

    @property
    @abstractmethod
    def log_start_offset(self) -> int:
        """The first offset a read may ask for (moved by retention and DeleteRecords)."""

    @property
    @abstractmethod
    def log_end_offset(self) -> int:
        """The next offset to assign (moves as soon as a leader append is accepted)."""

    @property
    @abstractmethod
    def committed_end_offset(self) -> int:
        """The end of what is written and readable: ``log_end_offset`` once no append is
        being written.  A follower's fetch position counts from here."""

    @property
    @abstractmethod
    def has_writes_in_flight(self) -> bool:
        """Appends accepted and not yet written (a follower truncates only after them)."""

    @property
    @abstractmethod
    def size(self) -> int:
        """Bytes the log holds (what ``retention.bytes`` limits)."""

    @property
    @abstractmethod
    def num_segments(self) -> int:
        """Segments the log has (Kafka's ``kafka.log:type=Log,name=NumLogSegments``)."""

    # -- the high watermark ------------------------------------------------------------

    @property
    @abstractmethod
    def high_watermark(self) -> int:
        """The end of what every in-sync replica has: consumers read below it."""

    @abstractmethod
    def update_high_watermark(self, offset: int) -> int:
        """Set the high watermark (clamped to [log start, committed end]); the value taken.

        For the loader's checkpointed value; replication moves it forward with
        ``maybe_increment_high_watermark``."""

    @abstractmethod
    def maybe_increment_high_watermark(self, offset: int) -> bool:
        """Move the high watermark forward to ``offset`` (clamped to the committed end); True
        if it moved -- the only time, besides appends and log start moves, that the last stable
        offset moves forward.  The leader calls it with the smallest log end of its ISR, a
        follower with the leader's high watermark."""

    @abstractmethod
    def high_watermark_follows_log_end(self, follows: bool) -> None:
        """With ``follows`` (a leader without followers) the high watermark is the committed
        end after every append, and is moved there now; without it only
        ``maybe_increment_high_watermark``/``update_high_watermark`` move it."""

    # -- transactions (KIP-98) ---------------------------------------------------------

    @property
    @abstractmethod
    def last_stable_offset(self) -> int:
        """Below it every transaction is decided and its marker below the high watermark:
        read_committed consumers read below it, ListOffsets LATEST answers it for them (see
        the module docstring).  The high watermark when no transaction is open."""

    @abstractmethod
    def aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTransaction]:
        """The transactions aborted in [``start_offset``, ``upper_bound_offset``) -- their marker at or
        after the start, their first offset before the bound -- oldest first: what a
        read_committed Fetch of that range answers with its records."""

    @abstractmethod
    def set_offsets_listener(self, listener: OffsetsListener | None) -> None:
        """Call ``listener(high_watermark, last_stable_offset)`` on the reactor each time either
        changes (forward or back: truncation), from now on (None: stop).  The hook for whoever
        wakes fetches waiting at the last stable offset; one listener per log."""

    # -- appends -----------------------------------------------------------------------

    @abstractmethod
    def append_as_leader(self, records: Any, leader_epoch: int, now_ms: int | None = None, *,
                         origin: AppendOrigin = AppendOrigin.CLIENT,
                         produce_version: int | None = None) -> Deferred[LogAppendInfo]:
        """Validate the producer's batches, assign them offsets and ``leader_epoch``, and append.

        Fires with the ``LogAppendInfo`` once the records are readable and as
        durable as the topic's flush policy asks; appends become readable and
        fire in the order they were accepted.  Fails with ``KafkaError``
        (INVALID_RECORD, CORRUPT_MESSAGE, OUT_OF_ORDER_SEQUENCE_NUMBER,
        INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, TRANSACTION_COORDINATOR_FENCED,
        KAFKA_STORAGE_ERROR, ...); a duplicate of an idempotent producer's
        batch answers with the original's offsets and writes nothing.
        ``origin=AppendOrigin.COORDINATOR`` is the broker's own write: its
        control batches (transaction markers, one per append) are taken, a
        client's are INVALID_RECORD.
        """

    @abstractmethod
    def append_as_follower(self, records: Any) -> LogAppendInfo:
        """Append a leader's batches as they are (offsets, epochs, timestamps kept); raises
        ``KafkaError``.  Leader epochs of the batches are recorded."""

    # -- reads -------------------------------------------------------------------------

    @abstractmethod
    def read(self, fetch_offset: int, max_bytes: int, *, isolation: FetchIsolation = FetchIsolation.LOG_END,
             max_offset: int | None = None, min_one_message: bool = True) -> Deferred[FetchDataInfo]:
        """Whole batches from the one holding ``fetch_offset``, up to ``max_bytes``.

        Reads stop before the bound of ``isolation`` and, when given, before
        ``max_offset`` (a reader that replays up to a point it chose, such as
        a coordinator loading its partition).  ``TXN_COMMITTED`` reads stop at
        the last stable offset and answer the aborted transactions of what
        they return (``FetchDataInfo.aborted_transactions``).  With
        ``min_one_message`` the first batch comes whole even if larger than
        ``max_bytes`` (KIP-74).
        Fails with ``KafkaError``: OFFSET_OUT_OF_RANGE outside [log start,
        log end], CORRUPT_MESSAGE for damaged data, KAFKA_STORAGE_ERROR.
        """

    @abstractmethod
    def fetch_offset_by_timestamp(self, timestamp: int) -> Deferred[TimestampAndOffset | None]:
        """ListOffsets by time (KIP-79): the first record with a timestamp >= ``timestamp``."""

    @abstractmethod
    def fetch_offset_of_max_timestamp(self) -> Deferred[TimestampAndOffset | None]:
        """ListOffsets MAX_TIMESTAMP (KIP-734): the first record with the largest timestamp."""

    # -- removing data -----------------------------------------------------------------

    @abstractmethod
    def truncate_to(self, offset: int) -> bool:
        """Follower truncation (KIP-101): drop everything from ``offset`` on; True if anything went."""

    @abstractmethod
    def truncate_fully_and_start_at(self, offset: int) -> None:
        """A follower behind its leader's log start: drop the whole log and continue at ``offset``."""

    @abstractmethod
    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start to ``offset`` (-1: the high watermark); the new log
        start.  OFFSET_OUT_OF_RANGE above the high watermark.  Durable once the store
        checkpoints log start offsets (``LogStore.checkpoint_log_start_offsets``)."""

    # -- leader epochs (KIP-101, KIP-279) ----------------------------------------------

    @property
    @abstractmethod
    def latest_epoch(self) -> int:
        """The newest leader epoch the log knows (-1: none)."""

    @abstractmethod
    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> bool:
        """Record that leader epoch ``epoch`` starts at ``start_offset`` (a new leader does it
        when its leadership begins); True if anything changed."""

    @abstractmethod
    def epoch_for_offset(self, offset: int) -> int:
        """The leader epoch ``offset`` was written under (-1: unknown)."""

    @abstractmethod
    def epoch_entries(self) -> list[tuple[int, int]]:
        """Every (leader epoch, its start offset) the log knows, oldest first."""

    @abstractmethod
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch <= ``epoch``, the offset where it ends)."""

    # -- producer state (idempotence, KIP-98) ------------------------------------------

    @abstractmethod
    def producer_state_entry(self, producer_id: int) -> ProducerStateEntry | None:
        """What the log knows of a producer (its epoch, its last batches, the coordinator epoch
        of its last marker, the first offset of its open transaction), if anything."""

    @abstractmethod
    def active_producers(self) -> list[ProducerStateEntry]:
        """Every producer the log knows (DescribeProducers, KIP-664), by producer id."""

    @abstractmethod
    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` (never one whose transaction
        is open); how many were forgotten."""

    # -- durability --------------------------------------------------------------------

    @abstractmethod
    def flush(self, up_to_offset: int | None = None) -> Deferred[int]:
        """Make the log durable up to ``up_to_offset`` (default: the committed end); fires with
        the offset it is durable to."""

    @abstractmethod
    def when_idle(self) -> Deferred[Any]:
        """Fires when no write or flush of this log is running or queued."""


class LogStore(ABC):
    """Where the logs of the partitions a broker hosts live: one ``PartitionLog`` each.

    ``ReplicaManager`` uses this and nothing more of the storage.
    """

    @abstractmethod
    def create_log(self, topic: str, partition: int, topic_id: Any = None,
                   topic_config: Mapping[str, Any] | None = None) -> PartitionLog:
        """The log of ``topic``-``partition``, created empty at offset 0 if needed (idempotent).

        ``topic_config`` (topic key overrides) replaces the topic's stored
        overrides when given.  Raises ``KafkaError``: INCONSISTENT_TOPIC_ID if
        the log exists under another topic id, KAFKA_STORAGE_ERROR if it
        cannot be made (another try may succeed; nothing is left behind).
        """

    @abstractmethod
    def get_log(self, topic: str, partition: int) -> PartitionLog | None: ...

    #: The directories this store keeps logs in (``log.dirs``), absolute.
    log_dirs: list[str]

    @abstractmethod
    def all_logs(self) -> Sequence[PartitionLog]:
        """Every partition log this store holds (DescribeLogDirs, metrics)."""

    @abstractmethod
    def log_dir_of(self, topic: str, partition: int) -> str | None:
        """The directory of ``log_dirs`` holding a partition's log, or None if it holds none."""

    @abstractmethod
    def delete_log(self, topic: str, partition: int) -> Deferred[bool]:
        """Remove a partition's log; fires (True) when its data is gone, False if there was none."""

    @abstractmethod
    def log_config(self, topic: str) -> LogConfig:
        """The effective ``LogConfig`` of ``topic`` (broker defaults and its overrides)."""

    @abstractmethod
    def update_topic_config(self, topic: str, overrides: Mapping[str, Any]) -> LogConfig:
        """Replace a topic's overrides (AlterConfigs) and apply them to its logs."""

    @abstractmethod
    def checkpoint_log_start_offsets(self) -> Deferred[Any]:
        """Make every log's start offset durable (after DeleteRecords)."""

"""Per-partition producer state for idempotent and transactional producers: Kafka's ``ProducerStateManager``.

An idempotent producer (KIP-98) gets a producer id and epoch from
InitProducerId and numbers its batches per partition: each batch carries
``producerId``, ``producerEpoch`` and ``baseSequence`` (its records take
``baseSequence .. baseSequence + lastOffsetDelta``, wrapping after
2^31 - 1).  For each producer id seen on the partition the log keeps its
epoch and the metadata of its last 5 batches (Kafka's
``NUM_BATCHES_TO_RETAIN``: a producer has at most 5 requests in flight),
each as (last sequence, last offset, offset delta, max timestamp) — the
first sequence and offset follow from the delta.

A client's batch with a producer id (``producerId >= 0``; aiokafka's
non-idempotent batches carry -1 with sequence 0 and are never looked at) is
checked before it gets offsets, with Kafka's rules (Kafka 2.5+, KIP-360;
``ProducerAppendInfo``):

* **duplicate** — same epoch, and the exact sequence range of one of the 5
  remembered batches: nothing is appended and the append answers that
  batch's offsets (a retry after a lost response);
* **stale epoch** — an epoch below the producer's: INVALID_PRODUCER_EPOCH.
  (Kafka answers this, not PRODUCER_FENCED, on the produce path since 2.7;
  PRODUCER_FENCED belongs to the transaction coordinator.);
* **new epoch** — a higher epoch must start at sequence 0, else
  OUT_OF_ORDER_SEQUENCE_NUMBER;
* **same epoch** — the first sequence must follow the last one (0 after
  2^31 - 1), else OUT_OF_ORDER_SEQUENCE_NUMBER (a gap, or an old batch that
  is no longer among the 5);
* **unknown producer id** — never seen, or its state expired: accepted with
  any sequence.  Before KIP-360 (Kafka < 2.5) a non-zero sequence was
  UNKNOWN_PRODUCER_ID; Kafka no longer returns it on produce, and neither
  does this broker.

The broker's own writes (group offsets) use producer id -1 and are not
checked; Kafka checks only the epoch of coordinator writes (``Checks.EPOCH``),
and replicated or replayed batches not at all (``Checks.NONE``).

Transactions (KIP-98).  A transactional batch (attributes bit 4) starts its
producer's transaction when none is open -- the entry's
``current_txn_first_offset`` becomes the batch's base offset and the
transaction joins the *ongoing* ones (Kafka's ``ongoingTxns``) -- and
continues it otherwise.  A non-transactional batch from a producer with an
open transaction is INVALID_TXN_STATE.  A transaction marker (a control
batch of the coordinator, ``protocol.records.control``) ends it: checked
for the epoch (INVALID_PRODUCER_EPOCH below the producer's) and the
coordinator epoch (TRANSACTION_COORDINATOR_FENCED below the last one the
partition saw), it sets the producer's epoch (a bumped epoch forgets the
batches, so the next batch starts at sequence 0), its coordinator epoch,
and -- if a transaction was open -- completes it (``CompletedTxn``: producer
id, first offset, marker offset, aborted or not).  A completed transaction
stays *unstable* until the high watermark passes its marker (Kafka's
``unreplicatedTxns``); the first unstable offset is the smallest first
offset among the ongoing and the unreplicated transactions, and the log's
last stable offset is min(first unstable offset, high watermark)
(``Log.last_stable_offset``).  An aborted transaction becomes an entry of
the marker's segment's transaction index, with the last stable offset as
of its abort (``txn_index``; Kafka's ``lastStableOffset(completedTxn)``:
the first offset of the earliest other producer's open transaction, else
the marker's offset + 1).  PRODUCER_FENCED belongs to the transaction
coordinator; the log answers INVALID_PRODUCER_EPOCH, as Kafka's does.

When the state changes: checking an append yields a ``ProducerAppend``
(the new entries, nothing changed yet); ``Log`` applies it with
``commit`` once the append has its offsets and file position, so the next
append of the same producer — with 5 requests in flight it is often
prepared before this one is written — is checked against it.  ``commit``
returns what it replaced: if the write fails, ``Log`` puts it back
(``undo``), newest first, before the next append is taken.

Expiry: a producer is forgotten ``producer.id.expiration.ms`` (default one
day) after the max timestamp of its last batch, checked every
``producer.id.expiration.check.interval.ms`` (``remove_expired``), and when
a snapshot is loaded -- never while its transaction is open (Kafka's
rule).  A forgotten producer's next batch is accepted as from an unknown
one.

Snapshots (``<offset>.snapshot`` in the partition directory, twenty digits
as for segments): the state as of that offset, in Kafka's
``ProducerSnapshot`` v1 format — int16 version (1), uint32 CRC-32C of
everything after it, int32 count, then per entry: producer id (int64),
epoch (int16), last sequence (int32), last offset (int64), offset delta
(int32), timestamp (int64), coordinator epoch (int32), first offset of the
ongoing transaction (int64, -1).  Kafka writes one entry per producer (its
last batch); this broker writes one per remembered batch, oldest first, so
duplicates of all 5 are still recognised after a restart.  Kafka reading
such a file keeps the last entry of each producer — its own state — and
this broker reads Kafka's files as they are.  Loading one makes every entry
with a first offset an ongoing transaction again, so a restart -- clean or
after a kill -9 -- keeps open transactions and the last stable offset.

* taken when a segment is rolled (at the new segment's base offset) and
  written, with an fsync, by the flush of the finished segment in the
  I/O pool (``write_snapshots``); and at clean shutdown at the log end
  (``Log.snapshot_for_shutdown``: only for logs that have producers or
  snapshots, so a broker whose producers are not idempotent writes none);
* deleted with the segment whose base offset they carry (retention,
  DeleteRecords), and above the log end when a failed write is rolled back;
* loaded at start-up (``rebuild``, Kafka's ``rebuildProducerState``):
  snapshots not at a segment base are removed, except the newest if it is
  beyond every base (the one written at shutdown); those above the log end
  or at or below the log start are removed; the newest one left is loaded
  (a damaged one is removed and the next older tried), dropping expired
  producers, and the batches after it are replayed from the segments —
  headers only, no sequence checks.  With no snapshot at all, the replay
  starts at the log start, so the state covers the whole retained log as in
  Kafka — except after a clean shutdown, which means no idempotent
  producer wrote since the last start (Kafka's rule).  After a replay a
  snapshot is written at the log end (and, when the replay was long, at the
  base of the last two segments) so the next start replays less.  When
  segments' transaction indexes must be rebuilt (``LogSegment.txn_index_stale``:
  recovered after a crash, or a damaged file), snapshots above the first of
  them are removed first, as Kafka's ``LogLoader.recoverSegment`` does, and
  the replay appends the aborted transactions to their indexes.

For the log cleaner: ``last_batch_offsets`` (Kafka's
``lastRecordsOfActiveProducers``) maps each producer to the last offset of
its last batch, and ``retains_batch(header, last_batch_offsets)`` says
whether a batch is one of those.  Kafka's cleaner keeps such a batch even
when compaction removes all of its records (an empty batch:
``RETAIN_EMPTY``), so a producer's last sequence survives cleaning and a
restart.
"""

from __future__ import annotations

import contextlib
import enum
import os
import struct
import threading
from bisect import insort
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from crc32c import crc32c
from twisted.logger import Logger

from twisted_kafka.log.checkpoints import write_atomically
from twisted_kafka.log.file_handles import FileHandleCache
from twisted_kafka.log.layout import (
    DELETED_SUFFIX,
    PRODUCER_SNAPSHOT_SUFFIX,
    parse_snapshot_file,
    segment_file_name,
)
from twisted_kafka.log.txn_index import AbortedTxn
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.records.batch import CONTROL_MASK, TRANSACTIONAL_MASK, InvalidRecordBatch
from twisted_kafka.protocol.records.control import EndTransactionMarker, parse_end_txn_marker

log = Logger()

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NUM_BATCHES_TO_RETAIN = 5
INT32_MAX = 0x7FFFFFFF

#: Kafka's defaults (``producer.id.expiration.ms``, ``producer.id.expiration.check.interval.ms``).
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
DEFAULT_EXPIRATION_CHECK_INTERVAL_MS = 600_000

SNAPSHOT_VERSION = 1
_VERSION_AND_CRC = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_ENTRY = struct.Struct(">qhiqiqiq")
_ENTRIES_OFFSET = _VERSION_AND_CRC.size          # the CRC covers the bytes from here to the end
_HEADER_SIZE = _VERSION_AND_CRC.size + _COUNT.size


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment``, wrapping to 0 after 2^31 - 1 (Kafka's ``incrementSequence``)."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    """``sequence - decrement``, wrapping below 0 (Kafka's ``decrementSequence``)."""
    if sequence < decrement:
        return sequence - decrement + INT32_MAX + 1
    return sequence - decrement


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


class Checks(enum.IntEnum):
    """How much of an append is checked (Kafka's ``AppendOrigin`` decides it)."""

    ALL = 0          # a client's Produce: duplicates, epoch, sequence
    EPOCH = 1        # the broker's own writes: the epoch only
    NONE = 2         # replication and replay at start-up: the state follows the batches


class BatchMetadata(NamedTuple):
    """One remembered batch of a producer (Kafka's ``BatchMetadata``)."""

    last_seq: int
    last_offset: int
    offset_delta: int        # last offset - first offset (= last seq - first seq)
    timestamp: int           # the batch's max timestamp

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry(NamedTuple):
    """What the partition knows of one producer id (immutable: an update is a new entry)."""

    producer_id: int
    producer_epoch: int
    batches: tuple[BatchMetadata, ...]     # oldest first, at most NUM_BATCHES_TO_RETAIN
    last_timestamp: int                    # max timestamp of its last batch (what expiry measures)
    coordinator_epoch: int = -1            # of the last transaction marker seen (-1: none)
    current_txn_first_offset: int = -1     # first offset of its open transaction (-1: none)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def duplicate_of(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The remembered batch with exactly this sequence range (the caller matched the epoch)."""
        for batch in self.batches:
            if batch.last_seq == last_seq and batch.first_seq == first_seq:
                return batch
        return None

    def with_batch(self, epoch: int, batch: BatchMetadata, txn_first_offset: int | None = None) -> ProducerStateEntry:
        """This producer after ``batch`` (a new epoch forgets the old epoch's batches); its open
        transaction now starts at ``txn_first_offset`` (None: unchanged)."""
        batches = self.batches if epoch == self.producer_epoch else ()
        if len(batches) >= NUM_BATCHES_TO_RETAIN:
            batches = batches[1 - NUM_BATCHES_TO_RETAIN:]
        return ProducerStateEntry(self.producer_id, epoch, batches + (batch,), batch.timestamp,
                                  self.coordinator_epoch,
                                  self.current_txn_first_offset if txn_first_offset is None else txn_first_offset)

    def with_marker(self, epoch: int, coordinator_epoch: int, timestamp: int) -> ProducerStateEntry:
        """This producer after a transaction marker (Kafka's ``ProducerStateEntry.update``): its
        epoch (a new one forgets the batches), the coordinator's epoch, no open transaction."""
        batches = self.batches if epoch == self.producer_epoch else ()
        return ProducerStateEntry(self.producer_id, epoch, batches, timestamp, coordinator_epoch, -1)


class CompletedTxn(NamedTuple):
    """A transaction a marker ended (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int         # the marker's offset
    is_aborted: bool


def _empty_entry(producer_id: int) -> ProducerStateEntry:
    return ProducerStateEntry(producer_id, NO_PRODUCER_EPOCH, (), NO_TIMESTAMP)


class ProducerStateConfig:
    """The broker-wide settings every partition's producer state reads (changed at runtime
    by a dynamic ``producer.id.expiration.ms``: the next expiry check uses it)."""

    __slots__ = ("producer_id_expiration_ms",)

    def __init__(self, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS):
        self.producer_id_expiration_ms = producer_id_expiration_ms

    def __repr__(self) -> str:
        return f"ProducerStateConfig(producer_id_expiration_ms={self.producer_id_expiration_ms})"


class ProducerAppend:
    """The producer side of one append: each batch checked, the new entries collected, the
    transactions it starts (``started``: (first offset, producer id)) and ends (``completed``).

    Nothing in the manager changes until ``ProducerStateManager.commit``.
    """

    __slots__ = ("_producers", "_checks", "_where", "updated", "started", "completed")

    def __init__(self, producers: dict[int, ProducerStateEntry], checks: Checks, where: str):
        self._producers = producers
        self._checks = checks
        self._where = where
        self.updated: dict[int, ProducerStateEntry] = {}
        self.started: list[tuple[int, int]] = []
        self.completed: list[CompletedTxn] = []

    def add(self, header, first_offset: int, last_offset: int, timestamp: int,
            marker: EndTransactionMarker | None = None) -> BatchMetadata | None:
        """Check the batch with ``header`` (to be stored at ``first_offset``..``last_offset``,
        max timestamp ``timestamp``; ``marker``: what a control batch says, None for one the
        cleaner emptied) and note its effect.

        Returns the original batch's metadata when it is a duplicate (then the
        whole append is answered with it); raises ``KafkaError``
        (INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_TXN_STATE,
        TRANSACTION_COORDINATOR_FENCED) as described in the module docstring.
        """
        pid = header.producer_id
        epoch = header.producer_epoch
        first_seq = header.base_sequence
        last_seq = NO_SEQUENCE if first_seq < 0 else increment_sequence(first_seq, header.last_offset_delta)
        committed = self._producers.get(pid)
        current = self.updated.get(pid, committed)
        checks = self._checks
        control = header.attributes & CONTROL_MASK
        if control and marker is None:
            return None          # an emptied marker: its transaction is gone (Kafka ignores it too)
        if checks is Checks.ALL and committed is not None and committed.producer_epoch == epoch:
            duplicate = committed.duplicate_of(first_seq, last_seq)
            if duplicate is not None:
                return duplicate
        current_epoch = NO_PRODUCER_EPOCH if current is None else current.producer_epoch
        if epoch < current_epoch and checks is not Checks.NONE:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                             f"Epoch of producer {pid} at offset {first_offset} in {self._where} is {epoch}, "
                             f"which is smaller than the last seen epoch {current_epoch}")
        base = current if current is not None else _empty_entry(pid)
        txn_first = base.current_txn_first_offset
        if control:
            assert marker is not None
            if base.coordinator_epoch > marker.coordinator_epoch and checks is not Checks.NONE:
                raise KafkaError(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                                 f"Invalid coordinator epoch for producerId {pid} at offset {first_offset} in "
                                 f"partition {self._where}: {marker.coordinator_epoch} (zombie), "
                                 f"{base.coordinator_epoch} (current)")
            if txn_first >= 0:
                # Only a marker that ends data counts: an empty transaction changes no offset.
                self.completed.append(CompletedTxn(pid, txn_first, first_offset, marker.is_abort))
            self.updated[pid] = base.with_marker(epoch, marker.coordinator_epoch, timestamp)
            return None
        if checks is Checks.ALL:
            if epoch != current_epoch:
                if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
                    raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                     f"Invalid sequence number for new epoch of producer {pid} at offset "
                                     f"{first_offset} in partition {self._where}: {epoch} (request epoch), "
                                     f"{first_seq} (seq. number), {current_epoch} (current producer epoch)")
            elif committed is not None and committed.producer_epoch != NO_PRODUCER_EPOCH:
                current_last = NO_SEQUENCE if current is None else current.last_seq
                if not in_sequence(current_last, first_seq):
                    raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                     f"Out of order sequence number for producer {pid} at offset {first_offset} "
                                     f"in partition {self._where}: {first_seq} (incoming seq. number), "
                                     f"{current_last} (current end sequence number)")
        new_txn_first = None
        if header.attributes & TRANSACTIONAL_MASK:
            if txn_first < 0:                        # it begins a transaction
                new_txn_first = first_offset
                self.started.append((first_offset, pid))
        elif txn_first >= 0 and checks is not Checks.NONE:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                             f"Expected transactional write from producer {pid} at offset {first_offset} in "
                             f"partition {self._where}: its transaction started at offset {txn_first}")
        self.updated[pid] = base.with_batch(
            epoch, BatchMetadata(last_seq, last_offset, last_offset - first_offset, timestamp), new_txn_first)
        return None


class Undo:
    """What ``ProducerStateManager.commit`` changed, for ``undo``: the entries it replaced
    ((producer id, previous entry or None), in order) and the transactions it started and
    completed.  ``aborted`` are the transaction index entries of the aborted ones, for the
    segment holding their markers."""

    __slots__ = ("entries", "started", "completed", "aborted")

    def __init__(self, entries: list[tuple[int, ProducerStateEntry | None]], started: list[tuple[int, int]],
                 completed: list[CompletedTxn], aborted: list[AbortedTxn]):
        self.entries = entries
        self.started = started
        self.completed = completed
        self.aborted = aborted


class CorruptSnapshotError(ValueError):
    """A snapshot file that is not a valid ``ProducerSnapshot``."""


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """A snapshot file's bytes (module docstring: one row per remembered batch, oldest first)."""
    pack = _ENTRY.pack
    rows = []
    for e in entries:
        batches = e.batches
        if not batches:
            rows.append(pack(e.producer_id, e.producer_epoch, NO_SEQUENCE, -1, 0, e.last_timestamp,
                             e.coordinator_epoch, e.current_txn_first_offset))
            continue
        last = len(batches) - 1
        for i, b in enumerate(batches):
            rows.append(pack(e.producer_id, e.producer_epoch, b.last_seq, b.last_offset, b.offset_delta,
                             e.last_timestamp if i == last else b.timestamp, e.coordinator_epoch,
                             e.current_txn_first_offset))
    body = _COUNT.pack(len(rows)) + b"".join(rows)
    return _VERSION_AND_CRC.pack(SNAPSHOT_VERSION, crc32c(body)) + body


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """The entries of a snapshot file's bytes; raises ``CorruptSnapshotError``."""
    if len(data) < _HEADER_SIZE:
        raise CorruptSnapshotError(f"{len(data)} bytes are too short for a snapshot")
    version, crc = _VERSION_AND_CRC.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    computed = crc32c(memoryview(data)[_ENTRIES_OFFSET:])
    if computed != crc:
        raise CorruptSnapshotError(f"CRC mismatch: stored {crc}, computed {computed}")
    (count,) = _COUNT.unpack_from(data, _ENTRIES_OFFSET)
    if count < 0 or _HEADER_SIZE + count * _ENTRY.size != len(data):
        raise CorruptSnapshotError(f"{count} entries do not fill {len(data)} bytes")
    entries: dict[int, ProducerStateEntry] = {}
    for pid, epoch, last_seq, last_offset, delta, ts, coordinator_epoch, txn_first in \
            _ENTRY.iter_unpack(memoryview(data)[_HEADER_SIZE:]):
        previous = entries.get(pid)
        batches = previous.batches if previous is not None and previous.producer_epoch == epoch else ()
        if last_offset >= 0:
            batches = (batches + (BatchMetadata(last_seq, last_offset, delta, ts),))[-NUM_BATCHES_TO_RETAIN:]
        entries[pid] = ProducerStateEntry(pid, epoch, batches, ts, coordinator_epoch, txn_first)
    return list(entries.values())


def retains_batch(header, last_batch_offsets: dict[int, int]) -> bool:
    """Whether the log cleaner must keep the batch with ``header`` (if need be without records):
    it is the last batch of a producer the partition still remembers."""
    return header.producer_id >= 0 and last_batch_offsets.get(header.producer_id) == header.last_offset


class ProducerStateManager:
    """Every producer id of one partition (module docstring).

    Threading: the state and ``commit``/``undo``/``take_snapshot`` belong to
    the reactor; ``write_snapshots`` runs in the I/O pool (it writes what
    ``take_snapshot`` captured); ``rebuild`` runs in the pool while the log
    is loaded, before anything else sees it.
    """

    def __init__(self, dir: str, name: str, config: ProducerStateConfig | None = None):
        self.dir = dir
        self.name = name                 # "<topic>-<partition>", for messages
        self.config = config if config is not None else ProducerStateConfig()
        self.producers: dict[int, ProducerStateEntry] = {}
        #: Open transactions: (first offset, producer id), by first offset (Kafka's ``ongoingTxns``).
        self.ongoing: list[tuple[int, int]] = []
        #: Completed transactions whose marker the high watermark may not have passed yet:
        #: (first offset, marker offset, producer id), by first offset (Kafka's ``unreplicatedTxns``).
        self.unreplicated: list[tuple[int, int, int]] = []
        #: Offsets of the snapshots on disk or waiting to be written, ascending.
        self.snapshot_offsets: list[int] = []
        self._pending: dict[int, list[ProducerStateEntry]] = {}
        self._doomed: list[str] = []                 # renamed ``.deleted``, unlinked by write_snapshots
        self._lock = threading.Lock()                # _pending, _doomed
        self._io_lock = threading.Lock()             # snapshot files being written or removed
        #: The log manager's descriptor cache (set by ``Log``): snapshots are opened through it.
        self.files: FileHandleCache | None = None

    def __repr__(self) -> str:
        return f"<ProducerStateManager {self.name} producers={len(self.producers)}>"

    # -- appends ------------------------------------------------------------------------

    def begin_append(self, checks: Checks = Checks.ALL) -> ProducerAppend:
        return ProducerAppend(self.producers, checks, self.name)

    def commit(self, append: ProducerAppend) -> Undo:
        """Apply a checked append; returns what it changed, for ``undo``, with the transaction
        index entries of the transactions it aborted.  As Kafka's append: the producers are
        updated and the transactions begun first, then each one ended is completed, its
        entry's last stable offset computed just before (``last_stable_offset_of``)."""
        producers = self.producers
        replaced: list[tuple[int, ProducerStateEntry | None]] = []
        for pid, entry in append.updated.items():
            replaced.append((pid, producers.get(pid)))
            producers[pid] = entry
        for first, pid in append.started:
            insort(self.ongoing, (first, pid))
        aborted = []
        for txn in append.completed:
            if txn.is_aborted:
                aborted.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset,
                                          self.last_stable_offset_of(txn)))
            self._complete(txn)
        return Undo(replaced, append.started, append.completed, aborted)

    def undo(self, undo: Undo) -> None:
        """Put back what a ``commit`` changed (appends undone newest first)."""
        for txn in reversed(undo.completed):
            with contextlib.suppress(ValueError):
                self.unreplicated.remove((txn.first_offset, txn.last_offset, txn.producer_id))
            insort(self.ongoing, (txn.first_offset, txn.producer_id))
        for started in undo.started:
            with contextlib.suppress(ValueError):
                self.ongoing.remove(started)
        producers = self.producers
        for pid, previous in reversed(undo.entries):
            if previous is None:
                producers.pop(pid, None)
            else:
                producers[pid] = previous

    # -- transactions -------------------------------------------------------------------

    def _complete(self, txn: CompletedTxn) -> None:
        """Kafka's ``completeTxn``: the transaction leaves the open ones and waits for the high
        watermark to pass its marker."""
        with contextlib.suppress(ValueError):
            self.ongoing.remove((txn.first_offset, txn.producer_id))
        insort(self.unreplicated, (txn.first_offset, txn.last_offset, txn.producer_id))

    def last_stable_offset_of(self, txn: CompletedTxn) -> int:
        """The last stable offset once ``txn`` is complete (Kafka's ``lastStableOffset``): the first
        offset of the earliest open transaction of another producer, else the offset after the
        marker.  Recorded with an aborted transaction's index entry."""
        for first, pid in self.ongoing:
            if pid != txn.producer_id:
                return first
        return txn.last_offset + 1

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset whose transaction is undecided, or decided by a marker the high
        watermark has not passed (None: no such offset).  Kafka drops the completed transactions
        as the high watermark passes their markers (``on_high_watermark_updated``); they are also
        skipped here, so a high watermark set lower (a follower's checkpoint at load) counts
        only those it has not passed."""
        first = self.ongoing[0][0] if self.ongoing else None
        for txn_first, marker, _ in self.unreplicated:
            if first is not None and txn_first >= first:
                break
            if marker >= high_watermark:
                first = txn_first
                break
        return first

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Forget the completed transactions whose markers are below the high watermark."""
        if self.unreplicated:
            self.unreplicated = [t for t in self.unreplicated if t[1] >= high_watermark]

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Kafka's ``onLogStartOffsetIncremented``: completed transactions wholly below the log
        start are gone with their data."""
        self.on_high_watermark_updated(log_start_offset)

    def has_ongoing_transaction(self, producer_id: int) -> bool:
        entry = self.producers.get(producer_id)
        return entry is not None and entry.current_txn_first_offset >= 0

    def _clear(self) -> None:
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()

    def _load_entry(self, entry: ProducerStateEntry) -> None:
        """Kafka's ``loadProducerEntry``: an entry with an open transaction makes it ongoing."""
        self.producers[entry.producer_id] = entry
        if entry.current_txn_first_offset >= 0:
            insort(self.ongoing, (entry.current_txn_first_offset, entry.producer_id))

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    # -- expiry -------------------------------------------------------------------------

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return entry.current_txn_first_offset < 0 and \
            now_ms - entry.last_timestamp >= self.config.producer_id_expiration_ms

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for ``producer.id.expiration.ms`` (never one with an open
        transaction); how many were forgotten."""
        expired = [pid for pid, entry in self.producers.items() if self.is_expired(entry, now_ms)]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    # -- the log cleaner ----------------------------------------------------------------

    def last_batch_offsets(self) -> dict[int, int]:
        """Producer id -> last offset of its last batch, for every producer with one."""
        return {pid: entry.batches[-1].last_offset for pid, entry in self.producers.items() if entry.batches}

    # -- snapshots ----------------------------------------------------------------------

    def snapshot_path(self, offset: int) -> str:
        return os.path.join(self.dir, segment_file_name(offset, PRODUCER_SNAPSHOT_SUFFIX))

    @property
    def latest_snapshot_offset(self) -> int | None:
        return self.snapshot_offsets[-1] if self.snapshot_offsets else None

    def take_snapshot(self, offset: int) -> bool:
        """Capture the state as of ``offset`` (every append below it is in the state, none
        above) for a snapshot file; ``write_snapshots`` writes it.  Nothing is captured
        unless ``offset`` is beyond the latest snapshot.  On the reactor: it copies
        references to the (immutable) entries only."""
        offsets = self.snapshot_offsets
        if offsets and offsets[-1] >= offset:
            return False
        entries = list(self.producers.values())
        with self._lock:
            self._pending[offset] = entries
        offsets.append(offset)
        return True

    @property
    def has_unwritten_snapshots(self) -> bool:
        return bool(self._pending or self._doomed)

    def write_snapshots(self, *, fsync: bool = True) -> int:
        """Write the captured snapshots and remove the files of deleted ones (BLOCKING:
        run in the pool; ``Log.flush`` does).  A snapshot that cannot be written (a
        full disk) is skipped with a warning: recovery then replays from an older
        one.  Returns how many were written."""
        if not self._pending and not self._doomed:
            return 0
        written = 0
        with self._io_lock:
            with self._lock:
                pending, self._pending = self._pending, {}
                doomed, self._doomed = self._doomed, []
            for offset in sorted(pending):
                try:
                    write_atomically(self.snapshot_path(offset), encode_snapshot(pending[offset]), fsync=fsync,
                                     files=self.files)
                    written += 1
                except OSError as e:
                    log.warn("cannot write the producer state snapshot {path}: {e}; after a crash the state "
                             "is rebuilt from an older snapshot", path=self.snapshot_path(offset), e=e)
            for path in doomed:
                with contextlib.suppress(OSError):
                    os.unlink(path)
        return written

    def delete_snapshots_above(self, offset: int) -> None:
        """Forget snapshots beyond ``offset`` (a rolled-back or truncated log end)."""
        if not self.snapshot_offsets or self.snapshot_offsets[-1] <= offset:
            return
        with self._io_lock:
            with self._lock:
                for o in [o for o in self._pending if o > offset]:
                    del self._pending[o]
            keep = [o for o in self.snapshot_offsets if o <= offset]
            for o in self.snapshot_offsets[len(keep):]:
                with contextlib.suppress(OSError):
                    os.unlink(self.snapshot_path(o))
            self.snapshot_offsets = keep

    def remove_snapshots(self, offsets: Iterable[int]) -> None:
        """Segments with these base offsets were deleted: their snapshots go too (renamed
        ``.deleted`` now, unlinked by the next ``write_snapshots``)."""
        doomed = set(offsets) & set(self.snapshot_offsets)
        if not doomed:
            return
        with self._io_lock:
            renamed = []
            with self._lock:
                for o in doomed:
                    self._pending.pop(o, None)
            for o in doomed:
                path = self.snapshot_path(o)
                with contextlib.suppress(OSError):
                    os.rename(path, path + DELETED_SUFFIX)
                    renamed.append(path + DELETED_SUFFIX)
            with self._lock:
                self._doomed.extend(renamed)
            self.snapshot_offsets = [o for o in self.snapshot_offsets if o not in doomed]

    def truncate_fully(self) -> None:
        """Forget every producer, transaction and snapshot (the log starts over)."""
        self._clear()
        self.delete_snapshots_above(-1)

    # -- loading (BLOCKING) -----------------------------------------------------------

    def scan_snapshot_files(self) -> None:
        """Learn which snapshot files the partition directory holds."""
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            names = []
        self.snapshot_offsets = sorted(o for o in map(parse_snapshot_file, names) if o is not None)

    def _delete_snapshot_file(self, offset: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.snapshot_path(offset))
        self.snapshot_offsets.remove(offset)

    def remove_stray_snapshots(self, segment_bases: Sequence[int]) -> None:
        """Kafka's ``removeStraySnapshots``: keep the snapshots at segment base offsets,
        and the newest other one only if it is beyond every segment base (the one
        written at the log end by a clean shutdown)."""
        bases = set(segment_bases)
        strays = [o for o in self.snapshot_offsets if o not in bases]
        if not strays:
            return
        newest = strays.pop()
        if bases and newest < max(bases):
            strays.append(newest)
        for o in strays:
            self._delete_snapshot_file(o)

    def load_latest_snapshot(self, log_start: int, log_end: int, now_ms: int) -> int:
        """Kafka's ``truncateAndReload`` at start-up: remove snapshots above ``log_end`` or
        at or below ``log_start``, load the newest remaining one (dropping expired
        producers; a damaged file is removed and the next one tried).  Returns the
        offset the state now reflects (``log_start`` without a snapshot)."""
        for o in [o for o in self.snapshot_offsets if o > log_end or o <= log_start]:
            self._delete_snapshot_file(o)
        self._clear()
        while self.snapshot_offsets:
            offset = self.snapshot_offsets[-1]
            path = self.snapshot_path(offset)
            try:
                with open(path, "rb") as f:
                    entries = decode_snapshot(f.read())
            except (CorruptSnapshotError, OSError) as e:
                log.warn("{name}: removing the unreadable producer state snapshot {path} ({e}); an older one "
                         "or the segments are used instead", name=self.name, path=path, e=e)
                self._delete_snapshot_file(offset)
                continue
            for entry in entries:
                if not self.is_expired(entry, now_ms):
                    self._load_entry(entry)
            return offset
        return log_start

    def write_snapshot_now(self, offset: int) -> None:
        """Write a snapshot of the state at ``offset`` at once, with an fsync (loading)."""
        if self.take_snapshot(offset):
            self.write_snapshots(fsync=True)

    def rebuild(self, segments: Sequence, log_start: int, log_end: int, now_ms: int, *,
                had_clean_shutdown: bool) -> int:
        """Load the state at start-up (module docstring; Kafka's ``rebuildProducerState``):
        the newest usable snapshot, then the batches after it.  ``segments`` are the
        loaded ``LogSegment``s, oldest first; those whose transaction index is stale get it
        rebuilt by the replay (written and fsynced: some are below the recovery point and
        are flushed no more).  Returns the number of batches replayed."""
        self.scan_snapshot_files()
        self.remove_stray_snapshots([s.base_offset for s in segments])
        stale = [s.base_offset for s in segments if s.txn_index_stale]
        if stale:
            # The replay must start at or before the first stale index's segment (Kafka's
            # recoverSegment rebuilds the state up to the segment's base the same way).
            for o in [o for o in self.snapshot_offsets if o > stale[0]]:
                self._delete_snapshot_file(o)
        elif not self.snapshot_offsets and had_clean_shutdown:
            return 0
        map_end = self.load_latest_snapshot(log_start, log_end, now_ms)
        replayed = 0
        if log_end > map_end:
            snapshot_at = {s.base_offset for s in segments[-2:]}
            for i, segment in enumerate(segments):
                following = segments[i + 1].base_offset if i + 1 < len(segments) else None
                if following is not None and following <= map_end:
                    continue
                if segment.base_offset >= log_end:
                    break
                start = max(segment.base_offset, map_end, log_start)
                if segment.base_offset in snapshot_at and start == segment.base_offset:
                    self.write_snapshot_now(start)
                replayed += self.replay(segment, start, log_end)
        for segment in segments:
            if segment.txn_index_stale:
                segment.txn_index_stale = False
                try:
                    segment.txn_index.flush()
                except OSError as e:
                    log.warn("{name}: cannot write the rebuilt transaction index {path}: {e}; it is written "
                             "at the next flush", name=self.name, path=segment.txn_index.path, e=e)
        if log_end > (self.latest_snapshot_offset or -1) and (self.producers or self.snapshot_offsets):
            self.write_snapshot_now(log_end)
        if replayed:
            log.info("{name}: producer state rebuilt from {n} batch(es) after offset {start}: {count} producer(s), "
                     "{open} open transaction(s)", name=self.name, n=replayed, start=map_end,
                     count=len(self.producers), open=len(self.ongoing))
        return replayed

    def replay(self, segment, start: int, end: int) -> int:
        """Apply the batches of ``segment`` holding offsets in [``start``, ``end``) to the
        state, without checks (BLOCKING: reads batch headers, and the record of each
        transaction marker).  A segment whose transaction index is stale gets the entries of
        the transactions its markers abort.  Returns how many batches with a producer id
        were applied."""
        count = 0
        rebuild_index = segment.txn_index_stale
        try:
            found = segment.find_batch(start)
            if found is None:
                return 0
            for pos, header in segment.iter_headers(found[0]):
                if header.base_offset >= end:
                    break
                if header.producer_id < 0 or header.last_offset < start:
                    continue
                marker = None
                if header.is_control:
                    marker = self._read_marker(segment, pos, header)
                    if marker is None:
                        continue
                # One batch at a time, as Kafka's segment recovery (``updateProducerState``): the
                # last stable offset of an aborted transaction's entry depends on the order.
                append = self.begin_append(Checks.NONE)
                append.add(header, header.base_offset, header.last_offset, header.max_timestamp, marker)
                undo = self.commit(append)
                if rebuild_index:
                    for txn in undo.aborted:
                        segment.txn_index.append(txn)
                count += 1
        except InvalidRecordBatch as e:
            log.warn("{name}: replaying producer state stopped in segment {base}: {e}", name=self.name,
                     base=segment.base_offset, e=e)
        return count

    def _read_marker(self, segment, pos: int, header) -> EndTransactionMarker | None:
        """The marker of the control batch at ``pos`` (None: emptied, or not a marker)."""
        data = segment.read(pos, header.size)
        try:
            return parse_end_txn_marker(data, 0, header)
        except InvalidRecordBatch as e:
            log.warn("{name}: the control batch at offset {offset} is not a transaction marker ({e}); "
                     "skipped", name=self.name, offset=header.base_offset, e=e)
            return None


__all__ = [
    "BatchMetadata", "Checks", "CompletedTxn", "CorruptSnapshotError", "NUM_BATCHES_TO_RETAIN", "ProducerAppend",
    "ProducerStateConfig", "ProducerStateEntry", "ProducerStateManager", "Undo", "decode_snapshot",
    "encode_snapshot", "retains_batch",
]

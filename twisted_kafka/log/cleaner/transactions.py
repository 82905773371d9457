"""Transactions while cleaning: which batches were aborted, which markers may go (Kafka's
``CleanedTransactionMetadata``).

Kafka's rules for a compacted log with transactions (``LogCleaner``):

* the cleaner never goes past the last stable offset (``selection``), so
  every transaction it sees is decided, and the aborted ones are known ahead
  from the transaction indexes (``Log.collect_aborted_txns``);
* the batches of an aborted transaction are removed whatever their keys
  (and never enter the offset map: an aborted record must not make an older
  committed one of its key obsolete);
* a marker stays while batches of its transaction may remain: an ABORT
  marker while the cleaning still saw one of its aborted batches, a COMMIT
  marker while it saw one of its committed batches.  When the cleaning saw
  none, the marker can go -- not at once: like a tombstone it is first kept
  ``delete.retention.ms`` past that cleaning (the delete horizon of KIP-534,
  written into the batch), so a consumer reading the partition meanwhile
  still sees the transaction end; a later cleaning past the horizon removes
  it (``records.BatchFilter``);
* the cleaned segment's transaction index keeps the entries of the aborted
  transactions whose markers it keeps and whose data it saw.

One ``CleanedTransactions`` follows one pass over the log, batch by batch in
offset order: ``add_aborted`` is fed the aborted transactions of each range
before its batches, ``on_batch``/``on_control_batch`` are told every batch.
"""

from __future__ import annotations

import heapq

from twisted_kafka.log.txn_index import AbortedTxn, TransactionIndex
from twisted_kafka.protocol.records.batch import RecordBatchHeader
from twisted_kafka.protocol.records.control import EndTransactionMarker

__all__ = ["CleanedTransactions"]


class _Aborted:
    """An aborted transaction under way in the pass, and whether one of its batches was seen."""

    __slots__ = ("txn", "seen_batch")

    def __init__(self, txn: AbortedTxn):
        self.txn = txn
        self.seen_batch = False


class CleanedTransactions:
    """The transaction state of one pass of the cleaner over a log (module docstring)."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, int, AbortedTxn]] = []       # heap by first offset
        self._known: set[tuple[int, int]] = set()                   # (producer id, first offset) added
        self._aborted: dict[int, _Aborted] = {}                     # producer id -> its aborted txn under way
        self._committed: set[int] = set()                           # producers with a committed txn under way
        #: Where the entries of the aborted transactions kept go (the cleaned segment's index).
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted(self, txns: list[AbortedTxn]) -> None:
        """The aborted transactions of the range about to be read (a transaction spanning ranges
        may come more than once)."""
        for txn in txns:
            key = (txn.producer_id, txn.first_offset)
            if key not in self._known:
                self._known.add(key)
                heapq.heappush(self._pending, (txn.first_offset, txn.last_offset, txn))

    def _begin_up_to(self, offset: int) -> None:
        pending = self._pending
        while pending and pending[0][0] <= offset:
            _, _, txn = heapq.heappop(pending)
            self._aborted.setdefault(txn.producer_id, _Aborted(txn))

    def on_batch(self, header: RecordBatchHeader) -> bool:
        """A data batch: True when it belongs to an aborted transaction (it can go)."""
        self._begin_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._aborted.get(header.producer_id)
        if aborted is not None:
            aborted.seen_batch = True
            return True
        self._committed.add(header.producer_id)
        return False

    def on_control_batch(self, header: RecordBatchHeader, marker: EndTransactionMarker | None) -> bool:
        """A control batch (``marker`` None: emptied by an earlier cleaning, or unreadable): True
        when no batch of its transaction was seen in this pass (the marker may go, after its
        delete horizon)."""
        self._begin_up_to(header.last_offset)
        if marker is None:
            return True
        pid = header.producer_id
        if marker.is_abort:
            aborted = self._aborted.pop(pid, None)
            if aborted is not None and aborted.seen_batch:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(aborted.txn)
                return False
            return True
        if pid in self._committed:
            self._committed.discard(pid)
            return False
        return True

"""The last batches of every producer in a log, from the batch headers.

Kafka's cleaner keeps the last batch of each *active* producer, even when
compaction removed all of its records, so the producer's last sequence
number (the batch header's base sequence + last offset delta) and epoch
survive cleaning and a restarted broker rebuilds the same producer state
from the log.  When the producer's epoch was last set by a transaction
marker -- the coordinator bumped it while aborting, so no data batch carries
it -- its markers of that epoch are the ones kept instead (Kafka's
``isBatchLastRecordOfProducer``: no last data offset, a control batch of
the producer's epoch).  Kafka takes "active producers, their last data
offset and epoch" from its ``ProducerStateManager``; this cleaner derives
them from the batch headers instead (the plan is made in the I/O pool, where
the partition's producer state, owned by the reactor, is not read): for
every producer id (>= 0), the last offset and epoch of its last data batch
anywhere in the log, and the epoch of its last batch of any kind.  That is a
superset of Kafka's: a producer the state has expired
(``producer.id.expiration.ms``) keeps its last batch too, 61 bytes once
emptied, until a newer batch of the same producer id supersedes it.

Finished segments never change (the cleaner replaces them with new segment
objects), so each one's summary is computed once -- while the cleaner writes
it, or by one header walk -- and kept on the segment
(``LogSegment.producer_last_offsets``).  BLOCKING (header walks): run in the pool.
"""

from __future__ import annotations

from typing import NamedTuple

from twisted_kafka.log.segment import LogSegment
from twisted_kafka.protocol.records.batch import RecordBatchHeader


class ProducerLast(NamedTuple):
    """What the cleaner keeps of a producer: where its last data batch ends, and the epochs."""

    data_offset: int       # last offset of its last data batch (-1: none seen)
    data_epoch: int        # that batch's producer epoch
    epoch: int             # the epoch of its last batch, data or transaction marker


def note_batch(summary: dict[int, ProducerLast], header: RecordBatchHeader) -> None:
    """Add the batch with ``header`` (the next in offset order) to ``summary``."""
    pid = header.producer_id
    if pid < 0:
        return
    if header.is_control:
        previous = summary.get(pid)
        summary[pid] = ProducerLast(-1, -1, header.producer_epoch) if previous is None else \
            ProducerLast(previous.data_offset, previous.data_epoch, header.producer_epoch)
    else:
        summary[pid] = ProducerLast(header.last_offset, header.producer_epoch, header.producer_epoch)


def merge(into: dict[int, ProducerLast], later: dict[int, ProducerLast]) -> None:
    """``into`` followed by ``later`` (the summary of what comes after it)."""
    for pid, last in later.items():
        previous = into.get(pid)
        if last.data_offset < 0 and previous is not None:
            into[pid] = ProducerLast(previous.data_offset, previous.data_epoch, last.epoch)
        else:
            into[pid] = last


def retains_batch(header: RecordBatchHeader, producers: dict[int, ProducerLast]) -> bool:
    """Whether the batch with ``header`` must stay (emptied if need be): its producer's last data
    batch, or a marker of the producer's epoch when no data batch carries that epoch."""
    if header.producer_id < 0:
        return False
    last = producers.get(header.producer_id)
    if last is None:
        return False
    if not header.is_control:
        return last.data_offset == header.last_offset
    return (last.data_offset < 0 or last.data_epoch != last.epoch) and header.producer_epoch == last.epoch


def segment_summary(segment: LogSegment, position: int = 0,
                    into: dict[int, ProducerLast] | None = None) -> tuple[int, dict[int, ProducerLast]]:
    """(where the walk ended, {producer id: its ``ProducerLast``}) of ``segment`` from
    ``position`` on, added to ``into`` (BLOCKING)."""
    summary: dict[int, ProducerLast] = {} if into is None else into
    end = position
    for pos, header in segment.iter_headers(position):
        note_batch(summary, header)
        end = pos + header.size
    return end, summary


def last_data_offsets(segments: list[LogSegment]) -> dict[int, ProducerLast]:
    """{producer id: ``ProducerLast``} over ``segments`` (a log's segments, oldest first; the
    last one is the active segment).  Summaries of finished segments are cached on them; the
    active segment's walk goes on where the previous one ended."""
    merged: dict[int, ProducerLast] = {}
    for i, segment in enumerate(segments):
        summary = segment.producer_last_offsets
        if summary is None:
            finished = i + 1 < len(segments) and not segment.has_writes_in_flight
            position, partial = segment.producer_scan or (0, {})
            if position > segment.size:            # truncated since: walk it again
                position, partial = 0, {}
            end, summary = segment_summary(segment, position, dict(partial))
            if finished:
                segment.producer_last_offsets = summary
            segment.producer_scan = (end, summary)
        merge(merged, summary)
    return merged

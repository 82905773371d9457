"""The last data batch of every producer in a log, from the batch headers.

Kafka's cleaner keeps the last batch of each *active* producer, even when
compaction removed all of its records, so the producer's last sequence
number (the batch header's base sequence + last offset delta) and epoch
survive cleaning and a restarted broker rebuilds the same producer state
from the log.  Kafka takes "active producers and their last data offset"
from its ``ProducerStateManager``; this cleaner derives the map from the
batch headers instead (the plan is made in the I/O pool, where the
partition's producer state, owned by the reactor, is not read): for every
producer id (>= 0), the last offset of its last non-control batch anywhere
in the log.  That is a superset of Kafka's: a producer the state has
expired (``producer.id.expiration.ms``) keeps its last batch too, 61 bytes
once emptied, until a newer batch of the same producer id supersedes it.

Finished segments never change (the cleaner replaces them with new segment
objects), so each one's summary is computed once -- while the cleaner writes
it, or by one header walk -- and kept on the segment
(``LogSegment.producer_last_offsets``).  BLOCKING (header walks): run in the pool.
"""

from __future__ import annotations

from twisted_kafka.log.segment import LogSegment


def segment_summary(segment: LogSegment, position: int = 0,
                    into: dict[int, int] | None = None) -> tuple[int, dict[int, int]]:
    """(where the walk ended, {producer id: last offset of its last data batch}) of
    ``segment`` from ``position`` on, added to ``into`` (BLOCKING)."""
    summary: dict[int, int] = {} if into is None else into
    end = position
    for pos, header in segment.iter_headers(position):
        if header.producer_id >= 0 and not header.is_control:
            summary[header.producer_id] = header.last_offset
        end = pos + header.size
    return end, summary


def last_data_offsets(segments: list[LogSegment]) -> dict[int, int]:
    """{producer id: last offset of its last data batch} over ``segments`` (a log's
    segments, oldest first; the last one is the active segment).  Summaries of finished
    segments are cached on them; the active segment's walk goes on where the previous
    one ended."""
    merged: dict[int, int] = {}
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
        merged.update(summary)
    return merged

"""Which log to clean next, and which part of it (Kafka's ``LogCleanerManager``).

A compacted log is a *clean* section -- already cleaned, below the cleaner
checkpoint (the *first dirty offset*) -- followed by a *dirty* one.  Only
part of the dirty section is *cleanable*: cleaning stops at the first
*uncleanable* offset, the lowest of

* the active segment's base offset (the active segment is never touched);
* the last stable offset (the high watermark when no transaction is open:
  the cleaner never sees an undecided transaction) -- rounded down to a
  segment boundary: only whole segments are cleaned;
* the first segment whose newest record is younger than
  ``min.compaction.lag.ms``;
* the first segment holding damaged data (``segment.DamagedRange``): what
  cannot be read cannot be compacted.

The *dirty ratio* is cleanable bytes / (clean + cleanable bytes).  A log is
cleaned when its ratio exceeds ``min.cleanable.dirty.ratio``, or -- whatever
the ratio -- when a dirty finished segment holds a record older than
``max.compaction.lag.ms`` (measured from its first batch's timestamp).  The
*filthiest* log (highest ratio) goes first.  A checkpoint below the log
start offset or above the log end (a truncated or recreated log) is reset to
the log start.

Runs on the reactor: it reads segment sizes and timestamps kept in memory
(the first batch's timestamp is one 61-byte read, only for logs with a
finite ``max.compaction.lag.ms``, and remembered).
"""

from __future__ import annotations

from dataclasses import dataclass

from twisted_kafka.log.log import Log
from twisted_kafka.log.segment import LogSegment


@dataclass
class LogToClean:
    """A compacted log and the range the cleaner would clean now."""

    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    compaction_delay_ms: int = 0            # > 0: max.compaction.lag.ms is overdue by this much
    checkpoint_reset: bool = False          # the checkpoint was invalid: rewrite it

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        total = self.total_bytes
        return self.cleanable_bytes / total if total else 0.0

    @property
    def needs_cleaning(self) -> bool:
        if self.compaction_delay_ms > 0 and self.cleanable_bytes > 0:
            return True
        return self.cleanable_ratio > self.log.config.min_cleanable_dirty_ratio


def _segments_from(segments: list[LogSegment], offset: int) -> list[LogSegment]:
    """Segments holding offsets at or above ``offset`` (the one containing it included)."""
    out = []
    for i, segment in enumerate(segments):
        following = segments[i + 1].base_offset if i + 1 < len(segments) else None
        if following is None or following > offset:
            out.append(segment)
    return out


def _finished_from(segments: list[LogSegment], offset: int) -> list[LogSegment]:
    """Kafka's ``nonActiveLogSegmentsFrom``: the finished segments holding offsets at or
    above ``offset``."""
    return [s for s in _segments_from(segments, offset) if s is not segments[-1]]


def cleanable_offsets(log: Log, checkpoint: int | None, now_ms: int) -> tuple[int, int, bool]:
    """(first dirty offset, first uncleanable offset, whether the checkpoint was reset)."""
    start = log.log_start_offset
    first_dirty = start if checkpoint is None else checkpoint
    reset = False
    if first_dirty < start or first_dirty > log.log_end_offset:
        first_dirty, reset = start, checkpoint is not None
    segments = log.segments
    active = segments[-1]
    bounds = [active.base_offset, log.last_stable_offset]
    lag = max(log.config.min_compaction_lag_ms, 0)
    for segment in _finished_from(segments, first_dirty):
        if segment.damaged:
            bounds.append(segment.base_offset)
            break
        if lag > 0 and segment.largest_timestamp > now_ms - lag:
            bounds.append(segment.base_offset)
            break
    uncleanable = max(first_dirty, min(bounds))
    return first_dirty, uncleanable, reset


def max_compaction_delay(log: Log, first_dirty: int, now_ms: int) -> int:
    """How long past ``max.compaction.lag.ms`` the oldest dirty record is (0: not overdue)."""
    lag = log.config.max_compaction_lag_ms
    if lag <= 0 or lag >= now_ms:
        return 0
    segments = log.segments
    earliest = None
    for segment in _finished_from(segments, first_dirty):
        ts = segment.first_batch_timestamp()
        if ts is not None and ts > 0 and (earliest is None or ts < earliest):
            earliest = ts
    clean_until = now_ms - lag
    if earliest is not None and earliest < clean_until:
        return clean_until - earliest
    return 0


def log_to_clean(log: Log, checkpoint: int | None, now_ms: int) -> LogToClean:
    first_dirty, uncleanable, reset = cleanable_offsets(log, checkpoint, now_ms)
    segments = log.segments
    # The first uncleanable segment: the one holding the uncleanable offset (the active
    # segment at most); everything before it and from the dirty offset on is cleanable.
    first_uncleanable = segments[-1].base_offset
    for segment in _finished_from(segments, uncleanable):
        first_uncleanable = segment.base_offset
        break
    clean_bytes = sum(s.size for s in segments if s.base_offset < first_dirty)
    cleanable_bytes = sum(s.size for s in _segments_from(segments, min(first_dirty, first_uncleanable))
                          if s.base_offset < first_uncleanable)
    return LogToClean(log, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes,
                      max_compaction_delay(log, first_dirty, now_ms), reset)

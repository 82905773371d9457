"""Retention: which whole segments a log may drop, by Kafka's three rules.

Run by ``LogManager`` every ``log.retention.check.interval.ms``.  Only whole
segments go, oldest first, and never the active segment nor any segment
holding data above the high watermark (``Log._delete_segments`` enforces
both), so retention can lag by up to one segment: a topic with
``retention.ms`` of an hour and ``segment.ms`` of a week keeps a week.

* time (``retention.ms``, negative = unlimited): a segment whose largest
  record timestamp is older than now - retention.ms.  Segments without
  timestamps use their file's modification time.
* size (``retention.bytes``, negative = unlimited): drop the oldest segments
  while the log stays at or above the limit without them.
* log start offset (always, whatever ``cleanup.policy``): segments entirely
  below the log start offset (after DeleteRecords).

Time and size apply only when ``cleanup.policy`` includes ``delete``.
Deleting renames the files to ``.deleted`` at once (cheap, on the reactor);
the unlink happens ``file.delete.delay.ms`` later in the thread pool, so a
fetch still reading the old segment on a pool thread is not cut short.
"""

from __future__ import annotations

from twisted_kafka.log.log import Log


def delete_retention_ms_breached(log: Log, now_ms: int) -> int:
    retention_ms = log.config.retention_ms
    if retention_ms < 0:
        return 0
    return log._delete_segments(
        lambda segment, following: now_ms - segment.largest_timestamp > retention_ms)


def delete_retention_size_breached(log: Log) -> int:
    retention_bytes = log.config.retention_bytes
    if retention_bytes < 0:
        return 0
    excess = log.size - retention_bytes
    if excess <= 0:
        return 0

    def should_delete(segment, following) -> bool:
        nonlocal excess
        if excess - segment.size >= 0:
            excess -= segment.size
            return True
        return False

    return log._delete_segments(should_delete)


def delete_log_start_offset_breached(log: Log) -> int:
    start = log.log_start_offset
    return log._delete_segments(lambda segment, following: following.base_offset <= start)


def delete_old_segments(log: Log, now_ms: int) -> int:
    """Apply every retention rule to ``log``; returns the number of segments deleted."""
    deleted = 0
    if log.config.delete_enabled:
        deleted += delete_retention_ms_breached(log, now_ms)
        deleted += delete_retention_size_breached(log)
    deleted += delete_log_start_offset_breached(log)
    return deleted

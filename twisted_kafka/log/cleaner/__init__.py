"""The log cleaner: compaction of topics with ``cleanup.policy=compact`` (Kafka's ``LogCleaner``).

A compacted log keeps, for every key, at least its latest record: the
cleaner rewrites the finished segments without the records a later record
of the same key made obsolete, and removes tombstones (records with a null
value) ``delete.retention.ms`` after the cleaning that first saw them.
Offsets never change -- a consumer sees gaps -- and the active segment is
never touched.  ``compact,delete`` topics are also subject to retention
(``retention``, unchanged).  ``__consumer_offsets`` is a compacted topic like
any other: deleted groups and offsets (tombstones) disappear this way.

Modules:

* ``selection`` -- which log, which range: the dirty ratio
  (``min.cleanable.dirty.ratio``), ``min.compaction.lag.ms``,
  ``max.compaction.lag.ms``, the active segment and the high watermark;
* ``offset_map`` -- key -> latest offset, bounded by
  ``log.cleaner.dedupe.buffer.size``;
* ``records`` -- one batch in, what stays of it out (tombstones and the
  delete horizon, rebuilt and empty batches, producer and control batches);
* ``producers`` -- the last batch of every producer, which stays;
* ``cleaner`` -- ``CleanTask``, one cleaning as steps for the I/O thread pool:
  map, plan, then per group of segments a ``.cleaned`` segment, fsynced;
* ``throttler`` -- ``log.cleaner.io.max.bytes.per.second``;
* ``metrics`` -- Kafka's ``LogCleaner`` and ``LogCleanerManager`` gauges;
* ``manager`` -- ``LogCleaner``: the schedule (``log.cleaner.backoff.ms``),
  ``log.cleaner.threads`` cleanings at once, the swap on the reactor, the
  ``cleaner-offset-checkpoint`` files, aborts and errors.

Crash safety is Kafka's ``.cleaned`` -> ``.swap`` -> rename protocol
(``Log.replace_segments``; ``recovery`` completes or abandons a swap a crash
interrupted): at every instant the directory holds either the old segments
or a complete, fsynced replacement for them, so a ``kill -9`` at any point
loses nothing a producer was told was written.
"""

from .cleaner import CleanerError, CleanerStats, CleanTask
from .config import CleanerConfig
from .manager import CLEANER_CHECKPOINT, CleaningAborted, LogCleaner
from .metrics import register_cleaner_metrics
from .offset_map import OffsetMap
from .records import BatchFilter
from .selection import LogToClean, log_to_clean

__all__ = [
    "CLEANER_CHECKPOINT",
    "BatchFilter",
    "CleanTask",
    "CleanerConfig",
    "CleanerError",
    "CleanerStats",
    "CleaningAborted",
    "LogCleaner",
    "LogToClean",
    "OffsetMap",
    "log_to_clean",
    "register_cleaner_metrics",
]

"""The log cleaner's gauges under Kafka's names (``LogCleaner`` and ``LogCleanerManager``).

``kafka.log:type=LogCleaner``, over the last ``log.cleaner.threads``
cleanings (Kafka reads each cleaner thread's last cleaning):

* ``max-buffer-utilization-percent`` -- how full the fullest offset map got;
* ``cleaner-recopy-percent`` -- bytes written / bytes read;
* ``max-clean-time-secs`` -- the longest cleaning;
* ``max-compaction-delay-secs`` -- how far past ``max.compaction.lag.ms`` a log was
  when its cleaning began;
* ``DeadThreadCount`` -- 1 when the cleaner's schedule has died, else 0.

``kafka.log:type=LogCleanerManager``: ``max-dirty-percent`` (the highest
dirty ratio at the last selection), ``time-since-last-run-ms``, and per log
dir (``logDirectory`` tag) ``uncleanable-partitions-count`` and
``uncleanable-bytes``.
"""

from __future__ import annotations

from twisted_kafka.metrics import MetricsRegistry
from twisted_kafka.metrics.registry import MetricName

from .manager import LogCleaner


def register_cleaner_metrics(cleaner: LogCleaner, registry: MetricsRegistry) -> None:
    def cleaner_gauge(name: str, read) -> None:
        registry.gauge(MetricName("kafka.log", "LogCleaner", name), read)

    def manager_gauge(name: str, read, tags: tuple[tuple[str, str], ...] = ()) -> None:
        registry.gauge(MetricName("kafka.log", "LogCleanerManager", name, tags), read)

    def recopy() -> int:
        read = sum(stats.bytes_read for stats, _ in cleaner.recent)
        written = sum(stats.bytes_written for stats, _ in cleaner.recent)
        return int(100 * written / max(read, 1))

    cleaner_gauge("max-buffer-utilization-percent",
                  lambda: int(100 * max((s.map_utilization for s, _ in cleaner.recent), default=0.0)))
    cleaner_gauge("cleaner-recopy-percent", recopy)
    cleaner_gauge("max-clean-time-secs", lambda: int(max((s.elapsed for s, _ in cleaner.recent), default=0.0)))
    cleaner_gauge("max-compaction-delay-secs",
                  lambda: max((delay for _, delay in cleaner.recent), default=0) // 1000)
    cleaner_gauge("DeadThreadCount", lambda: int(cleaner.schedule_died))
    manager_gauge("max-dirty-percent", lambda: int(100 * cleaner.max_dirty_ratio))
    manager_gauge("time-since-last-run-ms", lambda: max(0, cleaner._now_ms() - cleaner.last_run_ms))
    for log_dir in cleaner.log_dirs:
        tags = (("logDirectory", log_dir),)
        manager_gauge("uncleanable-partitions-count", lambda d=log_dir: len(cleaner.uncleanable_in(d)), tags)
        manager_gauge("uncleanable-bytes",
                      lambda d=log_dir: sum(sum(s.size for s in log_.segments) for log_ in cleaner.uncleanable_in(d)),
                      tags)

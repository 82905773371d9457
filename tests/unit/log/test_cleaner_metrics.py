"""The log cleaner's gauges, under Kafka's names, after cleanings on a ``task.Clock``."""

from __future__ import annotations

from twisted_kafka.log.cleaner import register_cleaner_metrics
from twisted_kafka.metrics import MetricsRegistry
from twisted_kafka.metrics.registry import MetricName

from .test_cleaner_manager import COMPACT, _fill, _started


def _value(registry, type_: str, name: str, tags=()):
    return registry.get(MetricName("kafka.log", type_, name, tags)).value


def test_gauges_after_a_cleaning(tmp_path):
    manager, reactor = _started(tmp_path)
    registry = MetricsRegistry()
    register_cleaner_metrics(manager.cleaner, registry)
    log = manager.create_log("c", 0, topic_config=COMPACT)
    assert _value(registry, "LogCleaner", "cleaner-recopy-percent") == 0       # no cleaning yet
    _fill(log, reactor)
    reactor.advance(1.0)
    assert manager.cleaner.cleanings == 1
    stats = manager.cleaner.last_stats[("c", 0)]
    assert _value(registry, "LogCleaner", "cleaner-recopy-percent") == \
        int(100 * stats.bytes_written / stats.bytes_read)
    assert 0 < _value(registry, "LogCleaner", "cleaner-recopy-percent") < 100
    assert _value(registry, "LogCleaner", "max-buffer-utilization-percent") == int(100 * stats.map_utilization)
    assert _value(registry, "LogCleaner", "max-compaction-delay-secs") == 0
    assert _value(registry, "LogCleaner", "DeadThreadCount") == 0
    # The selection after the cleaning found nothing dirty (the active segment does not count).
    assert _value(registry, "LogCleanerManager", "max-dirty-percent") == 0
    reactor.advance(2.5)
    assert 0 <= _value(registry, "LogCleanerManager", "time-since-last-run-ms") <= 1000
    tags = (("logDirectory", manager.log_dirs[0]),)
    assert _value(registry, "LogCleanerManager", "uncleanable-partitions-count", tags) == 0
    assert _value(registry, "LogCleanerManager", "uncleanable-bytes", tags) == 0

"""``Throttler`` and run-time changes of ``log.cleaner.io.max.bytes.per.second`` on a ``task.Clock``."""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from twisted_kafka.config import KafkaConfig
from twisted_kafka.log.cleaner.throttler import Throttler

from .test_cleaner_manager import COMPACT, _fill, _started


def test_delay_keeps_the_rate_and_idle_time_earns_no_burst():
    clock = Clock()
    throttler = Throttler(1000.0, clock)
    assert throttler.delay(500) == 0.5                # 500 bytes at once: wait half a second
    clock.advance(0.5)
    assert throttler.delay(0) == 0.0                  # on schedule: the window restarts
    clock.advance(60)                                 # a minute idle earns one report's worth:
    assert throttler.delay(1000) == 0.0               # the time that I/O took
    assert throttler.delay(1000) == 1.0               # the next second's worth waits
    clock.advance(0.4)
    assert throttler.delay(0) == pytest.approx(0.6)
    assert throttler.chunk_size(512 * 1024) == 16 * 1024     # a tenth of a second, at least 16 KiB


def test_unlimited_never_waits():
    throttler = Throttler(1.7976931348623157e308, Clock())
    assert throttler.unlimited and throttler.delay(1 << 30) == 0.0
    assert throttler.chunk_size(256 * 1024) == 256 * 1024


def test_the_rate_changes_at_run_time(tmp_path):
    manager, reactor = _started(tmp_path, log_cleaner_io_max_bytes_per_second=1000)
    log = manager.create_log("c", 0, topic_config=COMPACT)
    _fill(log, reactor, n=1500, keys=30)
    reactor.advance(1.0)
    assert ("c", 0) in manager.cleaner.in_progress            # crawling at 1000 bytes/s ...
    assert max(c.getTime() for c in reactor.getDelayedCalls()) - reactor.seconds() > 10   # long waits
    config = KafkaConfig.from_props({"log.dirs": str(tmp_path / "data"), "log.cleaner.backoff.ms": "1000",
                                     "log.cleaner.io.max.bytes.per.second": "1e9"})
    manager.cleaner.reconfigure(config)
    assert manager.cleaner.throttler.rate == 1e9
    started = reactor.seconds()
    while not manager.cleaner.cleanings and reactor.seconds() - started < 1.0:
        reactor.advance(0.01)
    assert manager.cleaner.cleanings == 1, "the wait computed at the old rate ends at once"

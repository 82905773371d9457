"""``CleanerConfig``: the broker's ``log.cleaner.*`` keys, as the cleaner uses them.

The topic-level compaction settings (``delete.retention.ms``,
``min.compaction.lag.ms``, ``max.compaction.lag.ms``,
``min.cleanable.dirty.ratio``) are in each log's ``LogConfig``; their broker
defaults are the ``log.cleaner.*`` synonyms (``config.topic``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from twisted_kafka.log.log_config import config_value

#: Smallest read a cleaning step makes, whatever log.cleaner.io.buffer.size says.
MIN_IO_BUFFER = 16 * 1024


@dataclass(frozen=True)
class CleanerConfig:
    enable: bool = True
    #: Logs cleaned at once (each cleaning runs one step at a time in the I/O thread pool).
    threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    io_buffer_size: int = 512 * 1024
    io_buffer_load_factor: float = 0.9
    io_max_bytes_per_second: float = 1.7976931348623157e308
    backoff_ms: int = 15000

    @classmethod
    def from_broker_config(cls, config: Any) -> CleanerConfig:
        return cls(
            enable=bool(config_value(config, "log.cleaner.enable", True)),
            threads=int(config_value(config, "log.cleaner.threads", 1)),
            dedupe_buffer_size=int(config_value(config, "log.cleaner.dedupe.buffer.size", 128 * 1024 * 1024)),
            io_buffer_size=int(config_value(config, "log.cleaner.io.buffer.size", 512 * 1024)),
            io_buffer_load_factor=float(config_value(config, "log.cleaner.io.buffer.load.factor", 0.9)),
            io_max_bytes_per_second=float(config_value(config, "log.cleaner.io.max.bytes.per.second",
                                                       1.7976931348623157e308)),
            backoff_ms=int(config_value(config, "log.cleaner.backoff.ms", 15000)),
        )

    @property
    def map_memory(self) -> int:
        """Each cleaning's share of the dedupe buffer."""
        return self.dedupe_buffer_size // max(1, self.threads)

    @property
    def read_buffer(self) -> int:
        """Bytes a cleaning step reads: its share of the I/O buffers, half of which Kafka
        gives to reads and half to writes."""
        return max(MIN_IO_BUFFER, self.io_buffer_size // max(1, self.threads) // 2)

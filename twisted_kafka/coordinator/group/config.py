"""The group coordinator's settings, read once from the broker configuration.

Kafka splits them the same way: ``GroupConfig`` bounds what members may ask
for, ``OffsetConfig`` governs the offsets topic and the commits stored in it.
"""

from __future__ import annotations

from dataclasses import dataclass

from twisted_kafka.protocol.records.compression import CompressionType


@dataclass(frozen=True, slots=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = 2 ** 31 - 1
    initial_rebalance_delay_ms: int = 3000

    @classmethod
    def from_broker_config(cls, config) -> GroupConfig:
        return cls(min_session_timeout_ms=config["group.min.session.timeout.ms"],
                   max_session_timeout_ms=config["group.max.session.timeout.ms"],
                   max_size=config["group.max.size"],
                   initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"])


@dataclass(frozen=True, slots=True)
class OffsetConfig:
    max_metadata_size: int = 4096
    load_buffer_size: int = 5 * 1024 * 1024
    retention_ms: int = 7 * 24 * 60 * 60 * 1000
    retention_check_interval_ms: int = 600000
    topic_num_partitions: int = 50
    topic_segment_bytes: int = 100 * 1024 * 1024
    topic_replication_factor: int = 3
    topic_compression: int = CompressionType.NONE
    commit_timeout_ms: int = 5000

    @classmethod
    def from_broker_config(cls, config) -> OffsetConfig:
        codec = config["offsets.topic.compression.codec"]
        return cls(max_metadata_size=config["offset.metadata.max.bytes"],
                   load_buffer_size=config["offsets.load.buffer.size"],
                   retention_ms=config["offsets.retention.minutes"] * 60 * 1000,
                   retention_check_interval_ms=config["offsets.retention.check.interval.ms"],
                   topic_num_partitions=config["offsets.topic.num.partitions"],
                   topic_segment_bytes=config["offsets.topic.segment.bytes"],
                   topic_replication_factor=config["offsets.topic.replication.factor"],
                   topic_compression=CompressionType(codec) if codec in set(CompressionType) else CompressionType.NONE,
                   commit_timeout_ms=config["offsets.commit.timeout.ms"])


@dataclass(frozen=True, slots=True)
class ConsumerGroupConfig:
    """The consumer rebalance protocol's settings (KIP-848's ``group.consumer.*`` keys)."""

    session_timeout_ms: int = 45000
    min_session_timeout_ms: int = 45000
    max_session_timeout_ms: int = 60000
    heartbeat_interval_ms: int = 5000
    min_heartbeat_interval_ms: int = 5000
    max_heartbeat_interval_ms: int = 15000
    max_size: int = 2 ** 31 - 1
    assignors: tuple[str, ...] = ("uniform", "range")
    enabled: bool = True

    @classmethod
    def from_broker_config(cls, config) -> ConsumerGroupConfig:
        return cls(session_timeout_ms=config["group.consumer.session.timeout.ms"],
                   min_session_timeout_ms=config["group.consumer.min.session.timeout.ms"],
                   max_session_timeout_ms=config["group.consumer.max.session.timeout.ms"],
                   heartbeat_interval_ms=config["group.consumer.heartbeat.interval.ms"],
                   min_heartbeat_interval_ms=config["group.consumer.min.heartbeat.interval.ms"],
                   max_heartbeat_interval_ms=config["group.consumer.max.heartbeat.interval.ms"],
                   max_size=config["group.consumer.max.size"],
                   assignors=tuple(config["group.consumer.assignors"]),
                   enabled="consumer" in config["group.coordinator.rebalance.protocols"])

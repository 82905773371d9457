"""``LogConfig``: the effective per-topic settings one ``Log`` obeys.

Kafka keeps two names for most storage settings: the broker default
(``log.segment.bytes``) and the topic-level override (``segment.bytes``).
A ``LogConfig`` is built from topic key names only.  The config package's
``topic_config(kafka_config, overrides)`` resolves the broker synonyms
(``log.retention.ms`` -> ``.minutes`` -> ``.hours`` and the like) and lays a
topic's overrides (CreateTopics / AlterConfigs) over them;
``LogConfig.from_broker_config`` is that plus the conversion.

Values may arrive typed (from ``KafkaConfig``) or as the strings a client
sent; both are accepted, and a value that cannot be read raises
``ValueError`` naming the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

LONG_MAX = 9223372036854775807

#: Defaults of Apache Kafka 4.x for the topic-level keys this layer uses.
TOPIC_DEFAULTS: dict[str, Any] = {
    "segment.bytes": 1073741824,
    "segment.ms": 604800000,
    "segment.jitter.ms": 0,
    "segment.index.bytes": 10485760,
    "index.interval.bytes": 4096,
    "retention.ms": 604800000,
    "retention.bytes": -1,
    "flush.messages": LONG_MAX,
    "flush.ms": LONG_MAX,
    "message.timestamp.type": "CreateTime",
    "max.message.bytes": 1048588,
    "cleanup.policy": ("delete",),
    "min.insync.replicas": 1,
    "file.delete.delay.ms": 60000,
    "preallocate": False,
    "message.timestamp.before.max.ms": LONG_MAX,
    "message.timestamp.after.max.ms": LONG_MAX,
    "delete.retention.ms": 86400000,
    "min.compaction.lag.ms": 0,
    "max.compaction.lag.ms": LONG_MAX,
    "min.cleanable.dirty.ratio": 0.5,
}

def config_value(config: Any, key: str, default: Any = None) -> Any:
    """``config[key]``, or ``default`` when the key is unknown or unset (None)."""
    try:
        value = config[key]
    except (KeyError, LookupError):
        return default
    return default if value is None else value


def _as_int(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{key}: expected an integer, got {value!r}")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key}: expected an integer, got {value!r}") from None


def _as_float(key: str, value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"{key}: expected a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{key}: expected a number, got {value!r}") from None


def _as_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"{key}: expected true or false, got {value!r}")


def _as_policy(key: str, value: Any) -> tuple[str, ...]:
    items = value.split(",") if isinstance(value, str) else list(value)
    policy = tuple(sorted({str(v).strip().lower() for v in items if str(v).strip()}))
    if not policy or set(policy) - {"delete", "compact"}:
        raise ValueError(f"{key}: expected delete and/or compact, got {value!r}")
    return policy


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Effective storage settings of one partition (immutable; replace to change)."""

    segment_bytes: int = TOPIC_DEFAULTS["segment.bytes"]
    segment_ms: int = TOPIC_DEFAULTS["segment.ms"]
    segment_jitter_ms: int = TOPIC_DEFAULTS["segment.jitter.ms"]
    max_index_size: int = TOPIC_DEFAULTS["segment.index.bytes"]
    index_interval_bytes: int = TOPIC_DEFAULTS["index.interval.bytes"]
    retention_ms: int = TOPIC_DEFAULTS["retention.ms"]          # negative: unlimited
    retention_bytes: int = TOPIC_DEFAULTS["retention.bytes"]    # negative: unlimited
    flush_interval_messages: int = TOPIC_DEFAULTS["flush.messages"]
    flush_interval_ms: int = TOPIC_DEFAULTS["flush.ms"]
    message_timestamp_type: str = TOPIC_DEFAULTS["message.timestamp.type"]
    max_message_bytes: int = TOPIC_DEFAULTS["max.message.bytes"]
    cleanup_policy: tuple[str, ...] = TOPIC_DEFAULTS["cleanup.policy"]
    file_delete_delay_ms: int = TOPIC_DEFAULTS["file.delete.delay.ms"]
    preallocate: bool = TOPIC_DEFAULTS["preallocate"]
    message_timestamp_before_max_ms: int = TOPIC_DEFAULTS["message.timestamp.before.max.ms"]
    message_timestamp_after_max_ms: int = TOPIC_DEFAULTS["message.timestamp.after.max.ms"]
    # Not a storage setting, but a property of the partition's log in Kafka too:
    # acks=all appends need at least this many in-sync replicas.
    min_insync_replicas: int = TOPIC_DEFAULTS["min.insync.replicas"]
    # Compaction (``cleanup.policy`` with ``compact``; see ``twisted_kafka.log.cleaner``).
    delete_retention_ms: int = TOPIC_DEFAULTS["delete.retention.ms"]
    min_compaction_lag_ms: int = TOPIC_DEFAULTS["min.compaction.lag.ms"]
    max_compaction_lag_ms: int = TOPIC_DEFAULTS["max.compaction.lag.ms"]
    min_cleanable_dirty_ratio: float = TOPIC_DEFAULTS["min.cleanable.dirty.ratio"]

    def __post_init__(self) -> None:
        if self.segment_bytes < 14:
            raise ValueError(f"segment.bytes must be at least 14, got {self.segment_bytes}")
        if self.segment_ms < 1:
            raise ValueError(f"segment.ms must be at least 1, got {self.segment_ms}")
        if self.max_index_size < 12:
            raise ValueError(f"segment.index.bytes must be at least 12, got {self.max_index_size}")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index.interval.bytes must be >= 0, got {self.index_interval_bytes}")
        if self.flush_interval_messages < 1:
            raise ValueError(f"flush.messages must be at least 1, got {self.flush_interval_messages}")
        if self.message_timestamp_type not in ("CreateTime", "LogAppendTime"):
            raise ValueError("message.timestamp.type must be CreateTime or LogAppendTime, "
                             f"got {self.message_timestamp_type!r}")

    @classmethod
    def from_topic_config(cls, values: Mapping[str, Any] | None = None,
                          defaults: Mapping[str, Any] | None = None) -> LogConfig:
        """Build from Kafka topic key names laid over ``defaults`` (also topic keys).

        Keys of other layers (``compression.type``, ``unclean.leader.election.enable``
        ...) are ignored here.
        """
        merged = dict(TOPIC_DEFAULTS)
        if defaults:
            merged.update(defaults)
        if values:
            merged.update({k: v for k, v in values.items() if v is not None})
        kwargs = {}
        for key, (name, conv) in _TOPIC_KEYS.items():
            kwargs[name] = conv(key, merged[key])
        # Deprecated by KIP-937 but still applied, as Kafka 3.x applies it: it stands
        # for whichever of the before/after bounds is left at its default.
        difference = merged.get("message.timestamp.difference.max.ms")
        if difference is not None:
            for name in ("message_timestamp_before_max_ms", "message_timestamp_after_max_ms"):
                if kwargs[name] == LONG_MAX:
                    kwargs[name] = _as_int("message.timestamp.difference.max.ms", difference)
        return cls(**kwargs)

    @classmethod
    def from_broker_config(cls, config: Any,
                           overrides: Mapping[str, Any] | None = None) -> LogConfig:
        """Effective settings of a topic: broker ``config`` (a ``KafkaConfig``)
        with the topic's ``overrides`` (topic key names, raw or typed)."""
        from twisted_kafka.config import topic_config

        return cls.from_topic_config(topic_config(config, dict(overrides or {})))

    def with_changes(self, **changes: Any) -> LogConfig:
        return replace(self, **changes)

    @property
    def delete_enabled(self) -> bool:
        """Whether time/size retention applies (``cleanup.policy`` has ``delete``)."""
        return "delete" in self.cleanup_policy

    @property
    def compact_enabled(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """Age at which the active segment rolls: ``segment.ms``, or on a compacted topic
        ``max.compaction.lag.ms`` when that is smaller -- the active segment is never
        cleaned, so it must roll for its records to be compacted in time (KIP-354)."""
        if self.compact_enabled and self.max_compaction_lag_ms > 0:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"


_TOPIC_KEYS: dict[str, tuple[str, Any]] = {
    "segment.bytes": ("segment_bytes", _as_int),
    "segment.ms": ("segment_ms", _as_int),
    "segment.jitter.ms": ("segment_jitter_ms", _as_int),
    "segment.index.bytes": ("max_index_size", _as_int),
    "index.interval.bytes": ("index_interval_bytes", _as_int),
    "retention.ms": ("retention_ms", _as_int),
    "retention.bytes": ("retention_bytes", _as_int),
    "flush.messages": ("flush_interval_messages", _as_int),
    "flush.ms": ("flush_interval_ms", _as_int),
    "message.timestamp.type": ("message_timestamp_type", lambda k, v: str(v)),
    "max.message.bytes": ("max_message_bytes", _as_int),
    "cleanup.policy": ("cleanup_policy", _as_policy),
    "file.delete.delay.ms": ("file_delete_delay_ms", _as_int),
    "preallocate": ("preallocate", _as_bool),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", _as_int),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", _as_int),
    "min.insync.replicas": ("min_insync_replicas", _as_int),
    "delete.retention.ms": ("delete_retention_ms", _as_int),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _as_int),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _as_int),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _as_float),
}

assert {name for name, _ in _TOPIC_KEYS.values()} == {f.name for f in fields(LogConfig)}

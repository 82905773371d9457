"""Topic-level keys and a topic's effective configuration.

A topic key (``retention.ms``) is an override of a broker key, its *synonym*
(``log.retention.ms``, or ``log.retention.minutes``/``log.retention.hours``
converted to milliseconds). The log layer needs each topic's effective typed
values; DescribeConfigs needs, in addition, where each value came from and
the synonyms it could have come from. ``topic_config`` computes both from
the broker's ``KafkaConfig`` and the topic's stored overrides, following
Kafka 3.9's ``ServerTopicConfigSynonyms`` and ``LogConfig``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from twisted.logger import Logger

from .broker import BROKER_CONFIG, COMPRESSION_TYPES
from .definition import ConfigDef, ConfigKey, Importance
from .effect import deprecation
from .errors import ConfigError
from .sources import ConfigEntry, ConfigSource, ConfigSynonym
from .types import Type
from .validators import at_least, between, metadata_version, one_of, valid_list

if TYPE_CHECKING:  # pragma: no cover
    from .kafka_config import KafkaConfig

__all__ = [
    "TOPIC_CONFIG",
    "TOPIC_SYNONYMS",
    "BrokerSynonym",
    "TopicConfig",
    "topic_config",
    "validate_topic_overrides",
    "warn_deprecated_topic_configs",
]

log = Logger(namespace="twisted_kafka.config")

MEDIUM, LOW = Importance.MEDIUM, Importance.LOW
LONG_MAX = 2**63 - 1


def _same(value: Any) -> Any:
    return value


def _times(factor: int) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        return None if value is None else value * factor

    return convert


def _retention(factor: int) -> Callable[[Any], Any]:
    """Broker retention to topic retention: any negative value means
    "unlimited" and is reported as -1 (Kafka's ``logRetentionTimeMillis``)."""

    def convert(value: Any) -> Any:
        if value is None:
            return None
        millis = value * factor
        return -1 if millis < 0 else millis

    return convert


@dataclass(frozen=True)
class BrokerSynonym:
    """A broker key that supplies a topic key's default, and the conversion
    from the broker key's unit to the topic key's."""

    name: str
    to_topic: Callable[[Any], Any] = _same


_HOUR_MS = 3_600_000
_MINUTE_MS = 60_000

#: Topic key -> broker synonyms, highest precedence first.
TOPIC_SYNONYMS: Mapping[str, tuple[BrokerSynonym, ...]] = MappingProxyType(
    {
        "segment.bytes": (BrokerSynonym("log.segment.bytes"),),
        "segment.ms": (
            BrokerSynonym("log.roll.ms"),
            BrokerSynonym("log.roll.hours", _times(_HOUR_MS)),
        ),
        "segment.jitter.ms": (
            BrokerSynonym("log.roll.jitter.ms"),
            BrokerSynonym("log.roll.jitter.hours", _times(_HOUR_MS)),
        ),
        "segment.index.bytes": (BrokerSynonym("log.index.size.max.bytes"),),
        "flush.messages": (BrokerSynonym("log.flush.interval.messages"),),
        "flush.ms": (
            BrokerSynonym("log.flush.interval.ms"),
            BrokerSynonym("log.flush.scheduler.interval.ms"),
        ),
        "retention.bytes": (BrokerSynonym("log.retention.bytes"),),
        "retention.ms": (
            BrokerSynonym("log.retention.ms", _retention(1)),
            BrokerSynonym("log.retention.minutes", _retention(_MINUTE_MS)),
            BrokerSynonym("log.retention.hours", _retention(_HOUR_MS)),
        ),
        "max.message.bytes": (BrokerSynonym("message.max.bytes"),),
        "index.interval.bytes": (BrokerSynonym("log.index.interval.bytes"),),
        "delete.retention.ms": (BrokerSynonym("log.cleaner.delete.retention.ms"),),
        "min.compaction.lag.ms": (BrokerSynonym("log.cleaner.min.compaction.lag.ms"),),
        "max.compaction.lag.ms": (BrokerSynonym("log.cleaner.max.compaction.lag.ms"),),
        "file.delete.delay.ms": (BrokerSynonym("log.segment.delete.delay.ms"),),
        "min.cleanable.dirty.ratio": (BrokerSynonym("log.cleaner.min.cleanable.ratio"),),
        "cleanup.policy": (BrokerSynonym("log.cleanup.policy"),),
        "unclean.leader.election.enable": (BrokerSynonym("unclean.leader.election.enable"),),
        "min.insync.replicas": (BrokerSynonym("min.insync.replicas"),),
        "compression.type": (BrokerSynonym("compression.type"),),
        "preallocate": (BrokerSynonym("log.preallocate"),),
        "message.timestamp.type": (BrokerSynonym("log.message.timestamp.type"),),
        "message.timestamp.before.max.ms": (
            BrokerSynonym("log.message.timestamp.before.max.ms"),
        ),
        "message.timestamp.after.max.ms": (
            BrokerSynonym("log.message.timestamp.after.max.ms"),
        ),
        "message.timestamp.difference.max.ms": (
            BrokerSynonym("log.message.timestamp.difference.max.ms"),
        ),
        "message.format.version": (BrokerSynonym("log.message.format.version"),),
    }
)


def _topic(
    name: str, type_: Type, default: Any, doc: str, validator: Any = None
) -> ConfigKey:
    return ConfigKey(name, type_, default, validator, MEDIUM, doc, "Topic")


#: Topic-level keys with Kafka's LogConfig types, defaults and validators.
TOPIC_CONFIG = ConfigDef(
    [
        _topic("cleanup.policy", Type.LIST, "delete",
               "delete removes segments past retention; compact keeps the "
               "latest record per key; both may be combined.",
               valid_list("compact", "delete")),
        _topic("compression.type", Type.STRING, "producer",
               "Codec of stored batches; 'producer' keeps the producer's codec.",
               one_of(*COMPRESSION_TYPES)),
        _topic("delete.retention.ms", Type.LONG, 86400000,
               "How long tombstones and transaction markers of a compacted topic are kept once removable.",
               at_least(0)),
        _topic("file.delete.delay.ms", Type.LONG, 60000,
               "Grace period before the files of a removed segment are deleted.",
               at_least(0)),
        _topic("flush.messages", Type.LONG, LONG_MAX,
               "Force an fsync after this many records.",
               at_least(1)),
        _topic("flush.ms", Type.LONG, LONG_MAX,
               "Force an fsync when unflushed data is this old.",
               at_least(0)),
        _topic("index.interval.bytes", Type.INT, 4096,
               "Bytes between two offset index entries.",
               at_least(0)),
        _topic("max.message.bytes", Type.INT, 1048588,
               "Largest record batch accepted for this topic.",
               at_least(0)),
        _topic("message.timestamp.type", Type.STRING, "CreateTime",
               "CreateTime keeps the producer's timestamps; LogAppendTime "
               "stamps batches with the broker's clock.",
               one_of("CreateTime", "LogAppendTime")),
        _topic("message.timestamp.before.max.ms", Type.LONG, LONG_MAX,
               "How far in the past a CreateTime timestamp may be.",
               at_least(0)),
        _topic("message.timestamp.after.max.ms", Type.LONG, LONG_MAX,
               "How far in the future a CreateTime timestamp may be.",
               at_least(0)),
        _topic("message.timestamp.difference.max.ms", Type.LONG, LONG_MAX,
               "Deprecated (KIP-937): how far from the broker's clock a CreateTime "
               "timestamp may be; stands for the before/after keys left at their "
               "default.",
               at_least(0)),
        _topic("message.format.version", Type.STRING, "3.0-IV1",
               "Deprecated (KIP-724) and ignored: batches are stored in message "
               "format v2.",
               metadata_version()),
        _topic("min.insync.replicas", Type.INT, 1,
               "In-sync replicas an acks=all write needs.",
               at_least(1)),
        _topic("retention.bytes", Type.LONG, -1,
               "Size of a partition beyond which old segments are deleted; -1: "
               "no limit."),
        _topic("retention.ms", Type.LONG, 604800000,
               "Age beyond which old segments are deleted; -1: no limit.",
               at_least(-1)),
        _topic("segment.bytes", Type.INT, 1073741824,
               "Segment size at which the active segment is rolled.",
               at_least(14)),
        _topic("segment.index.bytes", Type.INT, 10485760,
               "Size of a segment's offset and time index files.",
               at_least(4)),
        _topic("segment.ms", Type.LONG, 604800000,
               "Age at which the active segment is rolled.",
               at_least(1)),
        _topic("segment.jitter.ms", Type.LONG, 0,
               "Random reduction of segment.ms, to spread rolls out.",
               at_least(0)),
        _topic("unclean.leader.election.enable", Type.BOOLEAN, False,
               "Allow an out-of-sync replica to become leader."),
        _topic("preallocate", Type.BOOLEAN, False,
               "Preallocate segment files at full size."),
        _topic("min.cleanable.dirty.ratio", Type.DOUBLE, 0.5,
               "Uncompacted share of the log that triggers cleaning.",
               between(0, 1)),
        _topic("min.compaction.lag.ms", Type.LONG, 0,
               "Youngest a record may be and still be compacted away.",
               at_least(0)),
        _topic("max.compaction.lag.ms", Type.LONG, LONG_MAX,
               "Oldest an uncompacted record may get before cleaning is forced.",
               at_least(1)),
    ]
)

# DescribeConfigs lists dynamic layers before static ones before defaults.
_LAYER_ORDER = (
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ConfigSource.STATIC_BROKER_CONFIG,
)


def validate_topic_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Typed values of a topic's overrides; unknown names and invalid values
    raise ``ConfigError`` (Kafka answers both with INVALID_CONFIG)."""
    typed: dict[str, Any] = {}
    for name, raw in overrides.items():
        key = TOPIC_CONFIG.get(name)
        if key is None:
            raise ConfigError(name, "unknown topic configuration", raw)
        typed[name] = key.parse(raw)
    low = typed.get("min.compaction.lag.ms")
    high = typed.get("max.compaction.lag.ms")
    if low is not None and high is not None and low > high:
        raise ConfigError(
            "min.compaction.lag.ms",
            f"must not be greater than max.compaction.lag.ms ({high})",
            overrides["min.compaction.lag.ms"],
        )
    return typed


def warn_deprecated_topic_configs(topic: str, overrides: Mapping[str, Any]) -> None:
    """Log a warning for each key of a topic's overrides that Kafka deprecated (config/effect.py).

    Called where a topic's overrides are set (CreateTopics, AlterConfigs), so
    each setting is warned about once, when it is made.
    """
    for name, value in overrides.items():
        reason = deprecation(name)
        if reason is not None:
            log.warn("Topic configuration {key}={value} of topic {topic} is {reason}",
                     key=name, value=value, topic=topic, reason=reason)


class TopicConfig(Mapping[str, Any]):
    """A topic's effective typed configuration, read-only.

    ``config[name]`` is the value in effect; ``entry(name)`` adds its source
    and synonyms for DescribeConfigs.
    """

    def __init__(self, entries: Mapping[str, ConfigEntry], overrides: Mapping[str, Any]):
        self._entries = dict(entries)
        self._overrides = MappingProxyType(dict(overrides))

    def __getitem__(self, name: str) -> Any:
        value = self._entries[name].value
        return list(value) if isinstance(value, list) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def overrides(self) -> Mapping[str, Any]:
        """The topic's own settings, as stored (raw)."""
        return self._overrides

    def source(self, name: str) -> ConfigSource:
        return self._entries[name].source

    def entry(self, name: str) -> ConfigEntry:
        return self._entries[name]

    def entries(self) -> list[ConfigEntry]:
        return list(self._entries.values())

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{name}={entry.value_string}"
            for name, entry in self._entries.items()
            if entry.source is not ConfigSource.DEFAULT_CONFIG
        )
        return f"TopicConfig({shown})"


def topic_config(broker: KafkaConfig, overrides: Mapping[str, Any] = MappingProxyType({})) -> TopicConfig:
    """The effective configuration of a topic with ``overrides``.

    For each topic key: the topic's own value (DYNAMIC_TOPIC_CONFIG) if set;
    otherwise the first broker synonym, in precedence order, that the broker
    configuration sets explicitly, converted to the topic key's unit, with
    that setting's source; otherwise the first synonym's default
    (DEFAULT_CONFIG). Synonyms are listed as Kafka lists them: the topic
    override, then broker settings by layer (dynamic per-broker, dynamic
    cluster default, static), then defaults.
    """
    typed = validate_topic_overrides(overrides)
    entries: dict[str, ConfigEntry] = {}
    for name, key in TOPIC_CONFIG.items():
        synonyms = _synonyms(broker, name, key, typed)
        if name in typed:
            value, source = typed[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
        else:
            value, source = _from_broker(broker, name)
        entries[name] = ConfigEntry(
            name=name,
            value=value,
            source=source,
            type=key.type,
            sensitive=key.sensitive,
            read_only=False,
            synonyms=tuple(synonyms),
            doc=key.doc,
        )
    return TopicConfig(entries, overrides)


def _from_broker(broker: KafkaConfig, name: str) -> tuple[Any, ConfigSource]:
    synonyms = TOPIC_SYNONYMS[name]
    for synonym in synonyms:
        source = broker.source(synonym.name)
        if source is not ConfigSource.DEFAULT_CONFIG:
            return synonym.to_topic(broker[synonym.name]), source
    for synonym in synonyms:
        default = BROKER_CONFIG[synonym.name].default
        if default is not None:
            return synonym.to_topic(default), ConfigSource.DEFAULT_CONFIG
    raise AssertionError(f"no broker default for topic configuration {name}")


def _synonyms(
    broker: KafkaConfig, name: str, key: ConfigKey, typed: Mapping[str, Any]
) -> list[ConfigSynonym]:
    result: list[ConfigSynonym] = []
    if name in typed:
        result.append(
            ConfigSynonym(name, typed[name], ConfigSource.DYNAMIC_TOPIC_CONFIG, key.type)
        )
    names = [s.name for s in TOPIC_SYNONYMS[name]]
    for layer in _LAYER_ORDER:
        raw_layer = broker.layer(layer)
        for broker_name in names:
            if broker_name in raw_layer:
                broker_key = BROKER_CONFIG[broker_name]
                result.append(
                    ConfigSynonym(
                        broker_name,
                        broker_key.parse(raw_layer[broker_name]),
                        layer,
                        broker_key.type,
                        broker_key.sensitive,
                    )
                )
    for broker_name in names:
        broker_key = BROKER_CONFIG[broker_name]
        if broker_key.default is not None:
            result.append(
                ConfigSynonym(
                    broker_name,
                    broker_key.default,
                    ConfigSource.DEFAULT_CONFIG,
                    broker_key.type,
                    broker_key.sensitive,
                )
            )
    return result

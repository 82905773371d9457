"""Broker keys as DescribeConfigs reports them: value, source, synonyms.

Kafka lists a broker key's synonyms by layer (dynamic per-broker, dynamic
cluster default, static, default) and, inside a layer, by precedence
(``log.retention.ms`` before ``.minutes`` before ``.hours``); the first
synonym gives the reported source. A per-listener key has the broker-wide
key as its synonym. This mirrors Kafka 3.9's ``ConfigHelper`` and
``DynamicBrokerConfig.brokerConfigSynonyms``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .broker import BROKER_CONFIG
from .definition import UpdateMode
from .prefixes import NotAListenerKey, split_listener_key
from .sources import ConfigEntry, ConfigSource, ConfigSynonym

__all__ = ["broker_synonym_names", "describe_broker_config", "LayeredConfig"]


class LayeredConfig(Protocol):
    """What describing a key reads of a ``KafkaConfig``: its layers, its typed values, per-listener values.

    A protocol, not ``KafkaConfig`` itself: ``KafkaConfig.describe`` calls this module, which therefore
    does not import it (no import circle).
    """

    def layer(self, source: ConfigSource) -> Mapping[str, Any]: ...

    def __getitem__(self, name: str) -> Any: ...

    def listener_value(self, listener_name: str, key: str, mechanism: str | None = None) -> Any: ...

_SYNONYM_GROUPS = (
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
)
_LAYER_ORDER = (
    ConfigSource.DYNAMIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ConfigSource.STATIC_BROKER_CONFIG,
)


def broker_synonym_names(name: str) -> list[str]:
    """Names whose value can stand for ``name``, highest precedence first."""
    for group in _SYNONYM_GROUPS:
        if name in group:
            return list(group)
    if name == "log.flush.interval.ms":
        # log.flush.scheduler.interval.ms is what applies when it is unset
        return [name, "log.flush.scheduler.interval.ms"]
    try:
        parsed = split_listener_key(name, BROKER_CONFIG)
    except NotAListenerKey:
        parsed = None
    if parsed is not None:
        return [name, parsed.key]
    return [name]


def _definition(name: str):
    key = BROKER_CONFIG.get(name)
    if key is not None:
        return key
    parsed = split_listener_key(name, BROKER_CONFIG)
    if parsed is None:
        raise KeyError(name)
    return BROKER_CONFIG[parsed.key]


def describe_broker_config(
    config: LayeredConfig, name: str, per_broker: bool = True
) -> ConfigEntry:
    """Describe broker key (or per-listener key) ``name`` of ``config``.

    ``per_broker=False`` describes the cluster-wide default resource (the
    empty broker name), whose synonyms are only dynamic defaults.
    """
    key = _definition(name)
    synonyms: list[ConfigSynonym] = []
    names = broker_synonym_names(name)
    for layer in _LAYER_ORDER:
        raw = config.layer(layer)
        for synonym in names:
            if synonym in raw:
                synonym_key = _definition(synonym)
                synonyms.append(
                    ConfigSynonym(
                        synonym,
                        synonym_key.parse(raw[synonym], as_key=synonym),
                        layer,
                        synonym_key.type,
                        synonym_key.sensitive,
                    )
                )
    for synonym in names:
        default_key = BROKER_CONFIG.get(synonym)
        if default_key is not None and default_key.default is not None:
            synonyms.append(
                ConfigSynonym(
                    synonym,
                    default_key.default,
                    ConfigSource.DEFAULT_CONFIG,
                    default_key.type,
                    default_key.sensitive,
                )
            )
    # Kafka drops the higher-precedence synonyms listed before the key itself
    # (describing log.retention.hours does not report log.retention.ms).
    while synonyms and synonyms[0].name != name:
        synonyms.pop(0)
    if not per_broker:
        synonyms = [
            s for s in synonyms if s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        ]
    if name in BROKER_CONFIG:
        value = config[name]
    else:
        parsed = split_listener_key(name, BROKER_CONFIG)
        if parsed is None:              # already refused by _definition
            raise KeyError(name)
        value = config.listener_value(parsed.listener, parsed.key, parsed.mechanism)
    source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
    return ConfigEntry(
        name=name,
        value=value,
        source=source,
        type=key.type,
        sensitive=key.sensitive,
        read_only=key.update_mode is UpdateMode.READ_ONLY,
        synonyms=tuple(synonyms),
        doc=key.doc,
    )

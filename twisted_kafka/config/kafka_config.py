"""``KafkaConfig``: the broker's validated, typed, read-only configuration.

Every layer of the broker reads its settings from one ``KafkaConfig``, built
once at startup from ``server.properties`` plus ``--override`` pairs, and
rebuilt (never mutated) when dynamic configuration changes: holders of the
old object keep a consistent view, and an invalid update fails before
anything has changed.

The values come in layers, as in Kafka: the static properties, then dynamic
cluster-wide defaults, then dynamic per-broker settings, each layer winning
over the previous one; ``source(name)`` says which layer a value came from.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from twisted.logger import Logger

from . import derived
from .broker import BROKER_CONFIG, MECHANISM_PREFIX_REQUIRED
from .checks import check
from .definition import ConfigKey
from .describe import describe_broker_config
from .effect import deprecation, not_effective_reason
from .errors import HIDDEN
from .prefixes import NotAListenerKey, split_listener_key
from .properties import load_properties, parse_override
from .sources import ConfigEntry, ConfigSource
from .types import format_value

__all__ = ["KafkaConfig"]

log = Logger(namespace="twisted_kafka.config")

#: Layers in the order they are applied; later layers win.
LAYERS = (
    ConfigSource.STATIC_BROKER_CONFIG,
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    ConfigSource.DYNAMIC_BROKER_CONFIG,
)
_DYNAMIC_LAYERS = LAYERS[1:]
_EMPTY: Mapping[str, Any] = MappingProxyType({})


class KafkaConfig(Mapping[str, Any]):
    """The broker configuration: name -> typed value, defaults applied.

    Iterating yields every key of ``BROKER_CONFIG``. Per-listener settings
    (``listener.name.<l>.<key>``) are read with ``listener_value`` or
    ``listener_config``; keys the broker does not know are kept in
    ``originals`` and listed in ``unknown_keys``, and each is warned about
    once. Construct with ``load`` or ``from_props``.
    """

    def __init__(
        self,
        static: Mapping[str, Any],
        dynamic_default: Mapping[str, Any] = _EMPTY,
        dynamic_broker: Mapping[str, Any] = _EMPTY,
        *,
        _already_warned: frozenset[str] = frozenset(),
    ) -> None:
        self._layers: dict[ConfigSource, Mapping[str, Any]] = {
            ConfigSource.STATIC_BROKER_CONFIG: MappingProxyType(dict(static)),
            ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: MappingProxyType(dict(dynamic_default)),
            ConfigSource.DYNAMIC_BROKER_CONFIG: MappingProxyType(dict(dynamic_broker)),
        }
        merged: dict[str, Any] = {}
        self._sources: dict[str, ConfigSource] = {}
        for layer in LAYERS:
            for name, raw in self._layers[layer].items():
                merged[name] = raw
                self._sources[name] = layer
        self._originals = MappingProxyType(merged)

        listener_raw, unknown = self._classify(merged, _already_warned)
        self._unknown = tuple(unknown)
        dynamic = frozenset(name for name, source in self._sources.items() if source in _DYNAMIC_LAYERS)
        self._ineffective = tuple(self._warn_ineffective(merged, listener_raw, _already_warned, dynamic))
        self._values = BROKER_CONFIG.parse(merged)
        self._listener_values: dict[tuple[str, str | None, str], Any] = {}
        self._listener_names = listener_raw
        for name, index in listener_raw.items():
            parsed = BROKER_CONFIG[index[2]].parse(merged[name], as_key=name)
            self._listener_values[index] = parsed
        check(self._values)

    # -- construction -------------------------------------------------------

    @classmethod
    def load(
        cls, path: str | os.PathLike[str] | None, overrides: Sequence[str] = ()
    ) -> KafkaConfig:
        """Read ``path`` (a ``.properties`` file, or None for none) and apply
        ``key=value`` overrides, which win over the file."""
        props: dict[str, Any] = {} if path is None else load_properties(path)
        for override in overrides:
            key, value = parse_override(override)
            props[key] = value
        return cls(props)

    @classmethod
    def from_props(cls, props: Mapping[str, Any]) -> KafkaConfig:
        """Build from a mapping of raw values (normally strings)."""
        return cls(props)

    def with_updates(
        self,
        updates: Mapping[str, Any],
        source: ConfigSource = ConfigSource.DYNAMIC_BROKER_CONFIG,
    ) -> KafkaConfig:
        """A new configuration with ``updates`` applied to a dynamic layer.

        ``source`` picks the layer: DYNAMIC_BROKER_CONFIG (this broker) or
        DYNAMIC_DEFAULT_BROKER_CONFIG (cluster-wide default). A value of
        None removes the key from that layer. Raises ``ConfigError`` if the
        result is invalid; this configuration is unchanged either way.
        Whether a key may be updated dynamically at all is the caller's
        decision (``BROKER_CONFIG[name].update_mode``).
        """
        if source not in _DYNAMIC_LAYERS:
            raise ValueError(f"updates go to a dynamic layer, not {source.name}")
        layer = dict(self._layers[source])
        for name, value in updates.items():
            if value is None:
                layer.pop(name, None)
            else:
                layer[name] = value
        layers = dict(self._layers)
        layers[source] = layer
        return KafkaConfig(
            layers[ConfigSource.STATIC_BROKER_CONFIG],
            layers[ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG],
            layers[ConfigSource.DYNAMIC_BROKER_CONFIG],
            _already_warned=frozenset(self._unknown) | frozenset(self._ineffective),
        )

    @staticmethod
    def _warn_ineffective(merged: Mapping[str, Any], listener_raw, already_warned: frozenset[str],
                          dynamic: frozenset[str]) -> list[str]:
        """Warn once about each key set explicitly that the broker does not act on, or that Kafka
        deprecated (config/effect.py); returns them.  Keys of the dynamic layers are not warned
        about here: DynamicBrokerConfig says once per change that a dynamic key has no effect."""
        ineffective = []
        for name in merged:
            base = name if name in BROKER_CONFIG else listener_raw.get(name, (None, None, None))[2]
            deprecated = deprecation(base) if base else None
            reason = not_effective_reason(base) if base else None
            if reason is None and deprecated is None:
                continue
            ineffective.append(name)
            if name in already_warned:
                continue
            if deprecated is not None:
                log.warn("Configuration {key}={value} is {reason}", key=name, value=merged[name], reason=deprecated)
            elif name not in dynamic:
                log.warn("Configuration {key} is accepted but has no effect: {reason}", key=name, reason=reason)
        return ineffective

    @staticmethod
    def _classify(
        merged: Mapping[str, Any], already_warned: frozenset[str]
    ) -> tuple[dict[str, tuple[str, str | None, str]], list[str]]:
        """Sort non-broker keys into per-listener keys and unknown ones,
        warning once about each unknown or ignored key."""
        listener_keys: dict[str, tuple[str, str | None, str]] = {}
        unknown: list[str] = []
        for name in merged:
            if name in BROKER_CONFIG:
                continue
            try:
                parsed = split_listener_key(name, BROKER_CONFIG)
            except NotAListenerKey as exc:
                unknown.append(name)
                if name not in already_warned:
                    log.warn(
                        "Ignoring configuration {key}: {reason}",
                        key=name,
                        reason=str(exc),
                    )
                continue
            if parsed is None:
                unknown.append(name)
                if name not in already_warned:
                    log.warn(
                        "Ignoring unknown configuration {key}: this broker "
                        "defines no such key",
                        key=name,
                    )
                continue
            listener_keys[name] = (parsed.listener, parsed.mechanism, parsed.key)
            if (parsed.mechanism is None and parsed.key in MECHANISM_PREFIX_REQUIRED
                    and name not in already_warned):
                log.warn(
                    "Configuration {key} has no effect: brokers read {base} "
                    "only per SASL mechanism, as "
                    "listener.name.{listener}.<mechanism>.{base}",
                    key=name,
                    base=parsed.key,
                    listener=parsed.listener,
                )
        return listener_keys, unknown

    # -- Mapping ------------------------------------------------------------

    def __getitem__(self, name: str) -> Any:
        value = self._values[name]
        return list(value) if isinstance(value, list) else value

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shown = []
        for name in self._originals:
            if name in self._values:
                key, value = BROKER_CONFIG[name], self._values[name]
            elif name in self._listener_names:
                index = self._listener_names[name]
                key, value = BROKER_CONFIG[index[2]], self._listener_values[index]
            else:
                continue
            text = HIDDEN if key.sensitive else format_value(value, key.type)
            shown.append(f"{name}={text}")
        return f"KafkaConfig({', '.join(shown)})"

    # -- raw values and provenance -------------------------------------------

    @property
    def originals(self) -> Mapping[str, Any]:
        """Every key given, raw (strings as written), all layers merged."""
        return self._originals

    @property
    def unknown_keys(self) -> tuple[str, ...]:
        """Given keys that are neither broker keys nor valid per-listener keys."""
        return self._unknown

    def layer(self, source: ConfigSource) -> Mapping[str, Any]:
        """The raw values of one layer (empty for non-layer sources)."""
        return self._layers.get(source, _EMPTY)

    def source(self, name: str) -> ConfigSource:
        """Where ``name``'s value comes from: the layer that set it last, or
        DEFAULT_CONFIG for a broker key nobody set."""
        found = self._sources.get(name)
        if found is not None:
            return found
        if name in BROKER_CONFIG:
            return ConfigSource.DEFAULT_CONFIG
        raise KeyError(name)

    def describe(self, name: str, per_broker: bool = True) -> ConfigEntry:
        """``name`` as DescribeConfigs reports it for a broker resource."""
        return describe_broker_config(self, name, per_broker=per_broker)

    # -- per-listener values -------------------------------------------------

    def listener_value(
        self, listener_name: str, key: str, mechanism: str | None = None
    ) -> Any:
        """The typed value of ``listener.name.<listener>.[<mechanism>.]<key>``,
        or None when that is not set (the base key is *not* consulted).

        Listener and mechanism names are matched case-insensitively, as
        Kafka lower-cases both when it builds the prefix.
        """
        definition = self._overridable(key, mechanism)
        value = self._listener_values.get(
            (listener_name.lower(), mechanism.lower() if mechanism else None, key)
        )
        return definition.copy_value(value)

    def listener_effective(
        self, listener_name: str, key: str, mechanism: str | None = None
    ) -> Any:
        """The value in effect for a listener (and SASL mechanism), as Kafka
        resolves it: the mechanism-prefixed value, then the
        listener-prefixed one, then the broker-wide key.

        Keys a Kafka broker reads only per mechanism (``sasl.jaas.config``
        and the SASL class keys) fall back to their default, not to the
        listener-level or broker-wide setting, which Kafka ignores.
        """
        definition = self._overridable(key, mechanism)
        lowered = listener_name.lower()
        if mechanism is not None:
            found = self._listener_values.get((lowered, mechanism.lower(), key))
            if found is not None:
                return definition.copy_value(found)
        if key in MECHANISM_PREFIX_REQUIRED:
            return definition.copy_value(definition.default)
        found = self._listener_values.get((lowered, None, key))
        if found is not None:
            return definition.copy_value(found)
        return self[key]

    def listener_config(self, listener_name: str) -> Mapping[str, Any]:
        """All broker keys with this listener's ``listener.name.<l>.<key>``
        values in place of the broker-wide ones (Kafka's
        ``valuesWithPrefixOverride``); read-only."""
        lowered = listener_name.lower()
        values = {name: self[name] for name in self._values}
        for (listener, mechanism, key), value in self._listener_values.items():
            if listener == lowered and mechanism is None:
                values[key] = BROKER_CONFIG[key].copy_value(value)
        return MappingProxyType(values)

    @staticmethod
    def _overridable(key: str, mechanism: str | None) -> ConfigKey:
        definition = BROKER_CONFIG[key]
        if mechanism is None and not definition.listener_override:
            raise ValueError(f"{key} cannot be set per listener")
        if mechanism is not None and not definition.per_mechanism:
            raise ValueError(f"{key} cannot be set per SASL mechanism")
        return definition

    # -- values Kafka derives from several keys ------------------------------

    @property
    def log_retention_ms(self) -> int:
        """log.retention.ms, else .minutes, else .hours, in ms; -1 = unlimited."""
        return derived.log_retention_ms(self._values)

    @property
    def log_roll_ms(self) -> int:
        """log.roll.ms, else log.roll.hours, in ms."""
        return derived.log_roll_ms(self._values)

    @property
    def log_roll_jitter_ms(self) -> int:
        """log.roll.jitter.ms, else log.roll.jitter.hours, in ms."""
        return derived.log_roll_jitter_ms(self._values)

    @property
    def log_dirs(self) -> list[str]:
        """log.dirs, else log.dir, as a list of directories."""
        return derived.log_dirs(self._values)

    @property
    def listener_security_protocol_map(self) -> dict[str, str]:
        """Upper-case listener name -> security protocol."""
        return derived.listener_security_protocol_map(self._values)

    @property
    def max_connections_per_ip_overrides(self) -> dict[str, int]:
        """Host or address -> connection limit."""
        return derived.max_connections_per_ip_overrides(self._values)

    @property
    def super_users(self) -> list[str]:
        """Principals from super.users, e.g. ['User:admin']."""
        return derived.super_users(self._values)

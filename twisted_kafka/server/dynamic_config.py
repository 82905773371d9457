"""DynamicBrokerConfig: the running broker configuration, and how it changes at runtime.

Kafka keeps dynamic broker configs at two levels -- per broker
(``/config/brokers/<id>``) and the cluster default
(``/config/brokers/<default>``) -- and lays them over ``server.properties``:
per broker, then cluster default, then static, then the key's default.  The
controller stores both levels; brokers learn them from the controller (in
UpdateMetadata, at startup and after every change) and apply them here.

A change never mutates the running ``KafkaConfig``: a new one is built
(``KafkaConfig.with_updates``) and handed to every registered
``Reconfigurable`` whose keys changed -- Kafka's ``Reconfigurable``
interface.  The keys that may change at runtime are exactly the union of the
registered components' keys: any other key -- including keys Kafka itself
would accept, such as ``num.io.threads`` -- is refused with INVALID_REQUEST
("Cannot update these configs dynamically: ..."), as Kafka refuses its
read-only keys, so an operator is never told a setting took effect when it
did not.  A stored key that is not (or no longer) dynamic or valid is skipped
with a warning when it arrives, as Kafka ignores invalid dynamic configs at
startup.
"""

from __future__ import annotations

import re
from typing import Protocol
from collections.abc import Mapping

from twisted.logger import Logger

from twisted_kafka.config import BROKER_CONFIG, ConfigError, ConfigSource, KafkaConfig
from twisted_kafka.config.prefixes import LISTENER_PREFIX, NotAListenerKey, split_listener_key
from twisted_kafka.network.connection_quotas import parse_ip_rates, resolve_ip_overrides
from twisted_kafka.network.tls import RECONFIGURABLE_KEYS
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

log = Logger(namespace="twisted_kafka.server.DynamicBrokerConfig")

DEFAULT_ENTITY = ""   # the cluster-default resource (empty broker name)
_DYNAMIC_SOURCES = (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, ConfigSource.DYNAMIC_BROKER_CONFIG)


#: Broker keys that may also be set for one listener (``listener.name.<l>.<key>``), as
#: Kafka's DynamicListenerConfig allows besides the TLS/SASL keys (KIP-402, KIP-612).
LISTENER_LEVEL_KEYS = frozenset({"max.connections", "max.connection.creation.rate"})


def base_key(name: str) -> str:
    """The broker key a ``listener.name.<l>.<key>`` name sets per listener (the name itself otherwise)."""
    try:
        parsed = split_listener_key(name, BROKER_CONFIG)
    except NotAListenerKey:
        return name
    return name if parsed is None else parsed.key


def _listener_entries(config: KafkaConfig, keys: frozenset[str]) -> dict:
    """The dynamic layers' per-listener values of ``keys`` (what a listener-level change changes)."""
    return {(source, name): value for source in _DYNAMIC_SOURCES
            for name, value in config.layer(source).items() if name != base_key(name) and base_key(name) in keys}
_BROKER_ID = re.compile(r"-?[0-9]+")


class Reconfigurable(Protocol):
    """A part of the broker that applies some broker keys at runtime.

    A component may also declare ``listener_only = True``: its keys change
    only per listener (``listener.name.<l>.<key>``) and per broker, as
    Kafka's TLS key stores do; and ``reload_files(config)``: called after an
    AlterConfigs of this broker even when no value changed, as Kafka re-reads
    a key store updated in place (``reloadUpdatedFilesWithoutConfigChange``).
    """

    reconfigurable_keys: frozenset[str]

    def validate_reconfiguration(self, config: KafkaConfig) -> None:
        """Raise ``ConfigError`` if ``config`` cannot be applied (nothing is changed then)."""

    def reconfigure(self, config: KafkaConfig) -> None:
        """Apply ``config``; called only when one of ``reconfigurable_keys`` changed."""


def _layer_source(entity: str) -> ConfigSource:
    return (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if entity == DEFAULT_ENTITY
            else ConfigSource.DYNAMIC_BROKER_CONFIG)


def with_layer(config: KafkaConfig, entity: str, values: Mapping[str, str]) -> KafkaConfig:
    """``config`` with the dynamic layer of ``entity`` replaced by ``values``; raises ConfigError."""
    source = _layer_source(entity)
    updates: dict[str, str | None] = {name: None for name in config.layer(source) if name not in values}
    updates.update(values)
    return config.with_updates(updates, source)


class DynamicBrokerConfig:
    """The broker's current configuration and its dynamic layers; see the module docstring."""

    def __init__(self, config: KafkaConfig, broker_id: int):
        self.current = config
        self.broker_id = broker_id
        self._reconfigurables: list[Reconfigurable] = []

    def __getitem__(self, name: str):
        return self.current[name]

    # -- components ---------------------------------------------------------------------

    def add_reconfigurable(self, component: Reconfigurable) -> None:
        unknown = sorted(k for k in component.reconfigurable_keys if k not in BROKER_CONFIG)
        if unknown:
            raise ValueError(f"{component!r} declares unknown broker keys {unknown}")
        self._reconfigurables.append(component)

    @property
    def dynamic_keys(self) -> frozenset[str]:
        """Every broker key some component applies at runtime."""
        return frozenset().union(*(c.reconfigurable_keys for c in self._reconfigurables))

    @property
    def listener_only_keys(self) -> frozenset[str]:
        """Dynamic keys that change only with a ``listener.name.<l>.`` prefix (Kafka's security configs)."""
        return frozenset().union(*(c.reconfigurable_keys for c in self._reconfigurables
                                   if getattr(c, "listener_only", False)))

    def is_dynamic(self, name: str) -> bool:
        """Whether config ``name`` (a broker key or a per-listener key) may change at runtime."""
        base = base_key(name)
        if base in self.listener_only_keys:
            return base != name
        if base != name:
            return base in LISTENER_LEVEL_KEYS and base in self.dynamic_keys
        return name in self.dynamic_keys

    def reload_files(self) -> None:
        """Let components re-read files their (unchanged) configs name: an AlterConfigs of this broker."""
        for component in self._reconfigurables:
            reload = getattr(component, "reload_files", None)
            if reload is not None:
                try:
                    reload(self.current)
                except Exception:
                    log.failure("Reloading the files of {component} failed", component=component)

    # -- resources ------------------------------------------------------------------------

    def entity(self, resource_name: str | None) -> str:
        """The stored entity of a BROKER resource name: "" (cluster default) or our id; else INVALID_REQUEST."""
        if not resource_name:
            return DEFAULT_ENTITY
        if not _BROKER_ID.fullmatch(resource_name):
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {resource_name}")
        if int(resource_name) != self.broker_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {self.broker_id} or "
                                                        f"empty string, but received {resource_name}")
        return str(int(resource_name))

    def layer(self, entity: str) -> dict[str, str]:
        """The dynamic configs ``entity`` has now (as strings)."""
        return {name: str(value) for name, value in self.current.layer(_layer_source(entity)).items()}

    # -- changing -------------------------------------------------------------------------

    def validate(self, entity: str, values: Mapping[str, str | None]) -> KafkaConfig:
        """The configuration this broker would run with if ``entity``'s dynamic configs were ``values``.

        Raises INVALID_REQUEST naming the keys that cannot change at runtime, a
        null value, or a value the key (or a component) does not accept.
        """
        nulls = sorted(name for name, value in values.items() if value is None)
        if nulls:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
        listener_only = self.listener_only_keys
        unprefixed = sorted(name for name in values if name in listener_only)
        if unprefixed:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "These security configs can be dynamically updated only per-listener using the "
                             f"listener prefix: {', '.join(unprefixed)}")
        refused = sorted(name for name in values if not self.is_dynamic(name))
        if refused:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Cannot update these configs dynamically: {', '.join(refused)}")
        per_broker = sorted(name for name in values if name != base_key(name) and base_key(name) in listener_only)
        if entity == DEFAULT_ENTITY and per_broker:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, "
                                                        f"broker id must be specified: {', '.join(per_broker)}")
        try:
            updated = with_layer(self.current, entity, {k: v for k, v in values.items() if v is not None})
            for component in self._affected(updated):
                component.validate_reconfiguration(updated)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        return updated

    def apply(self, layers: Mapping[str, Mapping[str, str]]) -> None:
        """Make ``layers`` (entity -> configs, as the controller sent them) the dynamic layers now.

        Entities other than the cluster default and this broker are ignored;
        keys that are not dynamic or not valid are skipped with a warning.
        """
        config = self.current
        for entity, values in layers.items():
            if entity not in (DEFAULT_ENTITY, str(self.broker_id)):
                continue
            config = with_layer(config, entity, self._usable(config, entity, values))
        self._switch_to(config)

    def _usable(self, config: KafkaConfig, entity: str, stored: Mapping[str, str]) -> dict[str, str]:
        kept: dict[str, str] = {}
        for name, value in stored.items():
            if not self.is_dynamic(name):
                log.warn("Ignoring dynamic broker config {key} of {entity}: it cannot change at runtime",
                         key=name, entity=entity or "<default>")
                continue
            try:
                candidate = with_layer(config, entity, {**kept, name: value})
                for component in self._affected(candidate, config):
                    component.validate_reconfiguration(candidate)
            except ConfigError as exc:
                log.warn("Ignoring dynamic broker config {key} of {entity}: {error}", key=name,
                         entity=entity or "<default>", error=exc)
                continue
            kept[name] = value
        return kept

    def _affected(self, new: KafkaConfig, old: KafkaConfig | None = None) -> list[Reconfigurable]:
        old = self.current if old is None else old
        return [c for c in self._reconfigurables
                if any(_key_state(old, key) != _key_state(new, key) for key in c.reconfigurable_keys)
                or _listener_entries(old, c.reconfigurable_keys) != _listener_entries(new, c.reconfigurable_keys)]

    def _switch_to(self, config: KafkaConfig) -> None:
        dynamic = (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, ConfigSource.DYNAMIC_BROKER_CONFIG)
        if all(config.layer(source) == self.current.layer(source) for source in dynamic):
            return   # the controller repeated what is in effect (every UpdateMetadata at startup does)
        affected = self._affected(config)
        self.current = config
        for component in affected:
            try:
                component.reconfigure(config)
            except Exception:
                log.failure("Applying dynamic broker configs to {component} failed", component=component)
        changed = sorted(set(config.layer(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
                         | set(config.layer(ConfigSource.DYNAMIC_BROKER_CONFIG)))
        log.info("Dynamic broker configs in effect: {keys}", keys=", ".join(changed) or "none")


def _key_state(config: KafkaConfig, key: str) -> tuple:
    """``key``'s value and every per-listener value of it: what a change of the key means."""
    overrides = sorted((name, str(value)) for name, value in config.originals.items()
                       if name != key and name.startswith(LISTENER_PREFIX) and base_key(name) == key)
    return (config[key], tuple(overrides))


class ListenerTls:
    """The TLS listeners' key and trust stores as a Reconfigurable (Kafka's ``SslConfigs.RECONFIGURABLE_CONFIGS``).

    Changed only per listener and per broker; an update is validated by
    loading it (an unreadable file, a key that does not match, a changed
    subject without ``ssl.allow.dn.changes`` is INVALID_REQUEST) and applied
    to new connections; an AlterConfigs naming the same files re-reads them.
    """

    reconfigurable_keys = RECONFIGURABLE_KEYS
    listener_only = True

    def __init__(self, contexts: Mapping):
        self._contexts = contexts     # listener name -> ServerTls

    def validate_reconfiguration(self, config: KafkaConfig) -> None:
        for tls in self._contexts.values():
            tls.prepare(config)

    def reconfigure(self, config: KafkaConfig) -> None:
        for name, tls in self._contexts.items():
            try:
                tls.reload(config)
            except ConfigError as exc:
                log.error("TLS of listener {listener} not reloaded: {error}", listener=name, error=exc)

    reload_files = reconfigure


class ConnectionLimits:
    """The shared ConnectionQuotas' limits as a Reconfigurable (checked at every accept).

    A lower limit applies to the next connection -- existing ones stay open, as
    in Kafka -- and a listener paused at the old ``max.connections`` resumes at
    once when the limit rises.  ``max.connections`` and
    ``max.connection.creation.rate`` may also be set per listener
    (``listener.name.<l>.``), as Kafka's ``DynamicListenerConfig`` allows.
    """

    reconfigurable_keys = frozenset({"max.connections", "max.connections.per.ip",
                                     "max.connections.per.ip.overrides", "max.connection.creation.rate",
                                     "quota.ip.connection.creation.rate"})

    def __init__(self, quotas):
        self._quotas = quotas

    def validate_reconfiguration(self, config: KafkaConfig) -> None:
        resolve_ip_overrides(config)   # a host that does not resolve is a ConfigError
        parse_ip_rates(config["quota.ip.connection.creation.rate"])

    def reconfigure(self, config: KafkaConfig) -> None:
        self._quotas.update_limits(config)


class LogDefaults:
    """The ``log.*`` defaults topics inherit, as a Reconfigurable.

    Every topic's effective ``LogConfig`` is recomputed from the new broker
    defaults and its own overrides and applied to its logs: retention and
    flush policy at the next check, segment settings at the next roll, size
    limits at the next append.
    """

    reconfigurable_keys = frozenset({
        "log.segment.bytes",                    # segment.bytes
        "log.roll.ms",                          # segment.ms
        "log.roll.jitter.ms",                   # segment.jitter.ms
        "log.index.size.max.bytes",             # segment.index.bytes
        "log.index.interval.bytes",             # index.interval.bytes
        "log.retention.ms",                     # retention.ms
        "log.retention.bytes",                  # retention.bytes
        "log.flush.interval.messages",          # flush.messages
        "log.flush.interval.ms",                # flush.ms
        "log.cleanup.policy",                   # cleanup.policy
        "log.segment.delete.delay.ms",          # file.delete.delay.ms
        "log.preallocate",                      # preallocate
        "log.message.timestamp.type",           # message.timestamp.type
        "log.message.timestamp.before.max.ms",  # message.timestamp.before.max.ms
        "log.message.timestamp.after.max.ms",   # message.timestamp.after.max.ms
        "log.message.timestamp.difference.max.ms",  # message.timestamp.difference.max.ms (KIP-937)
        "message.max.bytes",                    # max.message.bytes
        "log.cleaner.delete.retention.ms",      # delete.retention.ms
        "log.cleaner.min.compaction.lag.ms",    # min.compaction.lag.ms
        "log.cleaner.max.compaction.lag.ms",    # max.compaction.lag.ms
        "log.cleaner.min.cleanable.ratio",      # min.cleanable.dirty.ratio
    })

    def __init__(self, log_manager, config_repository):
        self._log_manager = log_manager
        self._repository = config_repository

    def validate_reconfiguration(self, config: KafkaConfig) -> None:
        """Every key is validated by its ConfigKey when the config is built."""

    def reconfigure(self, config: KafkaConfig) -> None:
        self._log_manager.config = config
        topics = set(self._repository.topics()) | {log_.topic for log_ in self._log_manager.all_logs()}
        for topic in topics:
            self._log_manager.update_topic_config(topic, self._repository.topic_overrides(topic))


class ProducerIdExpiration:
    """``producer.id.expiration.ms`` as a Reconfigurable (dynamic cluster-wide in Kafka, KIP-854):
    every partition's next producer expiry check uses the new value."""

    reconfigurable_keys = frozenset({"producer.id.expiration.ms"})

    def __init__(self, log_manager):
        self._log_manager = log_manager

    def validate_reconfiguration(self, config: KafkaConfig) -> None:
        """The key's own validator (at least 1) is all there is."""

    def reconfigure(self, config: KafkaConfig) -> None:
        self._log_manager.update_producer_state_config(config)


__all__ = ["DynamicBrokerConfig", "Reconfigurable", "ConnectionLimits", "ListenerTls", "LogDefaults",
           "ProducerIdExpiration", "DEFAULT_ENTITY", "with_layer"]

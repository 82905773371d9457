"""Dynamic broker configuration: which keys change at runtime, and how a change takes effect.

Kafka keeps dynamic broker configs at two levels -- per broker
(``/config/brokers/<id>``) and the cluster default (``/config/brokers/<default>``)
-- and lays them over ``server.properties``: per broker, then cluster default,
then static, then the key's default.  Here the controller's ``MetadataStore``
holds both levels (``broker_configs["<id>"]`` and ``broker_configs[""]``).  A
change never mutates the running ``KafkaConfig``: a new one is built
(``KafkaConfig.with_updates``) and handed to the parts of the broker that
re-read those keys.

Only keys this broker really applies at runtime are accepted
(``LIVE_BROKER_KEYS``); any other key -- including keys Kafka itself would
accept, such as ``num.io.threads`` -- is refused with INVALID_REQUEST
("Cannot update these configs dynamically: ..."), as Kafka refuses its
read-only keys, so an operator is never told a setting took effect when it
did not.  The live keys:

* the ``log.*`` defaults topics inherit (and ``message.max.bytes``): the
  ``LogManager`` gets the new configuration and every topic's effective
  ``LogConfig`` is recomputed and applied to its logs (retention and flush
  policy at the next check, segment settings at the next roll, size limits
  at the next append);
* ``max.connections``, ``max.connections.per.ip`` and
  ``max.connections.per.ip.overrides``: the limits of the shared
  ``ConnectionQuotas``, checked at every accept.  A lower limit applies to
  the next connection (existing ones stay open, as in Kafka); a listener
  paused at the old ``max.connections`` resumes at the next connection
  close.

Stored configs are applied at startup, before the logs are loaded
(``load_dynamic_broker_configs``); a stored key that is no longer live or no
longer valid is skipped with a warning, as Kafka ignores invalid dynamic
configs at startup.
"""

from __future__ import annotations

import re
from typing import Mapping

from twisted.logger import Logger

from twisted_kafka.config import BROKER_CONFIG, ConfigError, ConfigSource, KafkaConfig
from twisted_kafka.network.connection_quotas import resolve_ip_overrides
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

log = Logger(namespace="twisted_kafka.server.DynamicBrokerConfig")

#: Broker defaults of topic configs that LogConfig reads (topic key in the comment).
TOPIC_DEFAULT_KEYS = frozenset({
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
    "message.max.bytes",                    # max.message.bytes
})
CONNECTION_KEYS = frozenset({"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides"})
#: Every broker key an AlterConfigs may change on this broker.
LIVE_BROKER_KEYS = TOPIC_DEFAULT_KEYS | CONNECTION_KEYS

DEFAULT_ENTITY = ""   # the cluster-default resource (empty broker name)
_BROKER_ID = re.compile(r"-?[0-9]+")

assert all(key in BROKER_CONFIG for key in LIVE_BROKER_KEYS)


def broker_entity(resource_name: str | None, broker_id: int) -> str:
    """The stored entity for a BROKER resource name: "" (cluster default) or our id; else INVALID_REQUEST."""
    if not resource_name:
        return DEFAULT_ENTITY
    if not _BROKER_ID.fullmatch(resource_name):
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {resource_name}")
    if int(resource_name) != broker_id:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Unexpected broker id, expected {broker_id} or empty string, but received {resource_name}")
    return str(int(resource_name))


def _layer_source(entity: str) -> ConfigSource:
    return (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if entity == DEFAULT_ENTITY
            else ConfigSource.DYNAMIC_BROKER_CONFIG)


def with_layer(config: KafkaConfig, entity: str, values: Mapping[str, str]) -> KafkaConfig:
    """``config`` with the dynamic layer of ``entity`` replaced by ``values``; raises ConfigError."""
    source = _layer_source(entity)
    updates: dict[str, str | None] = {name: None for name in config.layer(source) if name not in values}
    updates.update(values)
    return config.with_updates(updates, source)


def validate_update(config: KafkaConfig, entity: str, values: Mapping[str, str | None]) -> KafkaConfig:
    """The configuration ``config`` becomes when ``entity``'s dynamic configs are ``values``.

    Raises INVALID_REQUEST naming the keys that cannot change at runtime, a
    null value, or a value the key does not accept.
    """
    nulls = sorted(name for name, value in values.items() if value is None)
    if nulls:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
    refused = sorted(name for name in values if name not in LIVE_BROKER_KEYS)
    if refused:
        raise KafkaError(ErrorCode.INVALID_REQUEST,
                         f"Cannot update these configs dynamically: {', '.join(refused)}")
    try:
        updated = with_layer(config, entity, values)
        if CONNECTION_KEYS & set(values):
            resolve_ip_overrides(updated)
    except ConfigError as exc:
        raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    return updated


def apply_broker_config(server, config: KafkaConfig) -> None:
    """Make ``config`` the running configuration of ``server``'s live parts."""
    previous = server.config
    server.config = config
    if getattr(server, "controller", None) is not None:
        server.controller.config = config
    log_manager = server.log_manager
    log_manager.config = config
    # Every topic's effective LogConfig is recomputed from the new broker defaults.
    topics = {name: dict(record.configs) for name, record in server.store.topics.items()}
    for log_ in log_manager.all_logs():
        topics.setdefault(log_.topic, {})
    for name, overrides in topics.items():
        log_manager.update_topic_config(name, overrides)
    quotas = getattr(server.socket_server, "quotas", None)
    if quotas is not None and any(previous[key] != config[key] for key in CONNECTION_KEYS):
        try:
            quotas.update_limits(config)
        except ConfigError as exc:
            log.warn("Keeping the previous connection limits: {error}", error=exc)


def _usable(config: KafkaConfig, entity: str, stored: Mapping[str, str]) -> dict[str, str]:
    """The stored configs of ``entity`` that are live and valid over ``config``; the others are warned about."""
    kept = {}
    for name, value in stored.items():
        if name not in LIVE_BROKER_KEYS:
            log.warn("Ignoring stored dynamic broker config {key} of {entity}: it cannot change at runtime",
                     key=name, entity=entity or "<default>")
            continue
        try:
            with_layer(config, entity, {**kept, name: value})
        except ConfigError as exc:
            log.warn("Ignoring stored dynamic broker config {key} of {entity}: {error}", key=name,
                     entity=entity or "<default>", error=exc)
            continue
        kept[name] = value
    return kept


def load_dynamic_broker_configs(server) -> None:
    """Startup: lay the stored cluster-default and per-broker configs over the static ones."""
    store = server.store
    config = server.config
    own = str(server.broker.broker_id)
    for entity in (DEFAULT_ENTITY, own):
        stored = store.broker_configs.get(entity) or {}
        if stored:
            config = with_layer(config, entity, _usable(config, entity, stored))
    if config is not server.config:
        apply_broker_config(server, config)
        log.info("Applied stored dynamic broker configs: {keys}",
                 keys=", ".join(sorted(set(config.layer(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG))
                                       | set(config.layer(ConfigSource.DYNAMIC_BROKER_CONFIG)))) or "none")

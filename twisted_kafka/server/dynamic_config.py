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
interface.  The keys that may change at runtime are Kafka's
(``DynamicBrokerConfig.AllDynamicConfigs``: every key whose update mode is
per-broker or cluster-wide), with Kafka's rules: the TLS stores only per
listener, per-broker keys not at the cluster default, a value its key does
not accept refused.  Any other key is refused with INVALID_REQUEST ("Cannot
update these configs dynamically: ..."), as Kafka refuses its read-only
keys.  A dynamic key no registered component applies (``num.io.threads``,
the Kerberos keys, ...) is accepted and stored, so a client's batch that
Kafka would take is not failed, and the log says at once that it has no
effect yet, and why.  A stored key that is not (or no longer) dynamic or
valid is skipped with a warning when it arrives, as Kafka ignores invalid
dynamic configs at startup.

Passwords (keys of type PASSWORD, such as
``listener.name.<l>.ssl.key.password``) are stored only encrypted, in
Kafka's encoded form (``twisted_kafka.security.password_encoder``) with the
key derived from ``password.encoder.secret``: this broker encodes them before
they go to the controller's store, and decodes what the controller sends.
Without the secret such an AlterConfigs is refused naming the keys, as
Kafka refuses it.  With ``password.encoder.old.secret`` set, stored values
written with the old secret are re-encoded with the new one when they first
arrive after startup (Kafka's ``maybeReEncodePasswords``); so are values an
older version of this broker stored in plain text.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol

from twisted.internet.defer import ensureDeferred
from twisted.logger import Logger

from twisted_kafka.config import BROKER_CONFIG, ConfigError, ConfigSource, KafkaConfig, Type, UpdateMode
from twisted_kafka.config.broker import LISTENER_RECONFIGURABLE_KEYS
from twisted_kafka.config.effect import not_effective_reason
from twisted_kafka.config.prefixes import LISTENER_PREFIX, NotAListenerKey, split_listener_key
from twisted_kafka.network.connection_quotas import parse_ip_rates, resolve_ip_overrides
from twisted_kafka.network.tls import RECONFIGURABLE_KEYS
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.security.password_encoder import PasswordDecodeError, PasswordEncoder, looks_encoded

log = Logger(namespace="twisted_kafka.server.DynamicBrokerConfig")

DEFAULT_ENTITY = ""   # the cluster-default resource (empty broker name)
_DYNAMIC_SOURCES = (ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, ConfigSource.DYNAMIC_BROKER_CONFIG)

#: Kafka's dynamic broker keys (``DynamicBrokerConfig.AllDynamicConfigs``): those with an update mode.
DYNAMIC_KEYS = frozenset(name for name, key in BROKER_CONFIG.items() if key.update_mode is not UpdateMode.READ_ONLY)

#: Kafka's ``DynamicSecurityConfigs`` (``SslConfigs.RECONFIGURABLE_CONFIGS``): changed only per listener.
LISTENER_ONLY_KEYS = RECONFIGURABLE_KEYS

#: Broker keys that may also change for one existing listener (``listener.name.<l>.<key>``) besides the
#: TLS stores, and the only per-listener keys the cluster default may hold (config/broker.py).
LISTENER_LEVEL_KEYS = LISTENER_RECONFIGURABLE_KEYS

#: Dynamic keys applied by a part of the broker other than a Reconfigurable, and for which entities: the
#: controller reads the cluster default of unclean.leader.election.enable at every election.
_APPLIED_ELSEWHERE = {"unclean.leader.election.enable": frozenset({DEFAULT_ENTITY})}

#: Why a dynamic key without a component applying it, and without an entry in config/effect.py, does nothing.
NOT_AT_RUNTIME = "this broker reads it at startup only (from server.properties); a change at runtime is not applied"


def base_key(name: str) -> str:
    """The broker key a ``listener.name.<l>.<key>`` name sets per listener (the name itself otherwise)."""
    try:
        parsed = split_listener_key(name, BROKER_CONFIG)
    except NotAListenerKey:
        return name
    return name if parsed is None else parsed.key


def is_password(name: str) -> bool:
    """Whether config ``name`` (a broker key or a per-listener key) holds a password (Kafka's PASSWORD type)."""
    key = BROKER_CONFIG.get(base_key(name))
    return key is not None and key.type is Type.PASSWORD


def _per_broker(name: str) -> bool:
    """Kafka's ``perBrokerConfigs``: keys the cluster default may not hold."""
    base = base_key(name)
    if base != name:
        return base not in LISTENER_LEVEL_KEYS
    key = BROKER_CONFIG.get(name)
    return key is not None and key.update_mode is UpdateMode.PER_BROKER


def _entity_name(entity: str) -> str:
    return "the cluster default" if entity == DEFAULT_ENTITY else f"broker {entity}"


def _listener_entries(config: KafkaConfig, keys: frozenset[str]) -> dict:
    """The dynamic layers' per-listener values of ``keys`` (what a listener-level change changes)."""
    return {(source, name): value for source in _DYNAMIC_SOURCES
            for name, value in config.layer(source).items() if name != base_key(name) and base_key(name) in keys}
_BROKER_ID = re.compile(r"-?[0-9]+")


def password_encoder(config: KafkaConfig, secret_key: str = "password.encoder.secret") -> PasswordEncoder | None:
    """The encoder of ``config``'s password.encoder.* keys with the secret ``secret_key``; None when unset."""
    secret = config[secret_key]
    if secret is None:
        return None
    try:
        return PasswordEncoder(secret.value, cipher_algorithm=config["password.encoder.cipher.algorithm"],
                               key_length=config["password.encoder.key.length"],
                               iterations=config["password.encoder.iterations"],
                               key_factory_algorithm=config["password.encoder.keyfactory.algorithm"])
    except ValueError as exc:
        raise ConfigError(secret_key, str(exc), secret=True) from None


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

    def __init__(self, config: KafkaConfig, broker_id: int, *,
                 run_blocking: Callable[[Callable[[], dict[str, str]]], Awaitable[dict[str, str]]] | None = None):
        """``run_blocking`` runs a function in a worker thread (the broker's I/O pool: encoding a password
        derives a key); None runs it inline."""
        self.current = config
        self.broker_id = broker_id
        self._reconfigurables: list[Reconfigurable] = []
        self.encoder = password_encoder(config)
        self.old_encoder = password_encoder(config, "password.encoder.old.secret")
        #: entity -> its dynamic configs as stored (passwords encoded), as the controller last sent them.
        self._stored: dict[str, dict[str, str]] = {}
        #: stored form -> (password, whether password.encoder.secret wrote it): a decoding derives a key.
        self._decoded: dict[str, tuple[str, bool]] = {}
        #: Stores the re-encoded configs of this broker (entity, stored form): the ControllerClient's
        #: alter_broker_configs.  None: nothing is re-encoded.  The one seam set after construction, by
        #: KafkaServer: the controller client is built after this configuration, which (in a cluster,
        #: through its view of the cluster) it reads.
        self.store_reencoded: Callable[[str, dict[str, str]], Awaitable[None]] | None = None
        self._reencoding = False
        self._warned_plain: set[tuple[str, str]] = set()
        self.run_blocking = run_blocking

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
        """Every broker key Kafka lets change at runtime."""
        return DYNAMIC_KEYS

    @property
    def applied_keys(self) -> frozenset[str]:
        """Every broker key some component applies at runtime."""
        return frozenset().union(*(c.reconfigurable_keys for c in self._reconfigurables))

    @property
    def listener_only_keys(self) -> frozenset[str]:
        """Dynamic keys that change only with a ``listener.name.<l>.`` prefix (Kafka's security configs)."""
        return LISTENER_ONLY_KEYS

    def is_dynamic(self, name: str) -> bool:
        """Whether config ``name`` (a broker key or a per-listener key) may change at runtime."""
        base = base_key(name)
        if base in LISTENER_ONLY_KEYS:
            return base != name
        if base != name:
            return base in LISTENER_LEVEL_KEYS
        return name in DYNAMIC_KEYS

    def without_effect(self, entity: str, name: str) -> str | None:
        """Why dynamic config ``name`` of ``entity`` changes nothing here yet; None when it is applied."""
        base = base_key(name)
        if base in self.applied_keys or entity in _APPLIED_ELSEWHERE.get(base, ()):
            return None
        return not_effective_reason(base) or NOT_AT_RUNTIME

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
        """The dynamic configs ``entity`` has now (as strings; passwords in plain text, never to be shown)."""
        return {name: str(value) for name, value in self.current.layer(_layer_source(entity)).items()}

    def stored_layer(self, entity: str) -> dict[str, str]:
        """``entity``'s dynamic configs as stored (passwords encoded), as the controller last sent them."""
        return dict(self._stored.get(entity, {}))

    # -- changing -------------------------------------------------------------------------

    def validate(self, entity: str, values: Mapping[str, str | None]) -> KafkaConfig:
        """The configuration this broker would run with if ``entity``'s dynamic configs were ``values``.

        Raises INVALID_REQUEST naming the keys that cannot change at runtime, a
        null value, a value the key (or a component) does not accept, or a
        password while ``password.encoder.secret`` is not set.
        """
        nulls = sorted(name for name, value in values.items() if value is None)
        if nulls:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
        unprefixed = sorted(name for name in values if name in LISTENER_ONLY_KEYS)
        if unprefixed:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             "These security configs can be dynamically updated only per-listener using the "
                             f"listener prefix: {', '.join(unprefixed)}")
        refused = sorted(name for name in values if not self.is_dynamic(name))
        if refused:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Cannot update these configs dynamically: {', '.join(refused)}")
        per_broker = sorted(name for name in values if _per_broker(name))
        if entity == DEFAULT_ENTITY and per_broker:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Cannot update these configs at default cluster level, "
                                                        f"broker id must be specified: {', '.join(per_broker)}")
        passwords = sorted(name for name in values if is_password(name))
        if passwords and self.encoder is None:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Password encoder secret not configured: {', '.join(passwords)} can be stored only "
                             "encrypted, with password.encoder.secret set on this broker")
        try:
            updated = with_layer(self.current, entity, {k: v for k, v in values.items() if v is not None})
            for component in self._affected(updated):
                component.validate_reconfiguration(updated)
        except ConfigError as exc:
            raise KafkaError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        return updated

    async def to_stored(self, entity: str, values: Mapping[str, str]) -> dict[str, str]:
        """``values`` (validated) as they are stored: passwords encoded with ``password.encoder.secret``.

        A password that has not changed keeps the stored form it has (no new
        salt for every AlterConfigs of the broker).  Encoding derives a key
        (PBKDF2, milliseconds each), so it runs in ``run_blocking`` when set;
        what it encodes is remembered, so the configs coming back from the
        controller are not decoded again.
        """
        stored = self._stored.get(entity, {})
        result = dict(values)
        fresh = {}
        for name, value in values.items():
            if not is_password(name):
                continue
            previous = stored.get(name)
            if previous is not None and self._decoded.get(previous) == (value, True):
                result[name] = previous
            else:
                fresh[name] = value
        if fresh:
            encoder = self.encoder
            if encoder is None:     # validate() refused it already
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Password encoder secret not configured")
            encoded = await self._blocking(lambda: {name: encoder.encode(value) for name, value in fresh.items()})
            for name, value in encoded.items():
                result[name] = value
                self._decoded[value] = (fresh[name], True)
        return result

    async def _blocking(self, function: Callable[[], dict[str, str]]) -> dict[str, str]:
        if self.run_blocking is None:
            return function()
        return await self.run_blocking(function)

    def apply(self, layers: Mapping[str, Mapping[str, str]]) -> None:
        """Make ``layers`` (entity -> configs as stored, as the controller sent them) the dynamic layers now.

        Entities other than the cluster default and this broker are ignored;
        keys that are not dynamic or not valid, and passwords that do not
        decode, are skipped with a warning.
        """
        config = self.current
        reencode: dict[str, dict[str, str]] = {}
        for entity, stored in layers.items():
            if entity not in (DEFAULT_ENTITY, str(self.broker_id)):
                continue
            self._stored[entity] = dict(stored)
            values, stale = self._decode(entity, stored)
            if stale and entity != DEFAULT_ENTITY:
                reencode[entity] = {name: values[name] for name in stale}
            config = with_layer(config, entity, self._usable(config, entity, values))
        kept = {value for layer in self._stored.values() for value in layer.values()}
        self._decoded = {k: v for k, v in self._decoded.items() if k in kept}
        self._switch_to(config)
        for entity, passwords in reencode.items():
            self._reencode(entity, passwords)

    def _decode(self, entity: str, stored: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
        """The layer with its passwords decoded, and the passwords to store again with the current secret."""
        values: dict[str, str] = {}
        stale: list[str] = []
        for name, raw in stored.items():
            if not is_password(name):
                values[name] = raw
                continue
            found = self._decoded.get(raw)
            if found is None:
                found = self._decode_password(entity, name, raw)
                if found is None:
                    continue
                self._decoded[raw] = found
            values[name] = found[0]
            if not found[1] and self.encoder is not None:
                stale.append(name)
        return values, stale

    def _decode_password(self, entity: str, name: str, raw: str) -> tuple[str, bool] | None:
        """(password, written with the current secret), or None (logged) when it cannot be used."""
        error = "password.encoder.secret is not set"
        for encoder, current in ((self.encoder, True), (self.old_encoder, False)):
            if encoder is None:
                continue
            try:
                return encoder.decode(raw), current
            except PasswordDecodeError as exc:
                error = str(exc)
        if not looks_encoded(raw):
            # Stored in plain text by a version of this broker that did not encrypt passwords.
            if self.encoder is None and (entity, name) not in self._warned_plain:
                self._warned_plain.add((entity, name))
                log.warn("Dynamic password config {key} of {entity} is stored in plain text: set "
                         "password.encoder.secret to have it stored encrypted", key=name, entity=_entity_name(entity))
            return raw, False
        log.error("Dynamic password config {key} of {entity} could not be decoded, ignoring: {error}",
                  key=name, entity=_entity_name(entity), error=error)
        return None

    def _reencode(self, entity: str, passwords: Mapping[str, str]) -> None:
        """Store ``passwords`` of ``entity`` again, encoded with the current secret (Kafka re-encodes at startup)."""
        encoder, store_reencoded = self.encoder, self.store_reencoded
        if encoder is None or store_reencoded is None or self._reencoding:
            return
        stored = dict(self._stored.get(entity, {}))
        keys = ", ".join(sorted(passwords))
        self._reencoding = True

        async def store() -> None:
            try:
                encoded = await self._blocking(lambda: {name: encoder.encode(value)
                                                        for name, value in passwords.items()})
                stored.update(encoded)
                self._decoded.update({value: (passwords[name], True) for name, value in encoded.items()})
                await store_reencoded(entity, stored)
            except Exception as exc:
                log.error("Dynamic password configs {keys} of {entity} could not be stored re-encoded with "
                          "password.encoder.secret (retried when they next arrive): {error!r}",
                          keys=keys, entity=_entity_name(entity), error=exc)
            else:
                log.info("Dynamic password configs {keys} of {entity} re-encoded with password.encoder.secret",
                         keys=keys, entity=_entity_name(entity))
            finally:
                self._reencoding = False

        ensureDeferred(store())

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
        if all(config.layer(source) == self.current.layer(source) for source in _DYNAMIC_SOURCES):
            return   # the controller repeated what is in effect (every UpdateMetadata at startup does)
        affected = self._affected(config)
        previous, self.current = self.current, config
        for component in affected:
            try:
                component.reconfigure(config)
            except Exception:
                log.failure("Applying dynamic broker configs to {component} failed", component=component)
        for entity in (DEFAULT_ENTITY, str(self.broker_id)):
            source = _layer_source(entity)
            old, new = previous.layer(source), config.layer(source)
            for name in sorted(k for k in new if old.get(k) != new[k]):
                reason = self.without_effect(entity, name)
                if reason is not None:
                    log.warn("Dynamic broker config {key} of {entity} is stored but has no effect yet: {reason}",
                             key=name, entity=_entity_name(entity), reason=reason)
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
        "min.insync.replicas",                  # min.insync.replicas (acks=all appends)
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
           "ProducerIdExpiration", "DEFAULT_ENTITY", "DYNAMIC_KEYS", "is_password", "password_encoder", "with_layer"]

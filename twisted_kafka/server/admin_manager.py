"""AdminManager: topic and config administration, for the wire handlers and the admin REST endpoint.

Kafka's ``ZkAdminManager`` is what CreateTopics, DeleteTopics,
CreatePartitions, DescribeConfigs and the AlterConfigs APIs call; the same
operations back the admin REST endpoint here, so both answer alike.  It
works from this broker's own views -- the metadata cache (which topics
exist, their ids), the config repository (their overrides), the dynamic
broker config -- and sends changes to the controller through a
``ControllerClient``; it never touches controller objects.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from twisted.logger import Logger

from twisted_kafka.config import BROKER_CONFIG, ConfigEntry, ConfigSource, topic_config
from twisted_kafka.controller.client import ControllerClient
from twisted_kafka.controller.interface import INTERNAL_TOPICS, NewTopic, TopicResult, validate_topic_name
from twisted_kafka.logging import LOG_LEVELS, ROOT, InvalidLevel, LogLevels
from twisted_kafka.logging.levels import check_level
from twisted_kafka.network.connection_quotas import IP_RATES_KEY, format_ip_rates, parse_ip_rates
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .config_repository import ConfigRepository
from .dynamic_config import DEFAULT_ENTITY, DynamicBrokerConfig
from .metadata_cache import MetadataCache

#: How long a Metadata request that auto-creates topics waits for them to reach the brokers.
AUTO_CREATE_WAIT_MS = 5000

#: IncrementalAlterConfigs' operations.
_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3

#: (name, ConfigEntry, read_only, value as described) for one config of a resource.
DescribedConfig = tuple[str, ConfigEntry, bool, "str | None"]


class AdminManager:
    log = Logger(namespace="twisted_kafka.server.AdminManager")

    def __init__(self, *, controller: ControllerClient, metadata_cache: MetadataCache,
                 config_repository: ConfigRepository, dynamic_config: DynamicBrokerConfig, reactor=None,
                 log_levels: LogLevels | None = None):
        self.controller = controller
        #: The loggers' levels BROKER_LOGGER resources describe and change: the process's, as log4j's are.
        self.log_levels = LOG_LEVELS if log_levels is None else log_levels
        self.metadata_cache = metadata_cache
        self.config_repository = config_repository
        self.dynamic_config = dynamic_config
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.reactor = reactor
        self._internal_topics: dict[str, Callable[[], NewTopic]] = {}

    # -- internal topics ------------------------------------------------------------------

    def register_internal_topic(self, name: str, spec: Callable[[], NewTopic]) -> None:
        """How internal topic ``name`` is created (its owner's partitions, replication, configs),
        whoever causes it: the owner itself, or a client's Metadata request that may auto-create it."""
        self._internal_topics[name] = spec

    def internal_topic_spec(self, name: str) -> NewTopic | None:
        spec = self._internal_topics.get(name)
        return spec() if spec is not None else None

    # -- topics -----------------------------------------------------------------------

    def topic_exists(self, name: str) -> bool:
        return name in self.metadata_cache.topics

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self.metadata_cache.topic_name(topic_id)

    def partitions_added(self, name: str, count: int) -> int:
        """How many partitions growing ``name`` to ``count`` would add, as this broker knows the
        topic (0 for an unknown topic or a count that does not grow it)."""
        topic = self.metadata_cache.topics.get(name)
        return max(0, count - len(topic.partitions)) if topic is not None else 0

    def effective_topic_config(self, overrides: Mapping[str, str]):
        """A topic's effective configuration here: its overrides over the running broker config."""
        return topic_config(self.dynamic_config.current, dict(overrides))

    async def create_topics(self, topics: list[NewTopic], *, validate_only: bool = False,
                            timeout_ms: int = 0) -> list[TopicResult]:
        """Create (or validate) topics; with ``timeout_ms`` > 0 wait that long for every broker to know them."""
        return await self.controller.create_topics(topics, validate_only=validate_only,
                                                   wait_for_brokers=timeout_ms > 0, timeout_ms=timeout_ms)

    async def auto_create_topics(self, names: list[str]) -> dict[str, ErrorCode]:
        """Create topics clients asked for in Metadata; the error to report for those still missing.

        Kafka answers LEADER_NOT_AVAILABLE while a new topic propagates; here
        the call waits for the controller (milliseconds on one node) so the
        client gets the topic in the same answer -- but at most
        ``AUTO_CREATE_WAIT_MS``, after which the client is told
        LEADER_NOT_AVAILABLE and retries, as with Kafka.
        """
        errors: dict[str, ErrorCode] = {}
        # An internal topic is created as its owner defines it (__consumer_offsets: compacted, its
        # own partition count), and one without an owner yet (__transaction_state) not at all.
        topics = []
        for name in names:
            spec = self.internal_topic_spec(name)
            if spec is not None:
                topics.append(spec)
            elif name in INTERNAL_TOPICS:
                errors[name] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                topics.append(NewTopic(name))
        if not topics:
            return errors
        try:
            results = await self.controller.create_topics(topics, timeout_ms=AUTO_CREATE_WAIT_MS)
        except KafkaError as exc:
            if exc.code != ErrorCode.NOT_CONTROLLER:
                raise
            return {name: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION for name in names}
        for result in results:
            if result.error == ErrorCode.REQUEST_TIMED_OUT:   # created, still on its way to the brokers
                errors[result.name] = ErrorCode.LEADER_NOT_AVAILABLE
            elif result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                errors[result.name] = (ErrorCode.INVALID_REPLICATION_FACTOR
                                       if result.error == ErrorCode.INVALID_REPLICATION_FACTOR
                                       else ErrorCode.LEADER_NOT_AVAILABLE)
                self.log.warn("Auto-creating topic {topic} failed: {error} {message}", topic=result.name,
                              error=result.error.name, message=result.message or "")
            elif not self.topic_exists(result.name):
                errors[result.name] = ErrorCode.LEADER_NOT_AVAILABLE
        return errors

    async def delete_topics(self, names: list[str], *, timeout_ms: int = 0) -> dict[str, TopicResult]:
        return await self.controller.delete_topics(names, wait_for_brokers=timeout_ms > 0, timeout_ms=timeout_ms)

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None, *,
                                validate_only: bool = False, timeout_ms: int = 0) -> None:
        await self.controller.create_partitions(name, count, assignments, validate_only=validate_only,
                                                wait_for_brokers=timeout_ms > 0, timeout_ms=timeout_ms)

    # -- leaders and replicas -------------------------------------------------------------

    async def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None, *,
                            timeout_ms: int, forward: bool = True,
                            ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """ElectLeaders through the controller; as Kafka's ``ReplicaManager.electLeaders``, an elected
        partition is answered once this broker's metadata shows its new leader, or REQUEST_TIMED_OUT
        after ``timeout_ms`` (Kafka's DelayedElectLeader)."""
        outcomes = await self.controller.elect_leaders(election_type, partitions, timeout_ms=timeout_ms,
                                                       forward=forward)
        expected = {tp: o.leader for tp, o in outcomes.items() if o.error == ErrorCode.NONE and o.leader >= 0}

        def shown(tp) -> bool:
            state = self.metadata_cache.partition(*tp)
            return state is not None and state.leader == expected[tp]

        if expected:
            await self.metadata_cache.wait_until(lambda: all(shown(tp) for tp in expected), self.reactor,
                                                 max(0, timeout_ms) / 1000.0)
        return {tp: ((ErrorCode.REQUEST_TIMED_OUT, None) if tp in expected and not shown(tp) else (o.error, o.message))
                for tp, o in outcomes.items()}

    def all_partitions(self) -> list[tuple[str, int]]:
        """Every partition this broker knows (ElectLeaders without a partition list)."""
        return [(name, index) for name, topic in sorted(self.metadata_cache.topics.items())
                for index in sorted(topic.partitions)]

    async def alter_partition_reassignments(self, targets: dict[tuple[str, int], list[int] | None], *,
                                            allow_replication_factor_change: bool, timeout_ms: int,
                                            forward: bool = True):
        return await self.controller.alter_partition_reassignments(
            targets, allow_replication_factor_change=allow_replication_factor_change, timeout_ms=timeout_ms,
            forward=forward)

    async def list_partition_reassignments(self, partitions: list[tuple[str, int]] | None, *, timeout_ms: int,
                                           forward: bool = True):
        return await self.controller.list_partition_reassignments(partitions, timeout_ms=timeout_ms, forward=forward)

    # -- describing configs -------------------------------------------------------------

    def describe_topic_configs(self, name: str) -> list[DescribedConfig]:
        """Every topic key with its effective value and source; never read-only."""
        validate_topic_name(name)
        if not self.topic_exists(name):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)
        config = self.effective_topic_config(self.config_repository.topic_overrides(name))
        return [(e.name, e, False, e.value_string) for e in sorted(config.entries(), key=lambda e: e.name)]

    def describe_broker_configs(self, resource_name: str | None) -> list[DescribedConfig]:
        """This broker's keys (or, for "", the cluster-default layer).

        Read-only unless the name is one of Kafka's dynamic keys, as Kafka's
        ConfigHelper reports it: a per-listener name (``listener.name.<l>.<key>``)
        is read-only there even where AlterConfigs accepts it.
        """
        entity = self.dynamic_config.entity(resource_name)
        config = self.dynamic_config.current
        entries: list[DescribedConfig] = []
        if entity == DEFAULT_ENTITY:
            for name in sorted(config.layer(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)):
                if name in config.unknown_keys:
                    continue
                entry = config.describe(name, per_broker=False)
                value = entry.synonyms[0].value_string if entry.synonyms else entry.value_string
                entries.append((name, entry, name not in self.dynamic_config.dynamic_keys, value))
            return entries
        for name in sorted(set(BROKER_CONFIG) | set(config.originals)):
            if name in config.unknown_keys:
                entry = ConfigEntry(name=name, value=None, source=config.source(name), type=None, sensitive=True,
                                    read_only=True, synonyms=())
                entries.append((name, entry, True, None))
                continue
            entry = config.describe(name)
            entries.append((name, entry, name not in self.dynamic_config.dynamic_keys, entry.value_string))
        return entries

    # -- broker loggers (KIP-412) -----------------------------------------------------------

    def check_broker_logger(self, resource_name: str | None) -> None:
        """A BROKER_LOGGER resource is named with this broker's id (Kafka's ``ConfigHelper``); else INVALID_REQUEST."""
        if not resource_name:
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
        broker_id = self.dynamic_config.broker_id
        if not resource_name.isdigit() or int(resource_name) != broker_id:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Unexpected broker id, expected {broker_id} but received {resource_name}")

    def describe_broker_loggers(self, resource_name: str | None) -> list[DescribedConfig]:
        """Every logger with its level in force.  As Kafka answers: source DYNAMIC_BROKER_LOGGER_CONFIG for
        every logger (set or inherited), never read-only, no synonyms."""
        self.check_broker_logger(resource_name)
        described: list[DescribedConfig] = []
        for name, level in self.log_levels.loggers().items():
            entry = ConfigEntry(name=name, value=level, source=ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG, type=None)
            described.append((name, entry, False, level))
        return described

    def alter_broker_loggers(self, resource_name: str | None, operations, *, validate_only: bool = False) -> None:
        """IncrementalAlterConfigs on a BROKER_LOGGER resource: ``operations`` are (logger, op, level) with op
        SET (0) or DELETE (1), checked all first (Kafka's ``RuntimeLoggerManager``), then applied in order.

        Levels set this way last until the process ends: nothing is stored.
        """
        self.check_broker_logger(resource_name)
        names = [name for name, _, _ in operations]
        if len(set(names)) != len(names):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        nulls = [name for name, op, value in operations if op != _DELETE and value is None]
        if nulls:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(nulls)}")
        for name, op, value in operations:
            if op in (_SET, _DELETE) and not self.log_levels.exists(name):
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
            if op == _SET:
                try:
                    check_level(name, value)
                except InvalidLevel as exc:
                    raise KafkaError(ErrorCode.INVALID_CONFIG, str(exc)) from None
            elif op == _DELETE:
                if name == ROOT:
                    raise KafkaError(ErrorCode.INVALID_REQUEST,
                                     f"Removing the log level of the {ROOT} logger is not allowed")
            elif op in (_APPEND, _SUBTRACT):
                verb = "APPEND" if op == _APPEND else "SUBTRACT"
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"{verb} operation is not allowed for the BROKER_LOGGER resource")
            else:
                raise KafkaError(ErrorCode.INVALID_REQUEST,
                                 f"Unknown operation type {op} is not allowed for the BROKER_LOGGER resource")
        if validate_only:
            return
        for name, op, value in operations:
            if op == _SET:
                self.log_levels.set_level(name, value)
                self.log.warn("Updated the log level of {logger} to {new_level}", logger=name, new_level=value)
            else:
                self.log_levels.unset_level(name)
                self.log.warn("Unset the log level of {logger}", logger=name)

    # -- altering configs -----------------------------------------------------------------

    async def alter_topic_configs(self, name: str, new_configs: Callable[[dict[str, str]], dict[str, str]], *,
                                  validate_only: bool = False) -> None:
        """Replace a topic's overrides with ``new_configs(current overrides)``."""
        validate_topic_name(name)
        if not self.topic_exists(name):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        configs = new_configs(self.config_repository.topic_overrides(name))
        await self.controller.alter_topic_configs(name, configs, validate_only=validate_only)

    async def alter_broker_configs(self, resource_name: str | None,
                                   new_configs: Callable[[dict[str, str]], dict[str, str]], *,
                                   validate_only: bool = False) -> None:
        """Replace the dynamic configs of this broker (or of the cluster default, "").

        ``new_configs`` gets the current configs with passwords in plain text
        (this broker decoded them); they are encoded again before they are stored.
        """
        entity = self.dynamic_config.entity(resource_name)
        configs = new_configs(self.dynamic_config.layer(entity))
        self.dynamic_config.validate(entity, configs)
        if not validate_only:
            # Stored with passwords encrypted (password.encoder.secret), in the controller's store and in
            # ZooKeeper alike.
            stored = await self.dynamic_config.to_stored(entity, configs)
            await self.controller.alter_broker_configs(entity, stored)
            if entity != DEFAULT_ENTITY:
                self.dynamic_config.reload_files()   # a key store updated in place under the same name

    # -- connection quotas of client addresses (KIP-612) -------------------------------------

    def ip_connection_rates(self) -> dict[str, float]:
        """The ip entities' connection_creation_rate in force: {address or "<default>": rate}."""
        return parse_ip_rates(self.dynamic_config.current[IP_RATES_KEY])

    async def alter_ip_connection_rates(self, updates: Mapping[str, float | None], *,
                                        validate_only: bool = False) -> None:
        """Set (a rate) or remove (None) ip-entity rates: one change of the cluster-default dynamic config,
        so AlterClientQuotas and the admin endpoint change the same stored state."""

        def new_layer(layer: dict[str, str]) -> dict[str, str]:
            rates = parse_ip_rates(layer.get(IP_RATES_KEY))
            for address, rate in updates.items():
                if rate is None:
                    rates.pop(address, None)
                else:
                    rates[address] = rate
            result = dict(layer)
            if rates:
                result[IP_RATES_KEY] = format_ip_rates(rates)
            else:
                result.pop(IP_RATES_KEY, None)
            return result

        await self.alter_broker_configs(DEFAULT_ENTITY, new_layer, validate_only=validate_only)


__all__ = ["AdminManager", "DescribedConfig"]

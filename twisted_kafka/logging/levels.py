"""Log levels per logger, set at start and changed at runtime, as Kafka's log4j loggers are (KIP-412).

The broker logs with ``twisted.logger``: every event carries a namespace,
the dotted module path of the code that logged it
(``twisted_kafka.network.processor.DataPlaneProcessor``), and one
``LogLevelFilterPredicate`` -- the one filter in front of the log's
destination (``server/startup.py``) -- drops the events below the level of
their namespace, found as log4j finds a logger's: the namespace's own level,
else its nearest ancestor's (``twisted_kafka.network``, ``twisted_kafka``),
else the root's.

Operators know Kafka's logger names, so those are accepted too and mapped
onto the namespaces where the broker has the same concept
(``KAFKA_LOGGERS``): ``kafka.controller`` is ``twisted_kafka.controller``,
``kafka.request.logger`` and ``kafka.authorizer.logger`` are namespaces of
their own, ``root`` is the root.  Levels are log4j's (``LEVELS``); TRACE
logs what DEBUG does (twisted.logger has no finer level) and, for the
request log, adds each request's body.

A level lasts until it is changed or removed, or the process ends: levels
set at runtime (IncrementalAlterConfigs on a BROKER_LOGGER resource) are not
written anywhere, as in Kafka; the next start uses ``log.levels`` again.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from twisted.logger import Logger, LogLevel, LogLevelFilterPredicate

__all__ = ["LEVELS", "VALID_LEVELS", "ROOT", "KafkaLogger", "KAFKA_LOGGERS", "REQUEST_LOGGER", "LevelGate",
           "LogLevels", "UnknownLogger", "InvalidLevel", "parse_level_list", "LOG_LEVELS"]

#: log4j's levels (Kafka's ``LogLevelConfig.VALID_LOG_LEVELS``) and the twisted.logger level each keeps.
LEVELS: dict[str, LogLevel] = {
    "TRACE": LogLevel.debug, "DEBUG": LogLevel.debug, "INFO": LogLevel.info,
    "WARN": LogLevel.warn, "ERROR": LogLevel.error, "FATAL": LogLevel.critical,
}
#: As Kafka lists them in its error message: sorted.
VALID_LEVELS = ", ".join(sorted(LEVELS))

#: Kafka's name of the root logger (log4j 1's, which Kafka keeps).
ROOT = "root"

#: Kafka's request logger: one line per completed request at DEBUG (``network/request_metrics.py``).
REQUEST_LOGGER = "kafka.request.logger"


@dataclass(frozen=True)
class KafkaLogger:
    """One of Kafka's logger names, the broker's namespaces it stands for, and what they log."""

    name: str
    namespaces: tuple[str, ...]
    covers: str


KAFKA_LOGGERS: tuple[KafkaLogger, ...] = (
    KafkaLogger("kafka", ("kafka", "twisted_kafka"), "the whole broker (every logger below)"),
    KafkaLogger(REQUEST_LOGGER, (REQUEST_LOGGER,),
                "the request log: at DEBUG one line per completed request, at TRACE with its body"),
    KafkaLogger("kafka.authorizer.logger", ("kafka.authorizer.logger",),
                "authorization decisions: denials at INFO, grants at DEBUG"),
    KafkaLogger("kafka.network", ("twisted_kafka.network",), "the network layer"),
    KafkaLogger("kafka.network.SocketServer", ("twisted_kafka.network.socket_server",),
                "listeners starting, stopping, draining"),
    KafkaLogger("kafka.network.Acceptor", ("twisted_kafka.network.acceptor",), "accepting connections"),
    KafkaLogger("kafka.network.Processor", ("twisted_kafka.network.processor",),
                "connections: malformed frames, idle and refused connections, closes"),
    KafkaLogger("kafka.network.RequestChannel$", ("twisted_kafka.network.request_channel",),
                "the request queues of both planes"),
    KafkaLogger("kafka.server", ("twisted_kafka.server",), "the server layer: handlers, replicas, configs"),
    KafkaLogger("kafka.server.KafkaApis", ("twisted_kafka.server.kafka_apis", "twisted_kafka.server.handlers"),
                "the API handlers (errors answered to clients)"),
    KafkaLogger("kafka.server.KafkaRequestHandler", ("twisted_kafka.server.request_handler",),
                "the request handler pools"),
    KafkaLogger("kafka.server.KafkaServer", ("twisted_kafka.server.kafka_server",), "startup and shutdown"),
    KafkaLogger("kafka.server.ReplicaManager", ("twisted_kafka.server.replica_manager",),
                "partitions this broker hosts: LeaderAndIsr, StopReplica, appends"),
    KafkaLogger("kafka.server.ReplicaFetcherThread", ("twisted_kafka.server.replica_fetcher",),
                "followers fetching from leaders"),
    KafkaLogger("kafka.server.DynamicBrokerConfig", ("twisted_kafka.server.dynamic_config",),
                "dynamic broker configs applied at runtime"),
    KafkaLogger("kafka.controller", ("twisted_kafka.controller",), "the controller"),
    KafkaLogger("state.change.logger", ("twisted_kafka.controller.partition_state_machine",
                                        "twisted_kafka.controller.replica_state_machine"),
                "the controller's partition and replica state changes (leaders elected, replicas offline)"),
    KafkaLogger("kafka.log", ("twisted_kafka.log",), "the partitions' logs on disk"),
    KafkaLogger("kafka.log.LogManager", ("twisted_kafka.log.log_manager",),
                "loading, recovering, flushing and deleting logs"),
    KafkaLogger("kafka.log.LogCleaner", ("twisted_kafka.log.cleaner",), "the log cleaner (compaction)"),
    KafkaLogger("kafka.coordinator.group", ("twisted_kafka.coordinator.group",), "the group coordinator"),
    KafkaLogger("kafka.coordinator.transaction", ("twisted_kafka.coordinator.transaction",),
                "producer ids and transactions"),
    KafkaLogger("kafka.zk", ("twisted_kafka.zk",), "ZooKeeper (cluster mode)"),
    KafkaLogger("kafka.zookeeper.ZooKeeperClient", ("twisted_kafka.zk.client",), "the ZooKeeper session"),
)
_BY_KAFKA_NAME = {logger.name: logger for logger in KAFKA_LOGGERS}


class UnknownLogger(ValueError):
    """No logger of that name (Kafka: INVALID_CONFIG "Logger <name> does not exist!")."""


class InvalidLevel(ValueError):
    """Not one of log4j's levels."""


def check_level(name: str, level: str) -> str:
    """``level`` if it is one of Kafka's valid levels (upper case, as Kafka compares them); else InvalidLevel
    with Kafka's message."""
    if level not in LEVELS:
        raise InvalidLevel(f"Cannot set the log level of {name} to {level} as it is not a supported log level. "
                           f"Valid log levels are {VALID_LEVELS}")
    return level


def parse_level_list(items: Iterable[str]) -> dict[str, str]:
    """``log.levels``' items (``name=LEVEL``, the level in any case, as log4j reads it) -> name -> LEVEL.

    Raises ValueError saying which item is wrong (the config layer names the key)."""
    levels: dict[str, str] = {}
    for item in items:
        name, sep, level = item.partition("=")
        name, level = name.strip(), level.strip().upper()
        if not sep or not name:
            raise ValueError(f"{item!r} is not <logger>=<level>")
        if level not in LEVELS:
            raise ValueError(f"{item!r}: {level or 'no level'} is not a level ({VALID_LEVELS})")
        if name in levels:
            raise ValueError(f"{name} is given twice")
        levels[name] = level
    return levels


class LevelGate:
    """Whether one namespace logs at DEBUG and at TRACE, kept current by ``LogLevels``.

    A hot path (the request log, once per request) reads one attribute
    instead of building an event the filter would drop.
    """

    __slots__ = ("namespace", "debug", "trace")

    def __init__(self, namespace: str):
        self.namespace = namespace
        self.debug = False
        self.trace = False


class LogLevels:
    """The level of every logger: the root's, and those set on a name or namespace.

    ``predicate`` is the ``LogLevelFilterPredicate`` the log's filter uses;
    it is changed in place, so a change applies to the next event.
    """

    def __init__(self, root: str = "INFO"):
        self._root = check_level(ROOT, root)
        self._levels: dict[str, str] = {}          # namespace -> level name
        self._gates: dict[str, LevelGate] = {}
        self.predicate = LogLevelFilterPredicate(defaultLogLevel=LEVELS[root])

    # -- names ---------------------------------------------------------------------------

    def namespaces(self, name: str) -> tuple[str, ...]:
        """The namespaces ``name`` stands for ("" for the root); UnknownLogger if it names no logger."""
        if name == ROOT:
            return ("",)
        kafka = _BY_KAFKA_NAME.get(name)
        if kafka is not None:
            return kafka.namespaces
        if name and (name in self._levels or name in _broker_namespaces(with_ancestors=True)):
            return (name,)
        raise UnknownLogger(f"Logger {name} does not exist!")

    def exists(self, name: str) -> bool:
        try:
            self.namespaces(name)
        except UnknownLogger:
            return False
        return True

    # -- levels --------------------------------------------------------------------------

    def level_of_namespace(self, namespace: str) -> str:
        """The level in force for ``namespace``: its own, its nearest ancestor's, or the root's."""
        while namespace:
            level = self._levels.get(namespace)
            if level is not None:
                return level
            namespace = namespace.rpartition(".")[0]
        return self._root

    def level(self, name: str) -> str:
        """The level in force for logger ``name`` (a Kafka name, a namespace or ``root``)."""
        return self.level_of_namespace(self.namespaces(name)[0])

    def loggers(self) -> dict[str, str]:
        """Every logger with its level in force, as Kafka's DescribeConfigs lists BROKER_LOGGER: the root,
        Kafka's names, the namespaces the broker logs under and any name given a level."""
        result = {ROOT: self._root}
        for kafka in KAFKA_LOGGERS:
            result[kafka.name] = self.level_of_namespace(kafka.namespaces[0])
        for namespace in sorted(_broker_namespaces(with_ancestors=False) | set(self._levels)):
            result.setdefault(namespace, self.level_of_namespace(namespace))
        return result

    def configure(self, root: str, levels: Mapping[str, str] = {}) -> None:
        """The levels at start: the root's and ``levels`` (name -> LEVEL), replacing any set before."""
        check_level(ROOT, root)
        resolved = {}
        for name, level in levels.items():
            check_level(name, level)
            if name == ROOT:
                root = level
                continue
            for namespace in self.namespaces(name):
                resolved[namespace] = level
        self._root = root
        self._levels = resolved
        self._changed()

    def set_level(self, name: str, level: str) -> None:
        """Give logger ``name`` (and what it stands for) ``level``."""
        check_level(name, level)
        namespaces = self.namespaces(name)
        if namespaces == ("",):
            self._root = level
        else:
            for namespace in namespaces:
                self._levels[namespace] = level
        self._changed()

    def unset_level(self, name: str) -> None:
        """Remove logger ``name``'s own level: it follows its nearest ancestor's (the root's) again.
        The root's level cannot be removed (ValueError)."""
        namespaces = self.namespaces(name)
        if namespaces == ("",):
            raise ValueError(f"Removing the log level of the {ROOT} logger is not allowed")
        for namespace in namespaces:
            self._levels.pop(namespace, None)
        self._changed()

    def gate(self, namespace: str) -> LevelGate:
        """The ``LevelGate`` of ``namespace``, current now and after every change."""
        gate = self._gates.get(namespace)
        if gate is None:
            gate = self._gates[namespace] = LevelGate(namespace)
            self._update(gate)
        return gate

    def _update(self, gate: LevelGate) -> None:
        level = self.level_of_namespace(gate.namespace)
        gate.debug = level in ("DEBUG", "TRACE")
        gate.trace = level == "TRACE"

    def _changed(self) -> None:
        predicate = self.predicate
        predicate.defaultLogLevel = LEVELS[self._root]
        predicate.clearLogLevels()
        for namespace, level in self._levels.items():
            predicate.setLogLevelForNamespace(namespace, LEVELS[level])
        for gate in self._gates.values():
            self._update(gate)


def _broker_namespaces(*, with_ancestors: bool) -> set[str]:
    """The namespaces the broker's loaded modules log under (their ``Logger``s: module-level ones by their
    namespace, class attributes by module and class, as ``Logger.__get__`` names them); with their
    ancestors and the loaded modules' own names when ``with_ancestors``."""
    found: set[str] = set()
    modules = [(name, module) for name, module in list(sys.modules.items())
               if module is not None and (name == "twisted_kafka" or name.startswith("twisted_kafka."))]
    for module_name, module in modules:
        for value in list(vars(module).values()):
            if isinstance(value, Logger):
                found.add(value.namespace)
            elif (isinstance(value, type) and value.__module__ == module_name
                  and any(isinstance(attribute, Logger) for klass in value.__mro__
                          for attribute in vars(klass).values())):
                found.add(f"{module_name}.{value.__qualname__}")
    if not with_ancestors:
        return found
    names = set(found) | _package_modules()
    for namespace in list(names):
        while "." in namespace:
            namespace = namespace.rpartition(".")[0]
            names.add(namespace)
    return names


@functools.cache
def _package_modules() -> frozenset[str]:
    """Every module and package of twisted_kafka, loaded or not (a module-level logger's namespace is its
    module's name, so naming a module that is not loaded yet is no typo)."""
    root = Path(__file__).resolve().parents[1]
    names = set()
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        names.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return frozenset(names)


#: The process's levels, as log4j's are the process's: the twistd plugin configures them and installs
#: ``LOG_LEVELS.predicate`` in front of the log; DescribeConfigs and IncrementalAlterConfigs read and change them.
LOG_LEVELS = LogLevels()

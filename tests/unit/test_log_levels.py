"""``twisted_kafka.logging.levels``: per-logger levels on events, Kafka's names, start and runtime changes."""

from __future__ import annotations

import pytest
from twisted.logger import FilteringLogObserver, Logger, LogLevel

from twisted_kafka.logging import KAFKA_LOGGERS, LogLevels, UnknownLogger, parse_level_list
from twisted_kafka.logging.levels import InvalidLevel


@pytest.fixture
def levels() -> LogLevels:
    return LogLevels()


@pytest.fixture
def logged(levels):
    """(emit, lines): ``emit(namespace, level)`` logs through the filter; ``lines`` what passed it."""
    lines: list[tuple[str, str]] = []
    observer = FilteringLogObserver(lambda event: lines.append((event["log_namespace"], event["log_level"].name)),
                                    [levels.predicate])

    def emit(namespace: str, level: LogLevel) -> None:
        Logger(namespace=namespace, observer=observer).emit(level, "x")

    return emit, lines


CONTROLLER = "twisted_kafka.controller.kafka_controller.KafkaController"
PROCESSOR = "twisted_kafka.network.processor.DataPlaneProcessor"


def test_the_root_level_is_info_by_default(logged):
    emit, lines = logged
    for level in (LogLevel.debug, LogLevel.info, LogLevel.warn):
        emit(CONTROLLER, level)
    assert lines == [(CONTROLLER, "info"), (CONTROLLER, "warn")]


def test_a_kafka_name_sets_the_broker_s_namespace_and_its_children_only(levels, logged):
    emit, lines = logged
    levels.set_level("kafka.controller", "DEBUG")
    emit(CONTROLLER, LogLevel.debug)
    emit(PROCESSOR, LogLevel.debug)
    assert lines == [(CONTROLLER, "debug")]
    assert levels.level("kafka.controller") == levels.level("twisted_kafka.controller") == "DEBUG"
    assert levels.level("kafka.network.Processor") == "INFO"


def test_the_nearest_ancestor_s_level_wins_and_a_removed_level_falls_back_to_it(levels, logged):
    emit, lines = logged
    levels.set_level("kafka", "WARN")                      # the whole broker
    levels.set_level("kafka.network.Processor", "DEBUG")
    emit(PROCESSOR, LogLevel.debug)
    emit(CONTROLLER, LogLevel.info)
    emit("kafka.request.logger", LogLevel.info)            # a child of "kafka" in Kafka's tree too
    emit("twisted.internet", LogLevel.info)                # not the broker's: the root's INFO
    assert lines == [(PROCESSOR, "debug"), ("twisted.internet", "info")]
    levels.unset_level("kafka.network.Processor")
    assert levels.level("kafka.network.Processor") == "WARN"
    levels.unset_level("kafka")
    assert levels.level("kafka.network.Processor") == "INFO"


def test_state_change_logger_is_the_controller_s_state_machines(levels, logged):
    emit, lines = logged
    levels.set_level("state.change.logger", "DEBUG")
    emit("twisted_kafka.controller.partition_state_machine.PartitionStateMachine", LogLevel.debug)
    emit("twisted_kafka.controller.replica_state_machine.ReplicaStateMachine", LogLevel.debug)
    emit(CONTROLLER, LogLevel.debug)
    assert [namespace.rsplit(".", 1)[1] for namespace, _ in lines] == ["PartitionStateMachine", "ReplicaStateMachine"]


def test_the_root_level_can_change_but_not_be_removed(levels, logged):
    emit, lines = logged
    levels.set_level("root", "ERROR")
    emit(CONTROLLER, LogLevel.warn)
    emit(CONTROLLER, LogLevel.error)
    assert lines == [(CONTROLLER, "error")]
    with pytest.raises(ValueError, match="root logger is not allowed"):
        levels.unset_level("root")


def test_trace_logs_what_debug_does_and_fatal_only_critical(levels, logged):
    emit, lines = logged
    levels.set_level("kafka.controller", "TRACE")
    levels.set_level("kafka.log", "FATAL")
    emit(CONTROLLER, LogLevel.debug)
    emit("twisted_kafka.log.log_manager", LogLevel.error)
    emit("twisted_kafka.log.log_manager", LogLevel.critical)
    assert lines == [(CONTROLLER, "debug"), ("twisted_kafka.log.log_manager", "critical")]
    assert levels.level("kafka.controller") == "TRACE"


def test_unknown_names_and_levels_are_refused_and_change_nothing(levels):
    with pytest.raises(UnknownLogger, match="Logger kafka.controler does not exist!"):
        levels.set_level("kafka.controler", "DEBUG")
    with pytest.raises(InvalidLevel, match="Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"):
        levels.set_level("kafka.controller", "VERBOSE")
    assert "kafka.controler" not in levels.loggers() and levels.level("kafka.controller") == "INFO"
    # Modules of the broker that are not loaded are loggers too (a module-level logger is named after its module).
    assert levels.exists("twisted_kafka.spark.reader") and not levels.exists("twisted_kafka.spark.rider")
    assert not levels.exists("") and not levels.exists("org.apache.kafka")


def test_loggers_lists_root_kafka_s_names_and_the_broker_s_namespaces(levels):
    import twisted_kafka.server.admin_manager  # noqa: F401 - a module with a class logger, loaded

    levels.set_level("twisted_kafka.log.cleaner", "DEBUG")
    loggers = levels.loggers()
    assert list(loggers)[:1 + len(KAFKA_LOGGERS)] == ["root", *(k.name for k in KAFKA_LOGGERS)]
    assert loggers["twisted_kafka.server.admin_manager.AdminManager"] == "INFO"
    assert loggers["kafka.log.LogCleaner"] == loggers["twisted_kafka.log.cleaner"] == "DEBUG"


def test_configure_replaces_every_level(levels):
    levels.set_level("kafka.controller", "DEBUG")
    levels.configure("WARN", {"kafka.request.logger": "DEBUG", "root": "ERROR"})
    assert (levels.level("root"), levels.level("kafka.controller"), levels.level("kafka.request.logger")) == (
        "ERROR", "ERROR", "DEBUG")
    with pytest.raises(UnknownLogger):
        levels.configure("INFO", {"kafka.nope": "DEBUG"})


def test_a_gate_follows_its_namespace_s_level(levels):
    gate = levels.gate("kafka.request.logger")
    assert (gate.debug, gate.trace) == (False, False)
    levels.set_level("kafka.request.logger", "DEBUG")
    assert (gate.debug, gate.trace) == (True, False)
    levels.set_level("kafka.request.logger", "TRACE")
    assert (gate.debug, gate.trace) == (True, True)
    levels.unset_level("kafka.request.logger")
    levels.set_level("root", "DEBUG")                      # inherited
    assert (gate.debug, gate.trace) == (True, False)
    assert levels.gate("kafka.request.logger") is gate


def test_log_levels_items():
    assert parse_level_list(["kafka.controller=debug", " root = WARN "]) == {"kafka.controller": "DEBUG",
                                                                             "root": "WARN"}
    for bad, says in (("kafka.controller", "is not <logger>=<level>"), ("=INFO", "is not <logger>=<level>"),
                      ("kafka=LOUD", "LOUD is not a level"), ("kafka=", "no level is not a level")):
        with pytest.raises(ValueError, match=says):
            parse_level_list([bad])
    with pytest.raises(ValueError, match="kafka is given twice"):
        parse_level_list(["kafka=INFO", "kafka=DEBUG"])

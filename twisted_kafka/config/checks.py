"""Rules between keys, checked after every key is valid on its own.

These are the checks of Kafka's ``KafkaConfig.validateValues`` that involve
only configuration (not listeners' endpoints, which the network layer parses
and checks): a broker Kafka would refuse to start must not start here
either, and the error names the key to fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import derived
from .errors import ConfigError

__all__ = ["check"]


def _fail(values: Mapping[str, Any], key: str, reason: str) -> None:
    raise ConfigError(key, reason, values.get(key))


def check(values: Mapping[str, Any]) -> None:
    """Raise ``ConfigError`` for the first rule ``values`` break."""
    if derived.log_roll_ms(values) < 1:
        _fail(values, derived.log_roll_key(values), "the segment roll time must be at least 1 ms")
    if derived.log_roll_jitter_ms(values) < 0:
        _fail(values, derived.log_roll_jitter_key(values), "the roll jitter must not be negative")
    if derived.log_retention_ms(values) == 0:
        _fail(
            values,
            derived.log_retention_key(values),
            "retention must be unlimited (-1) or at least 1 ms",
        )
    if not derived.log_dirs(values):
        _fail(
            values,
            "log.dirs" if values["log.dirs"] is not None else "log.dir",
            "at least one log directory must be given in log.dirs or log.dir",
        )

    broker_id = values["broker.id"]
    if values["broker.id.generation.enable"]:
        if not -1 <= broker_id <= values["reserved.broker.max.id"]:
            _fail(
                values,
                "broker.id",
                "must be at least -1 and at most reserved.broker.max.id "
                f"({values['reserved.broker.max.id']})",
            )
    elif broker_id < 0:
        _fail(values, "broker.id", "must be at least 0 when broker.id.generation.enable is false")

    queued_bytes = values["queued.max.request.bytes"]
    if queued_bytes > 0 and queued_bytes < values["socket.request.max.bytes"]:
        _fail(
            values,
            "queued.max.request.bytes",
            "must be -1 (unbounded) or at least socket.request.max.bytes "
            f"({values['socket.request.max.bytes']})",
        )

    overrides = derived.max_connections_per_ip_overrides(values)
    if values["max.connections.per.ip"] == 0 and not overrides:
        _fail(
            values,
            "max.connections.per.ip",
            "may be 0 only when max.connections.per.ip.overrides is set",
        )

    for name in ("session.timeout.ms", "heartbeat.interval.ms"):
        low, high = values[f"group.consumer.min.{name}"], values[f"group.consumer.max.{name}"]
        if high < low:
            _fail(values, f"group.consumer.max.{name}", f"must be at least group.consumer.min.{name} ({low})")
        if not low <= values[f"group.consumer.{name}"] <= high:
            _fail(values, f"group.consumer.{name}",
                  f"must be between group.consumer.min.{name} ({low}) and group.consumer.max.{name} ({high})")
    if values["group.consumer.heartbeat.interval.ms"] >= values["group.consumer.session.timeout.ms"]:
        _fail(values, "group.consumer.heartbeat.interval.ms", "must be less than group.consumer.session.timeout.ms")
    if not values["group.consumer.assignors"]:
        _fail(values, "group.consumer.assignors", "must name at least one assignor")
    if "classic" not in values["group.coordinator.rebalance.protocols"]:
        _fail(values, "group.coordinator.rebalance.protocols", "must include classic")

    idle = values["connections.max.idle.ms"]
    delay = values["connection.failed.authentication.delay.ms"]
    if idle >= 0 and delay >= idle:
        _fail(
            values,
            "connection.failed.authentication.delay.ms",
            f"must be less than connections.max.idle.ms ({idle})",
        )

    wait = values["replica.fetch.wait.max.ms"]
    if wait > values["replica.socket.timeout.ms"]:
        _fail(
            values,
            "replica.socket.timeout.ms",
            f"must be at least replica.fetch.wait.max.ms ({wait})",
        )
    if wait > values["replica.lag.time.max.ms"]:
        _fail(
            values,
            "replica.fetch.wait.max.ms",
            f"must be at most replica.lag.time.max.ms ({values['replica.lag.time.max.ms']})",
        )

    threads = values["log.cleaner.threads"]
    if threads > 0 and values["log.cleaner.dedupe.buffer.size"] // threads <= 1024 * 1024:
        _fail(
            values,
            "log.cleaner.dedupe.buffer.size",
            "must give each cleaner thread more than 1 MiB",
        )

    derived.listener_security_protocol_map(values)

"""Values Kafka derives from several keys: precedence rules and small parsers.

Kafka never reads ``log.retention.hours`` directly; it asks "retention in
milliseconds", which is ``log.retention.ms`` if set, else the minutes, else
the hours. These functions are those derivations, over a mapping of typed
values, so ``KafkaConfig`` can expose them as properties and the checks can
validate the *effective* value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .broker import SECURITY_PROTOCOLS
from .csvutil import parse_csv_list, parse_csv_map
from .errors import ConfigError

__all__ = [
    "log_retention_ms",
    "log_retention_key",
    "log_roll_ms",
    "log_roll_key",
    "log_roll_jitter_ms",
    "log_roll_jitter_key",
    "log_dirs",
    "listener_security_protocol_map",
    "max_connections_per_ip_overrides",
    "super_users",
]

_MINUTE_MS = 60_000
_HOUR_MS = 60 * _MINUTE_MS
_INTEGER = re.compile(r"[+-]?[0-9]+")
_HOST_CHARACTERS = frozenset(
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-%._:"
)


def log_retention_key(values: Mapping[str, Any]) -> str:
    """Which of the three retention keys is in effect."""
    if values["log.retention.ms"] is not None:
        return "log.retention.ms"
    if values["log.retention.minutes"] is not None:
        return "log.retention.minutes"
    return "log.retention.hours"


def log_retention_ms(values: Mapping[str, Any]) -> int:
    """Retention in ms: ms > minutes > hours; any negative value is -1 (unlimited)."""
    key = log_retention_key(values)
    factor = {"log.retention.ms": 1, "log.retention.minutes": _MINUTE_MS}.get(key, _HOUR_MS)
    millis = values[key] * factor
    return -1 if millis < 0 else millis


def log_roll_key(values: Mapping[str, Any]) -> str:
    return "log.roll.ms" if values["log.roll.ms"] is not None else "log.roll.hours"


def log_roll_ms(values: Mapping[str, Any]) -> int:
    """Segment roll age in ms: log.roll.ms, else log.roll.hours."""
    if values["log.roll.ms"] is not None:
        return values["log.roll.ms"]
    return values["log.roll.hours"] * _HOUR_MS


def log_roll_jitter_key(values: Mapping[str, Any]) -> str:
    if values["log.roll.jitter.ms"] is not None:
        return "log.roll.jitter.ms"
    return "log.roll.jitter.hours"


def log_roll_jitter_ms(values: Mapping[str, Any]) -> int:
    """Roll jitter in ms: log.roll.jitter.ms, else log.roll.jitter.hours."""
    if values["log.roll.jitter.ms"] is not None:
        return values["log.roll.jitter.ms"]
    return values["log.roll.jitter.hours"] * _HOUR_MS


def log_dirs(values: Mapping[str, Any]) -> list[str]:
    """The log directories: log.dirs if set, else log.dir; empty items dropped."""
    text = values["log.dirs"]
    if text is None:
        text = values["log.dir"]
    return parse_csv_list(text)


def listener_security_protocol_map(values: Mapping[str, Any]) -> dict[str, str]:
    """Listener name (upper case, as Kafka normalises it) -> security protocol.

    Protocol names are accepted in any case, as ``SecurityProtocol.forName``
    does. Raises ``ConfigError`` naming the key.
    """
    key = "listener.security.protocol.map"
    raw = values[key]
    try:
        pairs = parse_csv_map(raw)
    except ValueError as exc:
        raise ConfigError(key, str(exc), raw) from None
    result: dict[str, str] = {}
    for name, protocol in pairs.items():
        if protocol.upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(
                key,
                f"unknown security protocol {protocol!r} for listener {name!r} "
                f"(expected one of {', '.join(SECURITY_PROTOCOLS)})",
                raw,
            )
        if not name:
            raise ConfigError(key, "a listener name is empty", raw)
        result[name.upper()] = protocol.upper()
    return result


def max_connections_per_ip_overrides(values: Mapping[str, Any]) -> dict[str, int]:
    """Host or IP -> connection limit. Raises ``ConfigError`` naming the key."""
    key = "max.connections.per.ip.overrides"
    raw = values[key]
    try:
        pairs = parse_csv_map(raw)
    except ValueError as exc:
        raise ConfigError(key, str(exc), raw) from None
    result: dict[str, int] = {}
    for host, count in pairs.items():
        if not set(host) <= _HOST_CHARACTERS:
            raise ConfigError(key, f"{host!r} is not a valid host name or address", raw)
        limit = int(count) if _INTEGER.fullmatch(count) else None
        if limit is None or not -(2**31) <= limit < 2**31:
            raise ConfigError(key, f"limit {count!r} for {host!r} is not a 32-bit integer", raw)
        result[host] = limit
    return result


def super_users(values: Mapping[str, Any]) -> list[str]:
    """Principals of super.users (``User:alice;User:bob``), in order."""
    raw = values["super.users"]
    if not raw:
        return []
    return [item.strip() for item in raw.split(";") if item.strip()]

"""Kafka's comma-separated list and map syntax (``org.apache.kafka.server.util.Csv``).

Several STRING keys hold small structures: ``log.dirs`` a list,
``listener.security.protocol.map`` and ``max.connections.per.ip.overrides``
``name:value`` maps. Kafka splits them with its own rules (Java's
``String.split`` drops trailing empty items; a map entry splits at its *last*
colon, so IPv6 addresses work as keys), and so must we.
"""

from __future__ import annotations

import re

__all__ = ["parse_csv_list", "parse_csv_map"]

# Java's \s*,\s*
_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")


def _java_split(text: str) -> list[str]:
    """``String.split("\\s*,\\s*")``: trailing empty items are dropped."""
    parts = _SEPARATOR.split(text)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_csv_list(text: str | None) -> list[str]:
    """Comma-separated items with empty ones removed (``Csv.parseCsvList``)."""
    if not text:
        return []
    return [item for item in _java_split(text) if item]


def parse_csv_map(text: str | None) -> dict[str, str]:
    """``key:value`` pairs split at the last colon (``Csv.parseCsvMap``).

    Raises ``ValueError`` naming the entry that has no colon.
    """
    result: dict[str, str] = {}
    if not text:
        return result
    for entry in _java_split(text):
        key, colon, value = entry.rpartition(":")
        if not colon:
            raise ValueError(f"entry {entry!r} is not of the form name:value")
        result[key.strip()] = value.strip()
    return result

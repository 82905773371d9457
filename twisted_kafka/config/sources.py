"""Where a configuration value came from, in DescribeConfigs' terms.

DescribeConfigs answers, for every key, the value, its
source and its synonyms; the names and wire ids here are Kafka's
(``DescribeConfigsResponse.ConfigSource``, with the Admin client's name
``DYNAMIC_TOPIC_CONFIG`` for wire id 1), so a handler can copy them out.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from .types import Type, format_value

__all__ = ["ConfigSource", "ConfigSynonym", "ConfigEntry"]


class ConfigSource(enum.Enum):
    """Kafka's config sources; ``.value`` is the int8 sent on the wire."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7


@dataclass(frozen=True)
class ConfigSynonym:
    """One name a value could have come from, with its own value and source.

    ``value`` is typed, in that key's own unit (``log.retention.hours`` is
    in hours even when it feeds ``retention.ms``).
    """

    name: str
    value: Any
    source: ConfigSource
    type: Type
    sensitive: bool = False

    @property
    def value_string(self) -> str | None:
        """The value as DescribeConfigs sends it (None for secrets)."""
        return None if self.sensitive else format_value(self.value, self.type)


@dataclass(frozen=True)
class ConfigEntry:
    """A described configuration: effective value, source and synonyms
    (the first synonym, when any, is the one that supplied the value)."""

    name: str
    value: Any
    source: ConfigSource
    type: Type | None               # None: a key this broker does not define, reported as set
    sensitive: bool = False
    read_only: bool = False
    synonyms: tuple[ConfigSynonym, ...] = field(default=())
    doc: str = ""

    @property
    def value_string(self) -> str | None:
        return None if self.sensitive else format_value(self.value, self.type)

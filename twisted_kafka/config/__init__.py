"""Broker configuration: Kafka's keys, Kafka's syntax, Kafka's rules.

``KafkaConfig.load(path, overrides)`` is the entry point; the rest of the
package is the machinery behind it (``.properties`` parsing, typed key
definitions, per-listener keys, topic-level keys and their broker synonyms)
and the generator of ``docs/configuration.md``. Only ``twisted.logger`` is
imported from Twisted, for the unknown-key warnings.
"""

from .broker import BROKER_CONFIG
from .definition import NO_DEFAULT, ConfigDef, ConfigKey, Importance, UpdateMode
from .errors import ConfigError, StartupError
from .kafka_config import KafkaConfig
from .properties import load_properties, parse_override, parse_properties
from .sources import ConfigEntry, ConfigSource, ConfigSynonym
from .topic import TOPIC_CONFIG, TOPIC_SYNONYMS, TopicConfig, topic_config
from .types import Password, Type, format_value
from .validators import at_least, between, custom, one_of, valid_list

__all__ = [
    "BROKER_CONFIG",
    "TOPIC_CONFIG",
    "TOPIC_SYNONYMS",
    "NO_DEFAULT",
    "ConfigDef",
    "ConfigEntry",
    "ConfigError",
    "ConfigKey",
    "ConfigSource",
    "ConfigSynonym",
    "Importance",
    "KafkaConfig",
    "Password",
    "StartupError",
    "TopicConfig",
    "Type",
    "UpdateMode",
    "at_least",
    "between",
    "custom",
    "format_value",
    "load_properties",
    "one_of",
    "parse_override",
    "parse_properties",
    "topic_config",
    "valid_list",
]

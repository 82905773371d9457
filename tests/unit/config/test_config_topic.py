"""Topic keys: effective values from broker synonyms, with their sources."""

from __future__ import annotations

import pytest

from twisted_kafka.config import (
    BROKER_CONFIG,
    TOPIC_CONFIG,
    TOPIC_SYNONYMS,
    ConfigError,
    ConfigSource,
    KafkaConfig,
    topic_config,
)

DEFAULT = ConfigSource.DEFAULT_CONFIG
STATIC = ConfigSource.STATIC_BROKER_CONFIG
TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG


def test_every_topic_key_has_broker_synonyms_that_exist():
    assert set(TOPIC_CONFIG) == set(TOPIC_SYNONYMS)
    for synonyms in TOPIC_SYNONYMS.values():
        assert synonyms
        assert all(s.name in BROKER_CONFIG for s in synonyms)


def test_named_synonyms():
    def names(topic_key):
        return [s.name for s in TOPIC_SYNONYMS[topic_key]]

    assert names("retention.ms") == ["log.retention.ms", "log.retention.minutes", "log.retention.hours"]
    assert names("max.message.bytes") == ["message.max.bytes"]
    assert names("flush.messages") == ["log.flush.interval.messages"]
    assert names("segment.ms") == ["log.roll.ms", "log.roll.hours"]
    assert names("min.cleanable.dirty.ratio") == ["log.cleaner.min.cleanable.ratio"]


def test_topic_defaults_equal_the_broker_defaults_they_stand_for():
    # with nothing configured, each topic key's effective value is its own default
    effective = topic_config(KafkaConfig.from_props({}))
    for name, key in TOPIC_CONFIG.items():
        assert effective[name] == key.default, name
        assert effective.source(name) is DEFAULT, name


def test_topic_override_wins():
    broker = KafkaConfig.from_props({"log.retention.hours": "1"})
    effective = topic_config(broker, {"retention.ms": "1000", "cleanup.policy": "compact,delete"})
    assert effective["retention.ms"] == 1000
    assert effective.source("retention.ms") is TOPIC
    assert effective["cleanup.policy"] == ["compact", "delete"]
    assert effective.overrides == {"retention.ms": "1000", "cleanup.policy": "compact,delete"}


def test_broker_synonym_converted_to_topic_units():
    broker = KafkaConfig.from_props(
        {"log.retention.minutes": "5", "log.roll.hours": "2", "message.max.bytes": "2000000"}
    )
    effective = topic_config(broker)
    assert effective["retention.ms"] == 300_000
    assert effective.source("retention.ms") is STATIC
    assert effective["segment.ms"] == 7_200_000
    assert effective.source("segment.ms") is STATIC
    assert effective["max.message.bytes"] == 2_000_000


def test_unlimited_broker_retention_is_minus_one():
    effective = topic_config(KafkaConfig.from_props({"log.retention.hours": "-1"}))
    assert effective["retention.ms"] == -1


def test_flush_ms_falls_back_to_scheduler_interval():
    effective = topic_config(KafkaConfig.from_props({"log.flush.scheduler.interval.ms": "2000"}))
    assert effective["flush.ms"] == 2000
    assert effective.source("flush.ms") is STATIC
    effective = topic_config(KafkaConfig.from_props({
        "log.flush.scheduler.interval.ms": "2000", "log.flush.interval.ms": "500",
    }))
    assert effective["flush.ms"] == 500


def test_dynamic_broker_value_is_reported_as_dynamic():
    broker = KafkaConfig.from_props({"log.segment.bytes": "1000000"}).with_updates(
        {"log.segment.bytes": "2000000"}
    )
    entry = topic_config(broker).entry("segment.bytes")
    assert entry.value == 2_000_000
    assert entry.source is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("log.segment.bytes", 2_000_000, ConfigSource.DYNAMIC_BROKER_CONFIG),
        ("log.segment.bytes", 1_000_000, STATIC),
        ("log.segment.bytes", 1073741824, DEFAULT),
    ]


def test_synonyms_list_topic_override_first_then_layers_then_defaults():
    broker = KafkaConfig.from_props({"log.retention.hours": "24", "log.retention.ms": "5000"})
    entry = topic_config(broker, {"retention.ms": "1000"}).entry("retention.ms")
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("retention.ms", 1000, TOPIC),
        ("log.retention.ms", 5000, STATIC),
        ("log.retention.hours", 24, STATIC),
        ("log.retention.hours", 168, DEFAULT),
    ]
    assert entry.value_string == "1000"


@pytest.mark.parametrize(
    "overrides, key",
    [
        ({"retention.ms": "-2"}, "retention.ms"),
        ({"cleanup.policy": "archive"}, "cleanup.policy"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "min.cleanable.dirty.ratio"),
        ({"no.such.topic.key": "1"}, "no.such.topic.key"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms"),
    ],
)
def test_invalid_topic_overrides_name_the_key(overrides, key):
    with pytest.raises(ConfigError) as info:
        topic_config(KafkaConfig.from_props({}), overrides)
    assert info.value.key == key


def test_topic_config_is_read_only_mapping():
    effective = topic_config(KafkaConfig.from_props({}), {"cleanup.policy": "compact"})
    effective["cleanup.policy"].append("delete")
    assert effective["cleanup.policy"] == ["compact"]
    assert len(effective) == len(TOPIC_CONFIG)
    assert "cleanup.policy=compact" in repr(effective)

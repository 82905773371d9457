"""Keys Kafka 3.x deprecated but still accepts: accepted here, warned about, and where Kafka
still applies one (message.timestamp.difference.max.ms, KIP-937), applied the same way."""

from __future__ import annotations

import pytest
from twisted.logger import LogLevel, globalLogPublisher

from twisted_kafka.config import ConfigError, KafkaConfig, topic_config
from twisted_kafka.config.topic import validate_topic_overrides, warn_deprecated_topic_configs
from twisted_kafka.log import LogConfig

LONG_MAX = 2**63 - 1


@pytest.fixture
def warnings():
    events: list = []
    globalLogPublisher.addObserver(events.append)
    yield lambda: [e["log_format"].format(**e) for e in events if e.get("log_level") == LogLevel.warn]
    globalLogPublisher.removeObserver(events.append)


@pytest.mark.parametrize("version", ["0.8.0", "0.10.2", "0.10.0-IV1", "0.8.2.1", "2.8", "2.8-IV1", "2.8.2", "3.0-IV1",
                                     "3.9"])
def test_message_format_version_takes_kafka_versions(version):
    assert validate_topic_overrides({"message.format.version": version}) == {"message.format.version": version}
    KafkaConfig.from_props({"log.message.format.version": version})


@pytest.mark.parametrize("version", ["x.y", "2", "0.7.0", "9.9", "2.8-XX1", ""])
def test_message_format_version_refuses_what_kafka_refuses(version):
    with pytest.raises(ConfigError) as refused:
        validate_topic_overrides({"message.format.version": version})
    assert refused.value.key == "message.format.version"
    with pytest.raises(ConfigError):
        KafkaConfig.from_props({"log.message.format.version": version})


def test_a_deprecated_broker_key_is_warned_about_once_as_deprecated(warnings):
    config = KafkaConfig.from_props({"log.message.format.version": "2.8"})
    config.with_updates({"log.retention.ms": "1000"})
    texts = [t for t in warnings() if "log.message.format.version" in t]
    assert len(texts) == 1 and "deprecated" in texts[0] and "KIP-724" in texts[0], texts
    assert not any("unknown" in t for t in texts)


def test_a_deprecated_topic_key_is_warned_about_naming_the_topic(warnings):
    warn_deprecated_topic_configs("old", {"message.format.version": "2.8", "retention.ms": "5"})
    [text] = warnings()
    assert "message.format.version" in text and "old" in text and "deprecated" in text


def test_message_format_version_has_no_effect_on_the_log():
    assert (LogConfig.from_broker_config(KafkaConfig.from_props({}), {"message.format.version": "0.10.0"})
            == LogConfig.from_broker_config(KafkaConfig.from_props({})))


def test_timestamp_difference_applies_to_either_bound_left_at_its_default():
    broker = KafkaConfig.from_props({})
    config = LogConfig.from_broker_config(broker, {"message.timestamp.difference.max.ms": "60000"})
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (60000, 60000)
    config = LogConfig.from_broker_config(broker, {"message.timestamp.difference.max.ms": "60000",
                                                   "message.timestamp.after.max.ms": "1000"})
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (60000, 1000)
    broker = KafkaConfig.from_props({"log.message.timestamp.difference.max.ms": "5000"})
    config = LogConfig.from_broker_config(broker)
    assert (config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms) == (5000, 5000)
    assert topic_config(broker)["message.timestamp.difference.max.ms"] == 5000
    assert LogConfig.from_broker_config(KafkaConfig.from_props({})).message_timestamp_before_max_ms == LONG_MAX

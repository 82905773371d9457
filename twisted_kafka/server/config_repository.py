"""ConfigRepository: the topic config overrides this broker knows, as the controller last told it.

Kafka's brokers read a topic's overrides when they create its log and when
they are told the overrides changed (``ConfigRepository`` in Kafka; ZooKeeper's
``/config/topics`` in ZooKeeper mode).  Here the overrides arrive over the
control plane, in the controller's UpdateMetadata, before the LeaderAndIsr
that creates the topic's logs -- so a log is created with its topic's
configuration, and a change reaches every broker the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType


class ConfigRepository:
    def __init__(self) -> None:
        self._topics: dict[str, Mapping[str, str]] = {}

    def topic_overrides(self, topic: str) -> dict[str, str]:
        """The topic's overrides (empty when it has none or is unknown)."""
        return dict(self._topics.get(topic, {}))

    def set_topic_overrides(self, topic: str, overrides: Mapping[str, str]) -> bool:
        """Record the topic's overrides; whether they changed."""
        new = MappingProxyType(dict(overrides))
        changed = self._topics.get(topic) != new
        self._topics[topic] = new
        return changed

    def remove_topic(self, topic: str) -> None:
        self._topics.pop(topic, None)

    def topics(self) -> list[str]:
        return list(self._topics)


__all__ = ["ConfigRepository"]

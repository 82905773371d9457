"""ConfigRepository: the topic overrides this broker was last told, handed out as copies."""

from __future__ import annotations

import pytest

from twisted_kafka.server.config_repository import ConfigRepository


def test_overrides_are_recorded_and_changes_reported():
    repository = ConfigRepository()
    assert repository.topic_overrides("unknown") == {} and repository.topics() == []
    assert repository.set_topic_overrides("t", {"retention.ms": "5"}) is True
    assert repository.set_topic_overrides("t", {"retention.ms": "5"}) is False     # the same: no change
    assert repository.set_topic_overrides("t", {"retention.ms": "6"}) is True
    assert repository.set_topic_overrides("empty", {}) is True                      # known, without overrides
    assert repository.topic_overrides("t") == {"retention.ms": "6"}
    assert sorted(repository.topics()) == ["empty", "t"]
    repository.remove_topic("t")
    repository.remove_topic("never")
    assert repository.topics() == ["empty"] and repository.topic_overrides("t") == {}


def test_callers_cannot_change_what_is_stored():
    repository = ConfigRepository()
    given = {"retention.ms": "5"}
    repository.set_topic_overrides("t", given)
    given["retention.ms"] = "6"
    handed_out = repository.topic_overrides("t")
    handed_out["segment.ms"] = "1"
    assert repository.topic_overrides("t") == {"retention.ms": "5"}
    with pytest.raises(TypeError):
        repository._topics["t"]["x"] = "y"          # type: ignore[index]

"""The table of keys the broker accepts without acting on them stays true both ways."""

import pathlib
import re

import pytest

from twisted_kafka.config import BROKER_CONFIG, KafkaConfig
from twisted_kafka.config.effect import not_effective_reason
from twisted_kafka.config.topic import TOPIC_SYNONYMS

PACKAGE = pathlib.Path(__file__).resolve().parents[3] / "twisted_kafka"


def _keys_read_by_the_broker() -> set[str]:
    """Key names quoted anywhere in the broker's code outside the config package,
    plus the broker synonyms of the topic keys that code reads (a broker key
    takes effect through every topic that inherits it).  The operator tools
    (``tools/``) are clients: the client keys they name are not the broker's."""
    quoted = set()
    for path in PACKAGE.rglob("*.py"):
        if path.relative_to(PACKAGE).parts[0] in ("config", "tools"):
            continue
        quoted.update(re.findall(r"[\"']([a-z0-9]+(?:\.[a-z0-9]+)*)[\"']", path.read_text()))
    for topic_key, synonyms in TOPIC_SYNONYMS.items():
        if topic_key in quoted:
            quoted.update(getattr(s, "name", s) for s in synonyms)
    return quoted


def test_every_key_is_either_read_or_declared_without_effect():
    read = _keys_read_by_the_broker()
    silently_ignored = sorted(k for k in BROKER_CONFIG if k not in read and not_effective_reason(k) is None)
    assert not silently_ignored, f"keys nobody reads must be declared in config/effect.py: {silently_ignored}"


def test_no_key_declared_without_effect_is_read():
    read = _keys_read_by_the_broker()
    wrongly_declared = sorted(k for k in BROKER_CONFIG if k in read and not_effective_reason(k) is not None)
    assert not wrongly_declared, f"keys the broker now reads must leave config/effect.py: {wrongly_declared}"


def _warnings(capture):
    return [e for e in capture if e.get("log_level").name == "warn"]


def test_setting_a_key_without_effect_warns_once_with_the_reason():
    from twisted.logger import LogLevel, globalLogPublisher

    events = []
    globalLogPublisher.addObserver(events.append)
    try:
        config = KafkaConfig.from_props({"num.network.threads": "4", "ssl.provider": "SunJSSE",
                                         "listener.name.plaintext.ssl.keymanager.algorithm": "PKIX"})
        config.with_updates({"log.retention.ms": "1000"})
    finally:
        globalLogPublisher.removeObserver(events.append)
    texts = [e["log_format"].format(**e) for e in events if e.get("log_level") == LogLevel.warn]
    assert sum("num.network.threads" in t and "no effect" in t for t in texts) == 1
    assert any("ssl.provider" in t and "pyOpenSSL" in t for t in texts)
    assert any("listener.name.plaintext.ssl.keymanager.algorithm" in t for t in texts)
    assert not any("log.retention.ms" in t for t in texts)


@pytest.mark.parametrize("key", ["num.network.threads", "ssl.provider", "transaction.partition.verification.enable"])
def test_docs_mark_keys_without_effect(key):
    docs = (PACKAGE.parent / "docs" / "configuration.md").read_text()
    section = docs.split(f"### `{key}`", 1)[1].split("### ", 1)[0]
    assert "Accepted, no effect yet" in section

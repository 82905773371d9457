"""Each SASL listener's settings, resolved and checked at startup as Kafka would (or as this broker must)."""

from __future__ import annotations

from pathlib import Path

import pytest

from twisted_kafka.config import ConfigError, KafkaConfig
from twisted_kafka.network.listeners import parse_listeners
from twisted_kafka.sasl.credential_store import InMemoryScramCredentialStore
from twisted_kafka.sasl.listener_config import sasl_server_configs

EXAMPLE = Path(__file__).resolve().parents[3] / "etc" / "sasl-plaintext.properties"
JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a";'
BASE = {
    "listeners": "INTERNAL://127.0.0.1:9094,CLIENTS://127.0.0.1:9092",
    "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CLIENTS:SASL_PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
    "log.dirs": "/nonexistent",
}


def configs(**props: str):
    config = KafkaConfig.from_props({**BASE, **{k.replace("_", "."): v for k, v in props.items()}})
    return sasl_server_configs(config, parse_listeners(config), InMemoryScramCredentialStore())


def test_the_shipped_example_is_accepted():
    config = KafkaConfig.load(EXAMPLE)
    [clients] = sasl_server_configs(config, parse_listeners(config), InMemoryScramCredentialStore()).values()
    assert clients.listener_name == "CLIENTS"
    assert clients.enabled_mechanisms == ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    assert clients.plain_users == {"admin": "admin-secret", "alice": "alice-secret"}


def test_per_listener_mechanisms_win_over_the_broker_wide_key():
    result = configs(**{"sasl.enabled.mechanisms": "PLAIN",
                        "listener.name.clients.sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    assert result["CLIENTS"].enabled_mechanisms == ("SCRAM-SHA-512",)
    assert "INTERNAL" not in result


def test_kafkas_default_gssapi_is_refused_naming_the_listener():
    with pytest.raises(ConfigError, match="CLIENTS enables GSSAPI"):
        configs()


def test_plain_needs_the_listeners_plain_login_module():
    with pytest.raises(ConfigError, match="no PlainLoginModule"):
        configs(**{"sasl.enabled.mechanisms": "PLAIN"})
    with pytest.raises(ConfigError, match="PlainLoginModule"):
        configs(**{"sasl.enabled.mechanisms": "PLAIN", "listener.name.clients.plain.sasl.jaas.config":
                   "org.apache.kafka.common.security.scram.ScramLoginModule required;"})
    result = configs(**{"sasl.enabled.mechanisms": "PLAIN", "listener.name.clients.plain.sasl.jaas.config": JAAS})
    assert result["CLIENTS"].plain_users == {"alice": "a"}


def test_the_controllers_listener_cannot_be_a_sasl_listener_yet():
    with pytest.raises(ConfigError, match="inter.broker.listener.name"):
        configs(**{"inter.broker.listener.name": "CLIENTS", "sasl.enabled.mechanisms": "SCRAM-SHA-256"})


def test_the_shipped_sasl_ssl_example_is_accepted():
    config = KafkaConfig.load(EXAMPLE.parent / "server-sasl-ssl.properties")
    [clients] = sasl_server_configs(config, parse_listeners(config), InMemoryScramCredentialStore()).values()
    assert clients.listener_name == "CLIENTS"
    assert clients.enabled_mechanisms == ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")

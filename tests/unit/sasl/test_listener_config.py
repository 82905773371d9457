"""Each SASL listener's settings, resolved and checked at startup as Kafka would (or as this broker must)."""

from __future__ import annotations

from pathlib import Path

import pytest

from twisted_kafka.config import ConfigError, KafkaConfig
from twisted_kafka.network.listeners import parse_listeners
from twisted_kafka.sasl.credential_store import InMemoryScramCredentialStore
from twisted_kafka.sasl.listener_config import sasl_client_config, sasl_server_configs

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


SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="b-secret";'
INTER_BROKER_SASL = {"inter.broker.listener.name": "CLIENTS", "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
                     "listener.name.clients.plain.sasl.jaas.config": JAAS}


def test_a_sasl_inter_broker_listener_needs_an_implemented_inter_broker_mechanism():
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol.*GSSAPI|GSSAPI.*sasl.mechanism"):
        configs(**INTER_BROKER_SASL)         # Kafka's default, GSSAPI


def test_the_inter_broker_mechanism_must_be_enabled_on_that_listener():
    with pytest.raises(ConfigError, match="SCRAM-SHA-256 is not enabled on listener CLIENTS"):
        configs(**INTER_BROKER_SASL, **{"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"})


def test_the_brokers_own_credentials_come_from_the_listeners_login_module_for_the_mechanism():
    scram = {**INTER_BROKER_SASL, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}
    with pytest.raises(ConfigError, match="listener.name.clients.scram-sha-512.sasl.jaas.config"):
        configs(**scram)
    with pytest.raises(ConfigError, match="ScramLoginModule"):
        configs(**scram, **{"listener.name.clients.scram-sha-512.sasl.jaas.config": JAAS})
    with pytest.raises(ConfigError, match="password"):
        configs(**scram, **{"listener.name.clients.scram-sha-512.sasl.jaas.config":
                            "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"b\";"})
    props = {**BASE, **scram, "listener.name.clients.scram-sha-512.sasl.jaas.config": SCRAM_JAAS}
    config = KafkaConfig.from_props(props)
    assert "CLIENTS" in sasl_server_configs(config, parse_listeners(config), InMemoryScramCredentialStore())
    client = sasl_client_config(config, "CLIENTS")
    assert (client.listener_name, client.mechanism, client.username, client.password) == (
        "CLIENTS", "SCRAM-SHA-512", "broker", "b-secret")


def test_plains_login_module_holds_both_the_users_and_the_brokers_own_credentials():
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="a";')
    props = {**BASE, **INTER_BROKER_SASL, "sasl.mechanism.inter.broker.protocol": "PLAIN",
             "listener.name.clients.plain.sasl.jaas.config": jaas}
    config = KafkaConfig.from_props(props)
    assert sasl_server_configs(config, parse_listeners(config), InMemoryScramCredentialStore())[
        "CLIENTS"].plain_users == {"admin": "admin-secret", "alice": "a"}
    client = sasl_client_config(config, "CLIENTS")
    assert (client.mechanism, client.username, client.password) == ("PLAIN", "admin", "admin-secret")
    with pytest.raises(ConfigError, match="username and password"):
        configs(**INTER_BROKER_SASL, **{"sasl.mechanism.inter.broker.protocol": "PLAIN"})


def test_the_control_plane_listener_is_checked_too():
    listeners = {"listeners": "INTERNAL://127.0.0.1:9094,CLIENTS://127.0.0.1:9092,CONTROL://127.0.0.1:9095",
                 "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CLIENTS:PLAINTEXT,CONTROL:SASL_PLAINTEXT",
                 "control.plane.listener.name": "CONTROL", "sasl.enabled.mechanisms": "SCRAM-SHA-256"}
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol"):
        configs(**listeners)


def test_the_shipped_sasl_ssl_example_is_accepted():
    config = KafkaConfig.load(EXAMPLE.parent / "server-sasl-ssl.properties")
    [clients] = sasl_server_configs(config, parse_listeners(config), InMemoryScramCredentialStore()).values()
    assert clients.listener_name == "CLIENTS"
    assert clients.enabled_mechanisms == ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")

"""KafkaConfig: loading, precedence, per-listener keys, warnings, layers."""

from __future__ import annotations

from pathlib import Path

import pytest
from twisted.logger import formatEvent, globalLogPublisher

from twisted_kafka.config import (
    BROKER_CONFIG,
    ConfigError,
    ConfigSource,
    KafkaConfig,
    Password,
)

SERVER_PROPERTIES = Path(__file__).resolve().parents[3] / "etc" / "server.properties"


@pytest.fixture
def config_warnings():
    """Formatted warnings logged by twisted_kafka.config during the test, except the
    "accepted but has no effect" ones (tests/unit/config/test_config_effect.py covers those)."""
    events: list[dict] = []

    def observer(event):
        if (event.get("log_namespace") == "twisted_kafka.config"
                and "is accepted but has no effect" not in formatEvent(event)):
            events.append(event)

    globalLogPublisher.addObserver(observer)
    try:
        yield lambda: [formatEvent(e) for e in events]
    finally:
        globalLogPublisher.removeObserver(observer)


@pytest.fixture
def properties_file(tmp_path):
    def write(text: str) -> str:
        path = tmp_path / "server.properties"
        path.write_text(text, encoding="iso-8859-1")
        return str(path)

    return write


# -- loading ------------------------------------------------------------------


def test_defaults_without_any_file():
    config = KafkaConfig.load(None)
    assert config["num.io.threads"] == 8
    assert config["listeners"] == "PLAINTEXT://:9092"
    assert config.originals == {}
    assert len(config) == len(BROKER_CONFIG)
    assert set(config) == set(BROKER_CONFIG)


def test_file_values_are_typed(properties_file):
    path = properties_file(
        "num.io.threads=4\nauto.create.topics.enable=false\n"
        "sasl.enabled.mechanisms=PLAIN, SCRAM-SHA-256\nqueued.max.request.bytes=209715200\n"
    )
    config = KafkaConfig.load(path)
    assert config["num.io.threads"] == 4
    assert config["auto.create.topics.enable"] is False
    assert config["sasl.enabled.mechanisms"] == ["PLAIN", "SCRAM-SHA-256"]
    assert config["queued.max.request.bytes"] == 209715200
    assert config.originals["num.io.threads"] == "4"


def test_overrides_win_over_file_values(properties_file):
    path = properties_file("num.io.threads=4\nbroker.id=1\n")
    config = KafkaConfig.load(path, ["num.io.threads=16", "broker.rack=r1"])
    assert config["num.io.threads"] == 16
    assert config["broker.id"] == 1
    assert config["broker.rack"] == "r1"
    assert config.originals["num.io.threads"] == "16"


def test_later_override_of_the_same_key_wins():
    config = KafkaConfig.load(None, ["num.io.threads=2", "num.io.threads=3"])
    assert config["num.io.threads"] == 3


def test_invalid_value_names_key_and_reason(properties_file):
    path = properties_file("num.io.threads=abc\n")
    with pytest.raises(ConfigError) as info:
        KafkaConfig.load(path)
    assert info.value.key == "num.io.threads"
    assert str(info.value) == (
        "Invalid value 'abc' for configuration num.io.threads: not a number of type INT"
    )


@pytest.mark.parametrize(
    "key, value, reason_part",
    [
        ("num.io.threads", "0", "at least 1"),
        ("socket.request.max.bytes", "2147483648", "32-bit"),
        ("security.inter.broker.protocol", "TLS", "must be one of"),
        ("ssl.client.auth", "REQUIRED", "must be one of"),
        ("log.cleanup.policy", "delete,archive", "'archive'"),
        ("compression.type", "brotli", "must be one of"),
        ("log.retention.bytes", "1GB", "not a number of type LONG"),
        ("offsets.topic.replication.factor", "40000", "16-bit"),
        ("auto.create.topics.enable", "yes", "true or false"),
    ],
)
def test_invalid_values_fail_naming_the_key(key, value, reason_part):
    with pytest.raises(ConfigError) as info:
        KafkaConfig.from_props({key: value})
    assert info.value.key == key
    assert reason_part in info.value.reason
    assert key in str(info.value)


def test_password_value_never_appears_in_errors_or_repr():
    config = KafkaConfig.from_props({"ssl.key.password": "s3cret", "num.io.threads": "2"})
    assert isinstance(config["ssl.key.password"], Password)
    assert config["ssl.key.password"].value == "s3cret"
    assert "s3cret" not in repr(config)
    assert "ssl.key.password=[hidden]" in repr(config)
    assert "num.io.threads=2" in repr(config)


def test_lists_handed_out_are_copies():
    config = KafkaConfig.from_props({"sasl.enabled.mechanisms": "PLAIN"})
    config["sasl.enabled.mechanisms"].append("EVIL")
    assert config["sasl.enabled.mechanisms"] == ["PLAIN"]


# -- unknown keys -------------------------------------------------------------


def test_unknown_keys_warn_once_each_and_are_kept(config_warnings):
    config = KafkaConfig.from_props({"num.io.thread": "4", "made.up": "1", "num.io.threads": "2"})
    assert config.unknown_keys == ("num.io.thread", "made.up")
    assert config.originals["made.up"] == "1"
    warnings = config_warnings()
    assert len(warnings) == 2
    assert any("num.io.thread" in w for w in warnings)
    assert any("made.up" in w for w in warnings)
    assert "made.up" not in config


def test_unknown_key_warning_does_not_show_the_value(config_warnings):
    KafkaConfig.from_props({"ssl.keystore.passwd": "s3cret"})
    warnings = config_warnings()
    assert warnings and all("s3cret" not in w for w in warnings)


def test_known_keys_do_not_warn(config_warnings):
    KafkaConfig.from_props(
        {
            "num.io.threads": "2",
            "listener.name.internal.max.connections": "10",
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": "x required;",
        }
    )
    assert config_warnings() == []


@pytest.mark.parametrize(
    "name",
    [
        "listener.name.internal.num.io.threads",  # not overridable per listener
        "listener.name.internal.no.such.key",
        "listener.name.INTERNAL.max.connections",  # Kafka only reads lower case
        "listener.name.sasl_ssl.PLAIN.sasl.jaas.config",
        "listener.name.internal.plain.max.connections",  # not per mechanism
        "listener.name.",
    ],
)
def test_invalid_listener_keys_are_unknown(name, config_warnings):
    config = KafkaConfig.from_props({name: "1"})
    assert config.unknown_keys == (name,)
    [warning] = config_warnings()
    assert name in warning


def test_listener_level_jaas_config_warns_that_kafka_ignores_it(config_warnings):
    config = KafkaConfig.from_props({"listener.name.sasl_ssl.sasl.jaas.config": "x required;"})
    assert config.unknown_keys == ()
    [warning] = config_warnings()
    assert "listener.name.sasl_ssl.sasl.jaas.config" in warning
    assert "mechanism" in warning


# -- per-listener values ---------------------------------------------------------


def test_listener_value_reads_the_prefixed_key():
    config = KafkaConfig.from_props(
        {
            "max.connections": "100",
            "listener.name.internal.max.connections": "10",
            "listener.name.ssl.ssl.client.auth": "required",
        }
    )
    assert config.listener_value("INTERNAL", "max.connections") == 10
    assert config.listener_value("internal", "max.connections") == 10
    assert config.listener_value("EXTERNAL", "max.connections") is None
    assert config.listener_value("SSL", "ssl.client.auth") == "required"
    assert config["max.connections"] == 100
    assert config.listener_effective("EXTERNAL", "max.connections") == 100
    assert config.listener_effective("INTERNAL", "max.connections") == 10


def test_listener_values_are_validated_like_the_base_key():
    with pytest.raises(ConfigError) as info:
        KafkaConfig.from_props({"listener.name.internal.max.connections": "-1"})
    assert info.value.key == "listener.name.internal.max.connections"
    assert "at least 0" in info.value.reason
    with pytest.raises(ConfigError) as info:
        KafkaConfig.from_props({"listener.name.ssl.ssl.client.auth": "always"})
    assert info.value.key == "listener.name.ssl.ssl.client.auth"


def test_listener_value_of_a_non_overridable_key_is_a_programming_error():
    config = KafkaConfig.from_props({})
    with pytest.raises(ValueError):
        config.listener_value("internal", "num.io.threads")
    with pytest.raises(KeyError):
        config.listener_value("internal", "no.such.key")


def test_mechanism_keys():
    config = KafkaConfig.from_props(
        {
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": "scram required;",
            "sasl.jaas.config": "ignored by brokers;",
            "connections.max.reauth.ms": "1000",
            "listener.name.sasl_ssl.connections.max.reauth.ms": "2000",
            "listener.name.sasl_ssl.oauthbearer.connections.max.reauth.ms": "3000",
        }
    )
    jaas = config.listener_value("SASL_SSL", "sasl.jaas.config", mechanism="SCRAM-SHA-256")
    assert jaas.value == "scram required;"
    assert config.listener_value("SASL_SSL", "sasl.jaas.config", mechanism="PLAIN") is None
    assert config.listener_effective("SASL_SSL", "sasl.jaas.config", "PLAIN") is None
    assert "scram required" not in repr(config)
    reauth = "connections.max.reauth.ms"
    assert config.listener_effective("SASL_SSL", reauth, "OAUTHBEARER") == 3000
    assert config.listener_effective("SASL_SSL", reauth, "PLAIN") == 2000
    assert config.listener_effective("OTHER", reauth, "PLAIN") == 1000


def test_listener_config_overlays_one_listener():
    config = KafkaConfig.from_props(
        {
            "ssl.client.auth": "requested",
            "listener.name.internal.ssl.client.auth": "required",
            "listener.name.internal.ssl.key.password": "secret",
        }
    )
    internal = config.listener_config("INTERNAL")
    assert internal["ssl.client.auth"] == "required"
    assert internal["ssl.key.password"].value == "secret"
    assert config.listener_config("EXTERNAL")["ssl.client.auth"] == "requested"
    with pytest.raises(TypeError):
        internal["ssl.client.auth"] = "none"


# -- precedence rules ----------------------------------------------------------


@pytest.mark.parametrize(
    "props, expected",
    [
        ({}, 168 * 3_600_000),
        ({"log.retention.hours": "1"}, 3_600_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "2"}, 120_000),
        ({"log.retention.hours": "1", "log.retention.minutes": "2", "log.retention.ms": "5"}, 5),
        ({"log.retention.ms": "-1"}, -1),
        ({"log.retention.ms": "-5"}, -1),
        ({"log.retention.minutes": "-1"}, -1),
        ({"log.retention.hours": "-1"}, -1),
    ],
)
def test_retention_precedence(props, expected):
    assert KafkaConfig.from_props(props).log_retention_ms == expected


def test_zero_retention_is_rejected_naming_the_key_in_effect():
    with pytest.raises(ConfigError) as info:
        KafkaConfig.from_props({"log.retention.minutes": "0"})
    assert info.value.key == "log.retention.minutes"


@pytest.mark.parametrize(
    "props, roll, jitter",
    [
        ({}, 168 * 3_600_000, 0),
        ({"log.roll.hours": "2", "log.roll.jitter.hours": "1"}, 7_200_000, 3_600_000),
        ({"log.roll.hours": "2", "log.roll.ms": "1000", "log.roll.jitter.ms": "10"}, 1000, 10),
    ],
)
def test_roll_precedence(props, roll, jitter):
    config = KafkaConfig.from_props(props)
    assert config.log_roll_ms == roll
    assert config.log_roll_jitter_ms == jitter


def test_roll_ms_must_be_positive():
    with pytest.raises(ConfigError) as info:
        KafkaConfig.from_props({"log.roll.ms": "0"})
    assert info.value.key == "log.roll.ms"


def test_log_dirs_over_log_dir():
    assert KafkaConfig.from_props({}).log_dirs == ["/tmp/kafka-logs"]
    assert KafkaConfig.from_props({"log.dir": "/a"}).log_dirs == ["/a"]
    config = KafkaConfig.from_props({"log.dir": "/a", "log.dirs": "/b, /c,"})
    assert config.log_dirs == ["/b", "/c"]
    with pytest.raises(ConfigError) as info:
        KafkaConfig.from_props({"log.dirs": " , "})
    assert info.value.key == "log.dirs"


# -- rules between keys ----------------------------------------------------------


@pytest.mark.parametrize(
    "props, key",
    [
        ({"queued.max.request.bytes": "1000"}, "queued.max.request.bytes"),
        ({"max.connections.per.ip": "0"}, "max.connections.per.ip"),
        ({"max.connections.per.ip.overrides": "host"}, "max.connections.per.ip.overrides"),
        ({"max.connections.per.ip.overrides": "h:many"}, "max.connections.per.ip.overrides"),
        ({"max.connections.per.ip.overrides": "bad/host:1"}, "max.connections.per.ip.overrides"),
        ({"connections.max.idle.ms": "100"}, "connection.failed.authentication.delay.ms"),
        ({"replica.fetch.wait.max.ms": "40000"}, "replica.socket.timeout.ms"),
        ({"broker.id": "1001"}, "broker.id"),
        ({"broker.id": "-1", "broker.id.generation.enable": "false"}, "broker.id"),
        ({"listener.security.protocol.map": "A:TLS"}, "listener.security.protocol.map"),
        ({"log.cleaner.dedupe.buffer.size": "1048576"}, "log.cleaner.dedupe.buffer.size"),
        # KIP-848's consumer protocol: a session and a heartbeat within their bounds, the heartbeat shorter.
        ({"group.consumer.session.timeout.ms": "1000"}, "group.consumer.session.timeout.ms"),
        ({"group.consumer.max.session.timeout.ms": "40000"}, "group.consumer.max.session.timeout.ms"),
        ({"group.consumer.heartbeat.interval.ms": "20000"}, "group.consumer.heartbeat.interval.ms"),
        ({"group.consumer.min.session.timeout.ms": "1000", "group.consumer.session.timeout.ms": "6000",
          "group.consumer.heartbeat.interval.ms": "6000", "group.consumer.max.heartbeat.interval.ms": "10000"},
         "group.consumer.heartbeat.interval.ms"),
        ({"group.coordinator.rebalance.protocols": "consumer"}, "group.coordinator.rebalance.protocols"),
        ({"group.consumer.assignors": ""}, "group.consumer.assignors"),
        ({"group.consumer.assignors": "sticky"}, "group.consumer.assignors"),
    ],
)
def test_cross_key_rules(props, key):
    with pytest.raises(ConfigError) as info:
        KafkaConfig.from_props(props)
    assert info.value.key == key


def test_cross_key_rules_accept_valid_combinations():
    config = KafkaConfig.from_props(
        {
            "queued.max.request.bytes": "104857600",
            "max.connections.per.ip": "0",
            "max.connections.per.ip.overrides": "127.0.0.1:200, host-a:100,::1:5",
            "listener.security.protocol.map": "INTERNAL:ssl,CONTROLLER:PLAINTEXT",
            "super.users": "User:admin; User:broker",
        }
    )
    assert config.max_connections_per_ip_overrides == {"127.0.0.1": 200, "host-a": 100, "::1": 5}
    assert config.listener_security_protocol_map == {"INTERNAL": "SSL", "CONTROLLER": "PLAINTEXT"}
    assert config.super_users == ["User:admin", "User:broker"]


def test_default_protocol_map_covers_the_four_protocols():
    assert KafkaConfig.from_props({}).listener_security_protocol_map == {
        p: p for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
    }


# -- layers and dynamic updates ----------------------------------------------------


def test_sources_by_layer():
    config = KafkaConfig.from_props({"num.io.threads": "4"})
    assert config.source("num.io.threads") is ConfigSource.STATIC_BROKER_CONFIG
    assert config.source("background.threads") is ConfigSource.DEFAULT_CONFIG
    with pytest.raises(KeyError):
        config.source("no.such.key")


def test_with_updates_returns_a_new_config_and_keeps_the_old():
    config = KafkaConfig.from_props({"num.io.threads": "4", "log.retention.hours": "1"})
    updated = config.with_updates({"num.io.threads": "6", "log.retention.ms": "1000"})
    assert config["num.io.threads"] == 4
    assert updated["num.io.threads"] == 6
    assert updated.log_retention_ms == 1000
    assert updated.source("num.io.threads") is ConfigSource.DYNAMIC_BROKER_CONFIG
    cluster = updated.with_updates(
        {"background.threads": "3", "num.io.threads": "1"},
        source=ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    # the per-broker layer wins over the cluster default
    assert cluster["num.io.threads"] == 6
    assert cluster["background.threads"] == 3
    assert cluster.source("background.threads") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    removed = cluster.with_updates({"num.io.threads": None})
    assert removed["num.io.threads"] == 1
    assert removed.layer(ConfigSource.STATIC_BROKER_CONFIG)["num.io.threads"] == "4"


def test_invalid_update_raises_and_changes_nothing():
    config = KafkaConfig.from_props({"num.io.threads": "4"})
    with pytest.raises(ConfigError) as info:
        config.with_updates({"num.io.threads": "0"})
    assert info.value.key == "num.io.threads"
    assert config["num.io.threads"] == 4


def test_updates_cannot_target_the_static_layer():
    with pytest.raises(ValueError):
        KafkaConfig.from_props({}).with_updates({}, source=ConfigSource.STATIC_BROKER_CONFIG)


def test_updates_do_not_repeat_old_warnings(config_warnings):
    config = KafkaConfig.from_props({"made.up": "1"})
    config.with_updates({"num.io.threads": "3", "also.made.up": "2"})
    warnings = config_warnings()
    assert len(warnings) == 2
    assert sum("made.up" in w and "also" not in w for w in warnings) == 1


def test_describe_broker_key_with_synonyms():
    config = KafkaConfig.from_props({"log.retention.hours": "24"}).with_updates(
        {"log.retention.hours": "12"}, source=ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    )
    entry = config.describe("log.retention.hours")
    assert entry.value == 12
    assert entry.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert [(s.name, s.value, s.source) for s in entry.synonyms] == [
        ("log.retention.hours", 12, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("log.retention.hours", 24, ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.hours", 168, ConfigSource.DEFAULT_CONFIG),
    ]
    assert entry.read_only is True
    assert config.describe("num.io.threads").read_only is False
    assert config.describe("num.io.threads").source is ConfigSource.DEFAULT_CONFIG


def test_describe_listener_key_and_password():
    config = KafkaConfig.from_props(
        {"ssl.key.password": "a", "listener.name.internal.ssl.key.password": "b"}
    )
    entry = config.describe("listener.name.internal.ssl.key.password")
    assert entry.sensitive and entry.value_string is None
    assert [s.name for s in entry.synonyms] == [
        "listener.name.internal.ssl.key.password",
        "ssl.key.password",
    ]
    assert all(s.value_string is None for s in entry.synonyms)


# -- the shipped configuration file ---------------------------------------------------


def test_shipped_server_properties_loads_without_unknown_keys(config_warnings):
    config = KafkaConfig.load(str(SERVER_PROPERTIES))
    assert config.unknown_keys == ()
    assert config_warnings() == []
    assert config.log_dirs


# The keys (and values) of the sample config/server.properties shipped with
# Apache Kafka 3.9 for ZooKeeper mode: such a file must load without warnings.
KAFKA_SAMPLE = """\
broker.id=0
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.retention.check.interval.ms=300000
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""


def test_kafka_sample_configuration_loads_cleanly(properties_file, config_warnings):
    config = KafkaConfig.load(properties_file(KAFKA_SAMPLE))
    assert config.unknown_keys == ()
    assert config_warnings() == []
    assert config["offsets.topic.replication.factor"] == 1
    assert config["zookeeper.connect"] == "localhost:2181"
    assert config.source("zookeeper.connect") is ConfigSource.STATIC_BROKER_CONFIG

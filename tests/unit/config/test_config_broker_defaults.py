"""The broker key definitions carry Apache Kafka's names and defaults."""

from __future__ import annotations

import pytest

from twisted_kafka.config import BROKER_CONFIG, KafkaConfig, Type, UpdateMode

# Values from Apache Kafka 3.9's broker configuration reference.
KAFKA_DEFAULTS = {
    "socket.request.max.bytes": 104857600,
    "socket.send.buffer.bytes": 102400,
    "socket.receive.buffer.bytes": 102400,
    "socket.listen.backlog.size": 50,
    "queued.max.requests": 500,
    "queued.max.request.bytes": -1,
    "num.io.threads": 8,
    "num.network.threads": 3,
    "background.threads": 10,
    "request.timeout.ms": 30000,
    "listeners": "PLAINTEXT://:9092",
    "advertised.listeners": None,
    "listener.security.protocol.map":
        "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
    "security.inter.broker.protocol": "PLAINTEXT",
    "control.plane.listener.name": None,
    "broker.id": -1,
    "reserved.broker.max.id": 1000,
    "max.connections.per.ip": 2147483647,
    "max.connections.per.ip.overrides": "",
    "max.connections": 2147483647,
    "max.connection.creation.rate": 2147483647,
    "connections.max.idle.ms": 600000,
    "connection.failed.authentication.delay.ms": 100,
    "connections.max.reauth.ms": 0,
    "ssl.protocol": "TLSv1.3",
    "ssl.enabled.protocols": ["TLSv1.2", "TLSv1.3"],
    "ssl.keystore.type": "JKS",
    "ssl.client.auth": "none",
    "ssl.cipher.suites": [],
    "ssl.endpoint.identification.algorithm": "https",
    "ssl.principal.mapping.rules": "DEFAULT",
    "sasl.enabled.mechanisms": ["GSSAPI"],
    "sasl.mechanism.inter.broker.protocol": "GSSAPI",
    "authorizer.class.name": "",
    "allow.everyone.if.no.acl.found": False,
    "log.dir": "/tmp/kafka-logs",
    "log.dirs": None,
    "log.segment.bytes": 1073741824,
    "log.roll.hours": 168,
    "log.roll.ms": None,
    "log.retention.hours": 168,
    "log.retention.minutes": None,
    "log.retention.ms": None,
    "log.retention.bytes": -1,
    "log.retention.check.interval.ms": 300000,
    "log.segment.delete.delay.ms": 60000,
    "log.flush.interval.messages": 9223372036854775807,
    "log.flush.interval.ms": None,
    "log.flush.scheduler.interval.ms": 9223372036854775807,
    "log.flush.offset.checkpoint.interval.ms": 60000,
    "log.index.size.max.bytes": 10485760,
    "log.index.interval.bytes": 4096,
    "log.cleanup.policy": ["delete"],
    "log.cleaner.enable": True,
    "log.message.timestamp.type": "CreateTime",
    "log.message.timestamp.before.max.ms": 9223372036854775807,
    "log.message.timestamp.after.max.ms": 9223372036854775807,
    "message.max.bytes": 1048588,
    "compression.type": "producer",
    "num.partitions": 1,
    "default.replication.factor": 1,
    "min.insync.replicas": 1,
    "unclean.leader.election.enable": False,
    "auto.create.topics.enable": True,
    "delete.topic.enable": True,
    "fetch.max.bytes": 57671680,
    "replica.fetch.max.bytes": 1048576,
    "replica.lag.time.max.ms": 30000,
    "zookeeper.connect": None,
    "zookeeper.session.timeout.ms": 18000,
    "controller.socket.timeout.ms": 30000,
    "controlled.shutdown.max.retries": 3,
    "group.initial.rebalance.delay.ms": 3000,
    "group.min.session.timeout.ms": 6000,
    "group.max.session.timeout.ms": 1800000,
    "offsets.topic.num.partitions": 50,
    "offsets.topic.replication.factor": 3,
    "offsets.topic.segment.bytes": 104857600,
    "offsets.retention.minutes": 10080,
    "offset.metadata.max.bytes": 4096,
    "transactional.id.expiration.ms": 604800000,
    "transaction.max.timeout.ms": 900000,
    "transaction.state.log.min.isr": 2,
    "producer.id.expiration.ms": 86400000,
    "max.incremental.fetch.session.cache.slots": 1000,
    "metrics.num.samples": 2,
    "metrics.sample.window.ms": 30000,
    "metrics.recording.level": "INFO",
}


@pytest.mark.parametrize("name, expected", sorted(KAFKA_DEFAULTS.items()))
def test_default_matches_kafka(name, expected):
    assert KafkaConfig.from_props({})[name] == expected


@pytest.mark.parametrize(
    "name, type_",
    [("offsets.topic.replication.factor", Type.SHORT), ("queued.max.request.bytes", Type.LONG),
     ("connections.max.idle.ms", Type.LONG), ("socket.request.max.bytes", Type.INT),
     ("ssl.key.password", Type.PASSWORD), ("sasl.jaas.config", Type.PASSWORD),
     ("log.cleaner.min.cleanable.ratio", Type.DOUBLE), ("log.cleanup.policy", Type.LIST),
     ("principal.builder.class", Type.CLASS), ("log.dirs", Type.STRING)],
)
def test_types_match_kafka(name, type_):
    assert BROKER_CONFIG[name].type is type_


def test_listener_overridable_keys():
    overridable = {n for n, k in BROKER_CONFIG.items() if k.listener_override}
    assert {"max.connections", "max.connection.creation.rate", "connections.max.reauth.ms",
            "sasl.enabled.mechanisms", "sasl.jaas.config", "num.network.threads"} <= overridable
    assert {n for n in BROKER_CONFIG if n.startswith("ssl.")} <= overridable
    assert {"num.io.threads", "listeners", "log.dirs", "max.connections.per.ip"}.isdisjoint(overridable)
    per_mechanism = {n for n, k in BROKER_CONFIG.items() if k.per_mechanism}
    assert per_mechanism == {
        "sasl.jaas.config", "sasl.server.callback.handler.class", "sasl.login.class",
        "sasl.login.callback.handler.class", "connections.max.reauth.ms",
    }


@pytest.mark.parametrize(
    "name, mode",
    [("log.retention.ms", UpdateMode.CLUSTER_WIDE), ("log.retention.hours", UpdateMode.READ_ONLY),
     ("ssl.keystore.location", UpdateMode.PER_BROKER), ("max.connections", UpdateMode.CLUSTER_WIDE),
     ("num.io.threads", UpdateMode.CLUSTER_WIDE), ("broker.id", UpdateMode.READ_ONLY),
     ("listeners", UpdateMode.PER_BROKER)],
)
def test_update_modes_match_kafka(name, mode):
    assert BROKER_CONFIG[name].update_mode is mode


def test_every_key_is_documented_and_grouped():
    for name, key in BROKER_CONFIG.items():
        assert key.doc.strip(), name
        assert key.group, name
        assert name == name.strip() and " " not in name


def test_passwords_have_no_default_to_leak():
    for name, key in BROKER_CONFIG.items():
        if key.type is Type.PASSWORD:
            assert key.default is None, name

"""DynamicBrokerConfig: broker resource names, which keys may change at runtime, and applying stored layers.

The dynamic keys are Kafka's (DynamicBrokerConfig.AllDynamicConfigs of Kafka
3.9); one no registered ``Reconfigurable`` applies is stored and logged as
having no effect yet.  Anything else is refused when altered and skipped
(with a warning) when it arrives from the controller, as Kafka ignores
invalid dynamic configs at startup.  Passwords are stored encrypted with
``password.encoder.secret`` and refused without it.
"""

from __future__ import annotations

import pytest

from twisted_kafka.config import BROKER_CONFIG, ConfigError, ConfigSource, KafkaConfig
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.server.config_repository import ConfigRepository
from twisted_kafka.server.dynamic_config import ConnectionLimits, DynamicBrokerConfig, LogDefaults

from .helpers import RecordingQuotas


def raises(code, f, *args):
    with pytest.raises(KafkaError) as info:
        f(*args)
    assert info.value.code == code
    return info.value.message


class RecordingLogManager:
    def __init__(self):
        self.config = None
        self.updated = []

    def all_logs(self):
        return []

    def update_topic_config(self, topic, overrides):
        self.updated.append((topic, overrides))


class Component:
    """A Reconfigurable that records what it is asked, and may refuse or fail."""

    def __init__(self, keys, *, refuse=None, fail=False):
        self.reconfigurable_keys = frozenset(keys)
        self.refuse = refuse
        self.fail = fail
        self.validated: list[KafkaConfig] = []
        self.applied: list[KafkaConfig] = []

    def validate_reconfiguration(self, config):
        self.validated.append(config)
        if self.refuse is not None and self.refuse(config):
            raise ConfigError("component", "refused by the component")

    def reconfigure(self, config):
        self.applied.append(config)
        if self.fail:
            raise RuntimeError("cannot apply")


def dynamic(props=None, broker_id=0, repository=None):
    """A DynamicBrokerConfig with the broker's two real reconfigurables."""
    config = DynamicBrokerConfig(KafkaConfig.from_props(props or {}), broker_id)
    log_manager, quotas = RecordingLogManager(), RecordingQuotas()
    config.add_reconfigurable(LogDefaults(log_manager, repository or ConfigRepository()))
    config.add_reconfigurable(ConnectionLimits(quotas))
    return config, log_manager, quotas


def test_broker_resource_names():
    config = DynamicBrokerConfig(KafkaConfig.from_props({}), 3)
    assert config.entity("") == "" and config.entity(None) == ""
    assert config.entity("3") == "3" and config.entity("03") == "3"
    assert raises(ErrorCode.INVALID_REQUEST, config.entity, "4") == \
        "Unexpected broker id, expected 3 or empty string, but received 4"
    assert raises(ErrorCode.INVALID_REQUEST, config.entity, "three") == \
        "Broker id must be an integer, but it is: three"


#: Kafka 3.9's DynamicBrokerConfig.AllDynamicConfigs: SslConfigs.RECONFIGURABLE_CONFIGS, LogCleaner's,
#: DynamicLogConfig's (the topic keys' broker synonyms but message.format.version), DynamicThreadPool's,
#: metric.reporters, DynamicListenerConfig's, SocketServer's, DynamicProducerStateManagerConfig's and
#: DynamicRemoteLogConfig's.
KAFKA_DYNAMIC_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password", "ssl.keystore.certificate.chain",
    "ssl.keystore.key", "ssl.truststore.certificates", "log.cleaner.threads", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size", "message.max.bytes",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms", "log.segment.bytes", "log.roll.ms",
    "log.roll.jitter.ms", "log.index.size.max.bytes", "log.flush.interval.messages", "log.flush.interval.ms",
    "log.retention.bytes", "log.retention.ms", "log.index.interval.bytes", "log.cleaner.delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", "log.segment.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio", "log.cleanup.policy", "unclean.leader.election.enable",
    "min.insync.replicas", "compression.type", "compression.gzip.level", "compression.lz4.level",
    "compression.zstd.level", "log.preallocate", "log.message.timestamp.type",
    "log.message.timestamp.difference.max.ms", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.after.max.ms", "log.message.downconversion.enable", "log.local.retention.ms",
    "log.local.retention.bytes", "num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
    "background.threads", "metric.reporters", "advertised.listeners", "listeners", "listener.security.protocol.map",
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm",
    "ssl.secure.random.implementation", "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds", "max.connections", "max.connection.creation.rate", "num.network.threads",
    "max.connections.per.ip", "max.connections.per.ip.overrides", "producer.id.expiration.ms",
    "transaction.partition.verification.enable", "remote.log.index.file.cache.total.size.bytes",
    "remote.fetch.max.wait.ms", "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.fetch.max.bytes.per.second",
})


def test_the_dynamic_keys_are_kafkas_and_the_applied_ones_those_of_the_components():
    config = DynamicBrokerConfig(KafkaConfig.from_props({}), 0)
    extensions = {name for name in config.dynamic_keys if BROKER_CONFIG[name].extension}
    assert config.dynamic_keys - extensions == KAFKA_DYNAMIC_KEYS
    assert extensions == {"quota.ip.connection.creation.rate"}      # Kafka keeps these under /config/ips
    assert config.applied_keys == frozenset()
    config.add_reconfigurable(LogDefaults(RecordingLogManager(), ConfigRepository()))
    config.add_reconfigurable(ConnectionLimits(RecordingQuotas()))
    assert config.applied_keys == LogDefaults.reconfigurable_keys | ConnectionLimits.reconfigurable_keys
    assert config.applied_keys <= config.dynamic_keys
    with pytest.raises(ValueError, match="no.such.key"):
        config.add_reconfigurable(Component({"log.retention.ms", "no.such.key"}))


def test_kafkas_per_broker_keys_are_refused_at_the_cluster_default():
    config, _, _ = dynamic()
    assert config.validate("0", {"sasl.kerberos.min.time.before.relogin": "120000"})[
        "sasl.kerberos.min.time.before.relogin"] == 120000
    assert raises(ErrorCode.INVALID_REQUEST, config.validate, "",
                  {"sasl.kerberos.min.time.before.relogin": "1", "num.io.threads": "4"}) == \
        "Cannot update these configs at default cluster level, broker id must be specified: " \
        "sasl.kerberos.min.time.before.relogin"
    # Kafka's cluster-level listener keys may be set per listener at the default too.
    config.validate("", {"listener.name.plaintext.max.connections": "5",
                         "listener.name.plaintext.num.network.threads": "2"})
    assert "listener.name.plaintext.num.io.threads" in raises(
        ErrorCode.INVALID_REQUEST, config.validate, "0", {"listener.name.plaintext.num.io.threads": "2"})


def log_lines(events) -> list[str]:
    from twisted.logger import formatEvent

    return [formatEvent(e) for e in events]


@pytest.fixture
def logged():
    from twisted.logger import globalLogPublisher

    events: list[dict] = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


def test_a_stored_key_no_component_applies_is_logged_once_as_without_effect(logged):
    config, log_manager, _ = dynamic()
    config.apply({"0": {"sasl.kerberos.min.time.before.relogin": "120000", "num.io.threads": "6",
                        "log.retention.ms": "1000"}})
    assert config.current["num.io.threads"] == 6 and log_manager.config is config.current
    lines = [line for line in log_lines(logged) if "has no effect yet" in line]
    assert len(lines) == 2
    assert any("sasl.kerberos.min.time.before.relogin of broker 0" in line and "GSSAPI" in line for line in lines)
    assert any("num.io.threads of broker 0" in line and "at startup only" in line for line in lines)
    logged.clear()
    config.apply({"0": {"sasl.kerberos.min.time.before.relogin": "120000", "num.io.threads": "6"}})
    assert not [line for line in log_lines(logged) if "has no effect yet" in line]   # unchanged: said already
    assert config.without_effect("", "unclean.leader.election.enable") is None      # the controller reads it
    assert config.without_effect("0", "log.retention.ms") is None


SECRET = "the encoder secret"


def to_stored(config, entity, values):
    from twisted.internet.defer import ensureDeferred

    done = ensureDeferred(config.to_stored(entity, values))
    assert done.called                         # no run_blocking: encoded at once
    return done.result


def test_a_password_is_refused_without_the_encoder_secret():
    config, _, _ = dynamic()
    message = raises(ErrorCode.INVALID_REQUEST, config.validate, "0",
                     {"listener.name.ssl.ssl.key.password": "pw", "log.retention.ms": "5"})
    assert "listener.name.ssl.ssl.key.password" in message and "password.encoder.secret" in message


def test_passwords_are_stored_encoded_and_applied_decoded():
    from twisted_kafka.security.password_encoder import PasswordEncoder

    config, _, _ = dynamic({"password.encoder.secret": SECRET})
    values = {"listener.name.ssl.ssl.key.password": "pw", "log.retention.ms": "5"}
    config.validate("0", values)
    stored = to_stored(config, "0", values)
    assert stored["log.retention.ms"] == "5" and stored["listener.name.ssl.ssl.key.password"] != "pw"
    assert PasswordEncoder(SECRET).decode(stored["listener.name.ssl.ssl.key.password"]) == "pw"
    config.apply({"0": stored})
    assert config.layer("0") == values and config.stored_layer("0") == stored
    assert config.current.listener_value("ssl", "ssl.key.password").value == "pw"
    assert to_stored(config, "0", {**values, "log.retention.ms": "6"})["listener.name.ssl.ssl.key.password"] == \
        stored["listener.name.ssl.ssl.key.password"]          # unchanged: not encoded again


def test_a_password_that_does_not_decode_is_skipped(logged):
    from twisted_kafka.security.password_encoder import PasswordEncoder

    config, _, _ = dynamic({"password.encoder.secret": SECRET})
    config.apply({"0": {"listener.name.ssl.ssl.key.password": PasswordEncoder("another").encode("pw"),
                        "log.retention.ms": "5"}})
    assert config.layer("0") == {"log.retention.ms": "5"}
    assert any("listener.name.ssl.ssl.key.password of broker 0 could not be decoded" in line
               for line in log_lines(logged))


def test_an_old_secret_or_plain_text_is_stored_again_with_the_secret():
    from twisted_kafka.security.password_encoder import PasswordEncoder

    config, _, _ = dynamic({"password.encoder.secret": SECRET, "password.encoder.old.secret": "old"})
    written = []

    async def store(entity, values):
        written.append((entity, values))

    config.store_reencoded = store
    old = PasswordEncoder("old").encode("pw1")
    config.apply({"0": {"listener.name.a.ssl.key.password": old, "listener.name.b.ssl.key.password": "pw2",
                        "log.retention.ms": "5"}, "": {"log.roll.ms": "7"}})
    assert config.layer("0") == {"listener.name.a.ssl.key.password": "pw1",
                                 "listener.name.b.ssl.key.password": "pw2", "log.retention.ms": "5"}
    [(entity, values)] = written
    assert entity == "0" and values["log.retention.ms"] == "5"
    encoder = PasswordEncoder(SECRET)
    assert encoder.decode(values["listener.name.a.ssl.key.password"]) == "pw1"
    assert encoder.decode(values["listener.name.b.ssl.key.password"]) == "pw2"
    config.apply({"0": values, "": {"log.roll.ms": "7"}})       # what the controller sends back: nothing stale
    assert len(written) == 1 and config.layer("0")["listener.name.a.ssl.key.password"] == "pw1"


def test_validate_accepts_only_dynamic_keys_with_valid_values():
    config, log_manager, quotas = dynamic({"log.retention.hours": "10", "num.partitions": "8"})
    static = config.current
    updated = config.validate("0", {"log.retention.ms": "1000", "max.connections": "50"})
    assert updated["log.retention.ms"] == 1000 and updated.log_retention_ms == 1000
    assert updated.source("max.connections") is ConfigSource.DYNAMIC_BROKER_CONFIG
    assert static["max.connections"] != 50                                  # the old config is untouched
    assert config.current is static and log_manager.config is None and quotas.updates == []   # nothing applied

    config.apply({"0": {"log.retention.ms": "1000"}})
    default = config.validate("", {"log.segment.bytes": "2048"})
    assert default.source("log.segment.bytes") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert default["log.retention.ms"] == 1000                              # the per-broker layer stays

    message = raises(ErrorCode.INVALID_REQUEST, config.validate, "0",
                     {"num.partitions": "2", "log.retention.hours": "1", "log.retention.ms": "5"})
    assert message == "Cannot update these configs dynamically: log.retention.hours, num.partitions"
    assert "log.segment.bytes" in raises(ErrorCode.INVALID_REQUEST, config.validate, "0",
                                         {"log.segment.bytes": "10"})      # below its minimum of 14
    assert raises(ErrorCode.INVALID_REQUEST, config.validate, "0", {"log.retention.ms": None}) == \
        "Null value not supported for : log.retention.ms"
    assert "max.connections.per.ip.overrides" in raises(
        ErrorCode.INVALID_REQUEST, config.validate, "0",
        {"max.connections.per.ip.overrides": "no-such-host.invalid:3"})


def test_a_component_may_refuse_a_change_it_is_affected_by():
    config = DynamicBrokerConfig(KafkaConfig.from_props({}), 0)
    picky = Component({"log.retention.ms"}, refuse=lambda c: c["log.retention.ms"] < 1000)
    bystander = Component({"max.connections"})
    config.add_reconfigurable(picky)
    config.add_reconfigurable(bystander)
    assert "refused by the component" in raises(ErrorCode.INVALID_REQUEST, config.validate, "",
                                                {"log.retention.ms": "5"})
    config.validate("", {"log.retention.ms": "5000"})
    assert len(picky.validated) == 2 and bystander.validated == []         # only the affected are asked


def test_stored_broker_configs_are_applied_skipping_bad_ones():
    repository = ConfigRepository()
    repository.set_topic_overrides("t", {"retention.ms": "5"})
    config, log_manager, quotas = dynamic({"log.retention.hours": "10"}, broker_id=7, repository=repository)
    config.apply({"": {"log.roll.ms": "5000", "num.partitions": "3"},
                  "7": {"log.retention.bytes": "100", "log.segment.bytes": "1"},
                  "8": {"log.retention.bytes": "999"}})
    current = config.current
    assert current["log.roll.ms"] == 5000
    assert current.source("log.roll.ms") is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    assert current["log.retention.bytes"] == 100                 # our own entity ("7"), not broker 8's
    assert current.source("log.segment.bytes") is ConfigSource.DEFAULT_CONFIG   # invalid stored value skipped
    assert current.source("num.partitions") is ConfigSource.DEFAULT_CONFIG      # not a dynamic key: skipped
    assert config.layer("") == {"log.roll.ms": "5000"} and config.layer("7") == {"log.retention.bytes": "100"}
    assert config["log.roll.ms"] == 5000
    assert log_manager.config is current
    assert log_manager.updated == [("t", {"retention.ms": "5"})]
    assert quotas.updates == []                                  # connection keys unchanged: left alone


def test_applying_replaces_a_layer_and_reconfigures_only_what_changed():
    config, log_manager, quotas = dynamic()
    config.apply({"": {"log.roll.ms": "5000", "max.connections": "10"}})
    assert quotas.updates[-1] is config.current and log_manager.config is config.current
    first = config.current

    config.apply({"": {"log.roll.ms": "5000"}})                  # max.connections removed from the layer
    assert config.current.source("max.connections") is ConfigSource.DEFAULT_CONFIG
    assert len(quotas.updates) == 2 and log_manager.config is first   # the log defaults did not change

    config.apply({"": {"log.roll.ms": "5000"}})                  # the same again: nothing to reconfigure
    config.apply({"9": {"log.roll.ms": "1"}})                    # another broker's layer: ignored
    assert len(quotas.updates) == 2 and log_manager.config is first
    assert config.layer("") == {"log.roll.ms": "5000"} and config.layer("0") == {}


def test_a_component_that_fails_to_apply_does_not_stop_the_others():
    config = DynamicBrokerConfig(KafkaConfig.from_props({}), 0)
    broken = Component({"log.retention.ms"}, fail=True)
    working = Component({"log.retention.ms"})
    config.add_reconfigurable(broken)
    config.add_reconfigurable(working)
    config.apply({"0": {"log.retention.ms": "5000"}})
    assert config.current["log.retention.ms"] == 5000
    assert broken.applied == [config.current] and working.applied == [config.current]


def test_a_component_refusing_a_stored_key_skips_only_that_key():
    config = DynamicBrokerConfig(KafkaConfig.from_props({}), 0)
    config.add_reconfigurable(Component({"log.retention.ms"}, refuse=lambda c: c["log.retention.ms"] < 1000))
    config.add_reconfigurable(Component({"log.roll.ms"}))
    config.apply({"0": {"log.retention.ms": "5", "log.roll.ms": "7000"}})
    assert config.layer("0") == {"log.roll.ms": "7000"}


def test_log_defaults_reach_every_topic_with_its_own_overrides(tmp_path):
    from .helpers import Broker

    node = Broker(tmp_path)
    node.create_topic("plain")
    node.create_topic("tuned", configs={"retention.ms": "777"})
    node.dynamic_config.apply({"": {"log.retention.ms": "1234", "log.segment.bytes": "4096"}})
    assert node.log_manager.config is node.dynamic_config.current
    assert (node.log("plain").config.retention_ms, node.log("plain").config.segment_bytes) == (1234, 4096)
    assert (node.log("tuned").config.retention_ms, node.log("tuned").config.segment_bytes) == (777, 4096)
    node.dynamic_config.apply({"": {}})
    assert node.log("plain").config.retention_ms == 7 * 24 * 3600 * 1000


class ListenerOnly(Component):
    """A component like the TLS key stores: its keys change only per listener (and per broker)."""

    listener_only = True

    def __init__(self, keys):
        super().__init__(keys)
        self.reloads = 0

    def reload_files(self, config):
        self.reloads += 1


def test_listener_only_keys_change_per_listener_and_per_broker():
    config = DynamicBrokerConfig(KafkaConfig.from_props({}), 0)
    tls = ListenerOnly({"ssl.keystore.location"})
    config.add_reconfigurable(tls)
    assert config.is_dynamic("listener.name.ssl.ssl.keystore.location")
    assert not config.is_dynamic("ssl.keystore.location")
    assert "only per-listener using the listener prefix: ssl.keystore.location" in \
        raises(ErrorCode.INVALID_REQUEST, config.validate, "0", {"ssl.keystore.location": "/a.pem"})
    assert "broker id must be specified: listener.name.ssl.ssl.keystore.location" in \
        raises(ErrorCode.INVALID_REQUEST, config.validate, "", {"listener.name.ssl.ssl.keystore.location": "/a"})
    updated = config.validate("0", {"listener.name.ssl.ssl.keystore.location": "/a.pem"})
    assert updated.listener_effective("SSL", "ssl.keystore.location") == "/a.pem"
    assert tls.validated and tls.validated[-1] is updated


def test_a_listener_value_change_reconfigures_and_an_unchanged_alter_reloads_files():
    config = DynamicBrokerConfig(KafkaConfig.from_props({}), 0)
    tls = ListenerOnly({"ssl.keystore.location"})
    config.add_reconfigurable(tls)
    config.apply({"0": {"listener.name.ssl.ssl.keystore.location": "/a.pem"}})
    assert len(tls.applied) == 1
    config.apply({"0": {"listener.name.ssl.ssl.keystore.location": "/a.pem"}})
    assert len(tls.applied) == 1                        # nothing changed: not reconfigured
    config.reload_files()
    assert tls.reloads == 1
    config.apply({"0": {"ssl.keystore.location": "/b.pem"}})    # stored without the prefix: skipped
    assert config.current["ssl.keystore.location"] is None

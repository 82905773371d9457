"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs with confluent-kafka's AdminClient
(librdkafka: DescribeConfigs v1, AlterConfigs v1, IncrementalAlterConfigs v1).

Topic configs are persisted by the controller and applied to the topic's
logs at once.  Broker configs are accepted for exactly the keys Apache Kafka
lets change at runtime (its DynamicBrokerConfig list), applied live where
the broker acts on them, stored with a logged "no effect yet" otherwise;
every other key is refused.  Both survive a restart.
"""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError as CK
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic, ResourceType

from support.raw_client import RawClient
from tests.integration.admin.support import (
    confluent_admin,
    error_code,
    outcomes,
    produce,
    produce_one,
    raw_request,
    wait_until,
    watermarks,
)
from twisted_kafka.protocol import messages as m

pytestmark = pytest.mark.integration

BROKER = "0"  # broker.id of etc/server.properties


def describe(admin, kind, name) -> dict:
    [result] = outcomes(admin.describe_configs([ConfigResource(kind, name)])).values()
    if isinstance(result, Exception):
        raise result
    return result


def incremental(admin, kind, name, *ops, validate_only=False):
    entries = [ConfigEntry(key, value, incremental_operation=op) for key, op, value in ops]
    [result] = outcomes(admin.incremental_alter_configs([ConfigResource(kind, name, incremental_configs=entries)],
                                                        validate_only=validate_only)).values()
    return result


def test_describe_topic_configs(admin):
    outcomes(admin.create_topics([NewTopic("dc-topic", 1, 1, config={"retention.bytes": "12345"})],
                                 operation_timeout=10))
    configs = describe(admin, ResourceType.TOPIC, "dc-topic")
    assert configs["retention.bytes"].value == "12345"
    assert configs["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert not configs["retention.bytes"].is_read_only
    # inherited from server.properties (log.retention.hours=168) and from Kafka's defaults
    assert configs["retention.ms"].value == "604800000"
    assert configs["retention.ms"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["cleanup.policy"].value == "delete"
    assert configs["cleanup.policy"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["max.message.bytes"].value == "1048588"
    # the broker setting it comes from (static, and the same name's default, which the dict folds)
    assert {name: s.value for name, s in configs["retention.ms"].synonyms.items()} == {"log.retention.hours": "168"}
    assert {name: s.value for name, s in configs["retention.bytes"].synonyms.items()} == {
        "retention.bytes": "12345", "log.retention.bytes": "-1"}

    [missing] = outcomes(admin.describe_configs([ConfigResource(ResourceType.TOPIC, "dc-missing")])).values()
    assert error_code(missing) == CK.UNKNOWN_TOPIC_OR_PART


def test_describe_broker_configs(admin):
    configs = describe(admin, ResourceType.BROKER, BROKER)
    assert configs["num.io.threads"].value == "8"
    assert configs["num.io.threads"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert not configs["num.io.threads"].is_read_only        # dynamic in Kafka (cluster-wide)
    assert configs["log.retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert not configs["log.retention.bytes"].is_read_only   # applied live
    assert configs["broker.id"].is_read_only
    assert configs["ssl.key.password"].is_sensitive and configs["ssl.key.password"].value is None
    assert configs["listener.security.protocol.map"].value == "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"



@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_alter_configs_replaces_topic_overrides_and_validates(admin):
    outcomes(admin.create_topics([NewTopic("ac-topic", 1, 1, config={"retention.bytes": "5000",
                                                                       "segment.ms": "600000"})],
                                 operation_timeout=10))
    [result] = outcomes(admin.alter_configs([ConfigResource(ResourceType.TOPIC, "ac-topic",
                                                            set_config={"retention.ms": "7200000"})])).values()
    assert result is None
    configs = describe(admin, ResourceType.TOPIC, "ac-topic")
    assert configs["retention.ms"].value == "7200000"
    # AlterConfigs replaces the whole set of overrides: the others went back to their defaults
    assert configs["retention.bytes"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert configs["segment.ms"].source != ConfigSource.DYNAMIC_TOPIC_CONFIG.value

    [bad] = outcomes(admin.alter_configs([ConfigResource(ResourceType.TOPIC, "ac-topic",
                                                         set_config={"retention.ms": "tomorrow"})])).values()
    assert error_code(bad) == CK.INVALID_CONFIG and "retention.ms" in bad.args[0].str()
    [unknown] = outcomes(admin.alter_configs([ConfigResource(ResourceType.TOPIC, "ac-topic",
                                                             set_config={"retention.msec": "1"})])).values()
    assert error_code(unknown) == CK.INVALID_CONFIG and "retention.msec" in unknown.args[0].str()
    [missing] = outcomes(admin.alter_configs([ConfigResource(ResourceType.TOPIC, "ac-missing",
                                                             set_config={"retention.ms": "1"})])).values()
    assert error_code(missing) == CK.UNKNOWN_TOPIC_OR_PART
    [validated] = outcomes(admin.alter_configs([ConfigResource(ResourceType.TOPIC, "ac-topic",
                                                               set_config={"retention.ms": "1"})],
                                               validate_only=True)).values()
    assert validated is None
    assert describe(admin, ResourceType.TOPIC, "ac-topic")["retention.ms"].value == "7200000"


def test_incremental_alter_topic_configs(admin):
    outcomes(admin.create_topics([NewTopic("ia-topic", 1, 1, config={"retention.bytes": "5000"})],
                                 operation_timeout=10))
    assert incremental(admin, ResourceType.TOPIC, "ia-topic",
                       ("retention.ms", AlterConfigOpType.SET, "3600000"),
                       ("cleanup.policy", AlterConfigOpType.APPEND, "compact")) is None
    configs = describe(admin, ResourceType.TOPIC, "ia-topic")
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.bytes"].value == "5000"            # kept: incremental
    assert configs["cleanup.policy"].value == "delete,compact"   # appended to the default

    assert incremental(admin, ResourceType.TOPIC, "ia-topic",
                       ("retention.bytes", AlterConfigOpType.DELETE, None),
                       ("cleanup.policy", AlterConfigOpType.SUBTRACT, "delete")) is None
    configs = describe(admin, ResourceType.TOPIC, "ia-topic")
    assert configs["retention.bytes"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "compact"

    error = incremental(admin, ResourceType.TOPIC, "ia-topic", ("retention.ms", AlterConfigOpType.APPEND, "1"))
    assert error_code(error) == CK.INVALID_CONFIG and "retention.ms" in error.args[0].str()
    error = incremental(admin, ResourceType.TOPIC, "ia-topic", ("segment.bytes", AlterConfigOpType.SET, "1"))
    assert error_code(error) == CK.INVALID_CONFIG and "segment.bytes" in error.args[0].str()
    assert incremental(admin, ResourceType.TOPIC, "ia-topic", ("retention.ms", AlterConfigOpType.SET, "1"),
                       validate_only=True) is None
    assert describe(admin, ResourceType.TOPIC, "ia-topic")["retention.ms"].value == "3600000"


def test_dynamic_broker_configs_live_keys_only(admin, admin_broker):
    assert incremental(admin, ResourceType.BROKER, BROKER,
                       ("log.retention.bytes", AlterConfigOpType.SET, "987654321")) is None
    configs = describe(admin, ResourceType.BROKER, BROKER)
    assert configs["log.retention.bytes"].value == "987654321"
    assert configs["log.retention.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    outcomes(admin.create_topics([NewTopic("db-topic", 1, 1)], operation_timeout=10))
    topic = describe(admin, ResourceType.TOPIC, "db-topic")
    assert topic["retention.bytes"].value == "987654321"          # topics inherit it
    assert topic["retention.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value

    refused = incremental(admin, ResourceType.BROKER, BROKER,
                          ("auto.create.topics.enable", AlterConfigOpType.SET, "false"),
                          ("log.retention.ms", AlterConfigOpType.SET, "1000"))
    assert error_code(refused) == CK.INVALID_REQUEST
    assert "Cannot update these configs dynamically: auto.create.topics.enable" in refused.args[0].str()
    assert describe(admin, ResourceType.BROKER, BROKER)["log.retention.ms"].source != \
        ConfigSource.DYNAMIC_BROKER_CONFIG.value                    # nothing of a refused request applies
    bad = incremental(admin, ResourceType.BROKER, BROKER, ("log.segment.bytes", AlterConfigOpType.SET, "big"))
    assert error_code(bad) == CK.INVALID_REQUEST and "log.segment.bytes" in bad.args[0].str()

    assert incremental(admin, ResourceType.BROKER, BROKER,
                       ("log.retention.bytes", AlterConfigOpType.DELETE, None)) is None
    assert describe(admin, ResourceType.BROKER, BROKER)["log.retention.bytes"].source == \
        ConfigSource.DEFAULT_CONFIG.value

    # message.max.bytes applies to the existing topic's next append
    assert produce_one(admin_broker, "db-topic") == CK.NO_ERROR
    assert incremental(admin, ResourceType.BROKER, BROKER, ("message.max.bytes", AlterConfigOpType.SET, "40")) is None
    try:
        assert produce_one(admin_broker, "db-topic") == CK.MSG_SIZE_TOO_LARGE
    finally:
        assert incremental(admin, ResourceType.BROKER, BROKER,
                           ("message.max.bytes", AlterConfigOpType.DELETE, None)) is None
    assert produce_one(admin_broker, "db-topic") == CK.NO_ERROR


def test_kafkas_dynamic_keys_without_effect_here_are_stored_and_logged(admin, admin_broker):
    """sasl.kerberos.min.time.before.relogin is per-broker dynamic in Kafka: a batch holding it must not fail
    because Kerberos is not built here; the value is kept and the log says it does nothing yet."""
    mark = admin_broker.log_mark()
    assert incremental(admin, ResourceType.BROKER, BROKER,
                       ("sasl.kerberos.min.time.before.relogin", AlterConfigOpType.SET, "120000"),
                       ("num.io.threads", AlterConfigOpType.SET, "6"),
                       ("log.retention.bytes", AlterConfigOpType.SET, "555555")) is None
    configs = describe(admin, ResourceType.BROKER, BROKER)
    for key, value in (("sasl.kerberos.min.time.before.relogin", "120000"), ("num.io.threads", "6"),
                       ("log.retention.bytes", "555555")):
        assert configs[key].value == value and configs[key].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert not configs[key].is_read_only
    admin_broker.wait_for_log(r"Dynamic broker config sasl\.kerberos\.min\.time\.before\.relogin of broker 0 "
                              r"is stored but has no effect yet: .*GSSAPI", after=mark)
    admin_broker.wait_for_log(r"Dynamic broker config num\.io\.threads of broker 0 is stored but has no effect yet",
                              after=mark)
    assert "log.retention.bytes is stored but has no effect" not in admin_broker.log_text()[mark:]

    # Per broker only, as in Kafka, and validated as Kafka's definition says.
    Req = m.IncrementalAlterConfigsRequest
    [refused] = raw_request(admin_broker, Req(validate_only=False, resources=[Req.AlterConfigsResource(
        resource_type=4, resource_name="", configs=[Req.AlterConfigsResource.AlterableConfig(
            name="sasl.kerberos.min.time.before.relogin", config_operation=0, value="1")])]), 1).responses
    assert refused.error_code == CK.INVALID_REQUEST
    assert "broker id must be specified: sasl.kerberos.min.time.before.relogin" in refused.error_message
    bad = incremental(admin, ResourceType.BROKER, BROKER,
                      ("sasl.kerberos.min.time.before.relogin", AlterConfigOpType.SET, "soon"))
    assert error_code(bad) == CK.INVALID_REQUEST and "sasl.kerberos.min.time.before.relogin" in bad.args[0].str()

    assert incremental(admin, ResourceType.BROKER, BROKER,
                       ("sasl.kerberos.min.time.before.relogin", AlterConfigOpType.DELETE, None),
                       ("num.io.threads", AlterConfigOpType.DELETE, None),
                       ("log.retention.bytes", AlterConfigOpType.DELETE, None)) is None
    configs = describe(admin, ResourceType.BROKER, BROKER)
    assert configs["sasl.kerberos.min.time.before.relogin"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["sasl.kerberos.min.time.before.relogin"].value == "60000"


def test_without_an_encoder_secret_a_password_is_refused_naming_the_key(admin, admin_broker):
    """Kafka stores a password set at runtime only encrypted with password.encoder.secret; this broker has none."""
    key, password = "listener.name.plaintext.ssl.key.password", "Never-Stored-Pa55"
    refused = incremental(admin, ResourceType.BROKER, BROKER, (key, AlterConfigOpType.SET, password),
                          ("log.retention.bytes", AlterConfigOpType.SET, "4444"))
    assert error_code(refused) == CK.INVALID_REQUEST
    assert key in refused.args[0].str() and "password.encoder.secret" in refused.args[0].str()
    assert describe(admin, ResourceType.BROKER, BROKER)["log.retention.bytes"].source != \
        ConfigSource.DYNAMIC_BROKER_CONFIG.value                    # nothing of the request applies
    assert not [path for path in admin_broker.dir.rglob("*") if path.is_file() and password.encode() in
                path.read_bytes()]                                 # neither stored nor logged


def test_max_connections_per_ip_overrides_apply_live(admin, admin_broker):
    with RawClient(admin_broker.data_port, source="127.0.0.2") as before:
        assert before.api_versions().error_code == 0
    assert incremental(admin, ResourceType.BROKER, BROKER,
                       ("max.connections.per.ip.overrides", AlterConfigOpType.SET, "127.0.0.2:0")) is None
    with RawClient(admin_broker.data_port, source="127.0.0.2") as refused:
        assert refused.wait_closed()
    assert incremental(admin, ResourceType.BROKER, BROKER,
                       ("max.connections.per.ip.overrides", AlterConfigOpType.DELETE, None)) is None
    with RawClient(admin_broker.data_port, source="127.0.0.2") as after:
        assert after.api_versions().error_code == 0


def test_configs_persist_across_restart_and_retention_applies_live(broker_factory):
    broker = broker_factory({"log.retention.check.interval.ms": "100"})
    admin = confluent_admin(broker)
    outcomes(admin.create_topics([NewTopic("rt-topic", 1, 1, config={"segment.bytes": "1024"})],
                                 operation_timeout=10))
    produce(broker.bootstrap, "rt-topic", 40, value_size=200, flush_each=True)
    assert watermarks(broker.bootstrap, "rt-topic") == (0, 40)

    # retention.bytes applies to the running log at the next retention check
    assert incremental(admin, ResourceType.TOPIC, "rt-topic", ("retention.bytes", AlterConfigOpType.SET, "2048"),
                       ("file.delete.delay.ms", AlterConfigOpType.SET, "0")) is None
    earliest = wait_until(lambda: watermarks(broker.bootstrap, "rt-topic")[0], timeout=10,
                          what="the earliest offset to move up")
    assert 20 < earliest < 40

    # a broker-wide retention.bytes reaches the running logs of topics that inherit it
    outcomes(admin.create_topics([NewTopic("rt-inherits", 1, 1, config={"segment.bytes": "1024"})],
                                 operation_timeout=10))
    produce(broker.bootstrap, "rt-inherits", 40, value_size=200, flush_each=True)
    assert watermarks(broker.bootstrap, "rt-inherits") == (0, 40)
    assert incremental(admin, ResourceType.BROKER, BROKER, ("log.retention.bytes", AlterConfigOpType.SET, "2048"),
                       ("log.segment.delete.delay.ms", AlterConfigOpType.SET, "0")) is None
    inherited = wait_until(lambda: watermarks(broker.bootstrap, "rt-inherits")[0], timeout=10,
                           what="the earliest offset of rt-inherits to move up")
    assert 20 < inherited < 40

    # cluster-default broker config (librdkafka cannot name the "" resource: a raw request), persisted too
    Req = m.IncrementalAlterConfigsRequest
    response = raw_request(broker, Req(validate_only=False, resources=[Req.AlterConfigsResource(
        resource_type=4, resource_name="", configs=[Req.AlterConfigsResource.AlterableConfig(
            name="log.roll.ms", config_operation=0, value="3600000")])]), 1)
    assert [(r.error_code, r.error_message) for r in response.responses] == [(0, None)]
    assert incremental(admin, ResourceType.BROKER, BROKER,
                       ("message.max.bytes", AlterConfigOpType.SET, "500000")) is None

    broker.restart()
    admin = confluent_admin(broker)
    topic = describe(admin, ResourceType.TOPIC, "rt-topic")
    assert topic["retention.bytes"].value == "2048"
    assert topic["retention.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert topic["max.message.bytes"].value == "500000"
    assert topic["segment.ms"].value == "3600000"
    assert topic["segment.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    configs = describe(admin, ResourceType.BROKER, BROKER)
    assert configs["message.max.bytes"].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert configs["log.retention.bytes"].value == "2048"
    assert configs["log.roll.ms"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    cluster_default = raw_request(broker, m.DescribeConfigsRequest(resources=[
        m.DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="", configuration_keys=None)],
        include_synonyms=False, include_documentation=False), 4)
    assert [(c.name, c.value) for c in cluster_default.results[0].configs] == [("log.roll.ms", "3600000")]
    assert watermarks(broker.bootstrap, "rt-topic")[0] >= earliest

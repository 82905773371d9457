"""AlterConfigs (33) and IncrementalAlterConfigs (44): topic and broker configs, per resource.

The operations' rules are tested on ``apply_operations``; the handlers on the
single-node harness, where an accepted change goes through the controller
and comes back in UpdateMetadata to the config repository, the dynamic
broker config and the logs.
"""

from __future__ import annotations

import pytest

from twisted_kafka.config import BROKER_CONFIG, TOPIC_CONFIG
from twisted_kafka.controller.client import NoControllerClient
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.server.handlers.alter_configs import APPEND, DELETE, SET, SUBTRACT, apply_operations

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
AC = m.AlterConfigsRequest
IAC = m.IncrementalAlterConfigsRequest


def raises(code, f, *args):
    with pytest.raises(KafkaError) as info:
        f(*args)
    assert info.value.code == code
    return info.value.message


def test_incremental_operations():
    current = {"retention.ms": "5", "cleanup.policy": "compact"}
    assert apply_operations(current, [("retention.ms", DELETE, None), ("segment.ms", SET, "9"),
                                      ("cleanup.policy", APPEND, "delete,compact")], TOPIC_CONFIG) == {
        "segment.ms": "9", "cleanup.policy": "compact,delete"}
    assert current == {"retention.ms": "5", "cleanup.policy": "compact"}          # not modified in place
    # APPEND/SUBTRACT start from the key's default when there is no override
    assert apply_operations({}, [("cleanup.policy", SUBTRACT, "delete")], TOPIC_CONFIG) == {"cleanup.policy": ""}
    assert apply_operations({}, [("cleanup.policy", APPEND, "compact")], TOPIC_CONFIG) == {
        "cleanup.policy": "delete,compact"}
    assert apply_operations({}, [("retention.ms", DELETE, None)], TOPIC_CONFIG) == {}
    message = raises(ErrorCode.INVALID_CONFIG, apply_operations, {}, [("retention.ms", APPEND, "1")], TOPIC_CONFIG)
    assert message == "Config value append is not allowed for config key: retention.ms"
    raises(ErrorCode.INVALID_CONFIG, apply_operations, {}, [("no.such", SUBTRACT, "1")], TOPIC_CONFIG)
    raises(ErrorCode.INVALID_REQUEST, apply_operations, {}, [("a", SET, "1"), ("a", DELETE, None)], TOPIC_CONFIG)
    raises(ErrorCode.INVALID_REQUEST, apply_operations, {}, [("retention.ms", SET, None)], TOPIC_CONFIG)
    raises(ErrorCode.INVALID_REQUEST, apply_operations, {}, [("retention.ms", 9, "1")], TOPIC_CONFIG)
    # broker list keys
    assert apply_operations({}, [("log.cleanup.policy", APPEND, "compact")], BROKER_CONFIG) == {
        "log.cleanup.policy": "delete,compact"}


def alter(resources, *, validate_only=False):
    """AlterConfigs: ``resources`` is [(type, name, {key: value})]."""
    return AC(validate_only=validate_only, resources=[
        AC.AlterConfigsResource(resource_type=t, resource_name=n, configs=[
            AC.AlterConfigsResource.AlterableConfig(name=k, value=v) for k, v in configs.items()])
        for t, n, configs in resources])


def incremental(resources, *, validate_only=False):
    """IncrementalAlterConfigs: ``resources`` is [(type, name, [(key, op, value)])]."""
    C = IAC.AlterConfigsResource.AlterableConfig
    return IAC(validate_only=validate_only, resources=[
        IAC.AlterConfigsResource(resource_type=t, resource_name=n, configs=[
            C(name=k, config_operation=op, value=v) for k, op, v in ops])
        for t, n, ops in resources])


def results(body):
    return [(r.resource_type, r.resource_name, r.error_code, r.error_message) for r in body.responses]


def codes(body):
    return [(r.resource_name, r.error_code) for r in body.responses]


@pytest.mark.parametrize("version", [0, 2])
def test_alter_configs_replaces_a_topic_s_overrides(node, version):
    node.create_topic("t", configs={"retention.ms": "5", "segment.ms": "1000"})
    body = node.call(alter([(TOPIC, "t", {"retention.ms": "7"})]), version)
    assert results(body) == [(TOPIC, "t", ErrorCode.NONE, None)]
    assert node.config_repository.topic_overrides("t") == {"retention.ms": "7"}      # segment.ms is gone
    assert (node.log("t").config.retention_ms, node.log("t").config.segment_ms) == (7, 604800000)


def test_incremental_alter_configs_edits_a_topic_s_overrides(node):
    node.create_topic("t", configs={"retention.ms": "5", "cleanup.policy": "compact"})
    body = node.call(incremental([(TOPIC, "t", [("retention.ms", DELETE, None), ("segment.ms", SET, "9000"),
                                                ("cleanup.policy", APPEND, "delete")])]), 1)
    assert results(body) == [(TOPIC, "t", ErrorCode.NONE, None)]
    assert node.config_repository.topic_overrides("t") == {"segment.ms": "9000", "cleanup.policy": "compact,delete"}
    assert node.log("t").config.segment_ms == 9000


def test_validate_only_changes_nothing(node):
    node.create_topic("t", configs={"retention.ms": "5"})
    body = node.call(alter([(TOPIC, "t", {"retention.ms": "7"}), (BROKER, "0", {"log.retention.ms": "9"})],
                           validate_only=True), 2)
    assert codes(body) == [("t", ErrorCode.NONE), ("0", ErrorCode.NONE)]
    body = node.call(incremental([(TOPIC, "t", [("retention.ms", SET, "x")])], validate_only=True), 1)
    assert codes(body) == [("t", ErrorCode.INVALID_CONFIG)]
    assert node.config_repository.topic_overrides("t") == {"retention.ms": "5"}
    assert node.dynamic_config.layer("0") == {} and node.controller.broker_configs == {}


def test_each_resource_succeeds_or_fails_alone(node):
    node.create_topic("t")
    node.create_topic("u")
    body = node.call(alter([
        (TOPIC, "t", {"retention.ms": "7"}),
        (TOPIC, "u", {"retention.ms": "x"}),
        (TOPIC, "u", {"retention.ms": "8"}),                    # u twice: both refused
        (TOPIC, "missing", {"retention.ms": "1"}),
        (TOPIC, "bad/name", {"retention.ms": "1"}),
        (TOPIC, "t2", {"no.such.key": "1"}),
        (BROKER_LOGGER, "0", {"kafka": "DEBUG"}),
        (3, "group", {"x": "y"}),
    ]), 2)
    got = results(body)
    assert [(n, c) for _, n, c, _ in got] == [
        ("t", ErrorCode.NONE), ("u", ErrorCode.INVALID_REQUEST), ("u", ErrorCode.INVALID_REQUEST),
        ("missing", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("t2", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("0", ErrorCode.INVALID_REQUEST),
        ("group", ErrorCode.INVALID_REQUEST)]
    messages = [msg for *_, msg in got]
    assert messages[1] == "Each resource must appear at most once."
    assert messages[3] == "The topic 'missing' does not exist."
    assert messages[6] == ("AlterConfigs is deprecated and does not support the resource type BROKER_LOGGER: "
                           "use IncrementalAlterConfigs")
    assert node.config_repository.topic_overrides("t") == {"retention.ms": "7"}
    assert node.config_repository.topic_overrides("u") == {}

    node.create_topic("v")
    body = node.call(alter([(TOPIC, "v", {"no.such.key": "1"})]), 2)
    [(_, _, code, message)] = results(body)
    assert code == ErrorCode.INVALID_CONFIG and "no.such.key" in message
    body = node.call(incremental([(TOPIC, "v", [("retention.ms", APPEND, "1")])]), 1)
    assert results(body)[0][2:] == (ErrorCode.INVALID_CONFIG,
                                    "Config value append is not allowed for config key: retention.ms")


def test_broker_configs_are_dynamic_keys_only_and_reach_the_running_broker(node):
    node.create_topic("t")
    body = node.call(alter([(BROKER, "0", {"log.retention.ms": "1234"}), (BROKER, "", {"max.connections": "50"})]), 2)
    assert codes(body) == [("0", ErrorCode.NONE), ("", ErrorCode.NONE)]
    assert node.controller.broker_configs == {"0": {"log.retention.ms": "1234"}, "": {"max.connections": "50"}}
    current = node.dynamic_config.current
    assert (current["log.retention.ms"], current["max.connections"]) == (1234, 50)
    assert node.log("t").config.retention_ms == 1234 and node.quotas.updates[-1] is current

    body = node.call(alter([(BROKER, "0", {"num.partitions": "2", "log.retention.ms": "1"}),
                            (BROKER, "1", {"log.retention.ms": "1"}), (BROKER, "zero", {})]), 2)
    assert results(body) == [
        (BROKER, "0", ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: num.partitions"),
        (BROKER, "1", ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 0 or empty string, but received 1"),
        (BROKER, "zero", ErrorCode.INVALID_REQUEST, "Broker id must be an integer, but it is: zero")]
    assert node.dynamic_config.layer("0") == {"log.retention.ms": "1234"}

    body = node.call(incremental([(BROKER, "0", [("log.retention.ms", DELETE, None),
                                                 ("log.cleanup.policy", APPEND, "compact")])]), 1)
    assert codes(body) == [("0", ErrorCode.NONE)]
    assert node.dynamic_config.layer("0") == {"log.cleanup.policy": "delete,compact"}
    assert node.log("t").config.retention_ms == 7 * 24 * 3600 * 1000


def test_a_null_value_is_an_invalid_request(node):
    node.create_topic("t")
    body = node.call(alter([(TOPIC, "t", {"retention.ms": None})]), 2)
    assert results(body) == [(TOPIC, "t", ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms")]
    body = node.call(incremental([(TOPIC, "t", [("retention.ms", SET, None)])]), 1)
    assert results(body) == [(TOPIC, "t", ErrorCode.INVALID_REQUEST, "Null value not supported for : SET:retention.ms")]


def test_changes_need_a_controller(node):
    node.create_topic("t")
    node.admin_manager.controller = NoControllerClient()
    body = node.call(alter([(TOPIC, "t", {"retention.ms": "7"}), (BROKER, "", {"log.roll.ms": "1000"})]), 2)
    assert codes(body) == [("t", ErrorCode.NOT_CONTROLLER), ("", ErrorCode.NOT_CONTROLLER)]
    body = node.call(incremental([(TOPIC, "t", [("retention.ms", SET, "7")])]), 1)
    assert codes(body) == [("t", ErrorCode.NOT_CONTROLLER)]

"""DescribeClientQuotas (48) / AlterClientQuotas (49) on the single-node harness, and the listener-level
connection quotas that AlterConfigs (and the admin endpoint) change at runtime."""

from __future__ import annotations

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

BROKER = 4
AC = m.AlterConfigsRequest
ACQ = m.AlterClientQuotasRequest
DCQ = m.DescribeClientQuotasRequest


def alter_quotas(entries, *, validate_only=False):
    return ACQ(validate_only=validate_only, entries=[
        ACQ.EntryData(entity=[ACQ.EntryData.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                      ops=[ACQ.EntryData.OpData(key=k, value=v, remove=r) for k, v, r in ops])
        for entity, ops in entries])


def describe_quotas(components, strict=False):
    return DCQ(strict=strict, components=[DCQ.ComponentData(entity_type=t, match_type=mt, match=match)
                                          for t, mt, match in components])


def entries(body) -> dict:
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in body.entries}


def test_ip_rates_are_set_described_and_removed_as_one_cluster_wide_config(node):
    rate = ("connection_creation_rate", 5.0, False)
    body = node.call(alter_quotas([([("ip", "10.0.0.1")], [rate]), ([("ip", None)], [rate]),
                                   ([("ip", "10.0.0.1"), ("user", "u")], [rate]),
                                   ([("client-id", "c")], [("request_percentage", 1.0, False)]),
                                   ([("ip", "10.0.0.2")], [("consumer_byte_rate", 1.0, False)]),
                                   ([("ip", "10.0.0.3")], [("connection_creation_rate", float("nan"), False)])]), 1)
    assert [e.error_code for e in body.entries] == [ErrorCode.NONE, ErrorCode.NONE] + [ErrorCode.INVALID_REQUEST] * 4
    assert node.controller.broker_configs[""] == {"quota.ip.connection.creation.rate": "10.0.0.1:5,<default>:5"}
    assert node.quotas.updates[-1]["quota.ip.connection.creation.rate"] == "10.0.0.1:5,<default>:5"

    body = node.call(describe_quotas([("ip", 2, None)]), 1)
    assert body.error_code == ErrorCode.NONE
    assert entries(body) == {(("ip", "10.0.0.1"),): {"connection_creation_rate": 5.0}}
    assert list(entries(node.call(describe_quotas([("ip", 1, None)]), 0))) == [(("ip", None),)]
    assert entries(node.call(describe_quotas([("ip", 0, "10.0.0.9")]), 1)) == {}
    for bad in ([("ip", 0, None)], [("ip", 7, None)], [("ip", 2, None), ("ip", 1, None)],
                [("ip", 2, None), ("client-id", 2, None)]):
        assert node.call(describe_quotas(bad), 1).error_code == ErrorCode.INVALID_REQUEST, bad

    body = node.call(alter_quotas([([("ip", "10.0.0.1")], [("connection_creation_rate", 0.0, True)])],
                                  validate_only=True), 1)
    assert body.entries[0].error_code == ErrorCode.NONE
    assert "10.0.0.1" in node.controller.broker_configs[""]["quota.ip.connection.creation.rate"]
    node.call(alter_quotas([([("ip", "10.0.0.1")], [("connection_creation_rate", 0.0, True)]),
                            ([("ip", None)], [("connection_creation_rate", 0.0, True)])]), 0)
    assert node.controller.broker_configs.get("", {}) == {}
    assert entries(node.call(describe_quotas([]), 1)) == {}


def test_listener_level_connection_quotas_change_at_runtime(node):
    body = node.call(AC(validate_only=False, resources=[AC.AlterConfigsResource(
        resource_type=BROKER, resource_name="0", configs=[
            AC.AlterConfigsResource.AlterableConfig(name="listener.name.plaintext.max.connections", value="7"),
            AC.AlterConfigsResource.AlterableConfig(name="listener.name.plaintext.max.connection.creation.rate",
                                                    value="3")])]), 2)
    assert [r.error_code for r in body.responses] == [ErrorCode.NONE]
    applied = node.quotas.updates[-1]
    assert applied.listener_value("PLAINTEXT", "max.connections") == 7
    assert applied.listener_value("PLAINTEXT", "max.connection.creation.rate") == 3
    body = node.call(AC(validate_only=False, resources=[AC.AlterConfigsResource(
        resource_type=BROKER, resource_name="0", configs=[
            AC.AlterConfigsResource.AlterableConfig(name="listener.name.plaintext.num.io.threads", value="7")])]), 2)
    assert [r.error_code for r in body.responses] == [ErrorCode.INVALID_REQUEST]

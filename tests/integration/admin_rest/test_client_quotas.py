"""DescribeClientQuotas / AlterClientQuotas (KIP-546) for the ``ip`` entity's connection_creation_rate
(KIP-612), over the wire with the raw client (the Python Kafka clients have no quota API), and the same
state in the admin endpoint's ``/v1/quotas``.

kafka-python's, confluent-kafka's and aiokafka's admin clients offer no client-quota calls, so the
requests are kafka-python's message classes sent through ``support/raw_client.py``.
"""

from __future__ import annotations

import pytest

from support.raw_client import RawClient
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.messages import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
)

from .support import TOKEN, Admin, AdminRestTestCase

pytestmark = pytest.mark.integration

A = AlterClientQuotasRequest.EntryData
D = DescribeClientQuotasRequest


def alter(raw: RawClient, entries, *, version: int = 1, validate_only: bool = False):
    body = AlterClientQuotasRequest(version=version, validate_only=validate_only, entries=[
        A(entity=[A.EntityData(entity_type=t, entity_name=n) for t, n in entity],
          ops=[A.OpData(key=k, value=v, remove=r) for k, v, r in ops])
        for entity, ops in entries])
    return raw.request(body, version)


def describe(raw: RawClient, components, *, strict: bool = False, version: int = 1):
    body = DescribeClientQuotasRequest(version=version, strict=strict, components=[
        D.ComponentData(entity_type=t, match_type=mt, match=match) for t, mt, match in components])
    return raw.request(body, version)


def as_dict(response) -> dict:
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in response.entries}


class ClientQuotasTest(AdminRestTestCase):
    async def test_ip_connection_creation_rate_over_the_wire_and_rest(self):
        broker = self.broker_factory({"admin.rest.auth.token": TOKEN})
        admin = Admin(broker)
        with RawClient(broker.data_port) as raw:
            response = alter(raw, [
                ([("ip", "127.0.0.1")], [("connection_creation_rate", 1.0, False)]),
                ([("ip", None)], [("connection_creation_rate", 50.0, False)]),
                ([("ip", "not-an-ip")], [("connection_creation_rate", 5.0, False)]),
                ([("user", "alice")], [("producer_byte_rate", 1024.0, False)]),
                ([("ip", "10.0.0.1")], [("connection_creation_rate", 1.5, False)]),
            ])
            errors = [entry.error_code for entry in response.entries]
            assert errors == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.INVALID_REQUEST,
                              ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_REQUEST], response

            everything = describe(raw, [])
            assert everything.error_code == ErrorCode.NONE
            assert as_dict(everything) == {(("ip", None),): {"connection_creation_rate": 50.0},
                                           (("ip", "127.0.0.1"),): {"connection_creation_rate": 1.0}}
            assert as_dict(describe(raw, [("ip", 0, "127.0.0.1")])) == {
                (("ip", "127.0.0.1"),): {"connection_creation_rate": 1.0}}
            assert list(as_dict(describe(raw, [("ip", 1, None)]))) == [(("ip", None),)]
            assert list(as_dict(describe(raw, [("ip", 2, None)]))) == [(("ip", "127.0.0.1"),)]
            assert as_dict(describe(raw, [("user", 2, None)])) == {}
            mixed = describe(raw, [("ip", 2, None), ("user", 2, None)])
            assert mixed.error_code == ErrorCode.INVALID_REQUEST

        quotas = await admin.get("/v1/quotas")
        assert quotas["ip_connection_creation_rates"] == {"127.0.0.1": 1, "<default>": 50}

        # 1 connection a second from 127.0.0.1: a burst of new connections has some closed at once.
        clients = [RawClient(broker.data_port) for _ in range(4)]
        try:
            closed = [c for c in clients if c.wait_closed(timeout=0.5)]
            assert 1 <= len(closed) <= 3
            rejected = (await admin.listener())["rejected"]["creation_rate"]
            assert rejected == len(closed)
        finally:
            for c in clients:
                c.close()

        status, quotas = await admin.request("PUT", "/v1/quotas", {
            "ip_connection_creation_rates": {"127.0.0.1": None, "10.1.2.3": 7}})
        assert status == 200, quotas
        assert quotas["ip_connection_creation_rates"] == {"10.1.2.3": 7, "<default>": 50}
        with RawClient(broker.data_port) as raw:
            assert as_dict(describe(raw, [("ip", 2, None)])) == {
                (("ip", "10.1.2.3"),): {"connection_creation_rate": 7.0}}
            validated = alter(raw, [([("ip", "10.1.2.3")], [("connection_creation_rate", 0.0, True)])],
                              validate_only=True)
            assert validated.entries[0].error_code == ErrorCode.NONE
            assert "10.1.2.3" in (await admin.get("/v1/quotas"))["ip_connection_creation_rates"]

        broker.restart()
        assert (await admin.get("/v1/quotas"))["ip_connection_creation_rates"] == {"10.1.2.3": 7, "<default>": 50}

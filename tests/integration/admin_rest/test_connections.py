"""The admin REST endpoint against a running broker: its counts match what the test does.

Connections are opened, refused (``max.connections.per.ip``), closed by the
client and closed through ``DELETE /v1/connections/{id}``; the quotas are
changed with ``PUT /v1/quotas`` and over the wire with AlterConfigs, and the
change survives a restart.
"""

from __future__ import annotations

import pytest

from support.raw_client import RawClient

from .support import TOKEN, Admin, AdminRestTestCase, eventually

pytestmark = pytest.mark.integration


def client(broker) -> RawClient:
    """A Kafka connection that has said who it is (ApiVersions v3: client software name and version)."""
    raw = RawClient(broker.data_port)
    raw.api_versions(version=3)
    return raw


class ConnectionsTest(AdminRestTestCase):
    async def test_counts_match_opened_rejected_and_closed_connections(self):
        broker = self.broker_factory({"max.connections.per.ip": "2", "admin.rest.auth.token": TOKEN})
        admin = Admin(broker)
        first, second = client(broker), client(broker)
        self.addCleanup(first.close)
        self.addCleanup(second.close)
        plaintext = await admin.listener()
        assert plaintext["plane"] == "data"
        assert plaintext["open"] == 2 and plaintext["accepted_total"] == 2
        assert plaintext["rejected_total"] == 0

        third = RawClient(broker.data_port)
        self.addCleanup(third.close)
        assert third.wait_closed(), "a connection over max.connections.per.ip is closed at once"
        plaintext = await eventually(
            lambda: _when(admin.listener(), lambda entry: entry["rejected"]["per_ip"] == 1),
            what="the per-IP rejection to be counted")
        assert plaintext["open"] == 2 and plaintext["rejected_total"] == 1
        assert set(plaintext["rejected"]) >= {"per_ip", "listener_limit", "broker_limit", "creation_rate",
                                              "authentication", "tls"}

        ips = (await admin.get("/v1/connections/ips"))["ips"]
        entry = next(e for e in ips if e["ip"] == "127.0.0.1")
        assert entry == {"ip": "127.0.0.1", "open": 2, "limit": 2, "override": False, "rejected": 1}

        live = (await admin.get("/v1/connections/live?listener=PLAINTEXT"))["connections"]
        mine = {c["client_port"]: c for c in live}
        assert set(mine) == {first.local_address[1], second.local_address[1]}
        conn = mine[first.local_address[1]]
        assert conn["client_software_name"] == "raw-client" and conn["client_software_version"] == "1.0"
        assert conn["requests"] == 1 and conn["bytes_in"] > 0 and conn["bytes_out"] > 0
        assert conn["plane"] == "data" and conn["principal"] == "User:ANONYMOUS"
        assert conn["connection_id"].endswith(f"-127.0.0.1:{first.local_address[1]}-{conn['connection_id'][-1]}")

        first.close()
        plaintext = await eventually(
            lambda: _when(admin.listener(), lambda entry: entry["closed"]["client"] == 1),
            what="the client's close to be counted")
        assert plaintext["open"] == 1 and plaintext["closed_total"] == 1

        only_me = await admin.listener(query="?ip=127.0.0.1")
        assert only_me["open"] == 1 and only_me["rejected"]["per_ip"] == 1
        nobody = await admin.listener(query="?ip=10.9.9.9")
        assert nobody["open"] == 0 and nobody["accepted_total"] == 0
        control = await admin.listener("CONTROLLER")
        assert control["plane"] == "control" and control["open"] == 1

    async def test_delete_closes_the_connection_and_frees_its_slot(self):
        broker = self.broker_factory({"max.connections.per.ip": "1", "admin.rest.auth.token": TOKEN})
        admin = Admin(broker)
        victim = client(broker)
        self.addCleanup(victim.close)
        refused = RawClient(broker.data_port)
        self.addCleanup(refused.close)
        assert refused.wait_closed()

        live = (await admin.get("/v1/connections/live?listener=PLAINTEXT"))["connections"]
        (conn,) = live
        status, body = await admin.request("DELETE", "/v1/connections/" + conn["connection_id"])
        assert status == 200 and body == {"closed": conn["connection_id"], "reason": "admin"}
        assert victim.wait_closed()
        plaintext = await eventually(
            lambda: _when(admin.listener(), lambda entry: entry["closed"]["admin"] == 1),
            what="the admin close to be counted")
        assert plaintext["open"] == 0

        replacement = client(broker)     # the slot is free again
        self.addCleanup(replacement.close)
        assert replacement.is_open()
        status, body = await admin.request("DELETE", "/v1/connections/" + conn["connection_id"])
        assert status == 404 and body["error_code"] == "NOT_FOUND"

    async def test_put_quotas_refuses_the_next_connection_and_survives_a_restart(self):
        broker = self.broker_factory({"admin.rest.auth.token": TOKEN})
        admin = Admin(broker)
        first, second = client(broker), client(broker)
        self.addCleanup(first.close)
        self.addCleanup(second.close)

        status, quotas = await admin.request("PUT", "/v1/quotas", {
            "max.connections.per.ip": 1, "listeners": {"PLAINTEXT": {"max.connections": 100}}})
        assert status == 200, quotas
        assert quotas["max.connections.per.ip"] == 1
        assert quotas["listeners"]["PLAINTEXT"]["max.connections"] == 100
        assert first.is_open() and second.is_open(), "lowering a limit closes no open connection"
        over = RawClient(broker.data_port)
        self.addCleanup(over.close)
        assert over.wait_closed(), "the next connection over the new limit is refused"
        assert (await admin.listener())["rejected"]["per_ip"] == 1

        first.close()
        second.close()
        broker.restart()
        assert (await admin.get("/v1/quotas"))["max.connections.per.ip"] == 1
        kept = client(broker)
        self.addCleanup(kept.close)
        again = RawClient(broker.data_port)
        self.addCleanup(again.close)
        assert again.wait_closed(), "the changed limit is in force after the restart"

        status, quotas = await admin.request("PUT", "/v1/quotas", {"max.connections.per.ip": None})
        assert status == 200 and quotas["max.connections.per.ip"] == 2147483647
        status, error = await admin.request("PUT", "/v1/quotas", {"max.connections.per.ip": -1})
        assert status == 400 and error["error_code"] == "INVALID_REQUEST", error
        status, error = await admin.request("PUT", "/v1/quotas", {"num.io.threads": 4})
        assert status == 400 and error["error_code"] == "INVALID_REQUEST", error

    async def test_alter_configs_over_the_wire_shows_in_the_rest_quotas(self):
        """A Kafka admin client changes the same state (incremental AlterConfigs of the broker)."""
        from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        broker = self.broker_factory({"admin.rest.auth.token": TOKEN})
        admin = Admin(broker)
        kafka_admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        resource = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[
            ConfigEntry("max.connections.per.ip.overrides", "127.0.0.1:7",
                        incremental_operation=AlterConfigOpType.SET)])
        for future in kafka_admin.incremental_alter_configs([resource]).values():
            future.result(timeout=20)
        quotas = await admin.get("/v1/quotas")
        assert quotas["max.connections.per.ip.overrides"] == {"127.0.0.1": 7}
        ips = (await admin.get("/v1/connections/ips?ip=127.0.0.1"))["ips"]
        assert ips[0]["limit"] == 7 and ips[0]["override"] is True

        await admin.request("PUT", "/v1/quotas", {"max.connections.per.ip.overrides": {"127.0.0.1": 9}})
        described = kafka_admin.describe_configs([ConfigResource(ResourceType.BROKER, "0")])
        (configs,) = [f.result(timeout=20) for f in described.values()]
        assert configs["max.connections.per.ip.overrides"].value == "127.0.0.1:9"


async def _when(awaitable, predicate):
    value = await awaitable
    return value if predicate(value) else None

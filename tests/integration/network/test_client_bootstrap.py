"""Real clients bootstrap against a broker started the README way.

confluent-kafka (librdkafka 2.16), kcat (librdkafka 2.0.2), kafka-python and
aiokafka each fetch cluster metadata: broker id, advertised host and port of
the listener they came in on, controller id, and a cluster id that survives a
restart (meta.properties).
"""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

pytestmark = pytest.mark.integration

BROKER_ID = 0  # etc/server.properties


def confluent_metadata(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})
    return admin.list_topics(timeout=15)


def test_confluent_kafka_admin_list_topics(broker):
    metadata = confluent_metadata(broker.bootstrap)
    assert set(metadata.brokers) == {BROKER_ID}
    listed = metadata.brokers[BROKER_ID]
    assert (listed.host, listed.port) == ("127.0.0.1", broker.data_port)
    assert metadata.controller_id == BROKER_ID
    assert metadata.cluster_id and len(metadata.cluster_id) == 22


def test_kcat_lists_metadata(broker):
    result = subprocess.run(["kcat", "-b", broker.bootstrap, "-L", "-J", "-m", "15"], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    metadata = json.loads(result.stdout)
    assert metadata["controllerid"] == BROKER_ID
    assert metadata["brokers"] == [{"id": BROKER_ID, "name": f"127.0.0.1:{broker.data_port}"}]
    assert metadata["originating_broker"]["id"] == BROKER_ID


def test_kafka_python_describe_cluster(broker):
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    assert cluster["controller_id"] == BROKER_ID
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [
        (BROKER_ID, "127.0.0.1", broker.data_port)]
    assert cluster["cluster_id"] == confluent_metadata(broker.bootstrap).cluster_id


def test_aiokafka_bootstrap(broker):
    from aiokafka.client import AIOKafkaClient

    async def bootstrap():
        client = AIOKafkaClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=15000)
        try:
            await client.bootstrap()
            brokers = [(b.nodeId, b.host, b.port) for b in client.cluster.brokers()]
            return brokers, client.cluster.controller.nodeId
        finally:
            await client.close()

    brokers, controller = asyncio.run(bootstrap())
    assert brokers == [(BROKER_ID, "127.0.0.1", broker.data_port)]
    assert controller == BROKER_ID


def test_cluster_id_is_stable_across_restart_and_the_control_plane_answers_too(broker):
    before = confluent_metadata(broker.bootstrap).cluster_id
    broker.restart()
    after = confluent_metadata(broker.bootstrap)
    assert after.cluster_id == before
    assert after.brokers[BROKER_ID].port == broker.data_port
    # The control plane is a listener like any other: a client that connects there
    # is told about the CONTROLLER endpoint.
    control = confluent_metadata(f"127.0.0.1:{broker.control_port}")
    assert control.brokers[BROKER_ID].port == broker.control_port
    assert control.cluster_id == before

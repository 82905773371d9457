"""SCRAM credentials in a ZooKeeper cluster: created on one broker, usable on every broker.

Every broker has a SASL_PLAINTEXT client listener; AlterUserScramCredentials
on any broker writes ``/config/users/<user>`` and a change notification, and
the other brokers reload the user from their watch, without a restart.
"""

from __future__ import annotations

import json

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from support.cluster import Cluster
from support.wait import wait_until
from tests.integration.sasl.conftest import SASL_OVERRIDES, authenticates

pytestmark = pytest.mark.integration


#: The SASL tests' broker settings, plus the cluster brokers' control plane listener.
OVERRIDES = {**SASL_OVERRIDES,
             "listeners": SASL_OVERRIDES["listeners"] + ",CONTROLLER://127.0.0.1:{port:CONTROLLER}",
             "listener.security.protocol.map": SASL_OVERRIDES["listener.security.protocol.map"]
             + ",CONTROLLER:PLAINTEXT"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zookeeper):
    cluster = Cluster(tmp_path_factory.mktemp("scram-cluster"), zookeeper, "/scram-cluster",
                      overrides=OVERRIDES)
    cluster.start()
    yield cluster
    statuses = cluster.stop()
    assert set(statuses.values()) == {0}, statuses


def admin(cluster, broker_id: int) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.broker(broker_id).port('PLAINTEXT')}",
                        "socket.timeout.ms": 10000})


def described(cluster, broker_id: int, user: str) -> bool:
    try:
        client = admin(cluster, broker_id)
        description = client.describe_user_scram_credentials([user])[user].result(timeout=30)
    except KafkaException:
        return False
    return bool(description.scram_credential_infos)


def test_a_user_created_on_one_broker_authenticates_on_another_until_deleted_on_a_third(cluster):
    upsertion = UserScramCredentialUpsertion("dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192),
                                             b"dave-secret")
    first = admin(cluster, 1)       # kept: a client's futures fail once it is destroyed
    for future in first.alter_user_scram_credentials([upsertion]).values():
        assert future.result(timeout=30) is None
    with cluster.zk() as zk:
        config = json.loads(zk.get("/config/users/dave")[0])
        assert config["version"] == 1
        assert config["config"]["SCRAM-SHA-256"].endswith(",iterations=8192")

    broker3 = cluster.broker(3)
    wait_until(lambda: authenticates(broker3, "SCRAM-SHA-256", "dave", "dave-secret"), timeout=30,
               what="broker 3 to accept dave's SCRAM credential")
    assert not authenticates(broker3, "SCRAM-SHA-256", "dave", "wrong-secret")
    assert described(cluster, 3, "dave")
    # confluent-kafka (librdkafka's SCRAM) against broker 3's SASL listener.
    client = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker3.port('SASL_PLAINTEXT')}",
                          "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                          "sasl.username": "dave", "sasl.password": "dave-secret"})
    assert len(client.list_topics(timeout=30).brokers) == 3

    broker1 = cluster.broker(1)
    assert authenticates(broker1, "SCRAM-SHA-256", "dave", "dave-secret")
    deletion = UserScramCredentialDeletion("dave", ScramMechanism.SCRAM_SHA_256)
    # Broker 2 reads dave from ZooKeeper to check the deletion, whether or not its watch has fired yet.
    second = admin(cluster, 2)
    for future in second.alter_user_scram_credentials([deletion]).values():
        assert future.result(timeout=30) is None
    wait_until(lambda: not authenticates(broker1, "SCRAM-SHA-256", "dave", "dave-secret"), timeout=30,
               what="broker 1 to refuse dave once deleted")
    with cluster.zk() as zk:
        assert zk.exists("/config/users/dave") is None

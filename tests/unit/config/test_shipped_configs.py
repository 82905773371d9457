"""Every configuration shipped in ``etc/`` binds loopback only: an example started as is must
not expose a broker, its control plane or its admin endpoint to the network."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from twisted_kafka.config import KafkaConfig
from twisted_kafka.config.properties import load_properties
from twisted_kafka.network.listeners import parse_listeners

ETC = Path(__file__).resolve().parents[3] / "etc"
BROKER_CONFIGS = sorted(p for p in ETC.rglob("*.properties") if "listeners" in load_properties(p))
LOOPBACK = {"127.0.0.1", "::1", "localhost"}


def test_the_examples_are_found():
    assert {p.name for p in BROKER_CONFIGS} >= {"server.properties", "sasl-plaintext.properties",
                                                "server-ssl.properties", "server-sasl-ssl.properties"}


@pytest.mark.parametrize("path", BROKER_CONFIGS, ids=lambda p: str(p.relative_to(ETC)))
def test_a_shipped_broker_binds_loopback_only(path):
    config = KafkaConfig.load(path)
    bound = {endpoint.listener_name: endpoint.host for endpoint in parse_listeners(config).listeners}
    assert {name: host for name, host in bound.items() if host not in LOOPBACK} == {}, path
    admin = config["admin.rest.listener"]
    assert not admin or urlsplit(admin).hostname in LOOPBACK, (path, admin)


def test_the_shipped_zookeeper_binds_loopback_only():
    assert load_properties(ETC / "cluster" / "zookeeper.properties")["clientPortAddress"] in LOOPBACK

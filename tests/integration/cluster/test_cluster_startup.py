"""Cluster-mode startup failures: each is one line naming the key, the value and the reason, exit status 1."""

from __future__ import annotations

import socket

import pytest

from support.broker_process import BrokerExited, BrokerProcess


def failed_start(tmp_path, overrides) -> BrokerExited:
    broker = BrokerProcess(tmp_path, overrides)
    with pytest.raises(BrokerExited) as info:
        broker.start(30)
    assert info.value.returncode == 1, info.value.log
    return info.value


def test_no_zookeeper_within_the_connection_timeout(tmp_path):
    with socket.socket() as held:            # bound, never listening: connections are refused
        held.bind(("127.0.0.1", 0))
        connect = f"127.0.0.1:{held.getsockname()[1]}"
        failure = failed_start(tmp_path, {"zookeeper.connect": connect, "zookeeper.connection.timeout.ms": "1000"})
    assert f"zookeeper.connect: {connect}: no ZooKeeper session with {connect} within 1000 ms" in failure.log


def test_secure_acls_need_an_authenticated_connection(tmp_path, zookeeper, zk_chroot):
    failure = failed_start(tmp_path, {"zookeeper.connect": zookeeper.connect_string(zk_chroot),
                                      "zookeeper.set.acl": "true"})
    assert "zookeeper.set.acl" in failure.log and "SASL or TLS" in failure.log


def test_a_broker_refuses_to_join_another_cluster_with_its_data(tmp_path, zookeeper, zk_chroot):
    first = BrokerProcess(tmp_path, {"zookeeper.connect": zookeeper.connect_string(zk_chroot + "-a"),
                                     "broker.id": "1"})
    first.start()
    assert first.stop() == 0
    first.overrides["zookeeper.connect"] = zookeeper.connect_string(zk_chroot + "-b")
    with pytest.raises(BrokerExited) as info:
        first.start(30)
    assert info.value.returncode == 1
    assert "the broker is trying to join the wrong cluster" in info.value.log

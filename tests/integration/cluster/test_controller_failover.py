"""A ZooKeeper cluster of three broker processes: election, controller failover, fencing, rejoining.

ZooKeeper (Debian's 3.8) and the brokers are real processes on loopback;
each test has its own ZooKeeper chroot, hence its own cluster.
"""

from __future__ import annotations

import json
import signal
import uuid

import pytest

from support.cluster import SESSION_TIMEOUT_MS, Cluster
from support.raw_client import RawClient
from support.wait import wait_until
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

U = m.UpdateMetadataRequest
L = m.LeaderAndIsrRequest


@pytest.fixture
def cluster(tmp_path, zookeeper, zk_chroot):
    cluster = Cluster(tmp_path, zookeeper, zk_chroot, overrides={"auto.leader.rebalance.enable": "false"})
    cluster.start()
    yield cluster
    cluster.kill_all()


def stale_update_metadata(*, controller_id: int, controller_epoch: int, broker_id: int, broker_epoch: int,
                          cluster_id: str) -> U:
    """An UpdateMetadata v8 as a controller that lost its job would still send: the receiver's own id, cluster
    and epoch, a topic that does not exist."""
    return U(version=8, controller_id=controller_id, is_k_raft_controller=False, controller_epoch=controller_epoch,
             broker_epoch=broker_epoch, broker_id=broker_id, cluster_id=cluster_id,
             topic_states=[U.UpdateMetadataTopicState(topic_name="ghost", topic_id=uuid.uuid4(), partition_states=[
                 U.UpdateMetadataTopicState.UpdateMetadataPartitionState(
                     partition_index=0, controller_epoch=controller_epoch, leader=controller_id, leader_epoch=0,
                     isr=[controller_id], zk_version=0, replicas=[controller_id], offline_replicas=[])])],
             live_brokers=[])


def stale_leader_and_isr(*, controller_id: int, controller_epoch: int, broker_id: int, broker_epoch: int,
                         cluster_id: str) -> L:
    state = L.LeaderAndIsrTopicState.LeaderAndIsrPartitionState(
        partition_index=0, controller_epoch=controller_epoch, leader=broker_id, leader_epoch=0, isr=[broker_id],
        partition_epoch=0, replicas=[broker_id], adding_replicas=[], removing_replicas=[], is_new=True,
        leader_recovery_state=0)
    return L(version=7, controller_id=controller_id, is_k_raft_controller=False, controller_epoch=controller_epoch,
             broker_epoch=broker_epoch, broker_id=broker_id, cluster_id=cluster_id, request_type=0,
             topic_states=[L.LeaderAndIsrTopicState(topic_name="ghost", topic_id=uuid.uuid4(),
                                                    partition_states=[state])],
             live_leaders=[])


def test_one_controller_is_elected_and_every_broker_agrees(cluster):
    controller = cluster.controller_id()
    assert controller in (1, 2, 3) and cluster.controller_epoch() >= 1
    md = cluster.wait_consistent(lambda md: md.broker_ids == [1, 2, 3])
    assert md.controller == controller
    with cluster.zk() as zk:
        assert sorted(zk.get_children("/brokers/ids")) == ["1", "2", "3"]
        registration = json.loads(zk.get("/brokers/ids/2")[0])
        assert registration["version"] == 5 and registration["jmx_port"] == -1
        assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT",
                                                                  "CONTROLLER": "PLAINTEXT"}
        assert f"PLAINTEXT://127.0.0.1:{cluster.broker(2).data_port}" in registration["endpoints"]
        assert json.loads(zk.get("/cluster/id")[0])["id"] == md.cluster_id
    for broker in cluster.brokers.values():
        meta = (broker.dir / "kafka-logs" / "meta.properties").read_text()
        assert f"cluster.id={md.cluster_id}" in meta


def test_a_killed_controller_is_replaced_and_its_late_requests_are_refused(cluster):
    old = cluster.controller_id()
    old_epoch = cluster.controller_epoch()
    md = cluster.wait_consistent(lambda md: md.broker_ids == [1, 2, 3])
    cluster.broker(old).kill()

    new = cluster.wait_for_controller(other_than=old)
    assert new != old and cluster.controller_epoch() > old_epoch
    after = cluster.wait_consistent(lambda md: md.broker_ids == sorted(b for b in (1, 2, 3) if b != old)
                                    and md.controller == new)
    assert after.cluster_id == md.cluster_id

    # What the old controller would still send, had it been only paused: refused everywhere.
    for target in cluster.running:
        epoch = cluster.broker_epoch(target)
        for request, api_key in ((stale_update_metadata, 6), (stale_leader_and_isr, 4)):
            with RawClient(cluster.broker(target).control_port) as client:
                body = request(controller_id=old, controller_epoch=old_epoch, broker_id=target, broker_epoch=epoch,
                               cluster_id=md.cluster_id)
                response = client.request(body, body.version)
            assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH, (target, api_key)
        # Even naming the new controller, an old epoch is refused.
        with RawClient(cluster.broker(target).control_port) as client:
            body = stale_update_metadata(controller_id=new, controller_epoch=old_epoch, broker_id=target,
                                         broker_epoch=epoch, cluster_id=md.cluster_id)
            assert client.request(body, 8).error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert "ghost" not in cluster.wait_consistent().topics
    assert "Refused UpdateMetadata v8" in cluster.broker(new).log_text()

    # The killed broker comes back: registered again (a new epoch), listed by every broker again.
    cluster.broker(old).start()
    back = cluster.wait_consistent(lambda md: md.broker_ids == [1, 2, 3])
    assert back.controller == cluster.controller_id()
    assert cluster.broker_epoch(old) is not None


def test_the_controller_stopping_cleanly_hands_over_at_once(cluster):
    old = cluster.controller_id()
    assert cluster.broker(old).stop() == 0
    new = cluster.wait_for_controller(other_than=old, timeout=10)
    cluster.wait_consistent(lambda md: old not in md.broker_ids and md.controller == new)


def test_a_generated_broker_id_joins_the_cluster(tmp_path, zookeeper, zk_chroot, cluster):
    from support.broker_process import BrokerProcess

    extra = BrokerProcess(tmp_path, {"broker.id": "-1", "zookeeper.connect": cluster.connect,
                                     "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
    extra.start()
    try:
        generated = wait_until(lambda: [b for b in cluster.registered() if b not in (1, 2, 3)], 10,
                               what="the new broker's registration")
        assert generated == [1001]          # reserved.broker.max.id + the first /brokers/seqid version
        assert "broker.id=1001" in (extra.dir / "kafka-logs" / "meta.properties").read_text()
        cluster.wait_consistent(lambda md: md.broker_ids == [1, 2, 3, 1001])
    finally:
        assert extra.stop() == 0


def test_a_paused_controller_loses_its_session_resigns_and_rejoins(cluster):
    """A controller frozen longer than its session timeout (a long GC pause, a stopped VM): the others
    elect a new one; when it resumes, its session has expired -- it resigns, registers again with a new
    broker epoch, and follows the new controller."""
    old = cluster.controller_id()
    old_epoch = cluster.controller_epoch()
    old_broker_epoch = cluster.broker_epoch(old)
    cluster.wait_consistent(lambda md: md.broker_ids == [1, 2, 3])
    frozen = cluster.broker(old).process
    frozen.send_signal(signal.SIGSTOP)
    try:
        new = cluster.wait_for_controller(other_than=old)
        assert cluster.controller_epoch() > old_epoch
        wait_until(lambda: old not in cluster.registered(), 30, what="the frozen broker's registration to expire")
    finally:
        frozen.send_signal(signal.SIGCONT)
    wait_until(lambda: (epoch := cluster.broker_epoch(old)) is not None and epoch > old_broker_epoch, 30,
               what="the resumed broker to register again")
    md = cluster.wait_consistent(lambda md: md.broker_ids == [1, 2, 3] and md.controller == new)
    assert md.controller == cluster.controller_id() == new
    log = cluster.broker(old).log_text()
    assert "registering broker" in log and "resigns as controller" in log

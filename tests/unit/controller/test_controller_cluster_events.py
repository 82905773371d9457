"""The controller's cluster events on a JSON store and fake channels: brokers failing and coming back,
leader elections (ElectLeaders, the automatic preferred-leader rebalance), partition reassignments.

The same code runs in a ZooKeeper cluster, where ZooKeeper's watches call these methods; the store
underneath does not matter to them (``test_zk_metadata_store`` covers ZooKeeper's).
"""

from __future__ import annotations

import pytest

from twisted_kafka.controller.election import ElectionType
from twisted_kafka.controller.interface import NewTopic
from twisted_kafka.controller.kafka_controller import FIRST_REBALANCE_CHECK_SECONDS
from twisted_kafka.controller.metadata_store import NO_LEADER
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey

from .helpers import live_broker, make_controller, run

UM, LAI, SR = ApiKey.UPDATE_METADATA, ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA


def brokers(*ids, epoch=1):
    return {b: live_broker(b) if epoch == 1 else _with_epoch(live_broker(b), epoch) for b in ids}


def _with_epoch(broker, epoch):
    from dataclasses import replace
    return replace(broker, epoch=epoch)


def state(controller, topic, partition):
    r = controller.topics[topic].partitions[partition]
    return r.leader, r.isr, r.leader_epoch


def three_brokers(tmp_path, **props):
    controller, channels, reactor = make_controller(tmp_path, brokers=(0, 1, 2), **props)
    run(controller.create_topics([NewTopic("t", assignments={0: [0, 1, 2], 1: [1, 2, 0], 2: [2, 0, 1]}),
                                  NewTopic("solo", assignments={0: [1]})]))
    channels.sent.clear()
    return controller, channels, reactor


def test_a_failed_broker_s_partitions_get_the_next_in_sync_leader(tmp_path):
    controller, channels, _ = three_brokers(tmp_path)
    run(controller.brokers_changed(brokers(0, 2)))
    assert channels.removed == [1] and sorted(controller.live_brokers) == [0, 2]
    assert state(controller, "t", 0) == (0, (0, 2), 1)        # follower 1 left the ISR
    assert state(controller, "t", 1) == (2, (2, 0), 1)        # leader 1 replaced by the next in the assignment
    assert state(controller, "solo", 0) == (NO_LEADER, (1,), 1)   # offline; the ISR remembers broker 1
    # live replicas learn their new state, every live broker the metadata (with broker 1 offline)
    assert set(channels.kinds(0)) == {LAI, UM} and set(channels.kinds(2)) == {LAI, UM}
    assert channels.kinds(1) == []
    update = channels.requests(0, UM)[-1]
    assert sorted(b.id for b in update.live_brokers) == [0, 2]
    offline = {(t.topic_name, p.partition_index): p.offline_replicas for t in update.topic_states
               for p in t.partition_states}
    assert offline[("t", 1)] == [1] and offline[("solo", 0)] == [1]


def test_a_restarted_broker_rejoins_and_its_offline_partitions_come_back(tmp_path):
    controller, channels, _ = three_brokers(tmp_path)
    run(controller.brokers_changed(brokers(0, 2)))
    channels.sent.clear()
    run(controller.brokers_changed({**brokers(0, 2), 1: _with_epoch(live_broker(1), 5)}))
    assert controller.live_brokers[1].epoch == 5
    assert state(controller, "solo", 0) == (1, (1,), 2)       # elected again from its ISR
    assert state(controller, "t", 1)[:2] == (2, (1, 2, 0))     # back in the ISR; leadership stays
    # the restarted broker hears everything first: configs and all partitions, then its replicas
    kinds = channels.kinds(1)
    assert kinds[:2] == [UM, LAI]
    first = channels.requests(1, UM)[0]
    assert {t.topic_name for t in first.topic_states} == {"t", "solo"}
    assert first.dynamic_broker_configs is not None


def test_a_bounced_broker_is_failed_and_started(tmp_path):
    controller, channels, _ = three_brokers(tmp_path)
    run(controller.brokers_changed({**brokers(0, 2), 1: _with_epoch(live_broker(1), 9)}))
    assert channels.removed == [1]
    assert state(controller, "solo", 0)[0] == 1 and controller.live_brokers[1].epoch == 9


def test_unclean_election_follows_the_topic_config(tmp_path):
    controller, _, _ = make_controller(tmp_path, brokers=(0, 1))
    run(controller.create_topics([NewTopic("clean", assignments={0: [0, 1]}),
                                  NewTopic("dirty", assignments={0: [0, 1]},
                                           configs={"unclean.leader.election.enable": "true"})]))
    run(controller.brokers_changed(brokers(0)))        # 1 leaves the ISRs
    run(controller.brokers_changed(brokers(1)))        # 0 dies, 1 comes back: not in sync
    assert state(controller, "clean", 0)[:2] == (NO_LEADER, (0,))
    assert state(controller, "dirty", 0)[:2] == (1, (1,))


def test_elect_leaders_preferred(tmp_path):
    controller, channels, _ = three_brokers(tmp_path)
    run(controller.brokers_changed(brokers(0, 2)))
    run(controller.brokers_changed(brokers(0, 1, 2)))
    channels.sent.clear()
    results = run(controller.elect_leaders(ElectionType.PREFERRED, [("t", 1), ("t", 0), ("t", 9), ("nope", 0)]))
    assert {tp: (r.error, r.leader) for tp, r in results.items()} == {
        ("t", 1): (ErrorCode.NONE, 1), ("t", 0): (ErrorCode.ELECTION_NOT_NEEDED, NO_LEADER),
        ("t", 9): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_LEADER),
        ("nope", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_LEADER)}
    assert state(controller, "t", 1)[0] == 1
    assert LAI in channels.kinds(1)


def test_elect_leaders_reports_what_cannot_be_elected(tmp_path):
    controller, _, _ = three_brokers(tmp_path)
    run(controller.brokers_changed(brokers(0, 2)))
    results = run(controller.elect_leaders(ElectionType.PREFERRED, [("t", 1)]))
    assert results[("t", 1)].error == ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    unclean = run(controller.elect_leaders(ElectionType.UNCLEAN, [("solo", 0), ("t", 0)]))
    assert unclean[("solo", 0)].error == ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE     # its only replica is down
    assert unclean[("t", 0)].error == ErrorCode.ELECTION_NOT_NEEDED


def test_the_automatic_rebalance_moves_leadership_back_to_preferred_replicas(tmp_path):
    controller, _, reactor = three_brokers(tmp_path, **{"leader.imbalance.check.interval.seconds": 60})
    run(controller.brokers_changed(brokers(0, 2)))
    run(controller.brokers_changed(brokers(0, 1, 2)))
    assert state(controller, "t", 1)[0] == 2
    reactor.advance(FIRST_REBALANCE_CHECK_SECONDS)
    assert state(controller, "t", 1)[0] == 1
    assert [c.getTime() - reactor.seconds() for c in reactor.getDelayedCalls()] == [60]


def test_no_rebalance_when_disabled_or_alone(tmp_path):
    controller, _, reactor = three_brokers(tmp_path, **{"auto.leader.rebalance.enable": "false"})
    assert reactor.getDelayedCalls() == []
    (tmp_path / "single").mkdir()
    single, _, single_reactor = make_controller(tmp_path / "single")
    assert single_reactor.getDelayedCalls() == []


def test_a_reassignment_moves_replicas_and_leadership(tmp_path):
    controller, channels, _ = three_brokers(tmp_path)
    results = run(controller.alter_partition_reassignments({("solo", 0): [2, 0], ("t", 0): [0, 7],
                                                            ("t", 1): [], ("x", 0): [1]}))
    assert results[("solo", 0)] == (ErrorCode.NONE, None)
    assert results[("t", 0)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT and "not alive" in results[("t", 0)][1]
    assert results[("t", 1)][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert results[("x", 0)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # with the ISR following liveness, the new replicas are in sync at once: the reassignment completes
    solo = controller.topics["solo"].partitions[0]
    assert (solo.replicas, solo.leader, solo.adding_replicas, solo.removing_replicas) == ((2, 0), 2, (), ())
    assert set(solo.isr) == {2, 0}
    [stop] = channels.requests(1, SR)
    assert [(p.partition_index, p.delete_partition) for t in stop.topic_states for p in t.partition_states] == [
        (0, True)]
    assert LAI in channels.kinds(2) and LAI in channels.kinds(0)
    assert controller.list_partition_reassignments(None) == {}
    assert run(controller.alter_partition_reassignments({("solo", 0): None})) == {
        ("solo", 0): (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None)}


def test_a_reassignment_may_keep_the_replication_factor(tmp_path):
    controller, _, _ = three_brokers(tmp_path)
    results = run(controller.alter_partition_reassignments({("solo", 0): [2, 0]},
                                                           allow_replication_factor_change=False))
    assert results[("solo", 0)][0] == ErrorCode.INVALID_REPLICATION_FACTOR


def test_an_inactive_controller_refuses_cluster_operations(tmp_path):
    controller, _, _ = three_brokers(tmp_path)
    controller.shutdown()
    for call in (controller.brokers_changed(brokers(0)), controller.elect_leaders(ElectionType.PREFERRED, None),
                 controller.alter_partition_reassignments({})):
        with pytest.raises(KafkaError) as info:
            run(call)
        assert info.value.code == ErrorCode.NOT_CONTROLLER


def test_alter_partition_is_the_seam_for_leaders_isr(tmp_path):
    """What a leader's AlterPartition will do once followers fetch: fenced by epochs, live replicas only."""
    from twisted_kafka.controller.interface import IsrChange

    controller, channels, _ = three_brokers(tmp_path)
    controller.isr_follows_liveness = False
    r = controller.topics["t"].partitions[0]           # leader 0, ISR (0, 1, 2), epochs 0 / 0
    shrink = IsrChange(r.leader_epoch, r.partition_epoch, (0, 2))
    assert run(controller.alter_partition(0, 1, {("t", 0): shrink})) == {("t", 0): ErrorCode.NONE}
    after = controller.topics["t"].partitions[0]
    assert (after.isr, after.leader_epoch, after.partition_epoch) == ((0, 2), 0, 1)
    assert run(controller.alter_partition(0, 1, {
        ("t", 0): IsrChange(0, 0, (0,)),            # an older partition epoch
        ("t", 1): IsrChange(5, 0, (1,)),            # ahead of the controller
        ("t", 2): IsrChange(0, 0, (2, 9)),          # 9 is not alive
        ("x", 0): IsrChange(0, 0, (0,))})) == {
        ("t", 0): ErrorCode.INVALID_UPDATE_VERSION, ("t", 1): ErrorCode.NOT_CONTROLLER,
        ("t", 2): ErrorCode.INELIGIBLE_REPLICA, ("x", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    with pytest.raises(KafkaError) as info:
        run(controller.alter_partition(0, 99, {("t", 0): shrink}))
    assert info.value.code == ErrorCode.STALE_BROKER_EPOCH
    # with the ISR reported by leaders, a broker coming back does not rejoin by itself
    run(controller.brokers_changed(brokers(0, 2)))
    run(controller.brokers_changed(brokers(0, 1, 2)))
    assert 1 not in controller.topics["t"].partitions[0].isr

"""What the controller tells brokers, in which order: configs in UpdateMetadata, before LeaderAndIsr.

Topic config overrides travel in the ``topic_configs`` tagged field of
UpdateMetadata's topic states and dynamic broker configs in
``dynamic_broker_configs`` (tags 1000/1001 of this project's schema).  Each
broker's channel is a FIFO, so a configs-only UpdateMetadata queued before
LeaderAndIsr arrives first: a new topic's logs are created with its
overrides.  A change to the store that fails is neither applied nor announced.
"""

from __future__ import annotations

import pytest
from twisted.internet.defer import ensureDeferred

from support.inline import InlineReactor
from twisted_kafka.config import KafkaConfig
from twisted_kafka.controller.broker_request_batch import UPDATE_METADATA_VERSION
from twisted_kafka.controller.interface import LEADER_DURING_DELETE, NewTopic
from twisted_kafka.controller.kafka_controller import KafkaController
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.codec import decode_request, encode_request
from twisted_kafka.protocol.registry import ApiKey

from .helpers import FakeChannels, live_broker, make_controller, make_store, run

UM, LAI, SR = ApiKey.UPDATE_METADATA, ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA


def configs(entries) -> dict[str, str] | None:
    return None if entries is None else {c.name: c.value for c in entries}


def topic_configs(request) -> dict[str, dict[str, str] | None]:
    return {t.topic_name: configs(t.topic_configs) for t in request.topic_states}


def broker_configs(request) -> dict[str, dict[str, str]] | None:
    if request.dynamic_broker_configs is None:
        return None
    return {e.entity: configs(e.configs) for e in request.dynamic_broker_configs}


def partitions(request) -> dict[str, list[int]]:
    return {t.topic_name: [p.partition_index for p in t.partition_states] for t in request.topic_states}


def over_the_wire(request):
    """``request`` after encoding and decoding at the version the controller sends."""
    frame = b"".join(encode_request(request, UPDATE_METADATA_VERSION, 1, "controller-0"))[4:]
    return decode_request(frame, strict=True)[1]


def test_a_new_topic_s_configs_reach_every_broker_before_its_leader_and_isr(tmp_path):
    controller, channels, _ = make_controller(tmp_path, brokers=(0, 1, 2))
    run(controller.create_topics([NewTopic("t", assignments={0: [0, 1], 1: [1, 0]},
                                           configs={"retention.ms": "5", "cleanup.policy": "compact"})]))
    # per broker, in order: configs only, then its replicas (if it hosts any), then the partition states
    assert channels.kinds(0) == [UM, LAI, UM] and channels.kinds(1) == [UM, LAI, UM]
    assert channels.kinds(2) == [UM, UM]
    for broker_id in (0, 1, 2):
        first, *_, last = channels.requests(broker_id, UM)
        assert partitions(first) == {"t": []}
        assert topic_configs(first) == {"t": {"cleanup.policy": "compact", "retention.ms": "5"}}
        assert broker_configs(first) is None                     # null: unchanged
        assert partitions(last) == {"t": [0, 1]} and topic_configs(last) == {"t": None}
        assert sorted(b.id for b in last.live_brokers) == [0, 1, 2]
    [leader_and_isr] = channels.requests(1, LAI)
    [state] = leader_and_isr.topic_states
    assert [(p.partition_index, p.leader, p.is_new) for p in state.partition_states] == [(0, 0, True), (1, 1, True)]

    # the tagged fields survive the codec
    first = over_the_wire(channels.requests(0, UM)[0])
    assert topic_configs(first) == {"t": {"cleanup.policy": "compact", "retention.ms": "5"}}
    assert first.dynamic_broker_configs is None


def test_a_topic_without_overrides_is_sent_an_empty_list(tmp_path):
    controller, channels, _ = make_controller(tmp_path)
    run(controller.create_topics([NewTopic("plain", 1, 1)]))
    first = channels.requests(0, UM)[0]
    assert topic_configs(first) == {"plain": {}}
    assert topic_configs(over_the_wire(first)) == {"plain": {}}   # empty, not null ("unchanged")


def test_startup_sends_every_config_first_then_leader_and_isr(tmp_path):
    controller, _, _ = make_controller(tmp_path, brokers=(0, 1))
    run(controller.create_topics([NewTopic("a", assignments={0: [0]}, configs={"retention.ms": "5"}),
                                  NewTopic("b", assignments={0: [1]})]))
    run(controller.alter_broker_configs("", {"log.roll.ms": "5000"}))
    run(controller.alter_broker_configs("1", {"log.retention.bytes": "100"}))
    controller.shutdown()

    # a new controller on the same store (a restart) tells every broker everything
    restarted, channels = restart(tmp_path, brokers=(0, 1))
    assert restarted.epoch == 2
    assert channels.kinds(0) == [UM, LAI] and channels.kinds(1) == [UM, LAI]
    for broker_id in (0, 1):
        [update] = channels.requests(broker_id, UM)
        assert topic_configs(update) == {"a": {"retention.ms": "5"}, "b": {}}
        assert partitions(update) == {"a": [0], "b": [0]}
        # the cluster default and the receiver's own layer, nobody else's
        assert broker_configs(update) == {"": {"log.roll.ms": "5000"},
                                          str(broker_id): {"log.retention.bytes": "100"} if broker_id == 1 else {}}
        assert broker_configs(over_the_wire(update)) == broker_configs(update)
    [leader_and_isr] = channels.requests(1, LAI)
    assert [(t.topic_name, [p.is_new for p in t.partition_states]) for t in leader_and_isr.topic_states] == [
        ("b", [False])]


def restart(tmp_path, brokers):
    """A new controller on the store in ``tmp_path``, with every request of its start-up kept."""
    reactor = InlineReactor()
    channels = FakeChannels(reactor)
    controller = KafkaController(config=KafkaConfig.from_props({"log.dirs": str(tmp_path)}), broker_id=brokers[0],
                                 cluster_id="unit-test-cluster-id1", store=make_store(tmp_path, reactor),
                                 channels=channels)
    run(controller.startup([live_broker(b) for b in brokers]))
    return controller, channels


def test_dynamic_broker_configs_go_to_the_brokers_they_apply_to(tmp_path):
    controller, channels, _ = make_controller(tmp_path, brokers=(0, 1, 2))
    run(controller.create_topics([NewTopic("t", 1, 1)]))
    channels.sent.clear()
    run(controller.alter_broker_configs("1", {"log.retention.bytes": "100"}))
    [(broker_id, api_key, update)] = channels.sent
    assert (broker_id, api_key) == (1, UM)
    assert update.topic_states == []                             # no partition or topic change
    assert broker_configs(update) == {"": {}, "1": {"log.retention.bytes": "100"}}

    channels.sent.clear()
    run(controller.alter_broker_configs("", {"log.roll.ms": "5000"}))
    assert [(b, k) for b, k, _ in channels.sent] == [(0, UM), (1, UM), (2, UM)]
    assert [broker_configs(r) for _, _, r in channels.sent] == [
        {"": {"log.roll.ms": "5000"}, "0": {}},
        {"": {"log.roll.ms": "5000"}, "1": {"log.retention.bytes": "100"}},
        {"": {"log.roll.ms": "5000"}, "2": {}}]

    channels.sent.clear()
    run(controller.alter_broker_configs("1", {}))                 # removing a layer is announced too
    [(_, _, update)] = channels.sent
    assert broker_configs(update) == {"": {"log.roll.ms": "5000"}, "1": {}}


def test_config_changes_return_once_the_brokers_have_them(tmp_path):
    controller, channels, _ = make_controller(tmp_path, brokers=(0, 1))
    run(controller.create_topics([NewTopic("t", 1, 1)]))
    channels.hold = True
    altered = ensureDeferred(controller.alter_topic_configs("t", {"retention.ms": "9"}))
    assert not altered.called and len(channels.pending) == 2
    assert [topic_configs(r) for _, _, r in channels.sent[-2:]] == [{"t": {"retention.ms": "9"}}] * 2
    channels.release()
    assert altered.called and altered.result is None
    broker = ensureDeferred(controller.alter_broker_configs("", {"log.roll.ms": "1"}))
    assert not broker.called
    channels.release()
    assert broker.called


def test_deleting_tells_every_broker_the_leader_is_being_deleted(tmp_path):
    controller, channels, _ = make_controller(tmp_path, brokers=(0, 1))
    run(controller.create_topics([NewTopic("t", assignments={0: [1]}, configs={"retention.ms": "5"})]))
    channels.sent.clear()
    run(controller.delete_topics(["t"]))
    assert channels.kinds(0) == [UM] and sorted(channels.kinds(1)) == sorted([UM, SR])
    for broker_id in (0, 1):
        [update] = channels.requests(broker_id, UM)
        assert [p.leader for t in update.topic_states for p in t.partition_states] == [LEADER_DURING_DELETE]
        assert topic_configs(update) == {"t": None}
    [stop] = channels.requests(1, SR)
    assert [(t.topic_name, [(p.partition_index, p.delete_partition) for p in t.partition_states])
            for t in stop.topic_states] == [("t", [(0, True)])]


def test_a_failed_store_write_is_neither_applied_nor_announced(tmp_path, monkeypatch):
    controller, channels, _ = make_controller(tmp_path)
    run(controller.create_topics([NewTopic("kept", 1, 1, configs={"retention.ms": "5"})]))
    channels.sent.clear()
    store = controller._store

    async def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    for name in ("create_topics", "delete_topics", "set_partitions", "set_topic_configs", "set_broker_configs"):
        monkeypatch.setattr(store, name, broken)
    for call in (controller.create_topics([NewTopic("new", 1, 1)]), controller.delete_topics(["kept"]),
                 controller.create_partitions("kept", 3, None),
                 controller.alter_topic_configs("kept", {"retention.ms": "6"}),
                 controller.alter_broker_configs("", {"log.roll.ms": "1"})):
        with pytest.raises(OSError):
            run(call)
    assert channels.sent == []
    assert list(controller.topics) == ["kept"] and len(controller.topics["kept"].partitions) == 1
    assert controller.topics["kept"].configs == {"retention.ms": "5"} and controller.broker_configs == {}
    monkeypatch.undo()
    run(controller.create_topics([NewTopic("new", 1, 1)]))           # the lock was released every time
    assert "new" in controller.topics


def test_update_metadata_describes_brokers_and_offline_replicas(tmp_path):
    controller, channels, _ = make_controller(tmp_path, brokers=(0, 1))
    run(controller.create_topics([NewTopic("t", assignments={0: [0, 1]})]))
    update = channels.requests(0, UM)[-1]
    [broker0, broker1] = sorted(update.live_brokers, key=lambda b: b.id)
    assert [(e.listener, e.host, e.port, e.security_protocol) for e in broker1.endpoints] == [
        ("PLAINTEXT", "127.0.0.1", 9093, 0)]
    [state] = update.topic_states[0].partition_states
    assert (state.leader, state.isr, state.replicas, state.offline_replicas) == (0, [0, 1], [0, 1], [])
    assert isinstance(update, m.UpdateMetadataRequest) and update.controller_epoch == controller.epoch

"""The controller's APIs on the broker: LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6), ControlledShutdown (7).

Requests are sent as the controller sends them, on the control plane, to the
broker's real handlers; their effects are checked in the ReplicaManager, the
logs, the MetadataCache, the ConfigRepository and the DynamicBrokerConfig.
"""

from __future__ import annotations

import uuid

import pytest

from twisted_kafka.controller.client import NoControllerClient
from twisted_kafka.controller.interface import LEADER_DURING_DELETE
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.server.authorization import ALLOW_ALL
from twisted_kafka.server.broker_epoch import BrokerEpoch
from twisted_kafka.server.controller_requests import ControllerRequestGuard
from twisted_kafka.server.handlers.controller_apis import ControlledShutdownHandler
from twisted_kafka.server.kafka_apis import KafkaApis

from .helpers import BROKER_EPOCH, BROKER_ID, CLUSTER_ID, Broker, decode, make_request, result_of

LR = m.LeaderAndIsrRequest
UM = m.UpdateMetadataRequest
SR = m.StopReplicaRequest
TOPIC_ID = uuid.UUID("0123456789abcdef0123456789abcdef")


def control(node, request, version):
    return node.call(request, version, plane="control", listener="CONTROLLER")


def lai_partition(index, *, leader=0, leader_epoch=0, partition_epoch=0, topic=None):
    cls = LR.LeaderAndIsrPartitionState if topic is not None else LR.LeaderAndIsrTopicState.LeaderAndIsrPartitionState
    fields = dict(partition_index=index, controller_epoch=1, leader=leader, leader_epoch=leader_epoch, isr=[0],
                  partition_epoch=partition_epoch, replicas=[0])
    if topic is not None:
        fields["topic_name"] = topic
    return cls(**fields)


def leader_and_isr(node, topics, *, version=7, controller_epoch=None, broker_epoch=BROKER_EPOCH):
    """``topics``: {name: (topic_id, [partition states])}."""
    epoch = node.controller.epoch if controller_epoch is None else controller_epoch
    if version <= 1:
        states = [s for _, (_, parts) in topics.items() for s in parts]
        return LR(controller_id=0, controller_epoch=epoch, ungrouped_partition_states=states, live_leaders=[])
    return LR(controller_id=0, controller_epoch=epoch, broker_epoch=broker_epoch, live_leaders=[],
              broker_id=BROKER_ID, cluster_id=CLUSTER_ID, topic_states=[
        LR.LeaderAndIsrTopicState(topic_name=name, topic_id=topic_id, partition_states=parts)
        for name, (topic_id, parts) in topics.items()])


def lai_errors(body, version=7):
    if version < 5:
        return {(e.topic_name, e.partition_index): e.error_code for e in body.partition_errors}
    return {(t.topic_id, e.partition_index): e.error_code for t in body.topics for e in t.partition_errors}


# -- LeaderAndIsr -----------------------------------------------------------------------------


def test_leader_and_isr_creates_logs_with_the_topic_s_overrides(node):
    node.config_repository.set_topic_overrides("t", {"retention.ms": "5"})       # told first, in UpdateMetadata
    body = control(node, leader_and_isr(node, {"t": (TOPIC_ID, [lai_partition(0), lai_partition(1)])}), 7)
    assert (body.error_code, lai_errors(body)) == (ErrorCode.NONE, {(TOPIC_ID, 0): 0, (TOPIC_ID, 1): 0})
    partition = node.replica_manager.leader_partition("t", 1)
    assert (partition.topic_id, partition.leader_epoch, partition.isr) == (TOPIC_ID, 0, [0])
    assert node.log("t", 1).config.retention_ms == 5 and node.log("t", 1).topic_id == TOPIC_ID


@pytest.mark.parametrize("version", [2, 4, 5])
def test_leader_and_isr_older_layouts(node, version):
    topic = "t" if version <= 1 else None
    body = control(node, leader_and_isr(node, {"t": (TOPIC_ID, [lai_partition(0, topic=topic)])},
                                        version=version), version)
    key = ("t", 0) if version < 5 else (TOPIC_ID, 0)
    assert lai_errors(body, version) == {key: ErrorCode.NONE}
    assert node.replica_manager.leader_partition("t", 0).is_leader


def test_leader_and_isr_per_partition_outcomes(node):
    control(node, leader_and_isr(node, {"t": (TOPIC_ID, [lai_partition(0, leader_epoch=2, partition_epoch=2),
                                                         lai_partition(1)])}), 7)
    other_id = uuid.uuid4()
    body = control(node, leader_and_isr(node, {"t": (TOPIC_ID, [
        lai_partition(0, leader_epoch=1, partition_epoch=9),                  # an older leader epoch
        lai_partition(1, leader_epoch=0, partition_epoch=0),                  # a repeat: nothing to do
    ]), "u": (other_id, [lai_partition(0)])}), 7)
    assert lai_errors(body) == {(TOPIC_ID, 0): ErrorCode.STALE_CONTROLLER_EPOCH, (TOPIC_ID, 1): ErrorCode.NONE,
                                (other_id, 0): ErrorCode.NONE}
    assert node.replica_manager.partition("t", 0).leader_epoch == 2
    body = control(node, leader_and_isr(node, {"t": (other_id, [lai_partition(1, leader_epoch=5)])}), 7)
    assert lai_errors(body) == {(other_id, 1): ErrorCode.INCONSISTENT_TOPIC_ID}


def test_becoming_a_follower_stops_serving_clients_and_wakes_waiting_fetches(node):
    node.create_topic("t")
    F = m.FetchRequest
    fetch = F(replica_id=-1, max_wait_ms=1000, min_bytes=1, topics=[F.FetchTopic(topic="t", partitions=[
        F.FetchTopic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)])])
    request, pending = node.pending(fetch, 12)
    assert not pending.called
    node.leader_and_isr("t", 0, leader=1, leader_epoch=1, replicas=(0, 1), isr=(0, 1))
    [topic] = decode(request, result_of(pending)).responses
    assert topic.partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    partition = node.replica_manager.partition("t", 0)
    assert (partition.is_leader, partition.leader_id, partition.leader_epoch) == (False, 1, 1)
    with pytest.raises(KafkaError) as info:
        node.replica_manager.leader_partition("t", 0)
    assert info.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_a_log_that_cannot_be_created_is_a_storage_error_for_its_partition(node, monkeypatch):
    real = node.log_manager.create_log

    def create_log(topic, partition, *args):
        if partition == 1:
            raise OSError(28, "No space left on device")
        return real(topic, partition, *args)

    monkeypatch.setattr(node.log_manager, "create_log", create_log)
    body = control(node, leader_and_isr(node, {"t": (TOPIC_ID, [lai_partition(0), lai_partition(1)])}), 7)
    assert lai_errors(body) == {(TOPIC_ID, 0): ErrorCode.NONE, (TOPIC_ID, 1): ErrorCode.KAFKA_STORAGE_ERROR}


@pytest.mark.parametrize("version", [4, 7])
def test_an_old_controller_or_broker_epoch_is_refused_as_a_whole(node, version):
    states = {"t": (TOPIC_ID, [lai_partition(0), lai_partition(1)])}
    body = control(node, leader_and_isr(node, states, version=version, controller_epoch=0), version)
    key = (lambda i: ("t", i)) if version < 5 else (lambda i: (TOPIC_ID, i))
    assert body.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert lai_errors(body, version) == {key(0): ErrorCode.STALE_CONTROLLER_EPOCH,
                                         key(1): ErrorCode.STALE_CONTROLLER_EPOCH}
    node.broker_epoch.update(5)
    body = control(node, leader_and_isr(node, states, version=version, broker_epoch=4), version)
    assert body.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert not node.replica_manager.partitions


# -- UpdateMetadata ---------------------------------------------------------------------------


def um_partition(index, *, leader=0, leader_epoch=0, topic=None, offline=()):
    return UM.UpdateMetadataPartitionState(
        **({"topic_name": topic} if topic is not None else {}), partition_index=index, controller_epoch=1,
        leader=leader, leader_epoch=leader_epoch, isr=[0], zk_version=3, replicas=[0, 1],
        offline_replicas=list(offline))


def um_broker(broker_id, port, rack=None):
    E = UM.UpdateMetadataBroker.UpdateMetadataEndpoint
    return UM.UpdateMetadataBroker(id=broker_id, rack=rack, endpoints=[
        E(port=port, host=f"host{broker_id}", listener="PLAINTEXT", security_protocol=0),
        E(port=port + 1, host=f"host{broker_id}", listener="CONTROLLER", security_protocol=0)])


def config_entries(values):
    return [UM.UpdateMetadataTopicState.UpdateMetadataConfig(name=k, value=v) for k, v in values.items()]


def update_metadata(node, topics, *, brokers=None, controller_id=0, dynamic=None, controller_epoch=None):
    """``topics``: {name: (topic_id, [partition states], configs or None)}; ``dynamic``: {entity: configs}."""
    B = UM.UpdateMetadataBrokerConfigs
    return UM(controller_id=controller_id,
              controller_epoch=node.controller.epoch if controller_epoch is None else controller_epoch,
              broker_epoch=BROKER_EPOCH, broker_id=BROKER_ID, cluster_id=CLUSTER_ID,
              topic_states=[UM.UpdateMetadataTopicState(
                  topic_name=name, topic_id=topic_id, partition_states=parts,
                  topic_configs=None if configs is None else config_entries(configs))
                  for name, (topic_id, parts, configs) in topics.items()],
              dynamic_broker_configs=None if dynamic is None else [
                  B(entity=entity, configs=[B.UpdateMetadataConfig(name=k, value=v) for k, v in values.items()])
                  for entity, values in dynamic.items()],
              live_brokers=brokers if brokers is not None else [um_broker(0, 9092)])


def test_update_metadata_fills_the_metadata_cache(node):
    body = control(node, update_metadata(node, {"t": (TOPIC_ID, [um_partition(0), um_partition(1, leader=1,
                                                                                                offline=[1])], None)},
                                         brokers=[um_broker(0, 9092), um_broker(1, 9192, rack="r1")]), 8)
    assert body.error_code == ErrorCode.NONE
    cache = node.metadata_cache
    assert cache.controller_id == 0
    assert cache.alive_brokers("PLAINTEXT") == [(0, "host0", 9092, None), (1, "host1", 9192, "r1")]
    assert cache.alive_brokers("CONTROLLER") == [(0, "host0", 9093, None), (1, "host1", 9193, "r1")]
    assert cache.topic_name(TOPIC_ID) == "t"
    state = cache.partition("t", 1)
    assert (state.leader, state.replicas, state.isr, state.offline_replicas, state.partition_epoch) == (
        1, (0, 1), (0,), (1,), 3)


def test_update_metadata_applies_topic_configs_to_the_repository_and_the_logs(node):
    node.create_topic("t", configs={"retention.ms": "5"})
    topic_id = node.metadata_cache.topics["t"].topic_id
    control(node, update_metadata(node, {"t": (topic_id, [], {"segment.ms": "1000"})}), 8)
    assert node.config_repository.topic_overrides("t") == {"segment.ms": "1000"}
    assert (node.log("t").config.segment_ms, node.log("t").config.retention_ms) == (1000, 7 * 24 * 3600 * 1000)
    # null configs mean "unchanged"; the partition states still apply
    control(node, update_metadata(node, {"t": (topic_id, [um_partition(0, leader_epoch=4)], None)}), 8)
    assert node.config_repository.topic_overrides("t") == {"segment.ms": "1000"}
    assert node.metadata_cache.partition("t", 0).leader_epoch == 4
    # an empty list means "no overrides"
    control(node, update_metadata(node, {"t": (topic_id, [], {})}), 8)
    assert node.config_repository.topic_overrides("t") == {} and node.log("t").config.segment_ms == 604800000
    # before v6 there are no configs at all
    node.config_repository.set_topic_overrides("t", {"retention.ms": "9"})
    request = update_metadata(node, {"t": (topic_id, [um_partition(0)], None)})
    control(node, request, 5)
    assert node.config_repository.topic_overrides("t") == {"retention.ms": "9"}


def test_update_metadata_applies_dynamic_broker_configs(node):
    control(node, update_metadata(node, {}, dynamic={"": {"log.roll.ms": "5000"},
                                                     "0": {"log.retention.bytes": "100", "num.partitions": "3"},
                                                     "1": {"log.retention.bytes": "7"}}), 8)
    assert node.dynamic_config.layer("") == {"log.roll.ms": "5000"}
    assert node.dynamic_config.layer("0") == {"log.retention.bytes": "100"}        # not-dynamic keys skipped
    current = node.dynamic_config.current
    assert current["log.retention.bytes"] == 100 and node.log_manager.config is current
    control(node, update_metadata(node, {}), 8)                                        # null: unchanged
    assert node.dynamic_config.layer("0") == {"log.retention.bytes": "100"}
    control(node, update_metadata(node, {}, dynamic={"": {}, "0": {}}), 8)
    assert node.dynamic_config.layer("0") == {} and node.dynamic_config.layer("") == {}


def test_update_metadata_forgets_deleted_topics(node):
    node.create_topic("t", configs={"retention.ms": "5"})
    topic_id = node.metadata_cache.topics["t"].topic_id
    control(node, update_metadata(node, {"t": (topic_id, [um_partition(0, leader=LEADER_DURING_DELETE)], None)}), 8)
    assert "t" not in node.metadata_cache.topics and node.metadata_cache.topic_name(topic_id) is None
    assert node.config_repository.topics() == []


def test_versions_without_a_broker_epoch_are_not_served():
    # KIP-380 added the broker epoch in LeaderAndIsr v2, UpdateMetadata v5, StopReplica v1 and
    # ControlledShutdown v2: older versions could not be checked, so they are not served.
    from twisted_kafka.protocol.registry import REGISTRY, ApiKey
    assert [REGISTRY[key].min_version for key in (ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA,
                                                  ApiKey.STOP_REPLICA, ApiKey.CONTROLLED_SHUTDOWN)] == [2, 5, 1, 2]


def test_update_metadata_from_an_old_controller_is_refused(node):
    body = control(node, update_metadata(node, {"t": (TOPIC_ID, [um_partition(0)], {"retention.ms": "1"})},
                                         controller_epoch=0), 8)
    assert body.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert "t" not in node.metadata_cache.topics and node.config_repository.topics() == []


# -- StopReplica ------------------------------------------------------------------------------


def stop_replica(node, partitions, *, delete, version=4, controller_epoch=None):
    """``partitions``: [(topic, index)]."""
    epoch = node.controller.epoch if controller_epoch is None else controller_epoch
    if version == 0:
        return SR(controller_id=0, controller_epoch=epoch, delete_partitions=delete, ungrouped_partitions=[
            SR.StopReplicaPartitionV0(topic_name=t, partition_index=i) for t, i in partitions])
    if version <= 2:
        topics: dict[str, list[int]] = {}
        for t, i in partitions:
            topics.setdefault(t, []).append(i)
        return SR(controller_id=0, controller_epoch=epoch, broker_epoch=BROKER_EPOCH, broker_id=BROKER_ID,
                  cluster_id=CLUSTER_ID, delete_partitions=delete, topics=[
            SR.StopReplicaTopicV1(name=t, partition_indexes=idx) for t, idx in topics.items()])
    PS = SR.StopReplicaTopicState.StopReplicaPartitionState
    return SR(controller_id=0, controller_epoch=epoch, broker_epoch=BROKER_EPOCH, broker_id=BROKER_ID,
              cluster_id=CLUSTER_ID, topic_states=[
        SR.StopReplicaTopicState(topic_name=t, partition_states=[
            PS(partition_index=i, leader_epoch=-2, delete_partition=delete)]) for t, i in partitions])


def stop_errors(body):
    return {(e.topic_name, e.partition_index): e.error_code for e in body.partition_errors}


@pytest.mark.parametrize("version", [1, 3, 4])
def test_stop_replica_with_delete_removes_the_log_in_the_background(tmp_path, version):
    node = Broker(tmp_path, {"log.segment.delete.delay.ms": "1000"})
    node.create_topic("t", 2)
    node.produce("t", 0, b"a")
    directory = node.log("t", 0).dir
    body = control(node, stop_replica(node, [("t", 0), ("never", 3)], delete=True, version=version), version)
    assert (body.error_code, stop_errors(body)) == (ErrorCode.NONE, {("t", 0): 0, ("never", 3): 0})
    assert node.log("t", 0) is None and node.log("t", 1) is not None
    with pytest.raises(KafkaError):
        node.replica_manager.partition("t", 0)
    renamed = [p for p in (tmp_path / "logs").iterdir() if p.name.startswith("t-0.") and p.name.endswith("-delete")]
    assert len(renamed) == 1 and not (tmp_path / "logs" / "t-0").exists()   # answered before the files go
    node.reactor.advance(1)
    assert not renamed[0].exists() and not (tmp_path / "logs" / "t-0").exists() and directory.endswith("t-0")


def test_stop_replica_without_delete_keeps_the_log(node):
    node.create_topic("t")
    body = control(node, stop_replica(node, [("t", 0)], delete=False), 4)
    assert stop_errors(body) == {("t", 0): ErrorCode.NONE}
    assert "t" not in {t for t, _ in node.replica_manager.partitions} and node.log("t") is not None


def test_stop_replica_from_an_old_controller_is_refused(node):
    node.create_topic("t")
    body = control(node, stop_replica(node, [("t", 0)], delete=True, controller_epoch=0), 4)
    assert (body.error_code, stop_errors(body)) == (ErrorCode.STALE_CONTROLLER_EPOCH,
                                                    {("t", 0): ErrorCode.STALE_CONTROLLER_EPOCH})
    assert node.log("t") is not None


# -- ControlledShutdown -----------------------------------------------------------------------


class Remaining(NoControllerClient):
    def __init__(self, remaining):
        self.remaining = remaining
        self.asked = []

    async def controlled_shutdown(self, broker_id, broker_epoch):
        self.asked.append((broker_id, broker_epoch))
        return self.remaining


def open_guard() -> ControllerRequestGuard:
    """A guard without an authorizer (ControlledShutdown's epoch is the controller's to check)."""
    return ControllerRequestGuard(broker_id=0, cluster_id="c", broker_epoch=BrokerEpoch(1), known_controller=lambda: 0)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_controlled_shutdown_reports_the_remaining_partitions(version):
    controller = Remaining([("t", 0), ("u", 2)])
    apis = KafkaApis([ControlledShutdownHandler(controller, open_guard())], authorization=ALLOW_ALL)
    fields = {"broker_id": 4}
    if version >= 2:
        fields["broker_epoch"] = 9
    request = make_request(m.ControlledShutdownRequest(**fields), version, plane="control", listener="CONTROLLER")
    body = decode(request, result_of(apis.handle(request)))
    assert body.error_code == ErrorCode.NONE
    assert [(p.topic_name, p.partition_index) for p in body.remaining_partitions] == [("t", 0), ("u", 2)]
    assert controller.asked == [(4, 9 if version >= 2 else -1)]


def test_controlled_shutdown_through_the_controller(node):
    node.create_topic("t")
    request = m.ControlledShutdownRequest(broker_id=0, broker_epoch=1)
    body = control(node, request, 3)
    assert (body.error_code, body.remaining_partitions) == (ErrorCode.NONE, [])   # a single replica cannot move
    assert control(node, m.ControlledShutdownRequest(broker_id=7, broker_epoch=1), 3).error_code == \
        ErrorCode.BROKER_NOT_AVAILABLE
    assert control(node, m.ControlledShutdownRequest(broker_id=0, broker_epoch=5), 3).error_code == \
        ErrorCode.STALE_BROKER_EPOCH
    apis = KafkaApis([ControlledShutdownHandler(NoControllerClient(), open_guard())], authorization=ALLOW_ALL)
    request = make_request(m.ControlledShutdownRequest(broker_id=0, broker_epoch=1), 3, plane="control")
    assert decode(request, result_of(apis.handle(request))).error_code == ErrorCode.NOT_CONTROLLER


def test_the_single_node_loop_applies_everything_the_controller_sends(node):
    """Through the real controller: configs, then the log, then the partition states, all on this broker."""
    node.channels.clear()
    topic_id = node.create_topic("t", 2, configs={"retention.ms": "5"})
    assert node.log("t", 1).config.retention_ms == 5 and node.log("t", 1).topic_id == topic_id
    assert node.metadata_cache.topics["t"].topic_id == topic_id
    assert node.replica_manager.leader_partition("t", 1).leader_epoch == 0
    assert node.produce("t", 1, b"x") == 0

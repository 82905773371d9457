"""The leader's side of replication on a clock: follower positions, the high watermark, acks=all in the
produce purgatory, min.insync.replicas, and ISR changes through the controller (AlterPartition)."""

from __future__ import annotations

import pytest
from twisted.internet.defer import Deferred

from twisted_kafka.controller.interface import IsrResult
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.server.replica_manager import PartitionStateChange

from .helpers import BROKER_ID, Broker, records, result_of
from .test_fetch import fetch, partitions, values

B = BROKER_ID
LAG_MS = 10_000
ISR_PROPS = {"replica.lag.time.max.ms": str(LAG_MS), "request.timeout.ms": "30000"}


def replicate(node, topic="t", *, isr=(B, 2, 3), min_isr=1):
    """``topic`` partition 0 led here with followers 2 and 3 (a LeaderAndIsr as the controller sends)."""
    topic_id = node.create_topic(topic, configs={"min.insync.replicas": str(min_isr)})
    partition = node.replica_manager.partition(topic, 0)
    node.replica_manager.become_leader_or_follower([PartitionStateChange(
        topic, topic_id, 0, B, partition.leader_epoch + 1, partition.partition_epoch + 1, [B, 2, 3], list(isr))])
    return partition


class Outcome:
    """What a Deferred fired with (a result or a Failure), None until it fires."""

    def __init__(self, d: Deferred):
        self.box: list = []
        d.addBoth(self.box.append)

    def __call__(self):
        return self.box[0] if self.box else None


def append(node, partition, *values_: bytes, acks=-1, timeout_ms=5000) -> Outcome:
    return Outcome(node.replica_manager.append(partition, records(*values_), 9, acks, timeout_ms=timeout_ms))


def test_the_high_watermark_is_the_smallest_log_end_of_the_isr_and_acks_all_waits_for_it(node):
    partition = replicate(node)
    d = append(node, partition, b"a", b"b")
    assert partition.log.log_end_offset == 2 and partition.high_watermark == 0
    assert d() is None
    node.replica_manager.follower_fetched(partition, 2, 2)
    assert partition.high_watermark == 0 and d() is None       # broker 3 has nothing yet
    node.replica_manager.follower_fetched(partition, 3, 1)
    assert partition.high_watermark == 1 and d() is None
    node.replica_manager.follower_fetched(partition, 3, 2)
    assert partition.high_watermark == 2 and d().first_offset == 0


def test_acks_1_answers_at_once_and_consumers_read_only_up_to_the_high_watermark(node):
    partition = replicate(node)
    assert append(node, partition, b"a", acks=1)().first_offset == 0
    assert values(partitions(node.call(fetch({"t": {0: 0}}), 12))[("t", 0)]) == []
    # A follower reads up to the log end, and its fetch moves its position.
    request = fetch({"t": {0: 0}})
    request.replica_id = 2
    follower = node.call(request, 12)
    assert values(partitions(follower)[("t", 0)]) == [(0, b"a")]
    node.replica_manager.follower_fetched(partition, 2, 1)
    node.replica_manager.follower_fetched(partition, 3, 1)
    got = partitions(node.call(fetch({"t": {0: 0}}), 12))[("t", 0)]
    assert got.high_watermark == 1 and values(got) == [(0, b"a")]


def test_acks_all_times_out_on_the_clock(node):
    partition = replicate(node)
    d = append(node, partition, b"a", timeout_ms=1500)
    node.reactor.advance(1.4)
    assert d() is None
    node.reactor.advance(0.2)
    failure = d()
    assert failure.check(KafkaError) and failure.value.code == ErrorCode.REQUEST_TIMED_OUT


def test_the_replicas_catching_up_at_the_timeout_answer_success_not_a_timeout(node):
    """The timer fires with the high watermark already past the records (moved without a check):
    one last look at expiry, as before the purgatory was shared."""
    partition = replicate(node)
    d = append(node, partition, b"a", timeout_ms=1000)
    for follower in (2, 3):
        partition.update_follower(follower, 1, 0)                      # behind the replica manager's back
    node.reactor.advance(1)
    assert d().first_offset == 0


def test_the_drain_answers_waiting_acks_all_produces_and_any_that_come_later(node):
    """The broker stops: a waiting acks=all append is answered NOT_LEADER_OR_FOLLOWER (the producer
    retries where leadership went), and so is one whose append completes after the purgatory shut."""
    partition = replicate(node)
    d = append(node, partition, b"a", timeout_ms=30_000)
    node.replica_manager.produce_purgatory.shutdown()
    assert d().value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    later = append(node, partition, b"b", timeout_ms=30_000)
    assert later().value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert node.replica_manager.produce_purgatory.size == 0


def test_min_insync_replicas_before_and_after_the_append(node):
    partition = replicate(node, isr=(B,), min_isr=2)
    with pytest.raises(KafkaError) as refused:
        append(node, partition, b"a")
    assert refused.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert partition.log.log_end_offset == 0                           # nothing written

    partition = replicate(node, "u", isr=(B, 2), min_isr=2)
    d = append(node, partition, b"a")
    assert d() is None
    partition.isr = [B]                                                # the controller accepted a shrink
    node.replica_manager.isr_changed(partition)
    failure = d()
    assert failure.value.code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_a_leadership_change_fails_waiting_produces(node):
    partition = replicate(node)
    d = append(node, partition, b"a")
    node.replica_manager.become_leader_or_follower([PartitionStateChange(
        "t", partition.topic_id, 0, 2, partition.leader_epoch + 1, partition.partition_epoch + 1, [B, 2, 3],
        [B, 2, 3])])
    assert d().value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER


class FakeController:
    """Answers AlterPartition as the controller would accept it, when the test releases it."""

    def __init__(self):
        self.calls: list = []

    async def alter_partition(self, broker_id, broker_epoch, changes, *, forward=True):
        d: Deferred = Deferred()
        self.calls.append((changes, d))
        return await d

    def accept(self, index: int = -1) -> None:
        changes, d = self.calls[index]
        d.callback({key: IsrResult(ErrorCode.NONE, B, change.leader_epoch, change.isr, change.partition_epoch + 1)
                    for key, change in changes.items()})


def replicating(tmp_path, controller, **kwargs) -> Broker:
    """A broker whose replica manager replicates as a cluster member's does, its ISR changes going to
    ``controller``."""
    return Broker(tmp_path, ISR_PROPS, replication_controller=controller, **kwargs)


def test_a_replicating_replica_manager_runs_its_isr_and_fetcher_managers_as_its_child_services(tmp_path):
    node = replicating(tmp_path, FakeController())
    replicas = node.replica_manager
    assert list(replicas) == [replicas.isr_manager, replicas.fetchers]
    assert [type(child).__name__ for child in replicas] == ["IsrManager", "ReplicaFetcherManager"]
    replicas.startService()
    assert all(child.running for child in replicas)
    replicas.stopService()
    assert not any(child.running for child in replicas)


def test_a_follower_that_stops_fetching_leaves_the_isr_after_replica_lag_time_max_ms(tmp_path):
    controller = FakeController()
    node = replicating(tmp_path, controller)
    partition = replicate(node)
    manager = node.replica_manager.isr_manager
    node.replica_manager.startService()                # starts the ISR manager's shrink check
    append(node, partition, b"a")
    node.reactor.advance(1)
    node.replica_manager.follower_fetched(partition, 2, 1)
    node.replica_manager.follower_fetched(partition, 3, 1)
    for _ in range(2 * LAG_MS // 1000):           # broker 2 keeps fetching, broker 3 stopped
        node.reactor.advance(1)
        node.replica_manager.follower_fetched(partition, 2, 1)
    [(changes, _)] = controller.calls
    assert changes[("t", 0)].isr == (B, 2)
    assert partition.pending_isr == [B, 2] and partition.isr == [B, 2, 3]
    epoch = partition.partition_epoch
    controller.accept()
    assert partition.isr == [B, 2] and partition.partition_epoch == epoch + 1 and partition.pending_isr is None
    manager.stopService()


def test_a_caught_up_follower_joins_the_isr(tmp_path):
    controller = FakeController()
    node = replicating(tmp_path, controller)
    partition = replicate(node, isr=(B, 2))
    append(node, partition, b"a", b"b", acks=1)
    node.replica_manager.follower_fetched(partition, 2, 2)
    node.replica_manager.follower_fetched(partition, 3, 1)             # behind the high watermark
    assert controller.calls == []
    node.replica_manager.follower_fetched(partition, 3, 2)
    [(changes, _)] = controller.calls
    assert changes[("t", 0)].isr == (B, 2, 3)
    # While the change is pending the high watermark counts broker 3 (the maximal ISR).
    append(node, partition, b"c", acks=1)
    node.replica_manager.follower_fetched(partition, 2, 3)
    assert partition.high_watermark == 2
    controller.accept()
    assert partition.isr == [B, 2, 3]
    assert result_of(node.replica_manager.read(partition, 0, 1 << 20, max_offset=None,
                                               min_one_message=True)).size > 0


def test_replica_manager_metrics_under_kafka_s_names(tmp_path):
    from twisted_kafka.metrics.registry import MetricName, MetricsRegistry
    from twisted_kafka.server.broker_metrics import register_broker_metrics

    registry = MetricsRegistry()
    controller = FakeController()
    node = replicating(tmp_path, controller, metrics=registry)
    register_broker_metrics(registry, replica_manager=node.replica_manager, metadata_cache=node.metadata_cache,
                            group_coordinator=node.group_coordinator.coordinator)
    replicate(node, isr=(B, 2), min_isr=2)

    def read(name):
        return registry.get(MetricName("kafka.server", "ReplicaManager", name))

    assert read("UnderReplicatedPartitions").value == 1 and read("AtMinIsrPartitionCount").value == 1
    partition = node.replica_manager.partition("t", 0)
    node.replica_manager.follower_fetched(partition, 3, 0)
    controller.accept()
    assert read("UnderReplicatedPartitions").value == 0 and read("IsrExpandsPerSec").count == 1


def test_a_new_leader_epoch_with_the_same_leader_keeps_waiting_produces(node):
    partition = replicate(node)
    d = append(node, partition, b"a")
    node.replica_manager.follower_fetched(partition, 3, 0)
    # The controller took broker 3 out of the ISR (it died): a new leader epoch, this broker still leads.
    node.replica_manager.become_leader_or_follower([PartitionStateChange(
        "t", partition.topic_id, 0, B, partition.leader_epoch + 1, partition.partition_epoch + 1, [B, 2, 3],
        [B, 2])])
    assert d() is None
    node.replica_manager.follower_fetched(partition, 2, 1)
    assert d().first_offset == 0
    assert partition.followers[3].log_end_offset == 0         # what it knew of its followers is kept


def test_the_high_watermark_is_checkpointed_and_loaded(node, tmp_path):
    from .helpers import Broker

    partition = replicate(node)
    append(node, partition, b"a", b"b", acks=1)
    node.replica_manager.follower_fetched(partition, 2, 1)
    node.replica_manager.follower_fetched(partition, 3, 1)
    assert (partition.high_watermark, partition.log.log_end_offset) == (1, 2)
    result_of(node.log_manager.stopService())          # writes replication-offset-checkpoint
    assert "t 0 1" in (tmp_path / "logs" / "replication-offset-checkpoint").read_text()
    restarted = Broker(tmp_path, start=False)
    result_of(restarted.log_manager.startService())
    assert restarted.log_manager.get_log("t", 0).high_watermark == 1    # not its log end


def test_an_unanswered_alter_partition_is_given_up_after_request_timeout_ms(tmp_path):
    controller = FakeController()
    node = replicating(tmp_path, controller)
    partition = replicate(node, isr=(B, 2))
    node.replica_manager.follower_fetched(partition, 3, 0)
    assert partition.pending_isr == [B, 2, 3]
    node.reactor.advance(30)
    assert partition.pending_isr is None and partition.isr == [B, 2]
    node.reactor.advance(1)                                            # past the retry pause: asked again
    node.replica_manager.follower_fetched(partition, 3, 0)
    assert len(controller.calls) == 2

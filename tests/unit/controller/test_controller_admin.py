"""KafkaController's admin planning: topic and partition plans, waiting for brokers, broker configs.

The controller runs against a fake channel manager (each request is answered
by a Deferred the test controls) and a real MetadataStore whose "thread pool"
runs work at once, on a ``Clock``: everything is synchronous and deterministic.
"""

from __future__ import annotations

import uuid

import pytest
from twisted.internet.defer import Deferred, ensureDeferred, succeed
from twisted.internet.task import Clock
from twisted.python.failure import Failure

from twisted_kafka.config import KafkaConfig
from twisted_kafka.controller.kafka_controller import KafkaController, LiveBroker, NewTopic
from twisted_kafka.controller.metadata_store import MetadataStore
from twisted_kafka.network.listeners import EndPoint
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey


class InlineReactor(Clock):
    def callFromThread(self, f, *args, **kwargs):
        f(*args, **kwargs)


class InlinePool:
    def callInThreadWithCallback(self, on_result, f, *args, **kwargs):
        try:
            result = f(*args, **kwargs)
        except BaseException:
            on_result(False, Failure())
        else:
            on_result(True, result)


class FakeChannels:
    """Records every request; answers at once unless ``hold`` is set."""

    def __init__(self, reactor):
        self.reactor = reactor
        self.sent: list[tuple[int, int, object]] = []
        self.hold = False
        self.pending: list[Deferred] = []

    def add_broker(self, broker_id, host, port):
        pass

    def close(self):
        pass

    def send(self, broker_id, api_key, version, request):
        self.sent.append((broker_id, api_key, request))
        responses = {ApiKey.LEADER_AND_ISR: m.LeaderAndIsrResponse, ApiKey.UPDATE_METADATA: m.UpdateMetadataResponse,
                     ApiKey.STOP_REPLICA: m.StopReplicaResponse}
        response = responses[api_key](error_code=0)
        if self.hold:
            d = Deferred()
            self.pending.append((d, response))
            return d
        return succeed(response)

    def release(self):
        pending, self.pending = self.pending, []
        for d, response in pending:
            d.callback(response)

    def kinds(self) -> list[int]:
        return [api_key for _, api_key, _ in self.sent]


def run(coroutine):
    """The result of a coroutine that completes synchronously (raises its exception)."""
    d = ensureDeferred(coroutine)
    outcome = []
    d.addBoth(outcome.append)
    assert outcome, "the coroutine is still waiting"
    if isinstance(outcome[0], Failure):
        outcome[0].raiseException()
    return outcome[0]


def make_controller(tmp_path, brokers=(0,), **props):
    reactor = InlineReactor()
    config = KafkaConfig.from_props({"log.dirs": str(tmp_path), **{k: str(v) for k, v in props.items()}})
    store = MetadataStore(str(tmp_path), reactor=reactor, threadpool=InlinePool())
    channels = FakeChannels(reactor)
    controller = KafkaController(config=config, broker_id=brokers[0], store=store, channels=channels)
    live = [LiveBroker(broker_id=b, epoch=1, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9092 + b, "PLAINTEXT"),),
                       control_listener="PLAINTEXT") for b in brokers]
    run(controller.startup(live))
    channels.sent.clear()
    return controller, channels, reactor


def errors(results):
    return {r.name: r.error for r in results}


def test_create_topics_plans_each_topic_alone(tmp_path):
    controller, channels, _ = make_controller(tmp_path, **{"num.partitions": 3})
    run(controller.create_topics([NewTopic("taken", 1, 1)]))
    results = run(controller.create_topics([
        NewTopic("defaults"),
        NewTopic("taken", 1, 1),
        NewTopic("a.b", 1, 1), NewTopic("a_b", 1, 1),                       # collide with each other
        NewTopic("zero", 0, 1), NewTopic("rf", 1, 2), NewTopic("rf0", 1, 0),
        NewTopic("both", 2, -1, assignments={0: [0]}),
        NewTopic("gap", assignments={0: [0], 2: [0]}),
        NewTopic("dup-replica", assignments={0: [0, 0]}),
        NewTopic("null", 1, 1, configs={"retention.ms": None}),
        NewTopic("bad", 1, 1, configs={"retention.ms": "x"}),
        NewTopic("", 1, 1),
    ]))
    assert errors(results) == {
        "defaults": ErrorCode.NONE, "taken": ErrorCode.TOPIC_ALREADY_EXISTS,
        "a.b": ErrorCode.NONE, "a_b": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "zero": ErrorCode.INVALID_PARTITIONS, "rf": ErrorCode.INVALID_REPLICATION_FACTOR,
        "rf0": ErrorCode.INVALID_REPLICATION_FACTOR, "both": ErrorCode.INVALID_REQUEST,
        "gap": ErrorCode.INVALID_REPLICA_ASSIGNMENT, "dup-replica": ErrorCode.INVALID_REPLICA_ASSIGNMENT,
        "null": ErrorCode.INVALID_CONFIG, "bad": ErrorCode.INVALID_CONFIG, "": ErrorCode.INVALID_TOPIC_EXCEPTION,
    }
    by_name = {r.name: r for r in results}
    assert (by_name["defaults"].num_partitions, by_name["defaults"].replication_factor) == (3, 1)
    assert "retention.ms" in by_name["bad"].message
    assert set(controller.store.topics) == {"taken", "defaults", "a.b"}
    # one LeaderAndIsr and one UpdateMetadata for the whole batch
    assert channels.kinds()[-2:] == [ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA]


def test_validate_only_persists_nothing_and_sends_nothing(tmp_path):
    controller, channels, _ = make_controller(tmp_path)
    [result] = run(controller.create_topics([NewTopic("v", 4, 1, configs={"retention.ms": "10"})],
                                            validate_only=True))
    assert (result.error, result.num_partitions, result.topic_id, result.configs) == (
        ErrorCode.NONE, 4, None, {"retention.ms": "10"})
    assert controller.store.topics == {} and channels.sent == []
    assert not (tmp_path / "cluster-metadata.json").exists() or "\"v\"" not in \
        (tmp_path / "cluster-metadata.json").read_text()


def test_waiting_for_brokers_times_out_without_losing_the_topic(tmp_path):
    controller, channels, reactor = make_controller(tmp_path)
    channels.hold = True
    d = ensureDeferred(controller.create_topics([NewTopic("slow", 1, 1)], timeout_ms=500))
    assert not d.called
    reactor.advance(0.5)
    [result] = d.result
    assert result.error == ErrorCode.REQUEST_TIMED_OUT and "slow" in result.message
    assert "slow" in controller.store.topics
    # The lock was released before waiting: the next change is planned and queued meanwhile.
    d2 = ensureDeferred(controller.create_topics([NewTopic("next", 1, 1)], wait_for_brokers=False))
    assert [r.error for r in d2.result] == [ErrorCode.NONE]
    channels.release()

    channels.hold = True
    d3 = ensureDeferred(controller.create_topics([NewTopic("answered", 1, 1)], timeout_ms=500))
    channels.release()
    assert [r.error for r in d3.result] == [ErrorCode.NONE]
    assert not reactor.getDelayedCalls()          # the timer was cancelled


def test_plan_partitions(tmp_path):
    controller, channels, _ = make_controller(tmp_path, brokers=(0, 1, 2))
    run(controller.create_topics([NewTopic("t", 2, 2)]))

    def error(count, assignments=None):
        with pytest.raises(KafkaError) as info:
            controller.plan_partitions("t", count, assignments)
        return info.value.code, info.value.message

    assert error(1) == (ErrorCode.INVALID_PARTITIONS,
                        "Topic currently has 2 partitions, which is higher than the requested 1.")
    assert error(2) == (ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partitions.")
    assert error(4, [[0, 1]])[1] == "Increasing the number of partitions by 2 but 1 assignments provided."
    assert error(3, [[0, 7]]) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 7.")
    assert error(3, [[0]])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT            # replication factor 1 != 2
    with pytest.raises(KafkaError) as info:
        controller.plan_partitions("missing", 3, None)
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    plan = controller.plan_partitions("t", 5, None)
    assert sorted(plan) == [2, 3, 4] and all(len(r) == 2 and len(set(r)) == 2 for r in plan.values())
    assert controller.plan_partitions("t", 3, [[2, 0]]) == {2: [2, 0]}

    run(controller.create_partitions("t", 4, None, validate_only=True))
    assert len(controller.store.topics["t"].partitions) == 2
    channels.sent.clear()
    run(controller.create_partitions("t", 4, [[1, 2], [2, 0]]))
    assert [controller.store.topics["t"].partitions[i].replicas for i in (2, 3)] == [[1, 2], [2, 0]]
    assert channels.kinds()[:1] == [ApiKey.LEADER_AND_ISR] and ApiKey.UPDATE_METADATA in channels.kinds()


def test_delete_topics_results_carry_ids(tmp_path):
    controller, channels, _ = make_controller(tmp_path)
    run(controller.create_topics([NewTopic("gone", 2, 1)]))
    gone_id = controller.store.topics["gone"].topic_id
    assert controller.topic_name(gone_id) == "gone" and controller.topic_name(uuid.uuid4()) is None
    channels.sent.clear()
    results = run(controller.delete_topics(["gone", "gone", "never"]))
    assert {n: (r.error, r.topic_id) for n, r in results.items()} == {
        "gone": (ErrorCode.NONE, gone_id), "never": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)}
    assert controller.store.topics == {}
    assert sorted(channels.kinds()) == sorted([ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA])
    # the name is free again, under a new id
    run(controller.create_topics([NewTopic("gone", 1, 1)]))
    assert controller.store.topics["gone"].topic_id != gone_id


def test_delete_topics_disabled(tmp_path):
    controller, _, _ = make_controller(tmp_path, **{"delete.topic.enable": "false"})
    run(controller.create_topics([NewTopic("kept", 1, 1)]))
    results = run(controller.delete_topics(["kept"]))
    assert results["kept"].error == ErrorCode.TOPIC_DELETION_DISABLED
    assert "kept" in controller.store.topics


def test_configs_are_persisted(tmp_path):
    controller, _, reactor = make_controller(tmp_path)
    run(controller.create_topics([NewTopic("c", 1, 1, configs={"retention.ms": "5"})]))
    seen = []
    controller.topic_config_listeners.append(lambda topic, configs: seen.append((topic, configs)))
    run(controller.alter_topic_configs("c", {"segment.ms": "1000"}, validate_only=True))
    assert seen == [] and controller.topic_configs("c") == {"retention.ms": "5"}
    with pytest.raises(KafkaError) as info:
        run(controller.alter_topic_configs("c", {"segment.ms": "0"}))
    assert info.value.code == ErrorCode.INVALID_CONFIG and "segment.ms" in info.value.message
    run(controller.alter_topic_configs("c", {"segment.ms": "1000"}))
    assert seen == [("c", {"segment.ms": "1000"})]
    run(controller.alter_broker_configs("0", {"log.retention.bytes": "100"}))
    run(controller.alter_broker_configs("", {"log.roll.ms": "5000"}))
    run(controller.alter_broker_configs("", {}))

    reloaded = MetadataStore(str(tmp_path), reactor=reactor, threadpool=InlinePool())
    reloaded.load()
    assert reloaded.topics["c"].configs == {"segment.ms": "1000"}
    assert reloaded.broker_configs == {"0": {"log.retention.bytes": "100"}}

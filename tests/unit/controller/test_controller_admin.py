"""KafkaController's admin planning: topic and partition plans, waiting for brokers, broker configs.

The controller runs against a fake channel manager (each request is answered
by a Deferred the test controls) and a real JsonFileMetadataStore whose
"thread pool" runs work at once, on a ``Clock``: everything is synchronous
and deterministic (see ``helpers``).
"""

from __future__ import annotations

import pytest
from twisted.internet.defer import ensureDeferred

from twisted_kafka.controller.interface import NewTopic
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey

from .helpers import make_controller, make_store, run


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
    assert set(controller.topics) == {"taken", "defaults", "a.b"}
    # one configs-only UpdateMetadata, one LeaderAndIsr and one UpdateMetadata for the whole batch
    assert channels.kinds()[-3:] == [ApiKey.UPDATE_METADATA, ApiKey.LEADER_AND_ISR, ApiKey.UPDATE_METADATA]
    [_, leader_and_isr, _] = channels.sent[-3:]
    assert [t.topic_name for t in leader_and_isr[2].topic_states] == ["defaults", "a.b"]


def test_validate_only_persists_nothing_and_sends_nothing(tmp_path):
    controller, channels, _ = make_controller(tmp_path)
    [result] = run(controller.create_topics([NewTopic("v", 4, 1, configs={"retention.ms": "10"})],
                                            validate_only=True))
    assert (result.error, result.num_partitions, result.topic_id, result.configs) == (
        ErrorCode.NONE, 4, None, {"retention.ms": "10"})
    assert controller.topics == {} and channels.sent == []
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
    assert "slow" in controller.topics
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
    assert len(controller.topics["t"].partitions) == 2
    channels.sent.clear()
    run(controller.create_partitions("t", 4, [[1, 2], [2, 0]]))
    assert [controller.topics["t"].partitions[i].replicas for i in (2, 3)] == [(1, 2), (2, 0)]
    assert channels.kinds()[:1] == [ApiKey.LEADER_AND_ISR] and ApiKey.UPDATE_METADATA in channels.kinds()


def test_delete_topics_results_carry_ids(tmp_path):
    controller, channels, _ = make_controller(tmp_path)
    run(controller.create_topics([NewTopic("gone", 2, 1)]))
    gone_id = controller.topics["gone"].topic_id
    channels.sent.clear()
    results = run(controller.delete_topics(["gone", "gone", "never"]))
    assert {n: (r.error, r.topic_id) for n, r in results.items()} == {
        "gone": (ErrorCode.NONE, gone_id), "never": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None)}
    assert controller.topics == {}
    assert sorted(channels.kinds()) == sorted([ApiKey.UPDATE_METADATA, ApiKey.STOP_REPLICA])
    # the name is free again, under a new id
    run(controller.create_topics([NewTopic("gone", 1, 1)]))
    assert controller.topics["gone"].topic_id != gone_id


def test_delete_topics_disabled(tmp_path):
    controller, _, _ = make_controller(tmp_path, **{"delete.topic.enable": "false"})
    run(controller.create_topics([NewTopic("kept", 1, 1)]))
    results = run(controller.delete_topics(["kept"]))
    assert results["kept"].error == ErrorCode.TOPIC_DELETION_DISABLED
    assert "kept" in controller.topics


def test_configs_are_persisted(tmp_path):
    controller, channels, reactor = make_controller(tmp_path)
    run(controller.create_topics([NewTopic("c", 1, 1, configs={"retention.ms": "5"})]))
    channels.sent.clear()
    run(controller.alter_topic_configs("c", {"segment.ms": "1000"}, validate_only=True))
    assert channels.sent == [] and controller.topics["c"].configs == {"retention.ms": "5"}
    with pytest.raises(KafkaError) as info:
        run(controller.alter_topic_configs("c", {"segment.ms": "0"}))
    assert info.value.code == ErrorCode.INVALID_CONFIG and "segment.ms" in info.value.message
    with pytest.raises(KafkaError) as info:
        run(controller.alter_topic_configs("missing", {"segment.ms": "1000"}))
    assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert channels.sent == []
    run(controller.alter_topic_configs("c", {"segment.ms": "1000"}))
    assert controller.topics["c"].configs == {"segment.ms": "1000"}
    # the brokers are told the new overrides (and nothing else) in UpdateMetadata
    [(broker_id, api_key, request)] = channels.sent
    assert (broker_id, api_key) == (0, ApiKey.UPDATE_METADATA)
    [state] = request.topic_states
    assert state.topic_name == "c" and state.partition_states == []
    assert [(c.name, c.value) for c in state.topic_configs] == [("segment.ms", "1000")]
    run(controller.alter_broker_configs("0", {"log.retention.bytes": "100"}))
    run(controller.alter_broker_configs("", {"log.roll.ms": "5000"}))
    run(controller.alter_broker_configs("", {}))
    assert controller.broker_configs == {"0": {"log.retention.bytes": "100"}}

    reloaded = run(make_store(tmp_path, reactor).load())
    assert reloaded.topics["c"].configs == {"segment.ms": "1000"}
    assert reloaded.broker_configs == {"0": {"log.retention.bytes": "100"}}


def test_only_the_active_controller_changes_anything(tmp_path):
    controller, channels, _ = make_controller(tmp_path)
    controller.shutdown()
    assert channels.closed and not controller.active
    for call in (controller.create_topics([NewTopic("t", 1, 1)]), controller.delete_topics(["t"]),
                 controller.create_partitions("t", 2, None), controller.alter_topic_configs("t", {}),
                 controller.alter_broker_configs("", {}), controller.controlled_shutdown(0, 1)):
        with pytest.raises(KafkaError) as info:
            run(call)
        assert info.value.code == ErrorCode.NOT_CONTROLLER
    assert channels.sent == []


def test_controlled_shutdown_moves_leadership_and_reports_what_could_not_move(tmp_path):
    controller, _, _ = make_controller(tmp_path, brokers=(0, 1))
    run(controller.create_topics([NewTopic("single", assignments={0: [0]}),
                                  NewTopic("pair", assignments={0: [0, 1], 1: [1, 0]})]))
    # pair-0 moves to broker 1 (the other ISR member); "single" cannot move and is not reported
    assert run(controller.controlled_shutdown(0, 1)) == []
    pair = controller.topics["pair"].partitions
    assert (pair[0].leader, pair[0].isr, pair[0].leader_epoch) == (1, (1,), 1)
    assert (pair[1].leader, pair[1].isr) == (1, (1,))
    assert controller.topics["single"].partitions[0].leader == 0
    # broker 1 has no ISR member to hand over to (broker 0 is shutting down): both remain
    assert run(controller.controlled_shutdown(1, 1)) == [("pair", 0), ("pair", 1)]
    for broker_id, epoch, code in ((7, 1, ErrorCode.BROKER_NOT_AVAILABLE), (0, 99, ErrorCode.STALE_BROKER_EPOCH),
                                   (0, -1, ErrorCode.STALE_BROKER_EPOCH)):     # -1 ("any epoch") is no epoch
        with pytest.raises(KafkaError) as info:
            run(controller.controlled_shutdown(broker_id, epoch))
        assert info.value.code == code

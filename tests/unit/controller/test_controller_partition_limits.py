"""The controller's partition limits: at most 10,000 new partitions per request, and each broker's budget.

The per-request bound is Kafka's (KAFKA-14996: POLICY_VIOLATION beyond
10,000 records per user operation) and is checked before any partition is
planned; the budget is the broker's (its open-file limit, registered with
it) and is checked against the partitions it already hosts.
"""

from __future__ import annotations

import dataclasses
import time
import tracemalloc

from twisted_kafka.controller.interface import MAX_PARTITIONS_PER_REQUEST, NewTopic
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .helpers import make_controller, run


def _codes(results) -> list[int]:
    return [r.error for r in results]


def test_a_request_may_create_at_most_10000_partitions(tmp_path):
    controller, channels, _ = make_controller(tmp_path)
    assert MAX_PARTITIONS_PER_REQUEST == 10_000
    fits = run(controller.create_topics([NewTopic("a", 10_000)], validate_only=True))
    assert _codes(fits) == [ErrorCode.NONE] and fits[0].num_partitions == 10_000
    over = run(controller.create_topics([NewTopic("a", 10_001)], validate_only=True))
    assert _codes(over) == [ErrorCode.POLICY_VIOLATION]
    assert "excessively large" in over[0].message and "10001" in over[0].message
    # Counted over the whole request (Kafka fails the whole operation): every topic is refused.
    both = run(controller.create_topics([NewTopic("b", 6_000), NewTopic("c", 4_001), NewTopic("d", -1)]))
    assert _codes(both) == [ErrorCode.POLICY_VIOLATION] * 3
    explicit = run(controller.create_topics([NewTopic("e", assignments={i: [0] for i in range(10_001)})]))
    assert _codes(explicit) == [ErrorCode.POLICY_VIOLATION]
    assert not controller.topics and not channels.sent


def test_an_absurd_partition_count_is_refused_without_planning(tmp_path):
    controller, channels, _ = make_controller(tmp_path)
    run(controller.create_topics([NewTopic("t", 1)]))
    channels.sent.clear()
    tracemalloc.start()
    try:
        began = time.perf_counter()
        try:
            run(controller.create_partitions("t", 33_554_432, None))
        except KafkaError as exc:
            error = exc
        elapsed = time.perf_counter() - began
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert error.code == ErrorCode.POLICY_VIOLATION and "33554431" in error.message
    assert elapsed < 0.05 and peak < 1 << 20             # no per-partition structure was built
    assert len(controller.topics["t"].partitions) == 1 and not channels.sent
    with_budget = controller.plan_partitions("t", 10_001, None)
    assert len(with_budget) == 10_000
    refused = run_error(controller.create_partitions("t", 10_002, None, validate_only=True))
    assert refused.code == ErrorCode.POLICY_VIOLATION


def run_error(coroutine) -> KafkaError:
    try:
        run(coroutine)
    except KafkaError as exc:
        return exc
    raise AssertionError("no KafkaError")


def test_a_broker_takes_no_partitions_beyond_its_budget(tmp_path):
    controller, channels, _ = make_controller(tmp_path)
    controller.live_brokers[0] = dataclasses.replace(controller.live_brokers[0], partition_budget=5)
    assert _codes(run(controller.create_topics([NewTopic("a", 3)]))) == [ErrorCode.NONE]
    # Each topic of a request is checked against what the ones before it took.
    results = run(controller.create_topics([NewTopic("b", 3), NewTopic("c", 2)]))
    assert _codes(results) == [ErrorCode.POLICY_VIOLATION, ErrorCode.NONE]
    assert results[0].message == ("Broker 0 hosts 3 partition(s); 3 more would exceed its partition budget of 5, "
                                  "set by its open-file limit (raise the limit to raise the budget).")
    # Full: nothing more, whether as a topic, validated only, or by growing one.
    assert _codes(run(controller.create_topics([NewTopic("d", 1)]))) == [ErrorCode.POLICY_VIOLATION]
    assert _codes(run(controller.create_topics([NewTopic("d", 1)], validate_only=True))) == [
        ErrorCode.POLICY_VIOLATION]
    assert run_error(controller.create_partitions("a", 4, None)).code == ErrorCode.POLICY_VIOLATION
    assert sorted(controller.topics) == ["a", "c"]


def test_the_budget_is_per_broker(tmp_path):
    controller, channels, _ = make_controller(tmp_path, brokers=(0, 1))
    controller.live_brokers[0] = dataclasses.replace(controller.live_brokers[0], partition_budget=1)
    results = run(controller.create_topics([NewTopic("on-0", assignments={0: [0]}),
                                            NewTopic("more-on-0", assignments={0: [0]}),
                                            NewTopic("on-1", assignments={0: [1], 1: [1]})]))
    assert _codes(results) == [ErrorCode.NONE, ErrorCode.POLICY_VIOLATION, ErrorCode.NONE]
    assert run(controller.create_partitions("on-1", 3, [[1]])) is None        # broker 1 has no budget
    assert run_error(controller.create_partitions("on-1", 4, [[0]])).code == ErrorCode.POLICY_VIOLATION

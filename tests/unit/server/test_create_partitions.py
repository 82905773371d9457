"""CreatePartitions (37): grow topics through the controller, answered per topic."""

from __future__ import annotations

from twisted_kafka.controller.client import NoControllerClient
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

from .helpers import decode, result_of

CP = m.CreatePartitionsRequest
T = CP.CreatePartitionsTopic


def grow(topics, *, validate_only=False, timeout_ms=1000):
    """``topics``: [(name, count, assignments or None)]."""
    return CP(validate_only=validate_only, timeout_ms=timeout_ms, topics=[
        T(name=name, count=count, assignments=None if a is None else [T.CreatePartitionsAssignment(broker_ids=b)
                                                                      for b in a])
        for name, count, a in topics])


def results(body):
    return {r.name: (r.error_code, r.error_message) for r in body.results}


def test_topics_grow_and_the_new_partitions_are_hosted_before_the_answer(node):
    node.create_topic("t")
    node.create_topic("u")
    body = node.call(grow([("t", 3, None), ("u", 2, [[0]])]), 3)
    assert results(body) == {"t": (ErrorCode.NONE, None), "u": (ErrorCode.NONE, None)}
    assert sorted(node.metadata_cache.topics["t"].partitions) == [0, 1, 2]
    assert node.replica_manager.leader_partition("t", 2).is_leader and node.log("u", 1) is not None


def test_each_topic_fails_alone(node):
    node.create_topic("t", 2)
    node.create_topic("ok")
    body = node.call(grow([("t", 1, None), ("t", 3, None), ("missing", 2, None), ("ok", 2, None)]), 3)
    assert results(body) == {"t": (ErrorCode.INVALID_REQUEST, "Duplicate topic in request."),
                             "missing": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist."),
                             "ok": (ErrorCode.NONE, None)}
    got = results(node.call(grow([("t", 2, None)]), 3))
    assert got == {"t": (ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partitions.")}
    got = results(node.call(grow([("t", 4, [[0]])]), 3))
    assert got == {"t": (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                         "Increasing the number of partitions by 2 but 1 assignments provided.")}
    got = results(node.call(grow([("t", 3, [[5]])]), 3))
    assert got == {"t": (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s) in replica assignment: 5.")}
    assert len(node.metadata_cache.topics["t"].partitions) == 2


def test_validate_only_changes_nothing(node):
    node.create_topic("t")
    assert results(node.call(grow([("t", 5, None)], validate_only=True), 3)) == {"t": (ErrorCode.NONE, None)}
    assert len(node.controller.topics["t"].partitions) == 1 and node.log("t", 1) is None


def test_waiting_for_the_brokers_times_out_but_the_partitions_exist(node):
    node.create_topic("t")
    node.channels.hold = True
    request, pending = node.pending(grow([("t", 2, None)], timeout_ms=500), 3)
    assert not pending.called
    node.reactor.advance(0.5)
    [(error, message)] = results(decode(request, result_of(pending))).values()
    assert error == ErrorCode.REQUEST_TIMED_OUT and "500 ms" in message
    assert len(node.controller.topics["t"].partitions) == 2
    node.channels.release()
    assert len(node.metadata_cache.topics["t"].partitions) == 2


def test_only_the_active_controller_grows_topics(node):
    node.create_topic("t")
    node.admin_manager.controller = NoControllerClient()
    assert results(node.call(grow([("t", 2, None)]), 0)) == {
        "t": (ErrorCode.NOT_CONTROLLER, "This broker is not the active controller")}

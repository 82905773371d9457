"""The transaction coordinator through its handlers, on one in-process broker whose clock is a MemoryReactorClock.

FindCoordinator (key type 1) creates ``__transaction_state``; InitProducerId,
AddPartitionsToTxn, Produce, AddOffsetsToTxn, TxnOffsetCommit and EndTxn then
run a transaction; the markers land in the partitions' logs, the states in
``__transaction_state``; timeouts are proven by advancing the clock.
"""

from __future__ import annotations

import pytest

from twisted_kafka.coordinator.group.loader import batches_of
from twisted_kafka.coordinator.transaction.metadata import TransactionState
from twisted_kafka.coordinator.transaction.service import TRANSACTION_STATE_TOPIC, read_transaction_log
from twisted_kafka.log import FetchIsolation
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

from .helpers import Broker, records, result_of
from .test_produce import answers, produce

PROPS = {"transaction.state.log.num.partitions": "4", "offsets.topic.num.partitions": "3",
         "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
         "group.initial.rebalance.delay.ms": "0"}
TID = "tx-1"
APT = m.AddPartitionsToTxnRequest


@pytest.fixture
def node(tmp_path):
    node = Broker(tmp_path, PROPS)
    node.create_topic("t", 2)
    body = node.call(m.FindCoordinatorRequest(key_type=1, coordinator_keys=[TID]), 4)
    assert [(c.error_code, c.node_id) for c in body.coordinators] == [(ErrorCode.NONE, 0)]
    return node


def init(node, tid=TID, version=4, timeout_ms=60000, producer_id=-1, producer_epoch=-1):
    extra = {"producer_id": producer_id, "producer_epoch": producer_epoch} if version >= 3 else {}
    return node.call(m.InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=timeout_ms, **extra),
                     version)


def add_partitions(node, pid, epoch, partitions, tid=TID, version=3):
    body = node.call(APT(v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                         v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
                             APT.AddPartitionsToTxnTopic(name=topic, partitions=indexes)
                             for topic, indexes in partitions.items()]), version)
    return {(t.name, p.partition_index): p.partition_error_code
            for t in body.results_by_topic_v3_and_below for p in t.results_by_partition}


def end(node, pid, epoch, commit, tid=TID, version=3):
    return node.call(m.EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=commit),
                     version).error_code


def txn_records(pid, epoch, seq, *values):
    return records(*values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)


def batches(node, topic, partition):
    log = node.log(topic, partition)
    info = result_of(log.read(0, 1 << 20, isolation=FetchIsolation.LOG_END, min_one_message=True))
    return [header for header, _ in batches_of(info.records)] if info.records else []


def state(node, tid=TID):
    return node.transaction_coordinator.coordinator.transactions[tid]


def stored(node, tid=TID):
    coordinator = node.transaction_coordinator.coordinator
    log = node.log(TRANSACTION_STATE_TOPIC, coordinator.partition_for(tid))
    return result_of(read_transaction_log(log, 1 << 20))[tid]


def test_commit_writes_markers_and_the_states_are_in_the_log(node):
    first = init(node)
    assert (first.error_code, first.producer_epoch) == (ErrorCode.NONE, 0)
    pid = first.producer_id
    assert stored(node).transaction_status == TransactionState.EMPTY
    assert add_partitions(node, pid, 0, {"t": [0, 1]}) == {("t", 0): 0, ("t", 1): 0}
    assert stored(node).transaction_partitions == {"t": [0, 1]}
    body = node.call(produce({"t": {0: txn_records(pid, 0, 0, b"a", b"b"), 1: txn_records(pid, 0, 0, b"c")}},
                             acks=-1, transactional_id=TID), 9)
    assert answers(body) == {("t", 0): (ErrorCode.NONE, 0), ("t", 1): (ErrorCode.NONE, 0)}
    log = node.log("t", 0)
    assert log.last_stable_offset == 0               # open: read_committed consumers wait
    assert end(node, pid, 0, True) == ErrorCode.NONE
    for index in (0, 1):
        headers = batches(node, "t", index)
        assert headers[-1].is_control and headers[-1].producer_id == pid
    assert log.last_stable_offset == log.log_end_offset == 3
    assert state(node).state is TransactionState.COMPLETE_COMMIT and not state(node).partitions
    assert stored(node).transaction_status == TransactionState.COMPLETE_COMMIT
    # a retried EndTxn is answered as it was; the other outcome is an invalid state
    assert end(node, pid, 0, True) == ErrorCode.NONE
    assert end(node, pid, 0, False) == ErrorCode.INVALID_TXN_STATE


def test_abort_and_unknown_partitions(node):
    pid = init(node).producer_id
    assert add_partitions(node, pid, 0, {"t": [0, 9]}) == {("t", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
                                                           ("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert add_partitions(node, pid, 0, {"t": [0]}) == {("t", 0): 0}
    node.call(produce({"t": {0: txn_records(pid, 0, 0, b"x")}}, acks=-1, transactional_id=TID), 9)
    assert end(node, pid, 0, False) == ErrorCode.NONE
    log = node.log("t", 0)
    assert log.last_stable_offset == log.log_end_offset == 2
    assert [(a.producer_id, a.first_offset) for a in log.aborted_transactions(0, 2)] == [(pid, 0)]
    assert state(node).state is TransactionState.COMPLETE_ABORT


def test_a_new_producer_fences_the_old_one(node):
    old = init(node)
    assert add_partitions(node, old.producer_id, 0, {"t": [0]}) == {("t", 0): 0}
    # the ongoing transaction is aborted with the epoch bumped; the new producer retries
    assert init(node).error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    new = init(node)
    assert (new.error_code, new.producer_id, new.producer_epoch) == (ErrorCode.NONE, old.producer_id, 2)
    assert end(node, old.producer_id, 0, True) == ErrorCode.PRODUCER_FENCED
    assert end(node, old.producer_id, 0, True, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert add_partitions(node, old.producer_id, 0, {"t": [1]}) == {("t", 1): ErrorCode.PRODUCER_FENCED}
    body = node.call(produce({"t": {0: txn_records(old.producer_id, 0, 1, b"zombie")}}, acks=-1,
                             transactional_id=TID), 9)
    assert answers(body)[("t", 0)][0] == ErrorCode.INVALID_PRODUCER_EPOCH
    assert init(node, version=3).producer_epoch == 3
    assert end(node, 12345, 3, True) == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_kip_360_a_producer_bumps_its_own_epoch_and_a_stale_one_is_fenced(node):
    first = init(node)
    bumped = init(node, producer_id=first.producer_id, producer_epoch=0)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (ErrorCode.NONE, first.producer_id, 1)
    # the bump's response was lost: asking again with the epoch before it gets the same epoch
    again = init(node, producer_id=first.producer_id, producer_epoch=0)
    assert (again.error_code, again.producer_epoch) == (ErrorCode.NONE, 1)
    assert init(node, producer_id=first.producer_id + 1, producer_epoch=1).error_code == ErrorCode.PRODUCER_FENCED
    assert init(node, version=3, producer_id=first.producer_id + 1,
                producer_epoch=1).error_code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_transaction_past_its_timeout_is_aborted_on_the_clock(node):
    pid = init(node, timeout_ms=1000).producer_id
    add_partitions(node, pid, 0, {"t": [0]})
    node.call(produce({"t": {0: txn_records(pid, 0, 0, b"x")}}, acks=-1, transactional_id=TID), 9)
    log = node.log("t", 0)
    node.reactor.advance(0.5)
    assert state(node).state is TransactionState.ONGOING and log.last_stable_offset == 0
    node.reactor.advance(0.5)          # 1.0 s: the timeout is reached at the next check
    assert state(node).state is TransactionState.COMPLETE_ABORT
    assert state(node).producer_epoch == 1                  # the producer is fenced
    assert log.last_stable_offset == log.log_end_offset == 2
    assert end(node, pid, 0, True) == ErrorCode.PRODUCER_FENCED


def test_bad_requests(node):
    assert init(node, timeout_ms=900001).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert init(node, tid="").error_code == ErrorCode.INVALID_REQUEST
    coordinator = node.transaction_coordinator.coordinator
    other = next(tid for tid in (f"x{i}" for i in range(100))
                 if coordinator.partition_for(tid) != coordinator.partition_for(TID))
    coordinator.on_resignation(coordinator.partition_for(other), None)
    assert init(node, tid=other).error_code == ErrorCode.NOT_COORDINATOR
    assert end(node, 1, 0, True, tid=other) == ErrorCode.NOT_COORDINATOR


def test_offsets_committed_in_a_transaction_are_visible_only_after_the_commit(node):
    group = "g"
    assert node.call(m.FindCoordinatorRequest(key=group, key_type=0), 3).error_code == ErrorCode.NONE
    pid = init(node).producer_id
    assert node.call(m.AddOffsetsToTxnRequest(transactional_id=TID, producer_id=pid, producer_epoch=0,
                                              group_id=group), 3).error_code == ErrorCode.NONE
    T = m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    body = node.call(m.TxnOffsetCommitRequest(
        transactional_id=TID, group_id=group, producer_id=pid, producer_epoch=0, generation_id=-1, member_id="",
        group_instance_id=None, topics=[T(name="t", partitions=[T.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=42, committed_leader_epoch=-1, committed_metadata="m")])]), 3)
    assert [p.error_code for t in body.topics for p in t.partitions] == [ErrorCode.NONE]

    def fetch(require_stable):
        F = m.OffsetFetchRequest
        body = node.call(F(group_id=group, topics=[F.OffsetFetchRequestTopic(name="t", partition_indexes=[0])],
                           require_stable=require_stable), 7)
        (p,) = body.topics[0].partitions
        return p.error_code, p.committed_offset

    assert fetch(True) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
    assert fetch(False) == (ErrorCode.NONE, -1)
    assert end(node, pid, 0, True) == ErrorCode.NONE
    assert fetch(True) == (ErrorCode.NONE, 42)


def test_a_restarted_coordinator_completes_a_prepared_transaction(tmp_path, node):
    pid = init(node).producer_id
    add_partitions(node, pid, 0, {"t": [0]})
    node.call(produce({"t": {0: txn_records(pid, 0, 0, b"x")}}, acks=-1, transactional_id=TID), 9)
    coordinator = node.transaction_coordinator.coordinator
    sent = []
    coordinator.markers.send = lambda *args: sent.append(args) or __import__(
        "twisted.internet.defer", fromlist=["Deferred"]).Deferred()      # the markers never arrive: a crash
    assert end(node, pid, 0, True) == ErrorCode.NONE
    assert stored(node).transaction_status == TransactionState.PREPARE_COMMIT
    assert node.log("t", 0).last_stable_offset == 0
    # the partition moves away and comes back (a new leader epoch): the load sends the markers again
    partition = coordinator.partition_for(TID)
    coordinator.on_resignation(partition, None)
    coordinator.markers.send = type(coordinator.markers).send.__get__(coordinator.markers)
    replica = node.replica_manager.partition(TRANSACTION_STATE_TOPIC, partition)
    replica.leader_epoch += 1
    node.transaction_coordinator.on_leader(replica)
    assert state(node).state is TransactionState.COMPLETE_COMMIT
    assert node.log("t", 0).last_stable_offset == node.log("t", 0).log_end_offset == 2


def txn_offset_commit(node, pid, epoch, offset, *, generation=-1, member="", version=3, group="g"):
    T = m.TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    body = node.call(m.TxnOffsetCommitRequest(
        transactional_id=TID, group_id=group, producer_id=pid, producer_epoch=epoch, generation_id=generation,
        member_id=member, group_instance_id=None, topics=[T(name="t", partitions=[T.TxnOffsetCommitRequestPartition(
            partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata="")])]),
        version)
    return [p.error_code for t in body.topics for p in t.partitions][0]


def fetch_offset(node, require_stable=True, group="g"):
    F = m.OffsetFetchRequest
    body = node.call(F(group_id=group, topics=[F.OffsetFetchRequestTopic(name="t", partition_indexes=[0])],
                       require_stable=require_stable), 7)
    (p,) = body.topics[0].partitions
    return p.error_code, p.committed_offset


def test_kip_447_the_member_and_generation_are_checked(node):
    assert node.call(m.FindCoordinatorRequest(key="g", key_type=0), 3).error_code == ErrorCode.NONE
    pid = init(node).producer_id
    node.call(m.AddOffsetsToTxnRequest(transactional_id=TID, producer_id=pid, producer_epoch=0, group_id="g"), 3)
    assert txn_offset_commit(node, pid, 0, 5, generation=3) == ErrorCode.ILLEGAL_GENERATION
    assert txn_offset_commit(node, pid, 0, 5, member="ghost") == ErrorCode.UNKNOWN_MEMBER_ID
    assert txn_offset_commit(node, pid, 0, 5, generation=3, version=2) == ErrorCode.NONE   # v2: not checked


def test_pending_transactional_offsets_survive_a_reload_and_a_marker_then_decides_them(node):
    assert node.call(m.FindCoordinatorRequest(key="g", key_type=0), 3).error_code == ErrorCode.NONE
    pid = init(node).producer_id
    node.call(m.AddOffsetsToTxnRequest(transactional_id=TID, producer_id=pid, producer_epoch=0, group_id="g"), 3)
    assert txn_offset_commit(node, pid, 0, 42) == ErrorCode.NONE
    groups = node.group_coordinator.coordinator
    partition = groups.partition_for("g")
    groups.on_resignation(partition, None)
    assert groups.transactional_offsets.pending == {}
    replica = node.replica_manager.partition("__consumer_offsets", partition)
    replica.leader_epoch += 1
    node.group_coordinator.on_leader(replica)            # replays the transactional batch: pending again
    assert fetch_offset(node) == (ErrorCode.UNSTABLE_OFFSET_COMMIT, -1)
    assert end(node, pid, 0, True) == ErrorCode.NONE
    assert fetch_offset(node) == (ErrorCode.NONE, 42)
    # and once more from the log: the COMMIT marker follows the batch
    groups.on_resignation(partition, None)
    replica.leader_epoch += 1
    node.group_coordinator.on_leader(replica)
    assert fetch_offset(node) == (ErrorCode.NONE, 42)


def test_describe_and_list_transactions(node):
    pid = init(node).producer_id
    add_partitions(node, pid, 0, {"t": [1, 0]})
    init(node, tid="tx-2")
    body = node.call(m.DescribeTransactionsRequest(transactional_ids=[TID, "unknown"]), 0)
    described = {s.transactional_id: s for s in body.transaction_states}
    one = described[TID]
    assert (one.error_code, one.transaction_state, one.producer_id, one.producer_epoch,
            [(t.topic, list(t.partitions)) for t in one.topics]) == (ErrorCode.NONE, "Ongoing", pid, 0, [("t", [0, 1])])
    assert described["unknown"].error_code in (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, ErrorCode.NOT_COORDINATOR)
    L = m.ListTransactionsRequest
    listed = node.call(L(state_filters=[], producer_id_filters=[]), 0)
    assert sorted((s.transactional_id, s.transaction_state) for s in listed.transaction_states) == [
        (TID, "Ongoing"), ("tx-2", "Empty")]
    ongoing = node.call(L(state_filters=["Ongoing", "Bogus"], producer_id_filters=[]), 0)
    assert [s.transactional_id for s in ongoing.transaction_states] == [TID]
    assert list(ongoing.unknown_state_filters) == ["Bogus"]
    node.reactor.advance(0.3)
    assert [s.transactional_id for s in node.call(L(state_filters=[], producer_id_filters=[], duration_filter=200),
                                                   1).transaction_states] == [TID]
    assert node.call(L(state_filters=[], producer_id_filters=[], duration_filter=10_000), 1).transaction_states == []


def test_describe_producers_shows_an_open_transaction(node):
    pid = init(node).producer_id
    add_partitions(node, pid, 0, {"t": [0]})
    node.call(produce({"t": {0: txn_records(pid, 0, 0, b"a", b"b")}}, acks=-1, transactional_id=TID), 9)
    D = m.DescribeProducersRequest

    def describe():
        body = node.call(D(topics=[D.TopicRequest(name="t", partition_indexes=[0, 7]),
                                   D.TopicRequest(name="nope", partition_indexes=[0])]), 0)
        return {(t.name, p.partition_index): (p.error_code, [
            (s.producer_id, s.producer_epoch, s.last_sequence, s.coordinator_epoch, s.current_txn_start_offset)
            for s in p.active_producers]) for t in body.topics for p in t.partitions}

    assert describe() == {("t", 0): (ErrorCode.NONE, [(pid, 0, 1, -1, 0)]),
                          ("t", 7): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, []),
                          ("nope", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])}
    assert end(node, pid, 0, False) == ErrorCode.NONE
    (error, [(_, epoch, _, coordinator_epoch, txn_start)]) = describe()[("t", 0)]
    assert (error, epoch, coordinator_epoch, txn_start) == (ErrorCode.NONE, 0, 0, -1)

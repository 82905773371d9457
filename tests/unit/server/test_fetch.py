"""Fetch (1): reads up to the high watermark within KIP-74's limits, long polls in the purgatory, error codes."""

from __future__ import annotations

import pytest
from twisted.internet.defer import fail

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.records.batch import iter_batch_headers
from twisted_kafka.protocol.records.record import iter_records

from .helpers import Broker, decode, records, result_of

F = m.FetchRequest
FT = F.FetchTopic
FP = FT.FetchPartition


def fetch(wanted, *, version=12, max_wait_ms=0, min_bytes=0, max_bytes=2**31 - 1, partition_max_bytes=1 << 20,
          **fields):
    """``wanted``: {topic: {partition: fetch_offset or (fetch_offset, current_leader_epoch)}}."""
    def part(index, spec):
        offset, epoch = spec if isinstance(spec, tuple) else (spec, -1)
        return FP(partition=index, fetch_offset=offset, current_leader_epoch=epoch,
                  partition_max_bytes=partition_max_bytes)
    topics = [FT(topic=name, partitions=[part(i, s) for i, s in parts.items()]) for name, parts in wanted.items()]
    return F(replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, topics=topics,
             **fields)


def purgatory_timers(node) -> list:
    purgatory = node.replica_manager.fetch_purgatory
    return [c for c in node.reactor.getDelayedCalls() if getattr(c.func, "__self__", None) is purgatory]


def partitions(body):
    return {(t.topic, p.partition_index): p for t in body.responses for p in t.partitions}


def values(p) -> list[tuple[int, bytes]]:
    data = bytes(p.records or b"")
    return [(r.offset, r.value) for pos, header in iter_batch_headers(data) for r in iter_records(data, pos, header)]


def test_records_up_to_the_high_watermark(node):
    node.create_topic("t", 2)
    node.produce("t", 0, b"a", b"b")
    node.produce("t", 0, b"c")
    body = node.call(fetch({"t": {0: 1, 1: 0}}), 12)
    assert (body.error_code, body.session_id) == (ErrorCode.NONE, 0)
    got = partitions(body)
    p0, p1 = got[("t", 0)], got[("t", 1)]
    assert values(p0) == [(0, b"a"), (1, b"b"), (2, b"c")]        # whole batches, from the one holding offset 1
    assert (p0.error_code, p0.high_watermark, p0.last_stable_offset, p0.log_start_offset) == (0, 3, 3, 0)
    assert p0.aborted_transactions is None
    assert (p1.error_code, p1.high_watermark, values(p1), p1.records) == (0, 0, [], b"")   # empty, never null

    committed = partitions(node.call(fetch({"t": {0: 0}}, isolation_level=1), 12))[("t", 0)]
    assert committed.aborted_transactions == [] and committed.last_stable_offset == 3


def test_read_committed_answers_the_aborted_transactions_up_to_the_last_stable_offset(node):
    from twisted_kafka.log import AppendOrigin
    from twisted_kafka.protocol.records import ControlRecordType, build_end_txn_marker

    node.create_topic("t", 1)
    log = node.log("t")

    def append(data, origin=AppendOrigin.CLIENT):
        return result_of(log.append_as_leader(data, 0, origin=origin))

    append(records(b"a", producer_id=7, producer_epoch=0, base_sequence=0, transactional=True))   # 0
    append(build_end_txn_marker(7, 0, 0, ControlRecordType.ABORT, 0), AppendOrigin.COORDINATOR)   # 1
    append(records(b"b", producer_id=8, producer_epoch=0, base_sequence=0, transactional=True))   # 2: open
    committed = partitions(node.call(fetch({"t": {0: 0}}, isolation_level=1), 12))[("t", 0)]
    assert (committed.high_watermark, committed.last_stable_offset) == (3, 2)
    assert committed.aborted_transactions == [(7, 0)]
    assert [o for o, _ in values(committed)] == [0, 1]          # the aborted record and its marker
    uncommitted = partitions(node.call(fetch({"t": {0: 0}}), 12))[("t", 0)]
    assert uncommitted.aborted_transactions is None and [o for o, _ in values(uncommitted)] == [0, 1, 2]


def test_each_partition_fails_alone(node):
    node.create_topic("t", 1)
    node.produce("t", 0, b"a")
    got = partitions(node.call(fetch({"t": {0: 0, 5: 0}, "missing": {0: 0}}), 12))
    assert {k: p.error_code for k, p in got.items()} == {
        ("t", 0): ErrorCode.NONE, ("t", 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("missing", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert got[("t", 5)].records == b"" and values(got[("t", 0)]) == [(0, b"a")]
    assert partitions(node.call(fetch({"t": {0: 9}}), 12))[("t", 0)].error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_leader_epochs_are_checked_from_v9(node):
    node.create_topic("t")
    node.replica_manager.partition("t", 0).leader_epoch = 3
    codes = {epoch: partitions(node.call(fetch({"t": {0: (0, epoch)}}), 12))[("t", 0)].error_code
             for epoch in (-1, 2, 3, 4)}
    assert codes == {-1: ErrorCode.NONE, 2: ErrorCode.FENCED_LEADER_EPOCH, 3: ErrorCode.NONE,
                     4: ErrorCode.UNKNOWN_LEADER_EPOCH}
    assert partitions(node.call(fetch({"t": {0: (0, 2)}}), 8))[("t", 0)].error_code == ErrorCode.NONE


def test_limits_follow_kip_74(node):
    node.create_topic("t", 3)
    for partition in range(3):
        node.produce("t", partition, b"x" * 500)
        node.produce("t", partition, b"y" * 500)
    # the first partition returns at least its first batch, however small the limits; the others nothing beyond
    got = partitions(node.call(fetch({"t": {0: 0, 1: 0}}, max_bytes=10, partition_max_bytes=10), 12))
    assert [o for o, _ in values(got[("t", 0)])] == [0] and values(got[("t", 1)]) == []
    # per partition: one batch fits, the second does not; the response limit leaves room for partition 1 only
    one_batch = len(bytes(got[("t", 0)].records))
    got = partitions(node.call(fetch({"t": {0: 0, 1: 0, 2: 0}}, max_bytes=2 * one_batch + 10,
                                     partition_max_bytes=one_batch + 10), 12))
    assert [len(values(got[("t", i)])) for i in range(3)] == [1, 1, 0]


def test_the_response_is_capped_by_fetch_max_bytes(tmp_path):
    one_batch = len(records(b"x" * 600))
    assert one_batch < 1024 < 2 * one_batch
    node = Broker(tmp_path, {"fetch.max.bytes": "1024"})
    node.create_topic("t", 2)
    for partition in range(2):
        node.produce("t", partition, b"x" * 600)
        node.produce("t", partition, b"y" * 600)
    got = partitions(node.call(fetch({"t": {0: 0, 1: 0}}), 12))           # max_bytes 2 GiB asked
    assert [len(values(got[("t", i)])) for i in range(2)] == [1, 0]


def test_a_long_poll_waits_for_data_and_is_woken_by_the_append(node):
    node.create_topic("t", 2)
    request, pending = node.pending(fetch({"t": {0: 0, 1: 0}}, max_wait_ms=500, min_bytes=1), 12)
    assert not pending.called and node.replica_manager.fetch_purgatory.size == 1 and len(purgatory_timers(node)) == 1
    assert request.local_complete_ns > 0                         # the handler slot is given back while it waits
    node.produce("t", 1, b"wake")                                # in the same turn as the append
    got = partitions(decode(request, result_of(pending)))
    assert values(got[("t", 1)]) == [(0, b"wake")] and values(got[("t", 0)]) == []
    assert node.replica_manager.fetch_purgatory.size == 0 and purgatory_timers(node) == []


def test_a_long_poll_ends_at_max_wait(node):
    node.create_topic("t")
    request, pending = node.pending(fetch({"t": {0: 0}}, max_wait_ms=500, min_bytes=1), 12)
    node.reactor.advance(0.499)
    assert not pending.called
    node.reactor.advance(0.001)
    assert values(partitions(decode(request, result_of(pending)))[("t", 0)]) == []


def test_enough_data_or_an_error_answers_at_once(node):
    node.create_topic("t")
    node.produce("t", 0, b"a")
    _, pending = node.pending(fetch({"t": {0: 0}}, max_wait_ms=500, min_bytes=1), 12)
    assert pending.called
    _, pending = node.pending(fetch({"t": {0: 0}, "missing": {0: 0}}, max_wait_ms=500, min_bytes=10**6), 12)
    assert pending.called and purgatory_timers(node) == []


@pytest.mark.parametrize("replica_id", [-1, 812666])
def test_a_fetch_of_no_partition_is_answered_at_once_whatever_it_would_wait(node, replica_id):
    """As Kafka's (no append could ever wake it): the fuzzer's Fetch of no topic, 8.8 days of max_wait_ms
    and a replica id, waited its whole max_wait_ms, out of the shutdown's reach."""
    request, pending = node.pending(F(replica_id=replica_id, max_wait_ms=761_754_223, min_bytes=1970285921,
                                      max_bytes=1 << 20, topics=[]), 5)
    assert pending.called and purgatory_timers(node) == [] and node.replica_manager.fetch_purgatory.size == 0
    assert decode(request, result_of(pending)).responses == []


def test_a_partition_that_goes_away_ends_the_wait_with_its_error(node):
    node.create_topic("t")
    request, pending = node.pending(fetch({"t": {0: 0}}, max_wait_ms=500, min_bytes=1), 12)
    result_of(node.admin_manager.delete_topics(["t"], timeout_ms=1000))
    got = partitions(decode(request, result_of(pending)))
    assert got[("t", 0)].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_failed_read_is_a_storage_error_for_that_partition(node, monkeypatch):
    node.create_topic("t", 2)
    node.produce("t", 0, b"a")
    node.produce("t", 1, b"b")          # records to read: a partition at its end is answered without a read
    real_read = node.replica_manager.read

    def read(partition, *args, **kwargs):
        if partition.index == 1:
            return fail(OSError(5, "Input/output error"))
        return real_read(partition, *args, **kwargs)

    monkeypatch.setattr(node.replica_manager, "read", read)
    got = partitions(node.call(fetch({"t": {0: 0, 1: 0}}), 12))
    assert (got[("t", 0)].error_code, got[("t", 1)].error_code) == (ErrorCode.NONE, ErrorCode.KAFKA_STORAGE_ERROR)


@pytest.mark.parametrize("version", [6, 12])
def test_a_replica_fetch_from_a_broker_that_is_not_a_replica_is_refused(node, version):
    node.create_topic("t")
    request = fetch({"t": {0: 0}})
    request.replica_id = 1
    body = node.call(request, version)
    assert partitions(body)[("t", 0)].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert body.error_code == ErrorCode.NONE


def test_an_unknown_fetch_session_is_refused(node):
    node.create_topic("t")
    body = node.call(fetch({"t": {0: 0}}, session_id=5, session_epoch=1), 12)
    assert (body.error_code, body.session_id, body.responses) == (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, [])


def test_topic_ids_from_v13(node):
    topic_id = node.create_topic("t")
    node.produce("t", 0, b"a")
    request = F(replica_id=-1, max_wait_ms=0, min_bytes=0, topics=[
        FT(topic_id=topic_id, partitions=[FP(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    [topic] = node.call(request, 13).responses
    assert topic.topic_id == topic_id and values(topic.partitions[0]) == [(0, b"a")]


def test_a_plaintext_fetch_answers_file_regions_and_a_long_poll_pins_nothing_while_it_waits(node):
    from twisted_kafka.protocol.records.file_region import FileRegion

    node.create_topic("t")
    node.produce("t", 0, b"some")
    file = node.replica_manager.partition("t", 0).log.local_log._segments[0].file
    pins = file.pins
    request, pending = node.pending(fetch({"t": {0: 0}}, max_wait_ms=500, min_bytes=1_000_000), 12)
    assert not pending.called and file.pins == pins      # what it read before waiting is not held
    node.reactor.advance(0.5)
    response = result_of(pending)
    regions = [c for c in response.chunks if isinstance(c, FileRegion)]
    assert regions and file.pins == pins + len(regions)  # the answer's records: left in the file, pinned
    assert values(partitions(decode(request, response))[("t", 0)]) == [(0, b"some")]
    for region in regions:
        region.close()
    assert file.pins == pins

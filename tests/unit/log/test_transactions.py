"""Transactions in the log (KIP-98): producer state, markers, the last stable offset, the
transaction index, read_committed reads, snapshots, recovery, truncation and replication.

Kafka's rules (``ProducerAppendInfo``, ``ProducerStateManager``, ``TransactionIndex``,
``UnifiedLog``) as the file log applies them, on real files.
"""

from __future__ import annotations

import os
import struct
import tempfile

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.inline import InlineReactor, ManualThreadPool
from twisted_kafka.log import AbortedTransaction, AppendOrigin, FetchIsolation
from twisted_kafka.log.layout import segment_file_name
from twisted_kafka.log.log import Log
from twisted_kafka.log.txn_index import AbortedTxn
from twisted_kafka.log.unified_log import UnifiedLog
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.records import ControlRecordType, build_batch, build_end_txn_marker

from .helpers import NOW, batch, config, new_log, records_of, reopen

PID = 4711
COMMIT, ABORT = ControlRecordType.COMMIT, ControlRecordType.ABORT


def txn(seq: int, n: int = 1, *, pid: int = PID, epoch: int = 0, **kwargs) -> bytes:
    return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True, **kwargs)


def idem(seq: int, n: int = 1, *, pid: int = PID, epoch: int = 0, **kwargs) -> bytes:
    return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, **kwargs)


def end(log, control: int, *, pid: int = PID, epoch: int = 0, coordinator_epoch: int = 0, ts: int = NOW):
    """The coordinator's marker, as WriteTxnMarkers appends it."""
    return log.append_as_leader(build_end_txn_marker(pid, epoch, coordinator_epoch, control, ts), 0, NOW,
                                origin=AppendOrigin.COORDINATOR)


def append(log, data):
    return log.append_as_leader(data, 0, NOW)


def refused(log, data, *, origin=AppendOrigin.CLIENT) -> KafkaError:
    end_offset = log.log_end_offset
    state = dict(log.producer_state.producers), list(log.producer_state.ongoing)
    with pytest.raises(KafkaError) as e:
        log.append_as_leader(data, 0, NOW, origin=origin)
    assert log.log_end_offset == end_offset, "a refused batch must not be written"
    assert (dict(log.producer_state.producers), list(log.producer_state.ongoing)) == state
    return e.value


def aborted(log) -> list[AbortedTxn]:
    return [t for s in log.segments for t in s.txn_index.entries()]


def replicated(tmp_path, **changes) -> Log:
    """A log whose high watermark only moves when told (a leader with followers)."""
    log = new_log(tmp_path, **changes)
    log.hw_follows_leo = False
    return log


# -- producer state: a transaction from its first batch to its marker ----------------------


def test_a_transactional_batch_opens_a_transaction_and_a_marker_ends_it(tmp_path):
    log = new_log(tmp_path)
    append(log, batch(2))
    assert append(log, txn(0, 3)).first_offset == 2
    entry = log.producer_state.entry(PID)
    assert entry.current_txn_first_offset == 2 and log.producer_state.ongoing == [(2, PID)]
    assert log.last_stable_offset == 2 and log.high_watermark == 5
    append(log, txn(3))                                   # continues it: same first offset
    assert log.producer_state.entry(PID).current_txn_first_offset == 2
    info = end(log, COMMIT, coordinator_epoch=7)
    assert (info.first_offset, info.num_records) == (6, 1)
    entry = log.producer_state.entry(PID)
    assert (entry.current_txn_first_offset, entry.coordinator_epoch, entry.last_seq) == (-1, 7, 3)
    assert log.producer_state.ongoing == [] and log.last_stable_offset == log.high_watermark == 7
    assert aborted(log) == []                              # a commit leaves no index entry
    assert append(log, txn(4)).first_offset == 7           # the next transaction
    assert log.last_stable_offset == 7


def test_an_abort_is_indexed_with_the_last_stable_offset_of_its_time(tmp_path):
    log = new_log(tmp_path)
    append(log, txn(0, pid=1))                             # offset 0
    append(log, txn(0, pid=2))                             # offset 1
    append(log, txn(1, pid=1))                             # offset 2
    end(log, ABORT, pid=1)                                 # offset 3: producer 2 is still open at 1
    assert log.last_stable_offset == 1
    end(log, ABORT, pid=2)                                 # offset 4: nothing else open
    assert log.last_stable_offset == 5
    assert aborted(log) == [AbortedTxn(1, 0, 3, 1), AbortedTxn(2, 1, 4, 5)]
    log.flush()
    with open(os.path.join(log.dir, segment_file_name(0, ".txnindex")), "rb") as f:
        assert f.read() == struct.pack(">hqqqq", 0, 1, 0, 3, 1) + struct.pack(">hqqqq", 0, 2, 1, 4, 5)
    assert log.collect_aborted_txns(0, 5) == aborted(log)
    assert log.collect_aborted_txns(4, 5) == [AbortedTxn(2, 1, 4, 5)]   # marker at or after the start
    assert log.collect_aborted_txns(0, 1) == [AbortedTxn(1, 0, 3, 1)]   # first offset before the bound


def test_a_marker_without_an_open_transaction_changes_no_offset(tmp_path):
    log = new_log(tmp_path)
    append(log, idem(0))
    end(log, ABORT, coordinator_epoch=2)
    entry = log.producer_state.entry(PID)
    assert (entry.coordinator_epoch, entry.current_txn_first_offset, entry.last_seq) == (2, -1, 0)
    assert log.last_stable_offset == 2 and aborted(log) == []


# -- validation (Kafka's ProducerAppendInfo) --------------------------------------------------


def test_clients_may_not_write_control_batches(tmp_path):
    log = new_log(tmp_path)
    assert refused(log, build_end_txn_marker(PID, 0, 0, COMMIT, NOW)).code == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("data", [
    build_batch([(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 0), (), NOW)], control=True, transactional=True),
    build_batch([(struct.pack(">hh", 0, 3), struct.pack(">hi", 0, 0), (), NOW)], control=True, transactional=True,
                producer_id=PID, producer_epoch=0),
    build_batch([(struct.pack(">hh", 0, 1), b"", (), NOW)], control=True, transactional=True,
                producer_id=PID, producer_epoch=0),
], ids=["no producer id", "not a marker", "short value"])
def test_the_coordinator_writes_transaction_markers_only(tmp_path, data):
    log = new_log(tmp_path)
    append(log, txn(0))
    assert refused(log, data, origin=AppendOrigin.COORDINATOR).code == ErrorCode.INVALID_RECORD


def test_a_plain_batch_inside_a_transaction_is_invalid_txn_state(tmp_path):
    log = new_log(tmp_path)
    append(log, txn(0))
    error = refused(log, idem(1))
    assert error.code == ErrorCode.INVALID_TXN_STATE
    assert "Expected transactional write from producer 4711" in error.message
    end(log, COMMIT)
    assert append(log, idem(1)).first_offset == 2          # allowed again once the transaction ended


def test_a_marker_of_an_older_epoch_is_invalid_producer_epoch(tmp_path):
    log = new_log(tmp_path)
    append(log, txn(0, epoch=3))
    error = refused(log, build_end_txn_marker(PID, 2, 0, COMMIT, NOW), origin=AppendOrigin.COORDINATOR)
    assert error.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert refused(log, txn(1, epoch=2)).code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_a_marker_of_an_older_coordinator_is_fenced(tmp_path):
    log = new_log(tmp_path)
    append(log, txn(0))
    end(log, COMMIT, coordinator_epoch=5)
    append(log, txn(1))
    error = refused(log, build_end_txn_marker(PID, 0, 4, ABORT, NOW), origin=AppendOrigin.COORDINATOR)
    assert error.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert "4 (zombie), 5 (current)" in error.message
    end(log, ABORT, coordinator_epoch=5)                     # the same coordinator epoch is fine
    assert log.producer_state.ongoing == []


def test_a_bumped_epoch_resets_the_sequence(tmp_path):
    """The coordinator aborts with the producer's epoch + 1 (a timed-out transaction): the
    producer's old batches are forgotten, its next transaction starts at sequence 0."""
    log = new_log(tmp_path)
    append(log, txn(0, 3))
    end(log, ABORT, epoch=1)
    entry = log.producer_state.entry(PID)
    assert (entry.producer_epoch, entry.batches, entry.current_txn_first_offset) == (1, (), -1)
    assert refused(log, txn(3, epoch=0)).code == ErrorCode.INVALID_PRODUCER_EPOCH       # the zombie
    assert refused(log, txn(3, epoch=1)).code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(log, txn(0, epoch=1)).first_offset == 4
    # A newer epoch from the producer itself (InitProducerId) also starts at 0.
    end(log, COMMIT, epoch=1)
    assert refused(log, txn(1, epoch=2)).code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(log, txn(0, epoch=2)).first_offset == 6


def test_a_retried_transactional_batch_is_a_duplicate(tmp_path):
    log = new_log(tmp_path)
    first = append(log, txn(0, 2))
    append(log, txn(2))
    again = append(log, txn(0, 2))
    assert (again.first_offset, again.last_offset, again.num_records) == (first.first_offset, 1, 0)
    assert log.log_end_offset == 3 and log.producer_state.entry(PID).current_txn_first_offset == 0


def test_the_coordinators_transactional_offset_commits_join_the_transaction(tmp_path):
    """TxnOffsetCommit: the group coordinator writes transactional batches without sequences."""
    log = new_log(tmp_path)
    log.append_as_leader(txn(-1), 0, NOW, origin=AppendOrigin.COORDINATOR)
    assert log.producer_state.entry(PID).current_txn_first_offset == 0
    end(log, COMMIT)
    assert log.last_stable_offset == 2


def test_a_failed_write_undoes_the_transaction_it_began_and_the_one_it_ended(tmp_path):
    log = new_log(tmp_path)
    append(log, txn(0))
    pending = log.prepare_append_as_leader(build_end_txn_marker(PID, 0, 0, ABORT, NOW), 0, NOW,
                                           origin=AppendOrigin.COORDINATOR)
    other = log.prepare_append_as_leader(txn(0, pid=9), 0, NOW)
    assert log.producer_state.ongoing == [(2, 9)]
    log.complete_append(pending, OSError(28, "No space left on device"))
    other.write()
    log.complete_append(other)
    assert log.producer_state.ongoing == [(0, PID)] and log.producer_state.unreplicated == []
    assert aborted(log) == [] and log.last_stable_offset == 0
    end(log, ABORT)                                           # the coordinator's retry
    assert aborted(log) == [AbortedTxn(PID, 0, 1, 2)]


# -- the last stable offset and the high watermark ---------------------------------------------


def test_the_last_stable_offset_waits_for_the_high_watermark_to_pass_the_marker(tmp_path):
    log = replicated(tmp_path)
    moves = []
    log.set_offsets_listener(lambda hw, lso: moves.append((hw, lso)))
    append(log, batch(2))                                  # 0-1
    append(log, txn(0, 2))                                 # 2-3
    append(log, batch(1))                                  # 4
    log.high_watermark = 5
    assert (log.high_watermark, log.last_stable_offset) == (5, 2)
    end(log, COMMIT)                                       # marker at 5
    assert log.last_stable_offset == 2                     # decided, but the marker is not replicated
    log.high_watermark = 5
    assert log.last_stable_offset == 2
    log.high_watermark = 6                                 # the followers have the marker
    assert log.last_stable_offset == 6 and log.producer_state.unreplicated == []
    assert moves == [(5, 2), (6, 6)]


def test_a_lower_high_watermark_makes_an_unreplicated_marker_count_again(tmp_path):
    """A follower loads with the high watermark of its checkpoint: completed transactions whose
    markers are above it stay unstable."""
    log = new_log(tmp_path)
    append(log, txn(0, 2))
    end(log, ABORT)
    assert log.last_stable_offset == 3
    log.hw_follows_leo = False
    log2 = reopen(log, clean=False)
    log2.high_watermark = 2
    assert log2.last_stable_offset == 0
    log2.high_watermark = 3
    assert log2.last_stable_offset == 3


def test_the_last_stable_offset_is_at_least_the_log_start(tmp_path):
    log = replicated(tmp_path, segment_bytes=200)
    append(log, txn(0))
    for _ in range(6):
        append(log, batch(1, value_size=100))
    log.high_watermark = log.log_end_offset
    assert log.last_stable_offset == 0
    log.delete_records_before(3)
    assert log.first_unstable_offset == 3 and log.last_stable_offset == 3


def test_producers_with_an_open_transaction_never_expire(tmp_path):
    log = new_log(tmp_path)
    append(log, txn(0, ts=NOW))
    append(log, idem(0, pid=2, ts=NOW))
    week = 7 * 86_400_000
    assert log.producer_state.remove_expired(NOW + week) == 1
    assert sorted(log.producer_state.producers) == [PID]
    end(log, COMMIT, ts=NOW)
    assert log.producer_state.remove_expired(NOW + week) == 1 and log.producer_state.producers == {}


# -- reads: read_committed and the aborted transactions ---------------------------------------


def _unified(log: Log) -> UnifiedLog:
    clock = InlineReactor()
    clock.advance(NOW / 1000)
    return UnifiedLog(log, reactor=clock, threadpool=ManualThreadPool(holding=False))


def _read(log: UnifiedLog, offset: int, isolation: FetchIsolation):
    d = log.read(offset, 1 << 20, isolation=isolation)
    assert d.called
    return d.result


def test_read_committed_stops_at_the_last_stable_offset_and_names_the_aborted(tmp_path):
    log = _unified(new_log(tmp_path))
    append(log.local_log, txn(0, 2, pid=1))                  # 0-1 aborted below
    append(log.local_log, batch(1))                          # 2
    end(log.local_log, ABORT, pid=1)                         # 3
    append(log.local_log, txn(0, pid=2))                     # 4: open
    append(log.local_log, batch(1))                          # 5
    assert (log.high_watermark, log.last_stable_offset) == (6, 4)
    info = _read(log, 0, FetchIsolation.TXN_COMMITTED)
    assert [o for o, _ in records_of(info)] == [0, 1, 2, 3]
    assert info.aborted_transactions == [AbortedTransaction(1, 0)]
    assert _read(log, 3, FetchIsolation.TXN_COMMITTED).aborted_transactions == [AbortedTransaction(1, 0)]
    nothing = _read(log, 4, FetchIsolation.TXN_COMMITTED)
    assert nothing.empty and nothing.aborted_transactions == []
    plain = _read(log, 0, FetchIsolation.HIGH_WATERMARK)
    assert [o for o, _ in records_of(plain)] == list(range(6)) and plain.aborted_transactions is None
    assert log.aborted_transactions(0, 6) == [AbortedTransaction(1, 0)]
    assert log.aborted_transactions(4, 6) == []
    end(log.local_log, COMMIT, pid=2)
    assert [o for o, _ in records_of(_read(log, 4, FetchIsolation.TXN_COMMITTED))] == [4, 5, 6]


def test_the_offsets_listener_hears_the_last_stable_offset_move(tmp_path):
    log = _unified(new_log(tmp_path))
    heard = []
    log.set_offsets_listener(lambda hw, lso: heard.append((hw, lso)))
    append(log.local_log, txn(0))
    append(log.local_log, batch(1))
    end(log.local_log, COMMIT)
    assert heard == [(1, 0), (2, 0), (3, 3)]
    log.set_offsets_listener(None)
    append(log.local_log, batch(1))
    assert heard[-1] == (3, 3)


# -- snapshots, kill -9 and recovery ----------------------------------------------------------


def _open_transactions(log) -> list[tuple[int, int]]:
    return list(log.producer_state.ongoing)


def _kill(log: Log, **changes) -> Log:
    """kill -9 and a restart: descriptors go away; index entries and producer snapshots not
    written yet (they wait for a flush) are lost; nothing else happens."""
    for segment in log.segments:
        segment.offset_index.discard_pending()
        segment.time_index.discard_pending()
        segment.txn_index.discard_pending()
        segment.file.close()
    log.producer_state._pending.clear()
    return Log.open(log.dir, config(**changes), files=log.files, recovery_point=log.recovery_point,
                    log_start_offset=log.log_start_offset, had_clean_shutdown=False, now_ms=NOW)


def _mixed_log(tmp_path, **changes) -> Log:
    """Segments of committed, aborted and open transactions of three producers and plain data;
    the producer 3 transaction is still open at the end."""
    log = new_log(tmp_path, segment_bytes=500, **changes)
    seqs = {1: 0, 2: 0, 3: 0}

    def send(pid):
        append(log, txn(seqs[pid], 2, pid=pid, value_size=40))
        seqs[pid] += 2

    send(3)
    for round_ in range(4):
        send(1)
        send(2)
        append(log, batch(1, value_size=40))
        end(log, ABORT if round_ % 2 else COMMIT, pid=1)
        send(2)
        end(log, ABORT, pid=2)
    send(3)
    assert len(log.segments) >= 4
    return log


def test_kill_9_in_the_middle_of_a_transaction_loses_nothing(tmp_path):
    log = _mixed_log(tmp_path)
    log.flush(log.segments[2].base_offset)             # some of the log is flushed, the rest is not
    ongoing, lso, index = _open_transactions(log), log.last_stable_offset, aborted(log)
    assert ongoing == [(0, 3)] and lso == 0 and len(index) == 6
    crashed = _kill(log, segment_bytes=500)
    assert crashed.recovery_stats.segments_recovered >= 1
    assert _open_transactions(crashed) == ongoing and crashed.last_stable_offset == lso
    assert aborted(crashed) == index
    assert crashed.producer_state.entry(3).current_txn_first_offset == 0
    end(crashed, COMMIT, pid=3)
    assert crashed.last_stable_offset == crashed.log_end_offset


def test_without_any_snapshot_the_replay_finds_the_open_transaction(tmp_path):
    log = _mixed_log(tmp_path)
    ongoing, index = _open_transactions(log), aborted(log)
    log.flush()
    for name in os.listdir(log.dir):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(log.dir, name))
    log.producer_state.snapshot_offsets = []
    crashed = _kill(log, segment_bytes=500)
    assert _open_transactions(crashed) == ongoing and aborted(crashed) == index
    assert crashed.last_stable_offset == 0


def test_a_clean_restart_keeps_open_transactions_in_the_snapshot(tmp_path):
    log = _mixed_log(tmp_path)
    ongoing, index, lso = _open_transactions(log), aborted(log), log.last_stable_offset
    assert log.snapshot_for_shutdown()
    log.flush()
    end_offset = log.log_end_offset
    log = reopen(log, clean=True, segment_bytes=500)
    assert log.recovery_stats.segments_recovered == 0
    assert _open_transactions(log) == ongoing and aborted(log) == index and log.last_stable_offset == lso
    with open(os.path.join(log.dir, segment_file_name(end_offset, ".snapshot")), "rb") as f:
        data = f.read()
    # Kafka's ProducerSnapshot v1 rows: ... coordinator epoch int32, CurrentTxnFirstOffset int64.
    rows = [struct.unpack_from(">qhiqiqiq", data, 10 + 46 * i) for i in range((len(data) - 10) // 46)]
    assert {(r[0], r[7]) for r in rows} == {(1, -1), (2, -1), (3, 0)}


def test_a_damaged_txnindex_is_rebuilt_from_the_producer_state(tmp_path):
    log = _mixed_log(tmp_path)
    index = aborted(log)
    assert log.snapshot_for_shutdown()
    log.flush()
    damaged = [s for s in log.segments if len(s.txn_index)][-1]
    path = damaged.txn_index.path
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) - 5)            # a partial entry
    log = reopen(log, clean=True, segment_bytes=500)
    assert aborted(log) == index
    with open(path, "rb") as f:
        assert len(f.read()) % 34 == 0                   # rebuilt on disk too


def test_recovery_rebuilds_the_txnindex_of_every_recovered_segment(tmp_path):
    log = _mixed_log(tmp_path)
    index = aborted(log)
    log.flush()
    for segment in log.segments:
        with open(segment.txn_index.path, "wb"):          # lost: emptied files
            pass
    log.recovery_point = 0
    crashed = _kill(log, segment_bytes=500)
    assert aborted(crashed) == index


def test_an_index_naming_offsets_past_its_segment_is_rebuilt(tmp_path):
    log = _mixed_log(tmp_path)
    index = aborted(log)
    log.snapshot_for_shutdown()
    log.flush()
    first = log.segments[0]
    stray = AbortedTxn(99, first.base_offset, log.segments[1].base_offset + 1, 0)
    with open(first.txn_index.path, "ab") as f:
        f.write(stray.encode())
    log = reopen(log, clean=True, segment_bytes=500)
    assert aborted(log) == index


# -- truncation and replication ---------------------------------------------------------------


def test_truncation_drops_the_markers_entries_and_reopens_their_transactions(tmp_path):
    log = new_log(tmp_path)
    append(log, txn(0, 2, pid=1))                          # 0-1
    end(log, ABORT, pid=1)                                 # 2
    append(log, txn(0, pid=2))                             # 3
    end(log, ABORT, pid=2)                                 # 4
    assert [t.producer_id for t in aborted(log)] == [1, 2]
    log.truncate_to(4)
    assert aborted(log) == [AbortedTxn(1, 0, 2, 3)]
    assert _open_transactions(log) == [(3, 2)] and log.last_stable_offset == 3
    log.truncate_to(2)
    assert aborted(log) == [] and _open_transactions(log) == [(0, 1)]
    assert log.producer_state.entry(2) is None


def test_a_follower_keeps_the_transactions_and_leads_them_on(tmp_path):
    """A leader change in the middle of a transaction: the follower's producer state and index
    follow the leader's batches, and as the new leader it takes the producer's next batch, its
    retry and the coordinator's marker."""
    leader = new_log(tmp_path, "l-0")
    append(leader, txn(0, 2, pid=1))                       # 0-1
    append(leader, txn(0, pid=2))                          # 2
    end(leader, ABORT, pid=2)                              # 3
    append(leader, txn(2, pid=1))                          # 4
    follower = new_log(tmp_path, "f-0")
    follower.hw_follows_leo = False
    follower.append_as_follower(b"".join(bytes(c) for c in leader.read(0, 1 << 20).records))
    follower.high_watermark = leader.high_watermark
    assert _open_transactions(follower) == _open_transactions(leader) == [(0, 1)]
    assert aborted(follower) == aborted(leader) == [AbortedTxn(2, 2, 3, 0)]
    assert follower.last_stable_offset == leader.last_stable_offset == 0
    # The follower becomes the leader.
    follower.hw_follows_leo = True
    retry = append(follower, txn(2, pid=1))
    assert (retry.first_offset, retry.num_records) == (4, 0)
    assert append(follower, txn(3, pid=1)).first_offset == 5
    assert refused(follower, idem(4, pid=1)).code == ErrorCode.INVALID_TXN_STATE
    end(follower, COMMIT, pid=1)
    assert follower.last_stable_offset == follower.log_end_offset == 7


# -- a property: random interleavings -------------------------------------------------------


_step = st.one_of(
    st.tuples(st.just("data"), st.integers(1, 3), st.booleans()),       # producer, transactional?
    st.tuples(st.just("marker"), st.integers(1, 3), st.booleans()),     # producer, abort?
    st.tuples(st.just("plain"), st.just(0), st.just(False)),
    st.tuples(st.just("hw"), st.integers(0, 3), st.just(False)),        # move the high watermark forward
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_step, min_size=1, max_size=30))
def test_random_interleavings_keep_the_last_stable_offset_and_the_index_right(steps):
    """The last stable offset never passes an open transaction's first offset (nor an unreplicated
    marker's transaction), the index holds exactly the aborted transactions, and a crash and
    reload gives the same answers."""
    with tempfile.TemporaryDirectory() as tmp:
        log = new_log(tmp, segment_bytes=400)
        log.hw_follows_leo = False
        open_: dict[int, int] = {}              # producer -> first offset of its open transaction
        decided: list[tuple[int, int, int, bool, int]] = []    # (producer, first, marker, aborted, LSO then)
        seq = {1: 0, 2: 0, 3: 0}
        for kind, pid, flag in steps:
            offset = log.log_end_offset
            if kind == "data":
                if pid in open_ and not flag:
                    flag = True                 # a plain batch inside a transaction is refused (tested above)
                append(log, (txn if flag else idem)(seq[pid], pid=pid, value_size=30))
                seq[pid] += 1
                if flag:
                    open_.setdefault(pid, offset)
            elif kind == "marker":
                end(log, ABORT if flag else COMMIT, pid=pid)
                if pid in open_:
                    lso_then = min((f for p, f in open_.items() if p != pid), default=offset + 1)
                    decided.append((pid, open_.pop(pid), offset, flag, lso_then))
            elif kind == "plain":
                append(log, batch(1, value_size=30))
            else:
                log.high_watermark = min(log.log_end_offset, log.high_watermark + pid)
            hw = log.high_watermark
            unstable = list(open_.values()) + [first for _, first, marker, _, _ in decided if marker >= hw]
            assert log.last_stable_offset == min(unstable + [hw])
            assert all(log.last_stable_offset <= first for first in open_.values())
            assert aborted(log) == [AbortedTxn(p, first, marker, lso) for p, first, marker, abort, lso in decided
                                    if abort]
        expected = (sorted((f, p) for p, f in open_.items()), aborted(log))
        log.hw_follows_leo = True
        log.high_watermark = log.log_end_offset
        lso = log.last_stable_offset
        again = Log.open(log.dir, config(segment_bytes=400), files=log.files, recovery_point=0,
                         had_clean_shutdown=False, now_ms=NOW)
        log.close()
        assert (_open_transactions(again), aborted(again)) == expected
        assert again.last_stable_offset == lso
        again.close()

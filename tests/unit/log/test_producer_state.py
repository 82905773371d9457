"""Idempotent producers in the log: duplicates, gaps, epochs, expiry, snapshots, rebuild on recovery.

Kafka's rules (``ProducerAppendInfo``, ``ProducerStateManager``) as the log
applies them to batches with a producer id; batches without one (producer id
-1, as aiokafka's non-idempotent batches with sequence 0) are never checked.
"""

from __future__ import annotations

import os
import struct

import pytest
from crc32c import crc32c

from support.inline import InlineReactor, ManualThreadPool, SyncThreadPool
from twisted_kafka.config import KafkaConfig
from twisted_kafka.log.layout import segment_file_name
from twisted_kafka.log.log_manager import LogManager
from twisted_kafka.log.producer_state import (
    INT32_MAX,
    BatchMetadata,
    CorruptSnapshotError,
    ProducerStateEntry,
    decode_snapshot,
    encode_snapshot,
    retains_batch,
)
from twisted_kafka.log.unified_log import UnifiedLog
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.records.batch import parse_batch_header

from .helpers import NOW, batch, new_log, records_of, reopen

PID = 4711


def idem(seq: int, n: int = 1, *, pid: int = PID, epoch: int = 0, ts: int = NOW, **kwargs) -> bytes:
    """A batch of ``n`` records from producer ``pid`` (epoch ``epoch``) starting at sequence ``seq``."""
    return batch(n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, ts=ts, **kwargs)


def append(log, data, now_ms: int = NOW):
    return log.append_as_leader(data, 0, now_ms)


def error_of(log, data) -> KafkaError:
    end = log.log_end_offset
    with pytest.raises(KafkaError) as e:
        append(log, data)
    assert log.log_end_offset == end, "a refused batch must not be written"
    return e.value


def snapshots(log) -> list[int]:
    return sorted(int(n.split(".")[0]) for n in os.listdir(log.dir) if n.endswith(".snapshot"))


# -- the checks ------------------------------------------------------------------------------


def test_batches_without_a_producer_id_are_never_checked(tmp_path):
    log = new_log(tmp_path)
    for _ in range(3):      # aiokafka's non-idempotent batches: producer id -1, sequence 0
        append(log, batch(2, producer_id=-1, producer_epoch=-1, base_sequence=0))
    assert log.log_end_offset == 6 and log.producer_state.producers == {}


def test_in_sequence_batches_are_appended_and_the_last_five_remembered(tmp_path):
    log = new_log(tmp_path)
    seq = 0
    for i in range(7):
        info = append(log, idem(seq, 3))
        assert info.first_offset == 3 * i
        seq += 3
    entry = log.producer_state.entry(PID)
    assert entry.producer_epoch == 0 and entry.last_seq == 20
    assert [(b.first_seq, b.last_seq, b.first_offset, b.last_offset) for b in entry.batches] == \
        [(3 * i, 3 * i + 2, 3 * i, 3 * i + 2) for i in range(2, 7)]


def test_a_duplicate_of_any_of_the_last_five_is_answered_with_its_original_offsets(tmp_path):
    log = new_log(tmp_path)
    append(log, batch(4))                               # other data first: offsets differ from sequences
    originals = [append(log, idem(2 * i, 2)) for i in range(6)]
    end = log.log_end_offset
    for i in range(1, 6):
        info = append(log, idem(2 * i, 2))
        assert (info.first_offset, info.last_offset) == (originals[i].first_offset, originals[i].last_offset)
        assert info.num_records == 0 and info.valid_bytes == 0
    assert log.log_end_offset == end
    # The first batch is no longer among the last five: not recognised, and out of order.
    assert error_of(log, idem(0, 2)).code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    # A different range overlapping a remembered one is no duplicate either.
    assert error_of(log, idem(10, 1)).code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert [o for o, _ in records_of(log.read(0, 1 << 20))] == list(range(16))


def test_a_gap_is_out_of_order(tmp_path):
    log = new_log(tmp_path)
    append(log, idem(0, 5))
    error = error_of(log, idem(6))
    assert error.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert error.message == (f"Out of order sequence number for producer {PID} at offset 5 in partition t-0: "
                             f"6 (incoming seq. number), 4 (current end sequence number)")
    assert append(log, idem(5)).first_offset == 5


def test_a_stale_epoch_is_invalid_producer_epoch(tmp_path):
    log = new_log(tmp_path)
    append(log, idem(0, epoch=3))
    error = error_of(log, idem(1, epoch=2))
    assert error.code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert "is 2, which is smaller than the last seen epoch 3" in error.message


def test_a_new_epoch_starts_at_sequence_zero_and_forgets_the_old_batches(tmp_path):
    log = new_log(tmp_path)
    append(log, idem(0, 2, epoch=0))
    assert error_of(log, idem(2, epoch=1)).code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(log, idem(0, epoch=1)).first_offset == 2
    entry = log.producer_state.entry(PID)
    assert entry.producer_epoch == 1 and len(entry.batches) == 1
    # The old epoch's batch is no duplicate now: its epoch is stale.
    assert error_of(log, idem(0, 2, epoch=0)).code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_an_unknown_producer_is_accepted_at_any_sequence(tmp_path):
    """KIP-360 (Kafka 2.5+): no UNKNOWN_PRODUCER_ID on produce; the state starts from the batch."""
    log = new_log(tmp_path)
    assert append(log, idem(1234, 2)).first_offset == 0
    assert append(log, idem(1236)).first_offset == 2
    assert error_of(log, idem(1240)).code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_sequences_wrap_after_int32_max(tmp_path):
    log = new_log(tmp_path)
    append(log, idem(INT32_MAX - 1, 2))
    assert log.producer_state.entry(PID).last_seq == INT32_MAX
    assert append(log, idem(0, 3)).first_offset == 2
    assert append(log, idem(INT32_MAX - 1, 2)).first_offset == 0      # a retry of the first batch
    assert error_of(log, idem(INT32_MAX)).code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert append(log, idem(3)).first_offset == 5


def test_a_batch_wrapping_inside_is_remembered_with_its_first_sequence(tmp_path):
    log = new_log(tmp_path)
    append(log, idem(INT32_MAX - 1, 4))              # sequences MAX-1, MAX, 0, 1
    entry = log.producer_state.entry(PID)
    assert (entry.batches[-1].first_seq, entry.batches[-1].last_seq) == (INT32_MAX - 1, 1)
    info = append(log, idem(INT32_MAX - 1, 4))       # its retry
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 3, 4)
    assert append(log, idem(2)).first_offset == 4


def test_producers_are_independent(tmp_path):
    log = new_log(tmp_path)
    append(log, idem(0, pid=1))
    append(log, idem(0, pid=2))
    append(log, idem(1, pid=1))
    assert append(log, idem(0, pid=2)).first_offset == 1      # duplicate of producer 2's first
    assert error_of(log, idem(5, pid=2)).code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert sorted(log.producer_state.producers) == [1, 2]


def test_log_append_time_topics_remember_the_append_time(tmp_path):
    log = new_log(tmp_path, message_timestamp_type="LogAppendTime")
    append(log, idem(0, ts=NOW - 5000), now_ms=NOW + 7)
    assert log.producer_state.entry(PID).last_timestamp == NOW + 7
    info = append(log, idem(0, ts=NOW - 5000), now_ms=NOW + 99)
    assert (info.first_offset, info.log_append_time) == (0, NOW + 7)


# -- in flight ------------------------------------------------------------------------------


def test_pipelined_appends_of_one_producer_see_each_other(tmp_path):
    """Five requests in flight: each is prepared before the one ahead of it is written."""
    log = new_log(tmp_path)
    pendings = [log.prepare_append_as_leader(idem(2 * i, 2), 0, NOW) for i in range(5)]
    assert [p.info.first_offset for p in pendings] == [0, 2, 4, 6, 8]
    for p in pendings:
        p.write()
        log.complete_append(p)
    assert log.high_watermark == 10


def test_a_failed_write_undoes_its_producer_state(tmp_path):
    log = new_log(tmp_path)
    append(log, idem(0))
    first = log.prepare_append_as_leader(idem(1), 0, NOW)
    second = log.prepare_append_as_leader(idem(2), 0, NOW)
    log.complete_append(first, OSError(28, "No space left on device"))
    second.write()
    log.complete_append(second)                       # fails too: behind the failed one
    assert first.error is not None and second.error is not None
    assert log.producer_state.entry(PID).last_seq == 0
    # The producer retries both: in sequence, appended at the offsets they were meant for.
    assert append(log, idem(1)).first_offset == 1
    assert append(log, idem(2)).first_offset == 2


def test_a_duplicate_of_an_append_still_being_written_waits_for_it(tmp_path):
    pool = ManualThreadPool()
    clock = InlineReactor()
    clock.advance(NOW / 1000)
    log = UnifiedLog(new_log(tmp_path), reactor=clock, threadpool=pool)
    log.inline_write_max_bytes = 0                    # every write goes to the pool
    original = log.append_as_leader(idem(0, 3), 0)
    retry = log.append_as_leader(idem(0, 3), 0)
    assert not original.called and not retry.called
    pool.run_all()
    assert original.result.first_offset == retry.result.first_offset == 0
    assert log.log_end_offset == 3


def test_a_duplicate_of_an_append_whose_write_fails_fails_too(tmp_path):
    pool = ManualThreadPool()
    clock = InlineReactor()
    clock.advance(NOW / 1000)
    log = UnifiedLog(new_log(tmp_path), reactor=clock, threadpool=pool)
    log.inline_write_max_bytes = 0
    original = log.append_as_leader(idem(0, 3), 0)
    retry = log.append_as_leader(idem(0, 3), 0)
    on_result, f, args, kwargs = pool.queue.popleft()

    def broken():
        raise OSError(5, "Input/output error")

    SyncThreadPool.callInThreadWithCallback(pool, on_result, broken)
    failures = []
    original.addErrback(failures.append)
    retry.addErrback(failures.append)
    assert [f.value.code for f in failures] == [ErrorCode.KAFKA_STORAGE_ERROR] * 2
    assert log.local_log.producer_state.entry(PID) is None
    again = log.append_as_leader(idem(0, 3), 0)      # the producer's retry is appended now
    pool.run_all()
    assert again.result.first_offset == 0


def test_a_duplicate_waits_for_the_fsync_the_flush_policy_asks(tmp_path):
    pool = ManualThreadPool()
    clock = InlineReactor()
    clock.advance(NOW / 1000)
    log = UnifiedLog(new_log(tmp_path, flush_interval_messages=1), reactor=clock, threadpool=pool)
    original = log.append_as_leader(idem(0), 0)
    retry = log.append_as_leader(idem(0), 0)
    assert not original.called and not retry.called   # both wait for the fsync
    pool.run_all()
    assert original.result.first_offset == retry.result.first_offset == 0
    again = log.append_as_leader(idem(0), 0)          # below the recovery point now: at once
    assert again.called and again.result.first_offset == 0


# -- expiry ---------------------------------------------------------------------------------


def _manager(tmp_path, **props):
    reactor = InlineReactor()
    reactor.advance(NOW / 1000)
    config = KafkaConfig.from_props({"log.dirs": str(tmp_path / "data"),
                                     **{k: str(v) for k, v in props.items()}})
    manager = LogManager(config, reactor=reactor, threadpool=SyncThreadPool())
    assert manager.startService().called
    return manager, reactor


def test_idle_producers_expire_on_the_check_interval(tmp_path):
    manager, clock = _manager(tmp_path, **{"producer.id.expiration.ms": 60_000,
                                           "producer.id.expiration.check.interval.ms": 10_000})
    log = manager.create_log("t", 0)
    log.append_as_leader(idem(0, pid=1), 0)
    log.append_as_leader(idem(0, pid=2, ts=NOW + 30_000), 0)
    clock.advance(50)
    assert sorted(log.local_log.producer_state.producers) == [1, 2]
    clock.advance(10)                                 # NOW + 60 s: producer 1 is a minute old
    assert sorted(log.local_log.producer_state.producers) == [2]
    # Forgotten: its next batch is accepted at any sequence.
    assert log.append_as_leader(idem(7, pid=1, ts=NOW + 60_000), 0).result.first_offset == 2
    # A dynamic change applies at the next check.
    config = KafkaConfig.from_props({"log.dirs": str(tmp_path / "data"), "producer.id.expiration.ms": "1000"})
    manager.update_producer_state_config(config)
    clock.advance(10)
    assert log.local_log.producer_state.producers == {}
    manager.stopService()


def test_a_clean_shutdown_snapshots_only_logs_with_idempotent_producers(tmp_path):
    manager, _ = _manager(tmp_path)
    idempotent, plain = manager.create_log("i", 0), manager.create_log("p", 0)
    for i in range(3):
        idempotent.append_as_leader(idem(i), 0)
        plain.append_as_leader(batch(1), 0)
    assert manager.stopService().called
    assert snapshots(idempotent) == [3] and snapshots(plain) == []
    manager, _ = _manager(tmp_path)
    log = manager.get_log("i", 0)
    assert log.local_log.producer_state.entry(PID).last_seq == 2
    assert log.append_as_leader(idem(1), 0).result.first_offset == 1
    manager.stopService()


# -- snapshots ------------------------------------------------------------------------------


def test_snapshot_encoding_round_trips_and_is_kafkas_format(tmp_path):
    entries = [ProducerStateEntry(7, 2, tuple(BatchMetadata(4 * i + 3, 100 + 4 * i, 3, NOW + i) for i in range(5)),
                                  NOW + 4),
               ProducerStateEntry(9, 0, (), NOW - 1)]
    data = encode_snapshot(entries)
    assert decode_snapshot(data) == entries
    # Kafka's layout: version 1, CRC-32C of the rest, int32 count, 46-byte entries.
    version, crc, count = struct.unpack_from(">hIi", data)
    assert (version, crc, count, len(data)) == (1, crc32c(data[6:]), 6, 10 + 6 * 46)
    last_of_7 = struct.unpack_from(">qhiqiqiq", data, 10 + 4 * 46)
    assert last_of_7 == (7, 2, 19, 116, 3, NOW + 4, -1, -1)
    assert struct.unpack_from(">qhiqiqiq", data, 10 + 5 * 46) == (9, 0, -1, -1, 0, NOW - 1, -1, -1)
    # A file Kafka wrote (one entry per producer) reads as its last batch only.
    kafka = struct.pack(">qhiqiqiq", 7, 2, 19, 116, 3, NOW + 4, -1, -1)
    body = struct.pack(">i", 1) + kafka
    (entry,) = decode_snapshot(struct.pack(">hI", 1, crc32c(body)) + body)
    assert entry.batches == (BatchMetadata(19, 116, 3, NOW + 4),) and entry.batches[0].first_seq == 16


@pytest.mark.parametrize("damage", ["crc", "version", "short", "count"])
def test_damaged_snapshots_are_detected(damage):
    data = bytearray(encode_snapshot([ProducerStateEntry(1, 0, (BatchMetadata(0, 0, 0, NOW),), NOW)]))
    if damage == "crc":
        data[-1] ^= 1
    elif damage == "version":
        data[1] = 2
    elif damage == "short":
        data = data[:8]
    else:
        data += b"\0" * 46
    with pytest.raises(CorruptSnapshotError):
        decode_snapshot(bytes(data))


def test_a_roll_writes_a_snapshot_at_the_new_segment_base_with_the_flush(tmp_path):
    log = new_log(tmp_path, segment_bytes=400)
    seq = 0
    while len(log.segments) < 3:
        append(log, idem(seq, 2, value_size=40))
        seq += 2
    bases = [s.base_offset for s in log.segments]
    assert snapshots(log) == []                       # captured, written by the flush
    log.flush()
    assert snapshots(log) == bases[1:]
    with open(os.path.join(log.dir, segment_file_name(bases[2], ".snapshot")), "rb") as f:
        (entry,) = decode_snapshot(f.read())
    assert entry.last_data_offset == bases[2] - 1 and len(entry.batches) == min(5, bases[2] // 2)


def test_a_clean_restart_loads_the_shutdown_snapshot_and_still_knows_five_batches(tmp_path):
    log = new_log(tmp_path)
    append(log, batch(1))
    infos = [append(log, idem(i)) for i in range(6)]
    assert log.snapshot_for_shutdown()
    log.flush()
    assert snapshots(log) == [7]
    log = reopen(log, clean=True)
    assert log.recovery_stats.segments_recovered == 0
    for i in range(1, 6):                             # all five retries are recognised
        assert append(log, idem(i)).first_offset == infos[i].first_offset
    assert append(log, idem(6)).first_offset == 7


def test_no_snapshot_for_logs_without_idempotent_producers(tmp_path):
    log = new_log(tmp_path)
    append(log, batch(3))
    assert not log.snapshot_for_shutdown()
    log.flush()
    assert snapshots(log) == []
    log = reopen(log, clean=True)
    assert log.producer_state.producers == {} and snapshots(log) == []


def test_after_a_crash_the_state_is_rebuilt_from_the_segments(tmp_path):
    """No snapshot at all: the replay starts at the log start and covers every segment."""
    log = new_log(tmp_path, segment_bytes=400)
    infos = []
    seq = 0
    while len(log.segments) < 4:
        infos.append(append(log, idem(seq, 2, value_size=40)))
        seq += 2
    append(log, batch(1))
    for name in os.listdir(log.dir):
        if name.endswith(".snapshot"):
            os.unlink(os.path.join(log.dir, name))
    log.producer_state.snapshot_offsets = []
    log.producer_state._pending.clear()
    log = reopen(log, clean=False, segment_bytes=400)
    entry = log.producer_state.entry(PID)
    assert entry.last_seq == seq - 1 and [b.first_offset for b in entry.batches] == \
        [i.first_offset for i in infos[-5:]]
    # Snapshots now at the last two segment bases and at the log end, for the next start.
    bases = [s.base_offset for s in log.segments]
    assert snapshots(log) == bases[-2:] + [log.log_end_offset]
    assert append(log, idem(seq - 2, 2)).first_offset == infos[-1].first_offset


def test_after_a_crash_the_batches_after_the_latest_snapshot_are_replayed(tmp_path):
    log = new_log(tmp_path, segment_bytes=400)
    seq = 0
    while len(log.segments) < 3:
        append(log, idem(seq, 2, value_size=40))
        seq += 2
    log.flush()                                        # snapshots at the bases are on disk
    tail = [append(log, idem(seq + 2 * i, 2, value_size=40)) for i in range(2)]
    seq += 4
    log = reopen(log, clean=False, segment_bytes=400)   # no shutdown snapshot: a crash
    entry = log.producer_state.entry(PID)
    assert entry.last_seq == seq - 1
    assert entry.batches[-1].first_offset == tail[-1].first_offset
    assert append(log, idem(seq - 4, 2)).first_offset == tail[0].first_offset


def test_expired_producers_are_dropped_when_a_snapshot_is_loaded(tmp_path):
    log = new_log(tmp_path)
    append(log, idem(0, pid=1, ts=NOW - 2 * 86_400_000))
    append(log, idem(0, pid=2))
    log.snapshot_for_shutdown()
    log.flush()
    log = reopen(log, clean=True)
    assert sorted(log.producer_state.producers) == [2]


def test_a_damaged_snapshot_falls_back_to_an_older_one_and_the_segments(tmp_path):
    log = new_log(tmp_path, segment_bytes=400)
    seq = 0
    while len(log.segments) < 3:
        append(log, idem(seq, 2, value_size=40))
        seq += 2
    log.snapshot_for_shutdown()
    log.flush()
    newest = snapshots(log)[-1]
    path = os.path.join(log.dir, segment_file_name(newest, ".snapshot"))
    with open(path, "r+b") as f:
        f.seek(20)
        f.write(b"\xff\xff")
    log = reopen(log, clean=True, segment_bytes=400)
    assert log.producer_state.entry(PID).last_seq == seq - 1
    # Removed, the state rebuilt from the snapshot before it, and a good one written in its place.
    assert snapshots(log)[-1] == newest
    with open(path, "rb") as f:
        assert decode_snapshot(f.read())[0].last_seq == seq - 1


def test_stray_and_out_of_range_snapshots_are_removed_at_load(tmp_path):
    log = new_log(tmp_path, segment_bytes=400)
    seq = 0
    while len(log.segments) < 3:
        append(log, idem(seq, 2, value_size=40))
        seq += 2
    log.flush()
    bases = [s.base_offset for s in log.segments]
    end = log.log_end_offset
    state = encode_snapshot([])
    for offset in (bases[1] + 1, end + 100):          # not at a base; beyond the log end
        with open(os.path.join(log.dir, segment_file_name(offset, ".snapshot")), "wb") as f:
            f.write(state)
    log = reopen(log, clean=False, segment_bytes=400)
    assert snapshots(log) == bases[1:] + [end]
    assert log.producer_state.entry(PID).last_seq == seq - 1


def test_deleting_segments_deletes_their_snapshots(tmp_path):
    log = new_log(tmp_path, segment_bytes=400)
    seq = 0
    while len(log.segments) < 4:
        append(log, idem(seq, 2, value_size=40))
        seq += 2
    log.flush()
    bases = [s.base_offset for s in log.segments]
    log.delete_records_before(bases[2])
    assert [s.base_offset for s in log.segments] == bases[2:]
    log.flush()                                       # the renamed files go with the next flush
    assert snapshots(log) == bases[2:]
    assert not [n for n in os.listdir(log.dir) if n.endswith(".snapshot.deleted")]
    # The producer is still known (in memory, as in Kafka) after its old batches went.
    assert append(log, idem(seq, 2)).first_offset == log.log_end_offset - 2


def test_truncation_rebuilds_the_state_below_the_new_end(tmp_path):
    log = new_log(tmp_path)
    for i in range(4):
        append(log, idem(i))
    log.truncate_to(2)
    assert log.producer_state.entry(PID).last_seq == 1
    assert append(log, idem(2)).first_offset == 2


# -- the log cleaner's interface ----------------------------------------------------------


def test_the_cleaner_keeps_each_producers_last_batch(tmp_path):
    log = new_log(tmp_path)
    first = append(log, idem(0, 2, pid=1))
    last_of_1 = append(log, idem(2, 2, pid=1))
    last_of_2 = append(log, idem(0, 1, pid=2))
    append(log, batch(1))
    offsets = log.producer_state.last_batch_offsets()
    assert offsets == {1: last_of_1.last_offset, 2: last_of_2.last_offset}
    kept = []
    data = b"".join(bytes(c) for c in log.read(0, 1 << 20).records)
    pos = 0
    while pos < len(data):
        header = parse_batch_header(data, pos)
        if retains_batch(header, offsets):
            kept.append(header.base_offset)
        pos += header.size
    assert kept == [last_of_1.first_offset, last_of_2.first_offset] and first.first_offset not in kept

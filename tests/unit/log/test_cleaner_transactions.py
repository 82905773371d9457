"""The log cleaner and transactions (Kafka's ``LogCleaner`` rules): aborted data goes whatever its
keys, markers stay while their transaction may have data left and go ``delete.retention.ms`` after
the cleaning that first found them alone, and the cleaner stops at the last stable offset."""

from __future__ import annotations

import os

from twisted_kafka.log.cleaner import log_to_clean
from twisted_kafka.log.log import AppendOrigin
from twisted_kafka.log.txn_index import AbortedTxn, TransactionIndex
from twisted_kafka.protocol.records import ControlRecordType, build_end_txn_marker, iter_records, parse_end_txn_marker

from .helpers import NOW, append_keyed, clean_now, compacted_log, keyed_batch, reopen

COMMIT, ABORT = ControlRecordType.COMMIT, ControlRecordType.ABORT
RETENTION = 1000


class Producers:
    """Transactional producers writing keyed records to one log."""

    def __init__(self, log):
        self.log = log
        self.seq: dict[int, int] = {}

    def send(self, pid: int, pairs) -> int:
        seq = self.seq.get(pid, 0)
        self.seq[pid] = seq + len(pairs)
        data = keyed_batch(pairs, producer_id=pid, producer_epoch=0, base_sequence=seq, transactional=True)
        return self.log.append_as_leader(data, 0, NOW).first_offset

    def end(self, pid: int, control: int) -> int:
        return self.log.append_as_leader(build_end_txn_marker(pid, 0, 0, control, NOW), 0, NOW,
                                         origin=AppendOrigin.COORDINATOR).first_offset


def _fill(log, n: int = 30) -> None:
    """Plain records with keys of their own, so the interesting batches sit in finished segments."""
    for i in range(n):
        append_keyed(log, [(b"filler-%d" % i, b"x" * 60)])


def _data(log) -> dict[bytes, bytes]:
    """The latest value of every key, control records left out."""
    out: dict[bytes, bytes] = {}
    for segment in log.segments:
        for pos, header in segment.iter_headers(0):
            if header.is_control:
                continue
            data = segment.read(pos, header.size)
            for record in iter_records(data, 0, header):
                out[record.key] = record.value
    return out


def _markers(log) -> dict[int, tuple[int, int, bool, int]]:
    """{offset: (producer id, records, delete horizon set, base timestamp)} of every control batch."""
    out = {}
    for segment in log.segments:
        for _, header in segment.iter_headers(0):
            if header.is_control:
                out[header.base_offset] = (header.producer_id, header.records_count, header.has_delete_horizon,
                                           header.base_timestamp)
    return out


def _transactions(tmp_path):
    """Committed and aborted transactions of four producers, followed by filler data."""
    log = compacted_log(tmp_path, segment_bytes=600, delete_retention_ms=RETENTION)
    p = Producers(log)
    offsets = {}
    p.send(1, [(b"a", b"a-committed"), (b"d", b"d-committed")])       # T1
    offsets["M1"] = p.end(1, COMMIT)
    offsets["T2"] = p.send(2, [(b"a", b"a-aborted"), (b"b", b"b-aborted")])
    offsets["M2"] = p.end(2, ABORT)
    offsets["T4"] = p.send(3, [(b"e", b"e-committed")])
    offsets["M4"] = p.end(3, COMMIT)
    append_keyed(log, [(b"d", b"d-plain"), (b"e", b"e-plain")])        # T1's d and all of T4 obsolete
    p.send(2, [(b"g", b"g-committed")])                                 # T2 is no longer producer 2's last
    offsets["M6"] = p.end(2, COMMIT)
    p.send(3, [(b"f", b"f-committed")])
    offsets["M5"] = p.end(3, COMMIT)
    _fill(log)
    return log, offsets


def test_a_compacted_topic_keeps_only_committed_data(tmp_path):
    log, offsets = _transactions(tmp_path)
    assert _data(log)[b"a"] == b"a-aborted"                 # before: the aborted value is the latest
    clean_now(log)
    data = _data(log)
    assert data[b"a"] == b"a-committed"                     # the aborted record did not hide it
    assert b"b" not in data and data[b"d"] == b"d-plain" and data[b"e"] == b"e-plain"
    assert data[b"f"] == b"f-committed" and data[b"g"] == b"g-committed"
    values = [r for r in data.values() if r.endswith(b"-aborted")]
    assert values == []
    # The aborted batch went whole (it is not its producer's last batch any more).
    heads = [h for s in log.segments for _, h in s.iter_headers(0)]
    assert offsets["T2"] not in [h.base_offset for h in heads]


def test_markers_stay_while_their_data_may_and_go_after_the_delete_horizon(tmp_path):
    log, offsets = _transactions(tmp_path)
    clean_now(log, now_ms=NOW)
    markers = _markers(log)
    # First cleaning: every marker saw its transaction's batches, so every one stays as it was.
    assert all(offsets[m] in markers and not markers[offsets[m]][2] for m in ("M1", "M2", "M4", "M5", "M6"))
    # Second cleaning: T2 and T4 left no batch; their markers get a delete horizon, the others do not.
    clean_now(log, now_ms=NOW + 10)
    markers = _markers(log)
    assert markers[offsets["M2"]][2:] == (True, NOW + 10 + RETENTION)
    assert markers[offsets["M4"]][2:] == (True, NOW + 10 + RETENTION)
    assert not markers[offsets["M1"]][2] and not markers[offsets["M5"]][2] and not markers[offsets["M6"]][2]
    # Before the horizon they stay; the marker still reads as a marker (its record kept its timestamp).
    clean_now(log, now_ms=NOW + 10 + RETENTION - 1)
    assert offsets["M2"] in _markers(log)
    segment = next(s for s in log.segments if s.base_offset <= offsets["M4"] < s.next_offset)
    found = segment.find_batch(offsets["M4"])
    assert found is not None
    pos, header = found
    assert parse_end_txn_marker(segment.read(pos, header.size), 0, header).timestamp == NOW
    # At the horizon they go.
    clean_now(log, now_ms=NOW + 10 + RETENTION)
    markers = _markers(log)
    assert offsets["M2"] not in markers and offsets["M4"] not in markers
    assert {offsets["M1"], offsets["M5"], offsets["M6"]} <= set(markers)
    assert _data(log)[b"a"] == b"a-committed"


def test_the_cleaned_segment_keeps_the_index_entries_of_the_aborts_it_keeps(tmp_path):
    log, offsets = _transactions(tmp_path)
    before = [t for s in log.segments for t in s.txn_index.entries()]
    assert before == [AbortedTxn(2, offsets["T2"], offsets["M2"], offsets["M2"] + 1)]
    clean_now(log, now_ms=NOW)
    after = [t for s in log.segments for t in s.txn_index.entries()]
    assert after == before                                 # T2's batches were seen: its marker and entry stay
    segment = next(s for s in log.segments if len(s.txn_index))
    assert os.path.exists(segment.txn_index.path) and not segment.txn_index.path.endswith((".cleaned", ".swap"))
    assert TransactionIndex.open(segment.txn_index.path, segment.base_offset).entries() == before
    clean_now(log, now_ms=NOW + 10)                        # T2 has no batch left: no entry any more
    assert [t for s in log.segments for t in s.txn_index.entries()] == []
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap"))]
    # A restart finds the same.
    log = reopen(log, clean=False, segment_bytes=600, delete_retention_ms=RETENTION, cleanup_policy=("compact",))
    assert _data(log)[b"a"] == b"a-committed" and b"b" not in _data(log)


def test_the_aborted_last_batch_of_a_producer_stays_empty(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=600, delete_retention_ms=RETENTION)
    p = Producers(log)
    first = p.send(7, [(b"k", b"aborted")])
    p.end(7, ABORT)
    _fill(log)
    clean_now(log)
    segment = log.segments[0]
    pos, header = segment.find_batch(first)
    assert (header.base_offset, header.records_count, header.producer_id, header.base_sequence) == (first, 0, 7, 0)
    assert b"k" not in _data(log)
    # A restart rebuilds the producer with its sequence, and no open transaction.
    log = reopen(log, clean=False, segment_bytes=600, cleanup_policy=("compact",))
    entry = log.producer_state.entry(7)
    assert (entry.last_seq, entry.current_txn_first_offset) == (0, -1)


def test_the_cleaner_stops_at_the_last_stable_offset(tmp_path):
    log = compacted_log(tmp_path, segment_bytes=600, delete_retention_ms=RETENTION)
    _fill(log, 10)
    p = Producers(log)
    first = p.send(5, [(b"open", b"1")])
    _fill(log, 20)
    assert log.last_stable_offset == first < log.active_segment.base_offset
    target = log_to_clean(log, None, NOW)
    holding = next(s for s in log.segments if s.base_offset <= first < s.next_offset)
    assert target.first_uncleanable_offset == holding.base_offset
    clean_now(log)
    assert _data(log)[b"open"] == b"1"
    p.end(5, ABORT)
    _fill(log, 10)
    assert log_to_clean(log, None, NOW).first_uncleanable_offset > first
    clean_now(log)
    assert b"open" not in _data(log)


class Killed(BaseException):
    """The process died here."""


def test_a_kill_during_the_swap_keeps_the_index_with_its_segment(tmp_path, monkeypatch):
    """The cleaned segment's .txnindex is renamed with its .log (Kafka's .cleaned -> .swap ->
    final protocol): killed before any rename of the swap, the reloaded log has the old segments,
    after the commit point the cleaned one -- with the aborted transaction indexed either way."""
    from twisted_kafka.log.cleaner import CleanTask, OffsetMap
    from twisted_kafka.log.log import Log

    from .helpers import config

    def killed_at(kill_at: int, where) -> tuple[int, Log]:
        log, offsets = _transactions(where)
        log.segment_deleter = lambda log_, segments: [s.rename_for_delete() for s in segments]
        index = [t for s in log.segments for t in s.txn_index.entries()]
        log.flush()
        target = log_to_clean(log, None, NOW)
        task = CleanTask(log, target.first_dirty_offset, target.first_uncleanable_offset, OffsetMap(1 << 20),
                         now_ms=NOW)
        while not task.map_done:
            task.build_map_step(4096)
        for group in task.plan():
            task.start_group(group)
            while not task.group_done:
                task.clean_step(4096)
            cleaned = task.finish_group()
            if group[0].base_offset <= offsets["M2"] < cleaned.next_offset:
                break
            task.discard_group()
        assert len(cleaned.txn_index) == 1
        renames = []
        real = os.rename

        def dying(*args, **kwargs):
            if len(renames) == kill_at:
                raise Killed()
            renames.append(args)
            return real(*args, **kwargs)

        monkeypatch.setattr(os, "rename", dying)
        try:
            log.replace_segments(cleaned, group)
        except Killed:
            pass
        finally:
            monkeypatch.setattr(os, "rename", real)
        for segment in list(log.segments) + [cleaned]:
            segment.file.close()
        reloaded = Log.open(log.dir, config(cleanup_policy=("compact",), segment_bytes=600,
                                            delete_retention_ms=RETENTION),
                            recovery_point=log.recovery_point, had_clean_shutdown=False, now_ms=NOW, files=log.files)
        entries = [t for s in reloaded.segments for t in s.txn_index.entries()]
        data = _data(reloaded)
        if b"b" in data:                  # the aborted transaction's records are there: so is its entry
            assert entries == index and data[b"a"] == b"a-aborted"
        else:                             # cleaned: its entry may go with them (a rebuilt index cannot know it)
            assert entries in (index, []) and data[b"a"] == b"a-committed"
        assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap", ".deleted"))]
        return len(renames), reloaded

    total, done = killed_at(10_000, tmp_path / "all")
    assert total == 12                    # .index, .timeindex, .txnindex, .log: to .swap, old to .deleted, to final
    assert _data(done)[b"a"] == b"a-committed"
    assert [t for s in done.segments for t in s.txn_index.entries()] != []
    for kill_at in range(total):
        _, reloaded = killed_at(kill_at, tmp_path / f"k{kill_at}")
        committed = kill_at >= 4          # the cleaned .log renamed .swap (the last of its four)
        assert (_data(reloaded)[b"a"] == b"a-committed") == committed

"""The aborted-transaction index (``.txnindex``): Kafka's 34-byte entries, searches, truncation, damage."""

from __future__ import annotations

import os
import struct

import pytest

from twisted_kafka.log.index import CorruptIndexError
from twisted_kafka.log.txn_index import AbortedTxn, TransactionIndex, decode_entries


def _index(tmp_path, base: int = 100) -> TransactionIndex:
    return TransactionIndex.create(str(tmp_path / f"{base:020d}.txnindex"), base)


def test_entries_are_kafkas_34_bytes_written_with_the_flush(tmp_path):
    index = _index(tmp_path)
    index.append(AbortedTxn(4711, 90, 105, 91))
    index.append(AbortedTxn(12, 101, 110, 111))
    assert not os.path.exists(index.path)          # created with its first entry, at the flush
    index.flush()
    with open(index.path, "rb") as f:
        data = f.read()
    assert len(data) == 2 * 34
    # version int16 0, producerId int64, firstOffset int64, lastOffset int64, lastStableOffset int64
    assert data[:34] == struct.pack(">hqqqq", 0, 4711, 90, 105, 91)
    assert data[34:] == bytes.fromhex("0000" "000000000000000c" "0000000000000065" "000000000000006e"
                                      "000000000000006f")
    reopened = TransactionIndex.open(index.path, 100)
    assert reopened.entries() == [AbortedTxn(4711, 90, 105, 91), AbortedTxn(12, 101, 110, 111)]


def test_a_segment_without_aborts_has_no_file(tmp_path):
    index = _index(tmp_path)
    index.flush()
    assert index.write_pending()
    assert not os.path.exists(index.path)
    assert TransactionIndex.open(index.path, 100).entries() == []


def test_markers_must_come_in_order(tmp_path):
    index = _index(tmp_path)
    index.append(AbortedTxn(1, 100, 105, 106))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(2, 100, 105, 106))
    with pytest.raises(ValueError):
        _index(tmp_path, 200).append(AbortedTxn(2, 100, 150, 151))     # below the segment


def test_collect_is_kafkas_overlap_rule_and_stops_at_the_last_stable_offset(tmp_path):
    index = _index(tmp_path, 0)
    index.append(AbortedTxn(1, 0, 10, 5))        # producer 5's transaction was open from offset 5
    index.append(AbortedTxn(2, 5, 20, 21))
    index.append(AbortedTxn(3, 30, 40, 41))
    assert index.collect(0, 100) == ([AbortedTxn(1, 0, 10, 5), AbortedTxn(2, 5, 20, 21),
                                      AbortedTxn(3, 30, 40, 41)], False)
    # Marker before the fetch offset: not in range.  First offset at the upper bound: not in range
    # (and, its last stable offset past the bound, nothing later can be).
    assert index.collect(11, 30) == ([AbortedTxn(2, 5, 20, 21)], True)
    # An entry whose last stable offset reaches the upper bound ends the search (later segments too).
    assert index.collect(0, 5) == ([AbortedTxn(1, 0, 10, 5)], True)
    assert index.collect(15, 21) == ([AbortedTxn(2, 5, 20, 21)], True)


def test_truncation_removes_the_entries_of_markers_at_or_after_the_offset(tmp_path):
    index = _index(tmp_path, 0)
    for i in range(4):
        index.append(AbortedTxn(i, 10 * i, 10 * i + 5, 10 * i + 6))
    index.flush()
    index.truncate_to(26)                        # markers at 5, 15, 25 stay
    assert [t.producer_id for t in index.entries()] == [0, 1, 2]
    assert os.path.getsize(index.path) == 3 * 34
    index.append(AbortedTxn(9, 26, 27, 28))      # appends continue after the cut
    index.truncate_to(25)                        # the marker at 25 goes
    assert [t.producer_id for t in index.entries()] == [0, 1]
    index.flush()
    with open(index.path, "rb") as f:
        assert decode_entries(f.read(), 0) == index.entries()
    index.reset()
    assert index.entries() == [] and os.path.getsize(index.path) == 0


def test_a_rename_and_a_delete_follow_the_file(tmp_path):
    index = _index(tmp_path)
    index.rename(index.path + ".cleaned")               # no file yet: only the name changes
    assert not os.listdir(tmp_path)
    index.append(AbortedTxn(1, 100, 101, 102))
    index.flush()
    assert os.listdir(tmp_path) == ["00000000000000000100.txnindex.cleaned"]
    index.rename(index.path[:-len(".cleaned")])
    assert os.listdir(tmp_path) == ["00000000000000000100.txnindex"]
    index.delete()
    assert not os.listdir(tmp_path) and index.entries() == []


@pytest.mark.parametrize("damage", ["partial", "version", "order", "below", "first-after-last"])
def test_a_damaged_file_is_detected(tmp_path, damage):
    entries = [struct.pack(">hqqqq", 0, 1, 100, 105, 106), struct.pack(">hqqqq", 0, 2, 101, 110, 111)]
    if damage == "partial":
        data = b"".join(entries)[:-3]
    elif damage == "version":
        data = entries[0] + struct.pack(">hqqqq", 1, 2, 101, 110, 111)
    elif damage == "order":
        data = entries[1] + entries[0]
    elif damage == "below":
        data = struct.pack(">hqqqq", 0, 1, 10, 20, 21)
    else:
        data = struct.pack(">hqqqq", 0, 1, 120, 110, 121)
    path = tmp_path / "00000000000000000100.txnindex"
    path.write_bytes(data)
    with pytest.raises(CorruptIndexError):
        TransactionIndex.open(str(path), 100)


def test_a_failed_write_keeps_the_entries_pending_and_the_file_whole(tmp_path, monkeypatch):
    index = _index(tmp_path, 0)
    index.append(AbortedTxn(1, 0, 5, 6))
    index.flush()
    index.append(AbortedTxn(2, 6, 9, 10))
    real = os.pwrite

    def full(fd, data, offset):
        real(fd, bytes(data)[:5], offset)         # part of an entry, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    assert index.write_pending() is False
    with pytest.raises(OSError):
        index.flush()
    assert os.path.getsize(index.path) == 34 and index.pending_entries == 1
    monkeypatch.setattr(os, "pwrite", real)
    index.flush()
    assert TransactionIndex.open(index.path, 0).entries() == index.entries()

"""Damaged data and damaged checkpoints, on real files.

The recovery rule: only what lies at or above the recovery point may be cut
(that is what a crash leaves); damage below it came from outside, is kept
on disk, recorded, and reported to readers (CORRUPT_MESSAGE) — everything
after it, in its segment and in later ones, stays readable.
"""

from __future__ import annotations

import os

import pytest

from support.inline import InlineReactor, SyncThreadPool
from twisted_kafka.config import KafkaConfig
from twisted_kafka.log.checkpoints import read_damaged_ranges, read_epoch_checkpoint
from twisted_kafka.log.layout import DAMAGED_RANGES, LEADER_EPOCH_CHECKPOINT, segment_file_name
from twisted_kafka.log.log import Log
from twisted_kafka.log.log_manager import LogManager
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.records.batch import iter_batch_headers

from .helpers import NOW, batch, config, new_log, records_of

SEGMENT = dict(segment_bytes=500)


def _path(log, base, suffix=".log"):
    return os.path.join(log.dir, segment_file_name(base, suffix))


def _filled(tmp_path, batches=12, **changes):
    log = new_log(tmp_path, **changes)
    for i in range(batches):
        log.append_as_leader(batch(3, value_size=40, prefix=b"b%d." % i), 0, NOW)
    log.flush()
    return log


def _load(log, *, recovery_point, clean=False, **changes) -> Log:
    return Log.open(log.dir, config(**{**SEGMENT, **changes}), recovery_point=recovery_point,
                    had_clean_shutdown=clean, now_ms=NOW, files=log.files)


def _batches(path):
    with open(path, "rb") as f:
        return list(iter_batch_headers(f.read()))


def _flip(path, position):
    with open(path, "r+b") as f:
        f.seek(position)
        byte = f.read(1)
        f.seek(position)
        f.write(bytes([byte[0] ^ 0x40]))


def _offsets(log, start=0):
    return [o for o, _ in records_of(log.read(start, 1 << 20))]


def _corrupt(log, offset):
    with pytest.raises(KafkaError) as e:
        log.read(offset, 1 << 20)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    return e.value.message


def test_a_bad_crc_below_the_recovery_point_is_kept_reported_and_nothing_after_it_is_lost(tmp_path):
    log = _filled(tmp_path, **SEGMENT)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    log.close()
    first = _path(log, bases[0])
    pos, damaged = _batches(first)[1]
    _flip(first, pos + damaged.size - 3)                     # inside the records: only the CRC sees it
    os.unlink(_path(log, bases[0], ".index"))                # so loading checks this segment
    log = _load(log, recovery_point=36)                      # a crash; every segment was flushed
    assert [s.base_offset for s in log.segments] == bases    # nothing cut, nothing deleted
    assert log.log_end_offset == 36 and log.recovery_stats.bytes_truncated == 0
    assert _offsets(log) == [0, 1, 2]                        # a read stops before the damage
    message = _corrupt(log, 4)
    assert first in message and "3-5" in message
    assert _offsets(log, 6) == list(range(6, 36))            # everything after it reads as before
    assert read_damaged_ranges(os.path.join(log.dir, DAMAGED_RANGES)) == {
        0: [(pos, pos + damaged.size, 3, 5)]}
    # A clean restart still knows, and appends go on.
    log.close()
    log = _load(log, recovery_point=36, clean=True)
    _corrupt(log, 3)
    assert log.append_as_leader(batch(1), 0, NOW).first_offset == 36


def test_the_same_damage_at_or_above_the_recovery_point_is_cut_as_a_crash_leaves_it(tmp_path):
    log = _filled(tmp_path, **SEGMENT)
    bases = [s.base_offset for s in log.segments]
    log.close()
    first = _path(log, bases[0])
    pos, damaged = _batches(first)[1]
    _flip(first, pos + damaged.size - 3)
    log = _load(log, recovery_point=0)
    assert log.log_end_offset == 3 and [s.base_offset for s in log.segments] == [0]


def test_broken_framing_below_the_recovery_point_resumes_at_the_next_intact_batch(tmp_path):
    log = _filled(tmp_path, batches=6, segment_bytes=100_000)
    log.close()
    path = _path(log, 0)
    entries = _batches(path)
    pos, _ = entries[2]
    with open(path, "r+b") as f:                             # batch 2's length and magic: garbage
        f.seek(pos + 8)
        f.write(b"\x7f\xff\xff\x00\x00\x00\x00\x00\x09")
    log = _load(log, recovery_point=18, clean=True)          # clean: the tail walk finds it
    assert log.log_end_offset == 18
    assert _offsets(log) == list(range(6))
    _corrupt(log, 7)
    assert _offsets(log, 9) == list(range(9, 18))
    assert log.segments[0].damaged[0][:2] == (pos, entries[3][0])


def test_a_damaged_tail_of_the_last_segment_below_the_recovery_point_keeps_its_offsets(tmp_path):
    log = _filled(tmp_path, batches=6, segment_bytes=100_000)
    log.close()
    path = _path(log, 0)
    size = os.path.getsize(path)
    os.truncate(path, size - 7)                              # the last batch lost its end
    log = _load(log, recovery_point=18, clean=True)
    # Offsets 15-17 were acknowledged and flushed: they are reported, never reused.
    assert log.log_end_offset == 18
    _corrupt(log, 16)
    log.close()
    log = _load(log, recovery_point=18, clean=True)          # known now: the tail walk skips it
    assert log.log_end_offset == 18 and log.recovery_stats.segments_recovered == 0
    _corrupt(log, 16)
    assert log.append_as_leader(batch(2), 0, NOW).first_offset == 18
    assert _offsets(log, 18) == [18, 19]
    log.flush()
    log.close()
    log = _load(log, recovery_point=20, clean=True)
    assert log.log_end_offset == 20 and _offsets(log) == list(range(15))
    _corrupt(log, 15)
    assert _offsets(log, 18) == [18, 19]


def test_damaged_ranges_go_with_their_segment(tmp_path):
    log = _filled(tmp_path, **SEGMENT)
    bases = [s.base_offset for s in log.segments]
    log.close()
    pos, damaged = _batches(_path(log, bases[0]))[0]
    _flip(_path(log, bases[0]), pos + damaged.size - 3)
    os.unlink(_path(log, bases[0], ".index"))
    log = _load(log, recovery_point=36)
    _corrupt(log, 0)
    assert os.path.exists(os.path.join(log.dir, DAMAGED_RANGES))
    log.delete_records_before(bases[1])                      # the operator's way past it
    assert not os.path.exists(os.path.join(log.dir, DAMAGED_RANGES))
    assert _offsets(log, bases[1]) == list(range(bases[1], 36))


def test_a_garbage_damaged_ranges_file_is_discarded(tmp_path):
    log = _filled(tmp_path, batches=3)
    log.close()
    with open(os.path.join(log.dir, DAMAGED_RANGES), "wb") as f:
        f.write(b"\x00garbage\xff")
    log = _load(log, recovery_point=9, clean=True)
    assert _offsets(log) == list(range(9))
    assert not os.path.exists(os.path.join(log.dir, DAMAGED_RANGES))


def test_a_garbage_leader_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path):
    log = new_log(tmp_path, **SEGMENT)
    for epoch in (0, 0, 3, 3, 3, 7, 7, 7, 7, 9):
        log.append_as_leader(batch(3, value_size=40), epoch, NOW)
    entries = log.epoch_cache.entries
    assert entries == [(0, 0), (3, 6), (7, 15), (9, 27)]
    log.flush()
    log.close()
    path = os.path.join(log.dir, LEADER_EPOCH_CHECKPOINT)
    with open(path, "wb") as f:
        f.write(b"\xff\xfe\x00 not a checkpoint")
    for clean in (True, False):
        log = _load(log, recovery_point=30, clean=clean)
        assert log.epoch_cache.entries == entries
        assert read_epoch_checkpoint(path) == entries
        log.close()
        with open(path, "wb") as f:
            f.write(b"0\n9\n1 2\n")                          # fewer entries than it says


def test_after_an_unclean_start_segments_below_the_recovery_point_are_checked_in_the_background(tmp_path):
    reactor = InlineReactor()
    reactor.advance(NOW / 1000)
    props = {"log.dirs": str(tmp_path / "data"), "log.segment.bytes": "500"}
    manager = LogManager(KafkaConfig.from_props(props), reactor=reactor, threadpool=SyncThreadPool())
    manager.startService()
    log = manager.create_log("t", 0)
    for i in range(12):
        log.append_as_leader(batch(3, value_size=40, prefix=b"b%d." % i), 0, NOW)
    manager.stopService()
    first = os.path.join(log.dir, segment_file_name(0, ".log"))
    pos, damaged = _batches(first)[1]
    _flip(first, pos + damaged.size - 3)
    os.unlink(os.path.join(manager.log_dirs[0], ".kafka_cleanshutdown"))     # as after a crash

    manager = LogManager(KafkaConfig.from_props(props), reactor=reactor, threadpool=SyncThreadPool())
    manager.startService()
    log = manager.get_log("t", 0)
    assert log.recovery_point == 36 and log.log_end_offset == 36
    assert log.local_log.read(3, 1 << 20).first_offset == 3          # not found yet: served
    reactor.advance(0)                                                # the background check runs
    with pytest.raises(KafkaError) as e:
        log.local_log.read(4, 1 << 20)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    assert [o for o, _ in records_of(log.local_log.read(6, 1 << 20))][0] == 6
    assert log.log_end_offset == 36 and len(log.local_log.segments) > 2
    manager.stopService()

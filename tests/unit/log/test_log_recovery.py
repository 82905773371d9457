"""Loading after clean and unclean shutdowns: torn tails, bad CRCs, lost indexes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from twisted_kafka.log.layout import segment_file_name
from twisted_kafka.log.log import Log
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .helpers import NOW, batch, config, new_log, records_of


def _path(log, base, suffix=".log"):
    return os.path.join(log.dir, segment_file_name(base, suffix))


def _crash(log: Log) -> None:
    """Simulate kill -9: descriptors go away, index entries not written yet are lost
    (they wait in memory until a flush or close), nothing else happens."""
    for segment in log.segments:
        segment.offset_index.discard_pending()
        segment.time_index.discard_pending()
        segment.file.close()


def _load(log: Log, *, recovery_point=0, clean=False, **changes) -> Log:
    return Log.open(log.dir, config(**changes), recovery_point=recovery_point,
                    had_clean_shutdown=clean, now_ms=NOW, files=log.files)


def _filled(tmp_path, batches=10, **changes):
    log = new_log(tmp_path, **changes)
    sizes = []
    for i in range(batches):
        data = batch(3, value_size=40, prefix=b"b%d." % i)
        sizes.append(len(data))
        log.append_as_leader(data, 0, NOW)
    return log, sizes


def test_segment_truncated_mid_batch_recovers_to_the_last_whole_batch(tmp_path):
    log, sizes = _filled(tmp_path)
    _crash(log)
    path = _path(log, 0)
    os.truncate(path, sum(sizes[:7]) + sizes[7] // 2)
    log = _load(log)
    assert log.log_end_offset == 21
    assert os.path.getsize(path) == sum(sizes[:7])
    assert log.recovery_stats.bytes_truncated == sizes[7] // 2
    info = log.append_as_leader(batch(2), 0, NOW)
    assert info.first_offset == 21
    assert [o for o, _ in records_of(log.read(0, 1 << 20))] == list(range(23))


def test_truncated_inside_the_header_recovers_too(tmp_path):
    log, sizes = _filled(tmp_path)
    _crash(log)
    os.truncate(_path(log, 0), sum(sizes[:9]) + 20)
    assert _load(log).log_end_offset == 27


def test_garbage_tail_is_truncated(tmp_path):
    log, sizes = _filled(tmp_path)
    _crash(log)
    with open(_path(log, 0), "ab") as f:
        f.write(os.urandom(1000))
    log = _load(log)
    assert log.log_end_offset == 30
    assert os.path.getsize(_path(log, 0)) == sum(sizes)


def test_zero_filled_tail_is_truncated(tmp_path):
    log, sizes = _filled(tmp_path)
    _crash(log)
    with open(_path(log, 0), "ab") as f:
        f.write(b"\0" * 4096)
    assert _load(log).log_end_offset == 30


def test_corrupted_crc_in_the_tail_truncates_from_that_batch(tmp_path):
    log, sizes = _filled(tmp_path)
    _crash(log)
    with open(_path(log, 0), "r+b") as f:
        f.seek(sum(sizes[:8]) + 70)          # inside batch 8's records
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x55]))
    log = _load(log)
    assert log.log_end_offset == 24
    assert os.path.getsize(_path(log, 0)) == sum(sizes[:8])
    assert log.append_as_leader(batch(1), 0, NOW).first_offset == 24


def test_corruption_in_an_older_segment_drops_everything_after_it(tmp_path):
    log, sizes = _filled(tmp_path, batches=12, segment_bytes=500)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    _crash(log)
    with open(_path(log, bases[1]), "r+b") as f:
        f.seek(80)
        f.write(b"\xff\xff\xff")
    log = _load(log)
    assert [s.base_offset for s in log.segments] == bases[:2]
    assert not os.path.exists(_path(log, bases[2]))
    assert log.log_end_offset == bases[1]      # its first batch was the broken one
    assert log.recovery_stats.segments_deleted == len(bases) - 2


def test_recovery_starts_at_the_recovery_point(tmp_path):
    log, _ = _filled(tmp_path, batches=12, segment_bytes=500)
    log.flush()
    bases = [s.base_offset for s in log.segments]
    _crash(log)
    log = _load(log, recovery_point=bases[-2] + 1)
    assert log.recovery_stats.segments_recovered == 2
    assert log.log_end_offset == 36


def test_missing_index_is_rebuilt(tmp_path):
    log, _ = _filled(tmp_path, batches=30, index_interval_bytes=100, segment_bytes=2000)
    bases = [s.base_offset for s in log.segments]
    entries = len(log.segments[0].offset_index)
    log.flush()
    log.close()
    os.unlink(_path(log, bases[0], ".index"))
    os.unlink(_path(log, bases[1], ".timeindex"))
    log = _load(log, clean=True, index_interval_bytes=100, segment_bytes=2000)
    assert log.recovery_stats.indexes_rebuilt == 2
    assert len(log.segments[0].offset_index) == entries
    assert os.path.getsize(_path(log, bases[0], ".index")) == 8 * entries
    assert [o for o, _ in records_of(log.read(0, 1 << 20))] == list(range(90))
    assert log.read(bases[1] + 4, 1 << 20).first_offset == bases[1] + 3


def test_corrupt_index_is_rebuilt(tmp_path):
    log, _ = _filled(tmp_path, batches=20, index_interval_bytes=100)
    log.flush()
    log.close()
    index_path = _path(log, 0, ".index")
    good = Path(index_path).read_bytes()
    with open(index_path, "wb") as f:          # entries out of order
        f.write(good[8:16] + good[:8] + good[16:])
    log = _load(log, clean=True, index_interval_bytes=100)
    assert log.recovery_stats.indexes_rebuilt == 1
    assert Path(index_path).read_bytes() == good
    with open(index_path, "ab") as f:          # not a multiple of the entry size
        f.write(b"\x01\x02\x03")
    log.close()
    log = _load(log, clean=True, index_interval_bytes=100)
    assert log.recovery_stats.indexes_rebuilt == 1
    assert Path(index_path).read_bytes() == good


def test_clean_shutdown_skips_the_scan(tmp_path):
    log, sizes = _filled(tmp_path, batches=12, segment_bytes=500)
    bases = [s.base_offset for s in log.segments]
    log.flush()
    log.close()
    # Damage a record inside an old segment: a clean load does not look...
    with open(_path(log, bases[0]), "r+b") as f:
        f.seek(80)
        f.write(b"\xff")
    clean = _load(log, clean=True, segment_bytes=500)
    assert clean.recovery_stats.segments_recovered == 0
    assert clean.log_end_offset == 36
    clean.close()
    # ...an unclean load from offset 0 does.
    unclean = _load(log, clean=False, segment_bytes=500)
    assert unclean.recovery_stats.segments_recovered == 1
    assert unclean.log_end_offset == 0


def test_clean_load_whose_tail_is_torn_is_recovered_anyway(tmp_path):
    log, sizes = _filled(tmp_path)
    log.close()
    os.truncate(_path(log, 0), sum(sizes) - 5)
    log = _load(log, clean=True)
    assert log.log_end_offset == 27
    assert log.recovery_stats.segments_recovered == 1


def test_restart_keeps_every_record_and_offsets_continue(tmp_path):
    log, _ = _filled(tmp_path, batches=15, segment_bytes=600)
    log.flush()
    before = records_of(log.read(0, 1 << 20))
    log.close()
    for clean in (True, False):
        log = _load(log, clean=clean, recovery_point=45 if clean else 0, segment_bytes=600)
        assert records_of(log.read(0, 1 << 20))[:45] == before
        assert log.append_as_leader(batch(1), 0, NOW).first_offset == log.log_end_offset - 1
        log.close()
    assert log.log_end_offset == 47


def test_leftover_files_are_removed_at_load(tmp_path):
    log, _ = _filled(tmp_path, batches=3)
    log.close()
    for name in ("00000000000000000099.log.deleted", "00000000000000000050.index",
                 "leader-epoch-checkpoint.tmp", "00000000000000000000.log.swap"):
        open(os.path.join(log.dir, name), "wb").close()
    log = _load(log, clean=True)
    assert sorted(os.listdir(log.dir)) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex",
        "leader-epoch-checkpoint"]


def test_preallocated_segments_are_trimmed_and_recovered(tmp_path):
    log, sizes = _filled(tmp_path, batches=3, preallocate=True, segment_bytes=100_000)
    assert os.path.getsize(_path(log, 0)) == 100_000
    _crash(log)
    log = _load(log, preallocate=True, segment_bytes=100_000)
    assert log.log_end_offset == 9
    assert os.path.getsize(_path(log, 0)) == sum(sizes)
    log.append_as_leader(batch(1), 0, NOW)
    log.roll(NOW)          # the finished segment is trimmed to its data
    assert os.path.getsize(_path(log, 0)) == log.segments[0].size


def test_truncate_to_mid_batch_removes_the_whole_batch(tmp_path):
    log, sizes = _filled(tmp_path, batches=6, segment_bytes=400)
    assert log.truncate_to(10)                 # inside batch 9-11
    assert log.log_end_offset == 9
    assert [o for o, _ in records_of(log.read(0, 1 << 20))] == list(range(9))
    assert log.append_as_leader(batch(1), 0, NOW).first_offset == 9
    assert log.truncate_to(0) and log.log_end_offset == 0 and len(log.segments) == 1


def test_clean_load_notices_an_older_segment_cut_mid_batch(tmp_path):
    log, sizes = _filled(tmp_path, batches=12, segment_bytes=500)
    bases = [s.base_offset for s in log.segments]
    log.flush()
    log.close()
    path = _path(log, bases[1])
    os.truncate(path, os.path.getsize(path) - 7)
    log = _load(log, clean=True, recovery_point=36, segment_bytes=500)
    assert log.recovery_stats.segments_recovered == 1
    assert log.recovery_stats.bytes_truncated == 0
    assert [s.base_offset for s in log.segments] == bases          # later segments kept
    # The cut batch (below the recovery point) is reported, not dropped: a read
    # stops before it, one starting in it fails, one after it works.
    offsets = [o for o, _ in records_of(log.read(0, 1 << 20))]
    assert offsets == list(range(bases[2] - 3))
    with pytest.raises(KafkaError) as e:
        log.read(bases[2] - 2, 1 << 20)
    assert e.value.code == ErrorCode.CORRUPT_MESSAGE
    offsets = [o for o, _ in records_of(log.read(bases[2], 1 << 20))]
    assert offsets == list(range(bases[2], 36))
    assert log.log_end_offset == 36

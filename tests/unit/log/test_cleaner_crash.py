"""A crash at every step of a cleaning and of its swap: the reloaded log is consistent and
still holds every acknowledged record that compaction may not remove.

The swap (``Log.replace_segments``) is a sequence of renames; the test makes the
k-th rename "kill the process" for every k, drops every descriptor without
writing anything more (as ``kill -9`` would), and loads the directory again as
after an unclean shutdown.  Before the commit point (the cleaned ``.log``
renamed ``.swap``) the old segments must come back, after it the cleaned one.
"""

from __future__ import annotations

import contextlib
import os

import pytest

from twisted_kafka.log.cleaner import CleanTask, OffsetMap, log_to_clean
from twisted_kafka.log.log import Log

from .helpers import NOW, all_records, append_keyed, clean_now, compacted_log, config, latest_by_key


class Killed(BaseException):
    """The process died here."""


def _rename_deleter(log, segments):
    for segment in segments:         # what LogManager's deleter does at once
        segment.rename_for_delete()


def _build(tmp_path):
    """A log cleaned once (so its first segments are small enough to be cleaned together
    next time), then written to again; the cleaner checkpoint is on ``log.checkpoint``."""
    log = compacted_log(tmp_path, segment_bytes=2048)
    log.segment_deleter = _rename_deleter
    for i in range(600):
        append_keyed(log, [(b"k%d" % (i % 25), b"v%d" % i)] + ([(b"gone", None)] if i == 300 else []))
    log.checkpoint = clean_now(log, now_ms=NOW).end_offset
    for i in range(600, 700):
        append_keyed(log, [(b"k%d" % (i % 30), b"v%d" % i)])
    log.roll()
    log.flush()
    return log


def _prepare(log):
    """A cleaning run up to its first group's fsynced ``.cleaned`` segment."""
    target = log_to_clean(log, log.checkpoint, NOW)
    task = CleanTask(log, target.first_dirty_offset, target.first_uncleanable_offset, OffsetMap(1 << 20),
                     now_ms=NOW)
    while not task.map_done:
        task.build_map_step(4096)
    group = next(g for g in task.plan() if len(g) > 2)
    task.start_group(group)
    while not task.group_done:
        task.clean_step(4096)
    return task, group, task.finish_group()


def _kill(log, *extra):
    for segment in list(log.segments) + [s for s in extra if s is not None]:
        segment.file.close()


def _reload(log: Log) -> Log:
    return Log.open(log.dir, config(cleanup_policy=("compact",), segment_bytes=2048),
                    recovery_point=log.recovery_point, had_clean_shutdown=False, now_ms=NOW, files=log.files)


def _check(before: list, log: Log) -> list:
    records = all_records(log)
    assert [r.offset for r in records] == sorted({r.offset for r in records})
    assert latest_by_key(records) == latest_by_key(before)      # every key's last record, at its offset
    assert {(r.offset, r.value) for r in records} <= {(r.offset, r.value) for r in before}
    assert log.log_end_offset == before[-1].offset + 1
    assert not [n for n in os.listdir(log.dir) if n.endswith((".cleaned", ".swap", ".deleted"))]
    return records


def _renames_of_a_swap(tmp_path) -> int:
    log = _build(tmp_path / "count")
    _, group, cleaned = _prepare(log)
    calls = []
    real = os.rename

    def counting(*args, **kwargs):
        if not str(args[0]).endswith(".snapshot"):      # producer state snapshots: counted apart
            calls.append(args)
        return real(*args, **kwargs)

    os.rename = counting
    try:
        assert log.replace_segments(cleaned, group)
    finally:
        os.rename = real
    return len(calls)


def test_a_swap_is_three_renames_per_segment(tmp_path):
    log = _build(tmp_path)
    _, group, _ = _prepare(log)
    assert _renames_of_a_swap(tmp_path) == 3 + 3 * len(group) + 3


@pytest.mark.parametrize("kill_at", [*range(9), 30, -7, -6, -5, -4, -3, -2, -1])
def test_kill_during_the_swap(tmp_path, kill_at, monkeypatch):
    """Killed before the ``kill_at``-th rename of the swap (negative: counted back from its
    end; -1 is after its last rename)."""
    log = _build(tmp_path)
    before = all_records(log)
    segments_before = [s.base_offset for s in log.segments]
    task, group, cleaned = _prepare(log)
    total = 6 + 3 * len(group)
    assert len(group) > 10
    if kill_at < 0:
        kill_at += total + 1
    calls = []
    real = os.rename

    def dying(*args, **kwargs):
        if len(calls) == kill_at:
            raise Killed()
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(os, "rename", dying)
    with contextlib.suppress(Killed):
        log.replace_segments(cleaned, group)
    monkeypatch.setattr(os, "rename", real)
    _kill(log, cleaned)
    reloaded = _reload(log)
    records = _check(before, reloaded)
    committed = kill_at >= 3          # the cleaned .log renamed .swap: the swap completes at the next start
    bases = [s.base_offset for s in reloaded.segments]
    if committed:
        assert group[0].base_offset in bases and group[1].base_offset not in bases
    else:
        assert bases == segments_before and len(records) == len(before)


@pytest.mark.parametrize("phase", ["map", "writing", "written"])
def test_kill_before_the_swap_leaves_the_old_segments(tmp_path, phase):
    log = _build(tmp_path)
    before = all_records(log)
    target = log_to_clean(log, log.checkpoint, NOW)
    task = CleanTask(log, target.first_dirty_offset, target.first_uncleanable_offset, OffsetMap(1 << 20),
                     now_ms=NOW)
    task.build_map_step(4096)
    if phase != "map":
        while not task.map_done:
            task.build_map_step(4096)
        group = next(g for g in task.plan() if len(g) > 2)
        task.start_group(group)
        task.clean_step(100)
        if phase == "written":
            while not task.group_done:
                task.clean_step(4096)
            task.finish_group()
        assert any(n.endswith(".cleaned") for n in os.listdir(log.dir))
    _kill(log, task.cleaned)
    reloaded = _reload(log)
    assert len(_check(before, reloaded)) == len(before)


def test_swap_completed_by_recovery_when_old_segments_are_half_gone(tmp_path):
    """The state after the old segments' renames: some ``.deleted``, some not, the ``.swap`` there."""
    log = _build(tmp_path)
    before = all_records(log)
    _, group, cleaned = _prepare(log)
    cleaned.change_suffix(".cleaned", ".swap")
    group[0].rename_for_delete()
    _kill(log, cleaned)
    swap_end = cleaned.next_offset
    reloaded = _reload(log)
    _check(before, reloaded)
    bases = [s.base_offset for s in reloaded.segments]
    assert bases.count(group[0].base_offset) == 1
    # The replaced segments are those the swapped-in data reaches (Kafka's rule); one beyond
    # that (its records all obsolete, so none made it into the cleaned segment) stays as it
    # was: uncleaned, never lost, cleaned next time.
    assert [g.base_offset in bases for g in group[1:]] == [g.base_offset >= swap_end for g in group[1:]]


def test_replace_refuses_segments_no_longer_in_the_log(tmp_path):
    log = _build(tmp_path)
    task, group, cleaned = _prepare(log)
    log.delete_records_before(group[1].base_offset)
    assert not log.replace_segments(cleaned, group)
    task.discard_group()
    assert not any(n.endswith(".cleaned") for n in os.listdir(log.dir))

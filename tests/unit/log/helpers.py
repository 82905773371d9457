"""Helpers for the log tests: batches, logs, and a deterministic reactor + thread pool."""

from __future__ import annotations

import os

from twisted_kafka.log.file_handles import FileHandleCache, default_capacity
from twisted_kafka.log.log import Log
from twisted_kafka.log.log_config import LogConfig
from twisted_kafka.protocol.records.batch import iter_batch_headers, parse_batch_header
from twisted_kafka.protocol.records.builder import build_batch
from twisted_kafka.protocol.records.record import iter_records

NOW = 1_700_000_000_000


def batch(n: int = 1, *, value_size: int = 10, ts: int | None = NOW, step: int = 0,
          prefix: bytes = b"v", **kwargs) -> bytes:
    """A v2 batch of ``n`` records (timestamps ``ts``, ``ts+step``, ...)."""
    records = []
    for i in range(n):
        value = (prefix + b"%d-" % i).ljust(value_size, b"x")
        records.append((b"k%d" % i, value, (), None if ts is None else ts + i * step))
    return build_batch(records, **kwargs)


def config(**changes) -> LogConfig:
    base = dict(message_timestamp_before_max_ms=2**63 - 1, message_timestamp_after_max_ms=2**63 - 1)
    base.update(changes)
    return LogConfig(**base)


def new_log(tmp_path, name: str = "t-0", *, files: FileHandleCache | None = None, **changes) -> Log:
    """A new log; its files go through ``files``, else a descriptor cache of its own (as a
    ``LogManager`` would make)."""
    files = files if files is not None else FileHandleCache(default_capacity())
    return Log.create(os.path.join(str(tmp_path), name), name.rsplit("-", 1)[0],
                      int(name.rsplit("-", 1)[1]), config(**changes), files=files, now_ms=NOW)


def reopen(log: Log, *, clean: bool = False, **changes) -> Log:
    """Close ``log`` and load its directory again (as after a restart)."""
    recovery_point = log.recovery_point
    start = log.log_start_offset
    log.close()
    return Log.open(log.dir, config(**changes), files=log.files, recovery_point=recovery_point,
                    log_start_offset=start, had_clean_shutdown=clean, now_ms=NOW)


def records_of(info) -> list[tuple[int, bytes]]:
    """(offset, value) of every record in a FetchDataInfo's chunks."""
    data = b"".join(bytes(c) for c in info.records)
    out = []
    for pos, header in iter_batch_headers(data):
        for rec in iter_records(data, pos, header):
            out.append((rec.offset, rec.value))
    return out


def headers_of(info):
    data = b"".join(bytes(c) for c in info.records)
    return [h for _, h in iter_batch_headers(data)]


def first_header(data: bytes):
    return parse_batch_header(data, 0)




def keyed_batch(pairs, *, ts: int = NOW, **kwargs) -> bytes:
    """A batch of ``(key, value)`` records (value None: a tombstone), all at ``ts``."""
    return build_batch([(k, v, (), ts) for k, v in pairs], **kwargs)


def compacted_log(tmp_path, name: str = "c-0", **changes) -> Log:
    changes.setdefault("cleanup_policy", ("compact",))
    return new_log(tmp_path, name, **changes)


def append_keyed(log: Log, pairs, *, ts: int = NOW, **kwargs):
    from twisted_kafka.log.log import AppendOrigin

    return log.append_as_leader(keyed_batch(pairs, ts=ts, **kwargs), 0, NOW, origin=AppendOrigin.COORDINATOR)


def all_records(log: Log) -> list:
    """Every record of the log from its start: ``Record`` tuples (offset, timestamp, key, value, ...)."""
    out = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20)
        if info.empty:
            break
        data = b"".join(bytes(c) for c in info.records)
        for pos, header in iter_batch_headers(data):
            out.extend(r for r in iter_records(data, pos, header) if r.offset >= offset)
        offset = info.next_offset
    return out


def all_headers(log: Log) -> list:
    out = []
    for segment in log.segments:
        out.extend(h for _, h in segment.iter_headers(0))
    return out


def latest_by_key(records) -> dict:
    """{key: (offset, value)} of the last record of each key."""
    return {r.key: (r.offset, r.value) for r in records}


def clean_now(log: Log, *, now_ms: int = NOW, checkpoint: int | None = None, memory: int = 64 << 20,
              chunk: int = 256 * 1024, swap: bool = True):
    """One cleaning of ``log`` run synchronously (what ``LogCleaner`` does in the pool), its
    groups swapped in.  Returns the ``CleanTask``."""
    from twisted_kafka.log.cleaner import CleanTask, OffsetMap, log_to_clean

    target = log_to_clean(log, checkpoint, now_ms)
    task = CleanTask(log, target.first_dirty_offset, target.first_uncleanable_offset, OffsetMap(memory),
                     now_ms=now_ms)
    while not task.map_done:
        task.build_map_step(chunk)
    for group in task.plan():
        task.start_group(group)
        while not task.group_done:
            task.clean_step(chunk)
        cleaned = task.finish_group()
        if swap:
            assert log.replace_segments(cleaned, group)
            task.swapped()
    return task

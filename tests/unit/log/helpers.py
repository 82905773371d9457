"""Helpers for the log tests: batches, logs, and a deterministic reactor + thread pool."""

from __future__ import annotations

import os
from collections import deque

from twisted.internet.task import Clock
from twisted.python.failure import Failure

from twisted_kafka.log.log import Log
from twisted_kafka.log.log_config import LogConfig
from twisted_kafka.protocol.records.batch import parse_batch_header, iter_batch_headers
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


def new_log(tmp_path, name: str = "t-0", **changes) -> Log:
    return Log.create(os.path.join(str(tmp_path), name), name.rsplit("-", 1)[0],
                      int(name.rsplit("-", 1)[1]), config(**changes), now_ms=NOW)


def reopen(log: Log, *, clean: bool = False, **changes) -> Log:
    """Close ``log`` and load its directory again (as after a restart)."""
    recovery_point = log.recovery_point
    start = log.log_start_offset
    log.close()
    return Log.open(log.dir, config(**changes), recovery_point=recovery_point,
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


class FakeReactor(Clock):
    """``task.Clock`` plus ``callFromThread`` (runs at once: the pool below is synchronous)."""

    def callFromThread(self, f, *args, **kwargs):
        f(*args, **kwargs)


class SyncThreadPool:
    """Runs "thread pool" work immediately on the calling thread."""

    def __init__(self):
        self.calls = []

    def callInThreadWithCallback(self, on_result, f, *args, **kwargs):
        self.calls.append(getattr(f, "__name__", repr(f)))
        try:
            result = f(*args, **kwargs)
        except BaseException:
            on_result(False, Failure())
        else:
            on_result(True, result)


class ManualThreadPool(SyncThreadPool):
    """Queues work; the test decides when each item "runs in its thread"."""

    def __init__(self):
        super().__init__()
        self.queue = deque()

    def callInThreadWithCallback(self, on_result, f, *args, **kwargs):
        self.queue.append((on_result, f, args, kwargs))

    def run_one(self):
        on_result, f, args, kwargs = self.queue.popleft()
        SyncThreadPool.callInThreadWithCallback(self, on_result, f, *args, **kwargs)

    def run_all(self):
        while self.queue:
            self.run_one()

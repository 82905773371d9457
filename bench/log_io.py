"""What the log's disk work costs, and what it does to the reactor.

For 16 KiB and 1 MiB batches (uncompressed, 1 KiB records) it measures:

* append (validate + offset rewrite + page-cache write), without and with an
  fsync after each append;
* read of the same sizes from a warm page cache;

each run two ways — inline on the reactor thread, and through
``deferToThreadPool`` — and reports the per-operation latency (p50/p99/max)
together with the *reactor stall*: a 1 ms heartbeat runs during every
scenario and the largest (and 99th percentile) lateness of its ticks is what
every other connection would have felt.

"where" is ``inline`` (all on the reactor), ``thread`` (all of it through
``deferToThreadPool``) or ``split`` — what ``UnifiedLog`` does: append with
its write in the pool (prepare/commit on the reactor), fsync in the pool,
and reads tried on the reactor with ``RWF_NOWAIT`` (page cache only), redone
in the pool when they would wait for the disk.  "read cold" evicts the
segment from the page cache before each read.

"CPU ms/op" is this process's CPU time (every thread: the reactor's and the
pool's) per operation over the scenario -- the bench is its own client.  The
figures are per-operation latencies, so the N-scaling check asks whether the
N operations of a scenario cost the same throughout: the total latency of
all N must be about twice that of the first N/2 (a log that slows down as it
grows, or a cache that warms up halfway, is flagged: its percentiles mix two
regimes; ``bench/common.py``).

Usage: ``python bench/log_io.py [--dir PATH] [--quick]``.  The directory must
be on the disk you care about (``/tmp`` may be tmpfs, where fsync is free).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

from twisted.internet import defer, reactor, task, threads
from twisted.python.threadpool import ThreadPool

from bench.common import ClientCpu, ratio_cell, report_scaling, scaling_check
from twisted_kafka.log.file_handles import FileHandleCache, default_capacity
from twisted_kafka.log.log import Log
from twisted_kafka.log.log_config import LogConfig
from twisted_kafka.log.segment import WouldBlock
from twisted_kafka.protocol.records.builder import build_batch

KIB = 1024
MIB = 1024 * KIB
HEARTBEAT_S = 0.001


class Heartbeat:
    """Ticks every millisecond and records how late each tick was."""

    def __init__(self):
        self.lateness: list[float] = []
        self._expected = None
        self._loop = task.LoopingCall(self._tick)

    def _tick(self):
        now = time.perf_counter()
        if self._expected is not None:
            self.lateness.append(max(0.0, now - self._expected))
        self._expected = now + HEARTBEAT_S

    def start(self):
        self.lateness = []
        self._expected = None
        self._loop.start(HEARTBEAT_S, now=True)

    def stop(self):
        self._loop.stop()
        return self.lateness


def sleep(seconds):
    return task.deferLater(reactor, seconds, lambda: None)


def pct(values, q):
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def make_batch(size: int) -> bytes:
    records = [(b"key-%d" % i, os.urandom(1000), (), None) for i in range(max(1, size // 1024))]
    return build_batch(records)


class Scenario:
    def __init__(self, name, size, op, mode):
        self.name, self.size, self.op, self.mode = name, size, op, mode


def drop_cache(log: Log) -> None:
    """Evict the log's segment files from the page cache (they are fsynced first)."""
    for segment in log.segments:
        os.fsync(segment.fd)
        os.posix_fadvise(segment.fd, 0, 0, os.POSIX_FADV_DONTNEED)


@defer.inlineCallbacks
def run_scenario(log: Log, pool, heartbeat: Heartbeat, data: bytes, op: str, where: str, n: int):
    """Run ``n`` operations; returns (latencies, time on the reactor thread, heartbeat lateness, CPU seconds)."""
    latencies = []
    busy_times = []
    counter = [0]

    def next_offset():
        counter[0] += 1
        span = max(1, log.log_end_offset - log.log_start_offset)
        return log.log_start_offset + (counter[0] * 7919) % span

    def append():
        log.append_as_leader(data, 0)

    def append_fsync():
        log.append_as_leader(data, 0)
        log.flush()

    def read():
        assert log.read(next_offset(), len(data)).size

    heartbeat.start()
    yield sleep(0.01)
    cpu = ClientCpu().start()
    for _ in range(n):
        if op.startswith("read cold"):
            yield threads.deferToThreadPool(reactor, pool, drop_cache, log)
            yield sleep(0.002)
        t0 = time.perf_counter()
        busy = 0.0            # time spent on the reactor thread for this operation

        def submit(f, *a):
            nonlocal busy
            s0 = time.perf_counter()
            d = threads.deferToThreadPool(reactor, pool, f, *a)
            busy += time.perf_counter() - s0
            return d

        if op == "append" and where == "inline":
            append()
        elif op == "append" and where == "thread":
            yield submit(append)
        elif op == "append" and where == "split":
            # UnifiedLog for large appends: prepare on the reactor, write in the pool.
            pending = log.prepare_append_as_leader(data, 0)
            busy += time.perf_counter() - t0
            yield submit(pending.write)
            c0 = time.perf_counter()
            log.complete_append(pending)
            busy += time.perf_counter() - c0
        elif op == "append+fsync" and where == "inline":
            append_fsync()
        elif op == "append+fsync" and where == "thread":
            yield submit(append_fsync)
        elif op == "append+fsync" and where == "split":
            # UnifiedLog with flush.messages=1: append on the reactor, fsync in the pool.
            append()
            busy += time.perf_counter() - t0
            yield submit(log.flush)
        elif op.startswith("read") and where == "inline":
            read()
        elif op.startswith("read") and where == "thread":
            yield submit(read)
        elif op.startswith("read") and where == "split":
            # UnifiedLog.read: page cache only on the reactor, else the pool.
            offset = next_offset()
            try:
                info = log.read(offset, len(data), nowait=True)
                busy += time.perf_counter() - t0
            except WouldBlock:
                busy += time.perf_counter() - t0
                info = yield submit(log.read, offset, len(data))
            assert info.size
        else:
            raise AssertionError((op, where))
        latencies.append(time.perf_counter() - t0)
        busy_times.append(latencies[-1] if where == "inline" else busy)
        yield sleep(0.002)        # let the heartbeat tick between operations
    cpu.stop()
    lateness = heartbeat.stop()
    return latencies, busy_times, lateness, cpu.seconds


def fmt_ms(seconds):
    return f"{seconds * 1000:.3f}"


@defer.inlineCallbacks
def main(args):
    base = args.dir or tempfile.mkdtemp(prefix="log-io-", dir=os.getcwd())
    os.makedirs(base, exist_ok=True)
    pool = ThreadPool(minthreads=2, maxthreads=4, name="bench-log-io")
    pool.start()
    heartbeat = Heartbeat()
    rows = []
    try:
        sizes = [(16 * KIB, 60 if args.quick else 400), (1 * MIB, 15 if args.quick else 60)]
        plan = [(op, where)
                for op in ("append", "append+fsync", "read warm", "read cold")
                for where in ("inline", "thread", "split")]
        for size, n in sizes:
            data = make_batch(size)
            for op, mode in plan:
                if op == "read cold" and not hasattr(os, "posix_fadvise"):
                    continue
                path = os.path.join(base, f"bench-{size}-{op.replace(' ', '_')}-{mode}-0")
                shutil.rmtree(path, ignore_errors=True)
                config = LogConfig(segment_bytes=256 * MIB, max_message_bytes=2 * MIB)
                log = Log.create(path, "bench", 0, config, files=FileHandleCache(default_capacity()))
                if op.startswith("read"):
                    for _ in range(min(n, 200)):
                        log.append_as_leader(data, 0)
                    for _ in range(3):        # warm the page cache
                        log.read(0, 1 << 30)
                latencies, busy, lateness, cpu = yield run_scenario(log, pool, heartbeat, data, op, mode, n)
                scaling = scaling_check(f"{size // KIB} KiB {op} {mode}: total latency of the first {n // 2} "
                                        f"vs all {n} operations (s)", sum(latencies[:n // 2]), sum(latencies),
                                        min_seconds=0.005)
                rows.append((f"{size // KIB} KiB", op, mode, len(data), latencies, busy, lateness, cpu / n,
                             scaling))
                log.close()
                shutil.rmtree(path, ignore_errors=True)
    finally:
        pool.stop()
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)

    print(f"log I/O on {base} ({os.uname().sysname}, {os.cpu_count()} CPUs); "
          f"latency and reactor stall in ms")
    print("  latency: call to completion; on reactor: time the reactor thread spent on it;")
    print("  heartbeat: lateness of a 1 ms timer meanwhile (includes scheduler noise)")
    print("  CPU: this process's CPU time (all threads) per operation; N-scaling: total latency of all N")
    print("  operations over that of the first N/2 (~2: each operation cost the same throughout)")
    print(f"{'batch':>8} {'operation':>14} {'where':>7} | {'latency p50':>11} {'p99':>7} {'max':>7} |"
          f" {'on reactor p50':>14} {'max':>7} | {'heartbeat p99':>13} {'max':>7} | {'CPU ms/op':>9} |"
          f" {'N-scaling':>9}")
    for size, op, mode, _nbytes, lat, busy, late, cpu, scaling in rows:
        print(f"{size:>8} {op:>14} {mode:>7} | {fmt_ms(statistics.median(lat)):>11}"
              f" {fmt_ms(pct(lat, 0.99)):>7} {fmt_ms(max(lat)):>7} |"
              f" {fmt_ms(statistics.median(busy)):>14} {fmt_ms(max(busy)):>7} |"
              f" {fmt_ms(pct(late, 0.99)):>13} {fmt_ms(max(late) if late else 0):>7} | {fmt_ms(cpu):>9} |"
              f" {ratio_cell(scaling):>9}")
    print()
    report_scaling([row[-1] for row in rows])
    reactor.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", help="where to write (default: a temp dir under the cwd)")
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    args = parser.parse_args()
    reactor.callWhenRunning(lambda: main(args).addErrback(lambda f: (f.printTraceback(), reactor.stop())))
    reactor.run()

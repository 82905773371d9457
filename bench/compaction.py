"""How fast the log cleaner compacts, and whether its cost grows linearly with the log.

    .venv/bin/python bench/compaction.py [--records 400000] [--value-bytes 100] [--dir PATH]

A compacted log (1 MiB segments, uncompressed batches of 500 records,
``--value-bytes`` values) is filled with N/2 records, then (a new log) with N
records, over N/100 keys drawn at random, so about 1% of the records -- the
latest of each key -- survive at both sizes.  The active segment is rolled so
everything is cleanable, and one cleaning is run the way ``LogCleaner`` runs
it, minus the reactor: ``CleanTask``'s steps called in a loop on this thread
with the cleaner's default read size (256 KiB) and the default 128 MiB key
map, then each cleaned segment swapped in (``Log.replace_segments``).

Reported per size: the offset-map phase (MB read, MB/s), the copy phase
(MB read, MB written, MB/s read), the whole cleaning (MB/s of log read,
records/s, this process's CPU seconds), and the N-scaling check (the
cleaning of N records should take about twice the CPU time and the wall time
of N/2; ``bench/common.py``).  On a loaded machine the wall times mostly say
how much CPU the other processes left; the CPU time is the cleaner's own cost.  The cleaner's real
throughput on a broker is this figure or ``log.cleaner.io.max.bytes.per.second``,
whichever is lower, and it shares the I/O thread pool and the machine's CPU
with everything else.  ``--dir`` should be on the disk you care about (the
cleaner fsyncs each cleaned segment).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import tempfile
import time

from bench.common import ClientCpu, report_scaling, scaling_check
from twisted_kafka.log.cleaner import CleanTask, OffsetMap, log_to_clean
from twisted_kafka.log.file_handles import FileHandleCache, default_capacity
from twisted_kafka.log.log import AppendOrigin, Log
from twisted_kafka.log.log_config import LogConfig
from twisted_kafka.protocol.records.builder import build_batch

NOW = 1_700_000_000_000
BATCH = 500
READ = 256 * 1024
MAP_MEMORY = 128 * 1024 * 1024
MB = 1024 * 1024


def fill(directory: str, records: int, value_bytes: int) -> Log:
    config = LogConfig(cleanup_policy=("compact",), segment_bytes=1 << 20,
                       message_timestamp_before_max_ms=2**63 - 1, message_timestamp_after_max_ms=2**63 - 1)
    log = Log.create(directory, "bench", 0, config, now_ms=NOW, files=FileHandleCache(default_capacity()))
    rng = random.Random(records)
    keys = max(1, records // 100)
    for start in range(0, records, BATCH):
        batch = []
        for i in range(start, min(records, start + BATCH)):
            key = b"key-%08d" % rng.randrange(keys)
            batch.append((key, (b"%s=%d;" % (key, i)).ljust(value_bytes, b"."), (), NOW))
        log.append_as_leader(build_batch(batch), 0, NOW, origin=AppendOrigin.COORDINATOR)
    log.roll(NOW)
    log.flush()
    return log


def clean(log: Log) -> dict:
    target = log_to_clean(log, None, NOW)
    cpu = ClientCpu().start()
    started = time.perf_counter()
    task = CleanTask(log, target.first_dirty_offset, target.first_uncleanable_offset, OffsetMap(MAP_MEMORY),
                     now_ms=NOW)
    while not task.map_done:
        task.build_map_step(READ)
    mapped = time.perf_counter()
    for group in task.plan():
        task.start_group(group)
        while not task.group_done:
            task.clean_step(READ)
        cleaned = task.finish_group()
        assert log.replace_segments(cleaned, group)
        task.swapped()
    ended = time.perf_counter()
    stats = task.stats
    return {"map_s": mapped - started, "copy_s": ended - mapped, "total_s": ended - started,
            "cpu_s": cpu.stop(), "map_mb": stats.map_bytes_read / MB, "copy_mb": stats.filter.bytes_read / MB,
            "written_mb": stats.bytes_written / MB, "records": stats.filter.records_read,
            "kept": stats.filter.records_kept, "log_mb": target.cleanable_bytes / MB}


def run(base: str, records: int, value_bytes: int) -> dict:
    directory = os.path.join(base, f"bench-{records}")
    log = fill(directory, records, value_bytes)
    try:
        return clean(log)
    finally:
        log.close()
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=400_000, help="N (the larger run)")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--dir", default=None, help="where the logs are written (default: a temp dir)")
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="compaction-bench-", dir=args.dir)
    try:
        results = {n: run(base, n, args.value_bytes) for n in (args.records // 2, args.records)}
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"log cleaner, one cleaning of a whole log: {args.value_bytes}-byte values, batches of {BATCH}, "
          f"N/100 keys, 1 MiB segments, {READ // 1024} KiB reads")
    print(f"{'records':>9} {'log MB':>7} {'kept':>6} | {'map MB/s':>8} | {'copy MB/s':>9} {'written MB':>10} | "
          f"{'total s':>7} {'MB/s':>6} {'krec/s':>7} {'CPU s':>6}")
    for n, r in results.items():
        print(f"{n:>9} {r['log_mb']:>7.1f} {r['kept']:>6} | {r['map_mb'] / r['map_s']:>8.1f} | "
              f"{r['copy_mb'] / r['copy_s']:>9.1f} {r['written_mb']:>10.2f} | {r['total_s']:>7.2f} "
              f"{r['log_mb'] / r['total_s']:>6.1f} {r['records'] / r['total_s'] / 1000:>7.0f} {r['cpu_s']:>6.2f}")
    half, full = results[args.records // 2], results[args.records]
    report_scaling([scaling_check("cleaning CPU time", half["cpu_s"], full["cpu_s"]),
                    scaling_check("cleaning time", half["total_s"], full["total_s"]),
                    scaling_check("offset map time", half["map_s"], full["map_s"]),
                    scaling_check("copy time", half["copy_s"], full["copy_s"])])


if __name__ == "__main__":
    main()

"""What a flooding or misbehaving data-plane client does to everyone else, on a real broker process.

    .venv/bin/python bench/planes.py [--seconds 3] [--flood-processes 2] [--connections 20] [--repeat 1]
    .venv/bin/python bench/planes.py --flood non-reader [--seconds 5] [--idle-ms 5000]

A broker is started the README way (``support/broker_process.py``).

``--flood pipeline`` (the default; KIP-291's case): one data-plane handler
(``num.io.threads=1``) and ``queued.max.requests=8``.  Flood processes
(``support/load.py pipeline``) keep 5 Metadata requests in flight on
each of their connections; once every flood connection is being answered,
one latency probe per plane (``load.py latency``: one ApiVersions at a time,
every 10 ms) runs for ``--seconds``, then the flood stops.  Reported: p50 /
p99 / max round-trip of each plane's probe, the flood's throughput (requests
answered per second of sending), the broker's CPU time per flood request
(user + system, psutil: what the broker spends, whatever else runs on the
machine), the load generators' CPU time, and the data queue's peak from the
broker's shutdown summary.

``--flood non-reader``: one client (``load.py nonreader``) pipelines
Metadata requests on a connection with 4 KiB socket buffers and never
reads; ``connections.max.idle.ms`` is ``--idle-ms``.  A well-behaved producer
(``load.py latency --api produce``: one Produce of 100 bytes, acks=1, every
10 ms) runs for ``--seconds`` alone, then as long again beside the
non-reader.  Reported: the producer's p50 / p99 / max in both phases, the
broker's RSS before and its peak beside the non-reader (VmHWM), how many
requests the broker took from the non-reader, and whether and after how
long the broker closed it.

With ``--repeat N`` the whole run is repeated on a new broker and every run
is printed, so the noise of a shared machine shows.  The integration tests
(tests/integration/network/test_planes.py, test_flow_control.py) check the
behaviour; this script gives the figures.  The load runs on the same machine
as the broker: on a small or shared machine the latencies say as much about
the machine as about the broker, the CPU-per-request column less so.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

from bench.common import report_scaling, scaling_check
from support import load
from support.broker_process import BrokerProcess
from support.raw_client import RawClient, auto_create_topic

QUEUE_CAP = 8


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def peak_rss(pid: int) -> int:
    """VmHWM: the process's peak resident set size, in bytes (Linux)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def probe_row(label: str, result: dict) -> str:
    return (f"{label:<34}{result['count']:>9}{result['p50_ms']:>9.2f}{result['p99_ms']:>9.2f}"
            f"{result['max_ms']:>9.2f}")


PROBE_HEADER = f"{'probe':<34}{'requests':>9}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}"


def pipeline_run(args) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="bench-planes-"))
    broker = BrokerProcess(workdir, {"num.io.threads": "1", "queued.max.requests": str(QUEUE_CAP)}).start()
    floods = []
    client_cpu = children_cpu_seconds()
    broker_cpu = cpu_seconds(broker.pid)
    try:
        floods = [load.spawn("pipeline", port=broker.data_port, connections=args.connections, depth=args.depth,
                             duration=args.seconds + 600, api="metadata")
                  for _ in range(args.flood_processes)]
        for process in floods:
            load.wait_answering(process)
        probes = {plane: load.spawn("latency", port=port, duration=args.seconds, interval=args.interval,
                                    api="api_versions")
                  for plane, port in (("control", broker.control_port), ("data", broker.data_port))}
        latencies = {plane: load.collect(process) for plane, process in probes.items()}
    finally:
        for process in floods:
            load.stop(process)
        flood = [load.collect(process) for process in floods]
        broker_cpu = cpu_seconds(broker.pid) - broker_cpu
        client_cpu = children_cpu_seconds() - client_cpu
        status = broker.stop()
    summary = re.search(r"RequestChannel \(data plane\): .*peak queue size (\d+) of (\d+)", broker.log_text())
    shutil.rmtree(workdir, ignore_errors=True)
    if status != 0:
        print(f"warning: the broker exited with status {status}", file=sys.stderr)
    received = sum(r["received"] for r in flood)
    return {"latencies": latencies, "received": received,
            "seconds": max(r["sending_seconds"] for r in flood),
            "errors": sum(r["out_of_order"] + r["closed_by_broker"] + r["unanswered"] for r in flood),
            "broker_cpu_us": broker_cpu / received * 1e6 if received else float("nan"),
            "client_cpu": client_cpu, "queue_peak": summary[1] if summary else "?"}


def print_pipeline(args, runs: list[dict]) -> None:
    print(f"\nPlanes under a data-plane flood: {args.flood_processes} x {args.connections} connections x "
          f"{args.depth} Metadata requests in flight, num.io.threads=1, queued.max.requests={QUEUE_CAP}, "
          f"{os.cpu_count()} CPU(s), {len(runs)} run(s)")
    for n, run in enumerate(runs, 1):
        print(f"\nrun {n}")
        print(PROBE_HEADER)
        for plane, result in run["latencies"].items():
            print(probe_row(f"{plane} plane (ApiVersions)", result))
        rate = run["received"] / run["seconds"]
        print(f"flood: {run['received']:,} Metadata requests answered in {run['seconds']:.1f} s ({rate:,.0f}/s), "
              f"broker CPU {run['broker_cpu_us']:.1f} us/request, load generators' CPU {run['client_cpu']:.1f} s"
              + (f", {run['errors']} error(s) (out of order, closed or unanswered)" if run["errors"] else ""))
        print(f"data queue peak: {run['queue_peak']} of {QUEUE_CAP}")


def non_reader_run(args) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="bench-nonreader-"))
    broker = BrokerProcess(workdir, {"connections.max.idle.ms": str(args.idle_ms)}).start()
    samples: list[int] = []
    stop_sampling = threading.Event()
    try:
        with RawClient(broker.data_port) as client:
            auto_create_topic(client, load.PRODUCE_TOPIC, 1)
        alone = load.collect(load.spawn("latency", port=broker.data_port, duration=args.seconds,
                                        interval=args.interval, api="produce"))
        rss_before = psutil.Process(broker.pid).memory_info().rss
        hwm_before = peak_rss(broker.pid)

        def sample() -> None:
            while not stop_sampling.wait(0.1):
                samples.append(psutil.Process(broker.pid).memory_info().rss)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        non_reader = load.spawn("nonreader", port=broker.data_port, api="metadata",
                                duration=args.seconds + args.idle_ms / 1000.0 + 10)
        load.wait_connected(non_reader)
        beside = load.collect(load.spawn("latency", port=broker.data_port, duration=args.seconds,
                                         interval=args.interval, api="produce"))
        taken = load.collect(non_reader, timeout=args.seconds + args.idle_ms / 1000.0 + 60)
        stop_sampling.set()
        sampler.join()
        hwm_after = peak_rss(broker.pid)
    finally:
        stop_sampling.set()
        status = broker.stop()
    shutil.rmtree(workdir, ignore_errors=True)
    if status != 0:
        print(f"warning: the broker exited with status {status}", file=sys.stderr)
    return {"alone": alone, "beside": beside, "non_reader": taken, "rss_before": rss_before,
            "rss_max": max(samples, default=rss_before), "hwm_growth": hwm_after - hwm_before}


def print_non_reader(args, runs: list[dict]) -> None:
    mib = 2 ** 20
    print(f"\nA client that never reads: Metadata v1 pipelined on one connection with 4 KiB socket "
          f"buffers, connections.max.idle.ms={args.idle_ms}, {os.cpu_count()} CPU(s), {len(runs)} run(s)")
    for n, run in enumerate(runs, 1):
        taken = run["non_reader"]
        print(f"\nrun {n}")
        print(PROBE_HEADER)
        print(probe_row("producer alone (Produce acks=1)", run["alone"]))
        print(probe_row("producer beside the non-reader", run["beside"]))
        closed = (f"closed by the broker after {taken['closed_after_seconds']:.1f} s"
                  if taken["closed_by_broker"] else f"still open after {taken['seconds']:.1f} s")
        print(f"non-reader: {taken['requests_taken']:,} requests taken by the broker, {closed}")
        print(f"broker RSS: {run['rss_before'] / mib:.0f} MiB before, {run['rss_max'] / mib:.0f} MiB at most "
              f"beside the non-reader (peak RSS grew by {run['hwm_growth'] / mib:.1f} MiB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--flood", choices=("pipeline", "non-reader"), default="pipeline")
    parser.add_argument("--seconds", type=float, default=3.0, help="how long each latency probe runs")
    parser.add_argument("--flood-processes", type=int, default=2)
    parser.add_argument("--connections", type=int, default=20, help="flood connections per process")
    parser.add_argument("--depth", type=int, default=5, help="requests in flight per flood connection")
    parser.add_argument("--interval", type=float, default=0.01, help="seconds between two probe requests")
    parser.add_argument("--idle-ms", type=int, default=5000, help="connections.max.idle.ms (non-reader)")
    parser.add_argument("--repeat", type=int, default=1, help="runs, each on a new broker")
    args = parser.parse_args()
    started = time.monotonic()
    if args.flood == "pipeline":
        # The N-scaling check: one run at half the time first; twice the time should get about
        # twice the flood and probe requests answered (bench/common.py).
        half = pipeline_run(argparse.Namespace(**{**vars(args), "seconds": args.seconds / 2}))
        runs = [pipeline_run(args) for _ in range(args.repeat)]
        print_pipeline(args, runs)
        full = runs[-1]
        report_scaling([
            scaling_check(f"flood requests answered in {args.seconds / 2:g} s and {args.seconds:g} s",
                          half["received"], full["received"], timed=False),
            scaling_check(f"probe requests answered in {args.seconds / 2:g} s and {args.seconds:g} s",
                          sum(r["count"] for r in half["latencies"].values()),
                          sum(r["count"] for r in full["latencies"].values()), timed=False)])
    else:
        print_non_reader(args, [non_reader_run(args) for _ in range(args.repeat)])
    print(f"\n({time.monotonic() - started:.0f} s in all)")


if __name__ == "__main__":
    main()

"""Network-layer benchmark: small-request throughput and connection accept rate,
twisted_kafka against Tansu (a Kafka-compatible broker in Rust) in the same run.

    .venv/bin/python bench/network.py [--duration 4] [--no-tansu]

Both brokers listen on loopback only.  twisted_kafka is started the README
way (``bin/twisted-kafka-server-start etc/server.properties`` on ports the
kernel picks, via ``support/broker_process.py``); Tansu with
``tansu broker --storage-engine memory://tansu/`` (``bench/tansu.py``).

The load comes from separate processes with raw sockets
(``support/load.py``), so the client is not a Python Kafka library:

* throughput — ApiVersions v0 and Metadata v1 (all topics; there are none),
  5 requests in flight per connection, 1 / 10 / 100 connections;
* accept rate — connect, one ApiVersions request, read the answer, close,
  16 connections at a time.

Workloads run on both brokers in turn (interleaved, the order alternating),
and the best of ``--repeat`` runs is reported, so background load on the
machine hits both alike.  Reported: requests (or accepts) per second, the
broker's CPU time per request (user + system of the broker process and all its threads, from
psutil), and the client's: the load processes' CPU time per request (from
``getrusage`` of the children this script waited for).  On a small machine
the load generator competes with the broker for cores; the broker's
CPU-per-request column is its own cost regardless.

Each row is a fixed-duration run, so the N-scaling check runs every
workload once more for half the duration: it must get about half as much
done (requests answered at T / at T/2 ~ 2); a ratio far from 2 means set-up
or a stall, not the throughput, dominates the figure (``bench/common.py``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import psutil

from bench.common import ClientCpu, ratio_cell, report_scaling, scaling_check
from bench.tansu import BINARY as TANSU
from bench.tansu import Tansu
from support import load
from support.broker_process import BrokerProcess


def cpu_seconds(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


def run_pipeline(pid: int, port: int, connections: int, api: str, duration: float, depth: int) -> dict:
    processes = 1 if connections <= 10 else 2
    per_process = [connections // processes + (1 if i < connections % processes else 0) for i in range(processes)]
    before = cpu_seconds(pid)
    client = ClientCpu(children=True).start()
    generators = [load.spawn("pipeline", port=port, connections=n, depth=depth, duration=duration, api=api)
                  for n in per_process]
    results = [load.collect(g) for g in generators]      # waits for them: their CPU is counted
    client.stop()
    cpu = cpu_seconds(pid) - before
    received = sum(r["received"] for r in results)
    seconds = max(r["sending_seconds"] for r in results)
    errors = sum(r["out_of_order"] + r["closed_by_broker"] + r["unanswered"] for r in results)
    return {"rate": received / seconds, "cpu_us": cpu / received * 1e6 if received else float("nan"),
            "client_cpu_us": client.seconds / received * 1e6 if received else float("nan"),
            "count": received, "errors": errors}


def run_accept(pid: int, port: int, duration: float, concurrency: int = 16) -> dict:
    before = cpu_seconds(pid)
    client = ClientCpu(children=True).start()
    result = load.collect(load.spawn("accept", port=port, concurrency=concurrency, duration=duration))
    client.stop()
    cpu = cpu_seconds(pid) - before
    completed = result["completed"]
    return {"rate": completed / result["seconds"], "cpu_us": cpu / completed * 1e6 if completed else float("nan"),
            "client_cpu_us": client.seconds / completed * 1e6 if completed else float("nan"),
            "count": completed, "errors": result["failed"]}


def workloads(connection_counts):
    for api in ("api_versions", "metadata"):
        for connections in connection_counts:
            label = f"{'ApiVersions' if api == 'api_versions' else 'Metadata'} x{connections} conn"
            yield label, (lambda pid, port, duration, depth, api=api, n=connections:
                          run_pipeline(pid, port, n, api, duration, depth))
    yield "accept (connect+ApiVersions+close)", (lambda pid, port, duration, depth: run_accept(pid, port, duration))


def measure(brokers: dict[str, tuple[int, int]], duration: float, depth: int, connection_counts,
            repeat: int) -> dict[str, dict]:
    """Each workload on each broker in turn (interleaved, so background load hits both alike);
    the best of ``repeat`` runs is kept, with the N-scaling check against a run of half the duration."""
    results: dict[str, dict] = {name: {} for name in brokers}
    halves: dict[tuple[str, str], dict] = {}
    for name, (pid, port) in brokers.items():
        print(f"# {name}: warming up", file=sys.stderr, flush=True)
        run_pipeline(pid, port, 10, "metadata", 0.5, depth)
    for label, run in workloads(connection_counts):
        for name, (pid, port) in brokers.items():
            print(f"# {name}: {label} (half duration, for the N-scaling check)", file=sys.stderr, flush=True)
            halves[(name, label)] = run(pid, port, duration / 2, depth)
        for attempt in range(repeat):
            order = list(brokers) if attempt % 2 == 0 else list(reversed(brokers))
            for name in order:
                pid, port = brokers[name]
                print(f"# {name}: {label} (run {attempt + 1})", file=sys.stderr, flush=True)
                row = run(pid, port, duration, depth)
                best = results[name].get(label)
                if best is None or row["rate"] > best["rate"]:
                    results[name][label] = row
    for (name, label), half in halves.items():
        row = results[name][label]
        row["scaling"] = scaling_check(f"{name} {label}: operations done in {duration / 2:g} s and {duration:g} s",
                                       half["count"], row["count"], timed=False)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per measurement")
    parser.add_argument("--depth", type=int, default=5, help="requests in flight per connection")
    parser.add_argument("--connections", default="1,10,100")
    parser.add_argument("--repeat", type=int, default=2, help="runs per row; the best is reported")
    parser.add_argument("--no-tansu", action="store_true")
    args = parser.parse_args()
    counts = [int(c) for c in args.connections.split(",")]
    workdir = Path(tempfile.mkdtemp(prefix="bench-network-"))
    broker = BrokerProcess(workdir).start()
    tansu = None
    try:
        brokers = {"twisted_kafka": (broker.pid, broker.data_port)}
        if not args.no_tansu:
            if TANSU.exists():
                tansu = Tansu(workdir)
                brokers["tansu"] = (tansu.pid, tansu.port)
            else:
                print(f"tansu not found at {TANSU}; skipping", file=sys.stderr)
        results = measure(brokers, args.duration, args.depth, counts, args.repeat)
    finally:
        status = broker.stop()
        if tansu is not None:
            tansu.stop()
    if status != 0:
        print(f"warning: twisted_kafka exited with status {status}", file=sys.stderr)
    shutil.rmtree(workdir, ignore_errors=True)

    names = list(results)
    labels = list(results[names[0]])
    print(f"\nNetwork benchmark: best of {args.repeat} x {args.duration:.0f} s per row, {args.depth} requests in "
          f"flight per connection, {os.cpu_count()} CPU(s); load from separate raw-socket processes")
    print("CPU us/op: the broker's, and the client's (the load processes'); N-scaling: operations done in T "
          "over those done in T/2 (~2)")
    header = f"{'workload':<38}" + "".join(f"{name + ' ops/s':>22}{'CPU us/op':>12}{'client us/op':>14}"
                                             f"{'N-scaling':>11}" for name in names)
    print(header)
    print("-" * len(header))
    for label in labels:
        line = f"{label:<38}"
        for name in names:
            row = results[name][label]
            flag = " E" if row["errors"] else ""
            line += (f"{row['rate']:>22,.0f}{row['cpu_us']:>12.1f}{row['client_cpu_us']:>14.1f}"
                     f"{ratio_cell(row['scaling']):>11}{flag}")
        print(line)
    if any(row["errors"] for r in results.values() for row in r.values()):
        print("E = errors (out of order, closed, unanswered or failed connections) in that row")
    report_scaling([row["scaling"] for r in results.values() for row in r.values()])


if __name__ == "__main__":
    main()

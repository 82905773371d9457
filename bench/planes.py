"""Control-plane and data-plane latency while the data plane is flooded (KIP-291).

    .venv/bin/python bench/planes.py [--seconds 3] [--flood-processes 2] [--connections 20]

A broker is started the README way (``tests/support/broker_process.py``)
with one data-plane handler (``num.io.threads=1``) and
``queued.max.requests=8``.  Flood processes (``tests/support/load.py
pipeline``) keep 5 Metadata requests in flight on each of their
connections; once every flood connection is being answered, one latency
probe per plane (``load.py latency``: one ApiVersions at a time, every
10 ms) runs for ``--seconds``, then the flood stops.

Reported: p50 / p99 / max round-trip of each plane's probe, the flood's
throughput (requests answered per second of sending) and the data queue's
peak from the broker's shutdown summary.  The integration test
(tests/integration/network/test_planes.py) checks the behaviour -- the
control plane answers under the flood, nothing is lost or reordered, the
queue stays within its cap -- and this script gives the figures.  The load
runs on the same machine as the broker: on a small or shared machine the
figures say as much about the machine as about the broker, so the client's
CPU -- the flood and probe processes', from ``getrusage`` of the children
this script waited for -- is reported next to them.

The whole measurement runs twice, for ``--seconds``/2 then ``--seconds``
(figures are from the second run): the N-scaling check compares what the
flood got answered and how many probes were sent in each; both should be
about twice as many in twice the time (``bench/common.py``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import ClientCpu, report_scaling, scaling_check  # noqa: E402
from tests.support import load  # noqa: E402
from tests.support.broker_process import BrokerProcess  # noqa: E402

QUEUE_CAP = 8


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="how long each latency probe runs")
    parser.add_argument("--flood-processes", type=int, default=2)
    parser.add_argument("--connections", type=int, default=20, help="flood connections per process")
    parser.add_argument("--depth", type=int, default=5, help="requests in flight per flood connection")
    parser.add_argument("--interval", type=float, default=0.01, help="seconds between two probe requests")
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench-planes-"))
    broker = BrokerProcess(workdir, {"num.io.threads": "1", "queued.max.requests": str(QUEUE_CAP)}).start()
    try:
        half = measure(broker, args, args.seconds / 2)
        latencies, flood, client_cpu = measure(broker, args, args.seconds)
    finally:
        status = broker.stop()
    summary = re.search(r"RequestChannel \(data plane\): .*peak queue size (\d+) of (\d+)", broker.log_text())
    shutil.rmtree(workdir, ignore_errors=True)

    print(f"\nPlanes under a data-plane flood: {args.flood_processes} x {args.connections} connections x "
          f"{args.depth} Metadata requests in flight, num.io.threads=1, queued.max.requests={QUEUE_CAP}, "
          f"{os.cpu_count()} CPU(s)")
    print(f"{'probe (ApiVersions)':<22}{'requests':>10}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    for plane, result in latencies.items():
        print(f"{plane + ' plane':<22}{result['count']:>10}{result['p50_ms']:>10.2f}{result['p99_ms']:>10.2f}"
              f"{result['max_ms']:>10.2f}")
    received = sum(r["received"] for r in flood)
    seconds = max(r["sending_seconds"] for r in flood)
    errors = sum(r["out_of_order"] + r["closed_by_broker"] + r["unanswered"] for r in flood)
    print(f"flood: {received:,} Metadata requests answered in {seconds:.1f} s ({received / seconds:,.0f}/s)"
          + (f", {errors} error(s) (out of order, closed or unanswered)" if errors else ""))
    probes_sent = sum(result["count"] for result in latencies.values())
    print(f"client CPU (flood and probe processes): {client_cpu:.2f} s, "
          f"{client_cpu / (received + probes_sent) * 1e6:.1f} us per request")
    if summary:
        print(f"data queue peak: {summary[1]} of {summary[2]}")
    half_latencies, half_flood, _ = half
    report_scaling([
        scaling_check(f"flood requests answered in {args.seconds / 2:g} s and {args.seconds:g} s of probing",
                      sum(r["received"] for r in half_flood), received, timed=False),
        scaling_check(f"probe requests sent in {args.seconds / 2:g} s and {args.seconds:g} s",
                      sum(result["count"] for result in half_latencies.values()), probes_sent, timed=False)])
    if status != 0:
        print(f"warning: the broker exited with status {status}", file=sys.stderr)


def measure(broker, args, seconds: float) -> tuple[dict, list, float]:
    """Flood the data plane, probe both planes for ``seconds``, stop the flood.

    Returns the probes' results by plane, the flood processes' results and the
    client's CPU seconds (every load process, waited for)."""
    client = ClientCpu(children=True).start()
    floods = []
    try:
        floods = [load.spawn("pipeline", port=broker.data_port, connections=args.connections, depth=args.depth,
                             duration=seconds + 600, api="metadata")
                  for _ in range(args.flood_processes)]
        for process in floods:
            load.wait_answering(process)
        probes = {plane: load.spawn("latency", port=port, duration=seconds, interval=args.interval,
                                    api="api_versions")
                  for plane, port in (("control", broker.control_port), ("data", broker.data_port))}
        latencies = {plane: load.collect(process) for plane, process in probes.items()}
    finally:
        for process in floods:
            load.stop(process)
        flood = [load.collect(process) for process in floods]
    return latencies, flood, client.stop()


if __name__ == "__main__":
    main()

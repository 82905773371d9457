"""Instructions the broker executes per sequential Produce request, counted by callgrind.

    .venv/bin/python bench/callgrind_produce.py [--requests 2000] [--api produce]

A deterministic figure for before/after comparisons of the broker's own cost
on a shared machine, where CPU time and latency move with everyone else's
work.  The broker is started the README way (``etc/server.properties``,
``python -m twisted_kafka.cli``) under
``valgrind --tool=callgrind --instr-atstart=no``: nothing is counted while it
starts.  One connection then sends Produce v3 requests one at a time (acks=1,
one 100-byte record to partition 0 of a one-partition topic, the request
built once: ``support/load.py``; ``--depth D`` keeps D in flight, as a
pipelining producer does), and for the measured requests the
instrumentation is switched on around them only (``callgrind_control -i
on`` / ``-i off``, then ``-d`` dumps and resets the counters):

* a warm-up of ``--warmup`` requests, not counted;
* N/2 requests counted, then N requests counted.

Reported: instructions (Ir, every thread of the broker) for N/2 and for N,
and the cost per request as (Ir(N) - Ir(N/2)) / (N/2), which cancels the
fixed cost of switching the instrumentation on and off; the N vs N/2 ratio
of the two counts must be about 2.  ``--api metadata`` / ``api_versions``
counts those requests instead.  Callgrind runs the broker about 50x slower:
timings under it mean nothing, the instruction counts are exact up to the
broker's own timers firing during the window (a few per second).
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import report_scaling, scaling_check
from support import load
from twisted_kafka.testing.process import BrokerProcess
from twisted_kafka.testing.wire import AdminConnection

ROOT = Path(__file__).resolve().parents[1]


def _control(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], check=True, stdout=subprocess.DEVNULL,
                   timeout=300)


def _totals(path: str) -> int:
    """The dump's ``totals:`` line (its ``summary:`` line is written before the counts and says 0)."""
    with open(path) as fh:
        for line in fh:
            if line.startswith("totals:"):
                return int(line.split()[1])
    raise RuntimeError(f"no totals in {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000, help="N (N/2 is counted too)")
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--api", default="produce", choices=sorted(load.API_KEYS))
    parser.add_argument("--keep", help="copy the callgrind output files here (for callgrind_annotate)")
    parser.add_argument("--depth", type=int, default=1, help="requests kept in flight (1: one at a time; "
                        "librdkafka pipelines up to 5)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose broker is measured "
                        "(another one, e.g. main's from `git archive`, for a before/after)")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("valgrind is not installed (apt-get install valgrind)")
    tmp = tempfile.mkdtemp(prefix="bench-callgrind-")
    out = os.path.join(tmp, "callgrind.out")
    launcher = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                sys.executable, "-m", "twisted_kafka.cli"]
    env = dict(os.environ, PYTHONPATH=str(args.root))
    broker = BrokerProcess(tmp, {"num.partitions": "1"}, base_config=args.root / "etc" / "server.properties",
                           launcher=launcher, env=env)
    counts = {}
    try:
        print("starting the broker under callgrind (a minute or two) ...", flush=True)
        broker.start(timeout=900)
        pid = broker.process.pid
        if args.api == "produce":
            with AdminConnection("127.0.0.1", broker.data_port, timeout=300) as admin:
                admin.create_topic(load.PRODUCE_TOPIC, partitions=1, replication_factor=1)
                admin.wait_for_leaders(load.PRODUCE_TOPIC, 1)
        sock = socket.create_connection(("127.0.0.1", broker.data_port), timeout=300)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray()
        correlation = 0

        def send(n: int) -> None:
            nonlocal correlation
            expected = correlation + 1
            first = min(args.depth, n)
            sock.sendall(b"".join(load.request(args.api, correlation + 1 + i) for i in range(first)))
            correlation += first
            for i in range(n):
                response = load.read_frame(sock, buf)
                if struct.unpack_from(">i", response)[0] != expected:
                    raise RuntimeError("response out of order")
                expected += 1
                if i + first < n:
                    correlation += 1
                    sock.sendall(load.request(args.api, correlation))

        send(args.warmup)
        for label, n in (("half", args.requests // 2), ("full", args.requests)):
            before = set(glob.glob(out + "*"))
            _control(pid, "-i", "on")
            send(n)
            _control(pid, "-i", "off")
            _control(pid, "-d")
            wait_for = time.monotonic() + 120
            while not (new := set(glob.glob(out + "*")) - before):
                if time.monotonic() > wait_for:
                    raise RuntimeError("callgrind wrote no dump")
                time.sleep(0.2)
            path = max(new, key=os.path.getmtime)
            time.sleep(0.5)                    # the dump is written in one go; let it finish
            counts[label] = (n, _totals(path))
            if args.keep:
                os.makedirs(args.keep, exist_ok=True)
                shutil.copy(path, os.path.join(args.keep, f"callgrind.{args.api}.{label}"))
        sock.close()
    finally:
        if broker.process is not None and broker.running:
            broker.stop(timeout=600)
        shutil.rmtree(tmp, ignore_errors=True)
    (n_half, ir_half), (n_full, ir_full) = counts["half"], counts["full"]
    per_request = (ir_full - ir_half) / (n_full - n_half)
    print(f"{args.api}: N/2 = {n_half} requests -> {ir_half:,} Ir; N = {n_full} requests -> {ir_full:,} Ir")
    print(f"{args.api}: instructions per request (Ir(N) - Ir(N/2)) / (N/2) = {per_request:,.0f} "
          f"(Ir(N)/N = {ir_full / n_full:,.0f})")
    check = scaling_check(f"{args.api} instructions", ir_half, ir_full, timed=False)
    report_scaling([check])
    if check.ok:
        print(f"  {check}")


if __name__ == "__main__":
    main()

"""Fuzz a real broker with mutated real-client requests, then SIGTERM it.

    nice -n 10 .venv/bin/python bench/fuzz.py --frames 1000000

1. The seed corpus: real clients (confluent-kafka, kafka-python, aiokafka;
   admin calls, idempotent and acks=0/1 producers, group consumers that
   commit, SASL PLAIN and SCRAM) run against a broker through recording
   proxies (``support/fuzz_corpus.py``), or ``--corpus FILE`` reuses
   a capture (``--save-corpus FILE`` keeps one).
2. A fresh broker (PLAINTEXT, SASL_PLAINTEXT and a control plane) is fuzzed
   in rounds: Hypothesis draws ``--round`` plans per round
   (``support/fuzzing.py``: a captured connection replayed with
   mutated headers, bodies, size prefixes, frame order, write pieces and
   endings), played over ``--concurrency`` connections at once.  After
   each round a fresh connection must get ApiVersions and Metadata answered
   (liveness), and the broker's RSS is read.
3. SIGTERM: the time until the process exited, and its status.

Printed: frames written, connections, answers' bytes, broker closes,
liveness latencies, RSS before/after (and peak), tracebacks and error lines
found in the broker's output, the shutdown's "still pending" lines, and the
time from SIGTERM to exit against its bound (the drain timeout plus the
stop's grace).  The client's CPU is reported too: it shares the machine.
``--save-plans DIR`` writes each round's plans (JSON lines) so a finding
can be replayed (``--replay FILE``) and bisected: ``--bisect FILE`` reduces
the plans of FILE by delta debugging (each trial a fresh broker, the plans
played, then SIGTERM) to a smallest set that still leaves a request in
flight at the end of the drain, and prints their frames in hex.  Frames per
second are printed for context only: the run's length is a number of
frames, never a time, and no throughput is claimed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ClientCpu
from support.broker_process import BrokerProcess
from support.fuzz_corpus import Corpus, capture
from support.fuzzing import (
    FUZZ_BROKER_OVERRIDES,
    FrameEdit,
    Mutation,
    Plan,
    Sender,
    fuzz_round,
    liveness,
    play,
    render,
    rss_kib,
    scan_log,
)
from twisted_kafka.server.broker_lifecycle import DRAIN_TIMEOUT_SECONDS, STOP_GRACE_SECONDS


def plan_to_json(plan: Plan) -> str:
    return json.dumps(dataclasses.asdict(plan))


def plan_from_json(line: str) -> Plan:
    raw = json.loads(line)
    edits = tuple(FrameEdit(index=e["index"], mutations=tuple(Mutation(**m) for m in e["mutations"]),
                            size_delta=e["size_delta"], op=e["op"]) for e in raw.pop("edits"))
    return Plan(edits=edits, **raw)


class Fuzzer:
    def __init__(self, corpus: Corpus, broker: BrokerProcess, *, concurrency: int, save_plans: Path | None):
        self.corpus = corpus
        self.broker = broker
        self.sender = Sender({name: broker.port(name) for name in ("PLAINTEXT", "SASL_PLAINTEXT")},
                             concurrency=concurrency)
        self.save_plans = save_plans
        self.liveness: list[float] = []
        self.liveness_failures: list[str] = []

    def round(self, number: int, connections: int, base_seed: int) -> None:
        if self.save_plans is None:
            fuzz_round(self.corpus, self.sender, connections, base_seed * 1_000_003 + number)
            return
        with open(self.save_plans / f"round-{number:05d}.jsonl", "w", encoding="utf-8") as out:
            fuzz_round(self.corpus, self.sender, connections, base_seed * 1_000_003 + number,
                       lambda plan: out.write(plan_to_json(plan) + "\n"))

    def check(self) -> float | None:
        try:
            seconds = liveness(self.broker.data_port)
        except Exception as exc:
            self.liveness_failures.append(repr(exc))
            return None
        self.liveness.append(seconds)
        return seconds


def sigterm_exit(broker: BrokerProcess, limit: float) -> tuple[float | None, int | None]:
    """Seconds from SIGTERM to exit (None: still running after ``limit``, then killed) and the status."""
    began = time.monotonic()
    broker.process.send_signal(signal.SIGTERM)
    try:
        code = broker.process.wait(limit)
    except Exception:
        broker.kill()
        return None, None
    broker._reap(code)
    return time.monotonic() - began, code


#: What a bisection looks for after SIGTERM: a request still in flight when the drain timed out.
_PENDING_AT_SHUTDOWN = ("still in flight", "still pending")


def trial(corpus: Corpus, plans_: list[Plan], work: Path, overrides: dict[str, str], concurrency: int) -> bool:
    """Play ``plans_`` on a fresh broker, then SIGTERM it: whether a request was left in flight at the end
    of the drain (or the broker did not exit)."""
    broker = BrokerProcess(work, overrides).start(timeout=60)
    try:
        sender = Sender({name: broker.port(name) for name in ("PLAINTEXT", "SASL_PLAINTEXT")},
                        concurrency=concurrency)
        for plan in plans_:
            play(corpus, sender, plan)
        sender.drain()
        sender.stop()
        mark = broker.log_mark()
        broker.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + DRAIN_TIMEOUT_SECONDS + STOP_GRACE_SECONDS + 5
        while time.monotonic() < deadline:
            if broker.process.poll() is not None:
                break
            if any(marker in broker.log_text()[mark:] for marker in _PENDING_AT_SHUTDOWN):
                return True
            time.sleep(0.2)
        hung = broker.process.poll() is None
        return hung or any(marker in broker.log_text()[mark:] for marker in _PENDING_AT_SHUTDOWN)
    finally:
        broker.kill()


def bisect(corpus: Corpus, plans_: list[Plan], work: Path, overrides: dict[str, str], concurrency: int) -> list[Plan]:
    """Delta debugging (ddmin) over plans: a smallest subset that still leaves a request in flight."""
    trials = 0

    def fails(subset: list[Plan]) -> bool:
        nonlocal trials
        trials += 1
        result = trial(corpus, subset, work / f"trial-{trials}", overrides, concurrency)
        print(f"  trial {trials}: {len(subset)} plan(s) -> {'reproduced' if result else 'clean'}", flush=True)
        return result

    if not fails(plans_):
        print("the plans do not reproduce it")
        return plans_
    n = 2
    while len(plans_) >= 2:
        size = -(-len(plans_) // n)
        chunks = [plans_[i:i + size] for i in range(0, len(plans_), size)]
        for chunk in chunks:
            if fails(chunk):
                plans_, n = chunk, 2
                break
        else:
            for i in range(len(chunks)):
                complement = [p for j, c in enumerate(chunks) if j != i for p in c]
                if n > 2 and fails(complement):
                    plans_, n = complement, max(n - 1, 2)
                    break
            else:
                if n >= len(plans_):
                    break
                n = min(len(plans_), n * 2)
    return plans_


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frames", type=int, default=200_000, help="stop after this many frames written")
    parser.add_argument("--round", type=int, default=2000, help="plans (connections) per round")
    parser.add_argument("--concurrency", type=int, default=48)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--corpus", type=Path, help="reuse a captured corpus (JSON lines)")
    parser.add_argument("--save-corpus", type=Path)
    parser.add_argument("--save-plans", type=Path, help="write each round's plans to this directory")
    parser.add_argument("--replay", type=Path, help="play the plans of this file (JSON lines) instead of fuzzing")
    parser.add_argument("--bisect", type=Path, help="reduce the plans of this file (JSON lines) to a smallest "
                        "set that still leaves a request in flight at shutdown")
    parser.add_argument("--keep", action="store_true", help="keep the broker's directory")
    parser.add_argument("--override", action="append", default=[], help="broker key=value (repeatable)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="fuzz-"))
    began = time.monotonic()
    if args.corpus:
        corpus = Corpus.load(args.corpus)
    else:
        corpus = capture(work / "capture")
        print(f"captured in {time.monotonic() - began:.1f}s")
    if args.save_corpus:
        corpus.save(args.save_corpus)
    print(f"corpus: {len(corpus.connections)} connections, {corpus.frames} frames; api keys {corpus.api_keys()}")
    if args.save_plans:
        args.save_plans.mkdir(parents=True, exist_ok=True)

    overrides = dict(FUZZ_BROKER_OVERRIDES)
    overrides.update(dict(item.split("=", 1) for item in args.override))
    if args.bisect:
        with open(args.bisect, encoding="utf-8") as plans_file:
            found = bisect(corpus, [plan_from_json(line) for line in plans_file], work, overrides, args.concurrency)
        for plan in found:
            listener, pieces, frames = render(corpus, plan)
            print(plan.describe(corpus))
            print(f"  {listener}: {b''.join(pieces).hex()}")
        return 0
    broker = BrokerProcess(work / "fuzzed", overrides).start(timeout=60)
    fuzzer = Fuzzer(corpus, broker, concurrency=args.concurrency, save_plans=args.save_plans)
    rss_before, _ = rss_kib(broker.pid)
    print(f"broker pid {broker.pid}, RSS {rss_before / 1024:.1f} MiB; log {broker.log_path}")
    cpu = ClientCpu().start()
    fuzz_began = time.monotonic()
    stats = fuzzer.sender.stats
    rounds = 0
    if args.replay:
        with open(args.replay, encoding="utf-8") as plans_file:
            for line in plans_file:
                play(corpus, fuzzer.sender, plan_from_json(line))
        fuzzer.sender.drain()
        fuzzer.check()
    else:
        while stats.frames < args.frames and broker.running:
            fuzzer.round(rounds, args.round, args.seed)
            rounds += 1
            alive = fuzzer.check()
            rss, hwm = rss_kib(broker.pid) if broker.running else (0, 0)
            elapsed = time.monotonic() - fuzz_began
            print(f"round {rounds}: {stats.frames} frames, {stats.connections} connections in {elapsed:.0f}s "
                  f"({stats.frames / elapsed:.0f} frames/s); broker closed {stats.closed_by_broker}, stuck "
                  f"{stats.stuck}; liveness {'FAILED' if alive is None else f'{alive * 1000:.1f} ms'}; "
                  f"RSS {rss / 1024:.1f} MiB (peak {hwm / 1024:.1f})", flush=True)
    fuzz_seconds = time.monotonic() - fuzz_began
    fuzzer.sender.stop()
    client_cpu = cpu.stop()
    alive_at_end = broker.running
    rss_after, hwm = rss_kib(broker.pid) if alive_at_end else (0, 0)
    bound = DRAIN_TIMEOUT_SECONDS + STOP_GRACE_SECONDS
    exit_seconds, status = sigterm_exit(broker, bound + 30) if alive_at_end else (None, broker.returncode)
    log = broker.log_text()
    findings = scan_log(log)
    pending = [line for line in log.splitlines() if "still pending" in line]
    handled = sum(int(n) for n in re.findall(r"RequestChannel \(data plane\): (\d+) request\(s\) queued in all", log))
    closed = {f"{listener}/{reason}": int(n) for listener, reason, n in
              re.findall(r"'(PLAINTEXT|SASL_PLAINTEXT)/([a-z_]+)': (\d+)", log.split("Connections at shutdown")[-1])}

    print()
    print(f"fuzzing: {stats.frames} frames written over {stats.connections} connections "
          f"({stats.listeners}) in {fuzz_seconds:.0f}s, {rounds} rounds; "
          f"{stats.bytes_out / 1e6:.1f} MB out, {stats.answers} answers ({stats.bytes_in / 1e6:.1f} MB); "
          f"the broker closed {stats.closed_by_broker}; refused {stats.refused}; stalled {stats.stuck}")
    print(f"the broker read and queued {handled} data-plane requests (the rest of the frames were refused with "
          f"their connection, or never read: a connection is closed after a malformed frame); connections it "
          f"closed, by reason: {closed}")
    print(f"client CPU {client_cpu:.0f}s ({client_cpu / max(fuzz_seconds, 1e-9):.0%} of a core)")
    if fuzzer.liveness:
        lat = sorted(fuzzer.liveness)
        print(f"liveness: {len(lat)} checks answered, median {lat[len(lat) // 2] * 1000:.1f} ms, "
              f"max {lat[-1] * 1000:.1f} ms; failures {len(fuzzer.liveness_failures)} {fuzzer.liveness_failures[:3]}")
    print(f"broker RSS: {rss_before / 1024:.1f} MiB before, {rss_after / 1024:.1f} MiB after "
          f"(peak {hwm / 1024:.1f} MiB); alive at the end: {alive_at_end}")
    print(f"tracebacks/errors in the broker's output: {len(findings)}")
    for finding in findings[:10]:
        print("  ---\n  " + finding.replace("\n", "\n  "))
    print(f"requests named still pending at shutdown: {len(pending)}")
    for line in pending[:20]:
        print("  " + line)
    if exit_seconds is None:
        print(f"SIGTERM: still running {bound + 30:.0f}s after SIGTERM (killed)  <-- FAILED")
    else:
        verdict = "ok" if exit_seconds <= bound and status == 0 else "FAILED"
        print(f"SIGTERM: exited {status} after {exit_seconds:.2f}s (bound {bound:.0f}s): {verdict}")
    print(f"total {time.monotonic() - began:.0f}s; broker log {broker.log_path}")
    failed = bool(findings) or exit_seconds is None or exit_seconds > bound or status != 0 or \
        bool(fuzzer.liveness_failures)
    if not args.keep and not failed:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""What a broker's partition count costs: creating, restarting, and a full Metadata, at growing sizes.

    .venv/bin/python bench/partitions.py [--sizes 1000,4000,8000,16000] [--per-topic 50] [--batch 20]
                                         [--flood-seconds 3] [--root DIR] [--profile DIR]

For each size N a broker is started the README way (``support/broker_process.py``,
``max.connections=1000`` so that most of the open-file limit goes to the
partition budget: ``twisted_kafka.server.descriptor_budget``; the broker raises
its soft limit to the hard limit itself) in a new directory, and:

* **create**: topics of ``--per-topic`` partitions (RF=1) are created with
  confluent-kafka's AdminClient, ``--batch`` topics per CreateTopics request,
  one request after the other, until N partitions exist; the phase ends when a
  full Metadata answer shows all N partitions with a leader.
* **restart**: SIGTERM, wait for the exit (the clean shutdown's time and exit status: 1 when
  the stop passed the broker's last-resort deadline, and the next start recovers the logs), start
  again on the same directories; the phase ends at the started line and, for
  the second figure, at the first Metadata answer that shows all N partitions
  with a leader (the logs are loaded before the broker says it started).
* **full Metadata**: Metadata v1 for all topics on one raw connection, 5 times:
  the median time and the answer's size.
* **planes**: a flood of full Metadata requests on the data plane
  (``support/load.py pipeline``: 1 connection, 2 in flight) while a probe sends
  one ApiVersions every 10 ms on the control plane for ``--flood-seconds``: the
  probe's p50/p99/max, and how many Metadata answers the flood got.

The time per partition at each size shows whether creation and restart are
linear, and so do the create columns "1st q" and "last q": the mean time per
partition of the first and the last quarter of the CreateTopics requests on
one broker (the same when creating one more partition does not cost more
as the broker holds more); the scaling check (bench/common.py) compares the two largest sizes
(N/2 and N must take about half and all of the time).  The broker's CPU is
reported next to the client's (AdminClient and the raw Metadata reads run in
this process).  ``--root DIR`` runs another checkout's broker (its ``bin/``
and ``etc/``, this worktree's venv), for a before/after table in one run:
``git archive <commit> | tar -x -C /tmp/base`` then ``--root /tmp/base``.
``--profile DIR`` records the broker with py-spy (``pip install -e .[bench]``)
during create, the clean stop and the restart, and writes one speedscope profile per phase and size.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import ClientCpu, report_scaling, scaling_check
from support import load
from support.broker_process import BASE_CONFIG, START_SCRIPT
from twisted_kafka.protocol.codec import decode_response
from twisted_kafka.testing import process as _process

MAX_CONNECTIONS = 1000


def broker_cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return times.user + times.system


class Broker(_process.BrokerProcess):
    """The README way, from ``root`` (this checkout by default)."""

    def __init__(self, parent: Path, root: Path | None):
        script = (root / "bin" / START_SCRIPT.name) if root else START_SCRIPT
        config = (root / "etc" / BASE_CONFIG.name) if root else BASE_CONFIG
        super().__init__(parent, {"max.connections": str(MAX_CONNECTIONS)}, base_config=config,
                         launcher=[str(script)])
        if root is not None:
            self.env = dict(self.env or os.environ, TWISTED_KAFKA_PYTHON=sys.executable)
        self.startup_timeout = 600


def metadata_frame(correlation_id: int) -> bytes:
    return load.request("metadata", correlation_id)


def full_metadata(port: int) -> tuple[float, int, int, int]:
    """One Metadata v1 for all topics: (seconds, answer bytes, partitions, partitions with a leader)."""
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        started = time.perf_counter()
        sock.sendall(metadata_frame(7))
        head = _read(sock, 4)
        size = struct.unpack(">i", head)[0]
        body = _read(sock, size)
        seconds = time.perf_counter() - started
    _, response = decode_response(3, 1, body)
    partitions = led = 0
    for topic in response.topics:
        for partition in topic.partitions:
            partitions += 1
            led += partition.leader_id >= 0
    return seconds, size + 4, partitions, led


def _read(sock: socket.socket, count: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(min(1 << 20, count - len(chunks)))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        chunks += chunk
    return bytes(chunks)


def wait_all_led(port: int, n: int, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while True:
        _, _, partitions, led = full_metadata(port)
        if partitions >= n and led >= n:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{led} of {n} partitions have a leader after {timeout}s")
        time.sleep(0.05)


class Profiler:
    def __init__(self, directory: Path | None):
        self.directory = directory
        self.process: subprocess.Popen | None = None

    def start(self, pid: int, name: str) -> None:
        if self.directory is None:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy"), "record", "--pid", str(pid),
             "--rate", "200", "--format", "speedscope", "--threads",
             "--output", str(self.directory / f"{name}.speedscope.json")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)       # py-spy attaches

    def stop(self) -> None:
        if self.process is not None:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGINT)
            self.process.wait(60)
            self.process = None


def run_size(n: int, args) -> dict:
    workdir = Path(tempfile.mkdtemp(prefix="bench-partitions-"))
    broker = Broker(workdir, args.root).start()
    profiler = Profiler(args.profile)
    result: dict = {"n": n}
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "log_level": 0})
        topics = [f"p{i:05d}" for i in range(-(-n // args.per_topic))]
        client = ClientCpu().start()
        cpu = broker_cpu(broker.pid)
        profiler.start(broker.pid, f"create-{n}")
        started = time.perf_counter()
        made = 0
        steps = []
        for first in range(0, len(topics), args.batch):
            step = time.perf_counter()
            batch = []
            for name in topics[first:first + args.batch]:
                count = min(args.per_topic, n - made)
                batch.append(NewTopic(name, num_partitions=count, replication_factor=1))
                made += count
            for future in admin.create_topics(batch, operation_timeout=600, request_timeout=600).values():
                future.result()
            steps.append(time.perf_counter() - step)
        # Within one broker: the first and the last quarter of the CreateTopics requests (ms per
        # partition) -- linear creation takes the same per partition whatever the broker holds.
        quarter = max(1, len(steps) // 4)
        per = args.per_topic * args.batch
        result["step_first_ms"] = statistics.mean(steps[:quarter]) / per * 1000
        result["step_last_ms"] = statistics.mean(steps[-quarter:]) / per * 1000
        result["create_requests_s"] = time.perf_counter() - started
        wait_all_led(broker.data_port, n)
        result["create_s"] = time.perf_counter() - started
        profiler.stop()
        result["create_broker_cpu"] = broker_cpu(broker.pid) - cpu
        result["create_client_cpu"] = client.stop()
        del admin

        profiler.start(broker.pid, f"stop-{n}")
        started = time.perf_counter()
        result["stop_status"] = broker.stop(timeout=600)
        result["stop_s"] = time.perf_counter() - started
        profiler.stop()
        started = time.perf_counter()
        broker.spawn()
        profiler.start(broker.process.pid, f"restart-{n}")
        broker.wait_started()
        result["restart_started_s"] = time.perf_counter() - started
        wait_all_led(broker.data_port, n)
        result["restart_s"] = time.perf_counter() - started
        profiler.stop()
        result["restart_broker_cpu"] = broker_cpu(broker.pid)

        samples = []
        for _ in range(5):
            seconds, size, partitions, led = full_metadata(broker.data_port)
            samples.append(seconds)
        result["metadata_s"] = statistics.median(samples)
        result["metadata_bytes"] = size
        assert partitions >= n and led == partitions, (partitions, led, n)

        flood = load.spawn("pipeline", port=broker.data_port, connections=1, depth=2,
                           duration=args.flood_seconds + 600, api="metadata")
        try:
            load.wait_answering(flood, timeout=120)
            probe = load.collect(load.spawn("latency", port=broker.control_port, duration=args.flood_seconds,
                                            interval=0.01, api="api_versions"))
        finally:
            load.stop(flood)
        answered = load.collect(flood)
        result["probe"] = probe
        result["flood_answers"] = answered["received"]
        result["flood_seconds"] = answered["sending_seconds"]
    finally:
        profiler.stop()
        if broker.running:
            status = broker.stop(timeout=600)
            if status != 0:
                print(f"warning: the broker exited with status {status}", file=sys.stderr)
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,4000,8000,16000", help="partition counts, comma-separated")
    parser.add_argument("--per-topic", type=int, default=50, help="partitions per topic")
    parser.add_argument("--batch", type=int, default=20, help="topics per CreateTopics request")
    parser.add_argument("--flood-seconds", type=float, default=3.0)
    parser.add_argument("--root", type=Path, default=None, help="another checkout's bin/ and etc/ and package")
    parser.add_argument("--profile", type=Path, default=None, help="write py-spy speedscope profiles here")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    began = time.monotonic()
    results = []
    for n in sizes:
        result = run_size(n, args)
        results.append(result)
        print(f"done {n}: create {result['create_s']:.2f} s, restart {result['restart_s']:.2f} s", flush=True)
    soft, hard = _process_limits()
    print(f"\nPartitions on one broker ({args.root or 'this checkout'}): topics of {args.per_topic} partitions, "
          f"{args.batch} topics per CreateTopics, RF=1, max.connections={MAX_CONNECTIONS}, open-file limit "
          f"{soft}/{hard}, {os.cpu_count()} CPU(s)")
    print(f"{'partitions':>10} {'create s':>9} {'us/part':>8} {'1st q ms':>8} {'last q':>7} {'brkCPU s':>9} "
          f"{'cliCPU s':>9} {'stop s':>7} "
          f"{'exit':>4} {'started s':>9} {'restart s':>9} {'us/part':>8} {'md ms':>8} {'md KiB':>8} "
          f"{'ctl p50':>8} {'ctl p99':>8} {'ctl max':>8} {'md/s':>6}")
    for r in results:
        p = r["probe"]
        print(f"{r['n']:>10} {r['create_s']:>9.2f} {r['create_s'] / r['n'] * 1e6:>8.0f} "
              f"{r['step_first_ms']:>8.2f} {r['step_last_ms']:>7.2f} "
              f"{r['create_broker_cpu']:>9.2f} {r['create_client_cpu']:>9.2f} {r['stop_s']:>7.2f} "
              f"{r['stop_status']:>4} {r['restart_started_s']:>9.2f} {r['restart_s']:>9.2f} "
              f"{r['restart_s'] / r['n'] * 1e6:>8.0f} "
              f"{r['metadata_s'] * 1000:>8.1f} {r['metadata_bytes'] / 1024:>8.0f} "
              f"{p['p50_ms']:>8.2f} {p['p99_ms']:>8.2f} {p['max_ms']:>8.2f} "
              f"{r['flood_answers'] / r['flood_seconds']:>6.1f}")
    if len(results) >= 2:
        half, full = results[-2], results[-1]
        label = f"{half['n']} and {full['n']} partitions"
        checks = []
        if full["n"] == 2 * half["n"]:
            checks = [scaling_check(f"create, {label}", half["create_s"], full["create_s"]),
                      scaling_check(f"restart, {label}", half["restart_s"], full["restart_s"]),
                      scaling_check(f"full Metadata, {label}", half["metadata_s"], full["metadata_s"])]
            report_scaling(checks)
        else:
            print(f"(no scaling check: the two largest sizes, {label}, are not N/2 and N)")
    print(f"\n({time.monotonic() - began:.0f} s in all)")


def _process_limits() -> tuple[int, int]:
    import resource

    return resource.getrlimit(resource.RLIMIT_NOFILE)


if __name__ == "__main__":
    main()

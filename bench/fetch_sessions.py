"""An idle follower of 1,000 partitions: request bytes and leader CPU per fetch round, full fetches vs KIP-227.

    .venv/bin/python bench/fetch_sessions.py [--partitions 1000] [--seconds 10] [--baseline DIR]

ZooKeeper and two brokers run as real processes on loopback: broker 1
leads every partition of one topic (``--partitions``, replica assignment
[1, 2] each), broker 2 follows them all with one replica fetcher.  Once
every partition has both replicas in its ISR nothing is produced: each
fetch round is the follower's long poll (``replica.fetch.wait.max.ms``,
500 ms) on partitions without news.  Over ``--seconds`` the script reads,
from the leader's ``/metrics``, how many Fetch requests it served and their
bytes (``RequestMetrics`` ``RequestBytes`` for ``request="Fetch"``: only the
follower fetches), and the leader process's CPU (the run time of its
threads, ``/proc/<pid>/task/*/schedstat``).  Reported per round: request
bytes and leader CPU.

With ``--baseline DIR`` (another checkout, e.g. ``git archive`` of the
commit before fetch sessions) the same is measured on a pair of that
checkout's brokers first, in the same run, and the ratio printed.

The N vs N/2 check: each pair is measured over ``--seconds``/2 and then
``--seconds``; the rounds counted must be about twice as many (a phase ends
on the clock, not on progress, but rounds of an idle follower are what the
clock paces).  The leader CPU includes everything the leader does while
idle (timers, ZooKeeper pings, its periodic work over the partitions);
then the follower is stopped (SIGSTOP) for a while and the leader's CPU per
second without any fetch is measured, and the figure "above its idle work"
subtracts that rate: what the fetch rounds themselves cost.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from bench.common import ClientCpu, scaling_check
from bench.peers import broker_cpu
from support.scrape import scrape
from support.wait import wait_until
from support.zookeeper import ZooKeeperServer
from twisted_kafka.testing.process import BrokerProcess

TOPIC = "idle"


class Pair:
    """A leader (broker 1) and a follower (broker 2) of one checkout (None: this one)."""

    def __init__(self, tmp: Path, zookeeper: ZooKeeperServer, chroot: str, root: Path | None):
        extra = {}
        if root is not None:
            extra = dict(base_config=root / "etc" / "server.properties",
                         launcher=[str(root / "bin" / "twisted-kafka-server-start")],
                         env=dict(os.environ, TWISTED_KAFKA_PYTHON=sys.executable))
        self.brokers = [BrokerProcess(tmp, {"broker.id": str(i), "zookeeper.connect": zookeeper.connect_string(chroot),
                                            "num.replica.fetchers": "1"}, **extra) for i in (1, 2)]
        for broker in self.brokers:
            broker.spawn()
        for broker in self.brokers:
            broker.wait_started(60)
        self.leader = self.brokers[0]

    def create(self, partitions: int) -> None:
        admin = AdminClient({"bootstrap.servers": self.leader.bootstrap})
        admin.create_topics([NewTopic(TOPIC, num_partitions=partitions, replica_assignment=[[1, 2]] * partitions)],
                            operation_timeout=60)[TOPIC].result(120)

        def in_sync() -> bool:
            md = admin.list_topics(TOPIC, timeout=10).topics.get(TOPIC)
            return md is not None and len(md.partitions) == partitions and all(
                sorted(p.isrs) == [1, 2] and p.leader == 1 for p in md.partitions.values())
        wait_until(in_sync, timeout=300, what=f"{partitions} partitions in sync on brokers 1 and 2", interval=0.5)

    def fetches(self) -> tuple[float, float]:
        """(Fetch requests served, their bytes) by the leader so far."""
        metrics = scrape(self.leader.admin_url)
        name = "kafka_network_requestmetrics_requestbytes"
        return (metrics.value(name + "_count", 0.0, request="Fetch"),
                metrics.value(name + "_sum", 0.0, request="Fetch"))

    def measure(self, seconds: float) -> dict:
        pid = self.leader.pid
        assert pid is not None
        count0, bytes0 = self.fetches()
        cpu0 = broker_cpu(pid)
        time.sleep(seconds)         # the phase is the idle time itself: nothing to wait for
        cpu = broker_cpu(pid) - cpu0
        count1, bytes1 = self.fetches()
        rounds = count1 - count0
        if rounds <= 0:
            raise SystemExit(f"no fetch round in {seconds} s: the follower is not fetching")
        return {"rounds": rounds, "seconds": seconds, "bytes_per_round": (bytes1 - bytes0) / rounds,
                "cpu_ms_per_round": cpu * 1000 / rounds}

    def background(self, seconds: float) -> float:
        """The leader's CPU per second with the follower stopped (SIGSTOP): what it spends while idle
        without any fetch -- its periodic work over the partitions (high watermark checkpoints, flush and
        retention checks, ISR checks).  Short enough that no ISR shrinks (``replica.lag.time.max.ms``)."""
        follower, pid = self.brokers[1].process, self.leader.pid
        assert follower is not None and pid is not None
        follower.send_signal(signal.SIGSTOP)
        try:
            time.sleep(1.0)         # the long poll in flight ends
            cpu0 = broker_cpu(pid)
            count0, _ = self.fetches()
            time.sleep(seconds)
            cpu = broker_cpu(pid) - cpu0
            if self.fetches()[0] != count0:
                raise SystemExit("the stopped follower still fetched")
        finally:
            follower.send_signal(signal.SIGCONT)
        return cpu / seconds

    def stop(self) -> None:
        for broker in reversed(self.brokers):
            broker.stop()


def run(name: str, root: Path | None, zookeeper: ZooKeeperServer, partitions: int, seconds: float) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-sessions-{name}-"))
    pair = Pair(tmp, zookeeper, f"/bench-{name}", root)
    try:
        started = time.monotonic()
        pair.create(partitions)
        print(f"{name}: {partitions} partitions in sync after {time.monotonic() - started:.1f} s", flush=True)
        pair.measure(2)            # the follower's first (full) fetches and the ISR settle outside the phases
        half = pair.measure(seconds / 2)
        full = pair.measure(seconds)
        idle = pair.background(min(seconds, 10.0))
        for figures in (half, full):
            figures["net_cpu_ms_per_round"] = (figures["cpu_ms_per_round"]
                                               - idle * 1000 * figures["seconds"] / figures["rounds"])
        check = scaling_check(f"{name} rounds", half["rounds"], full["rounds"], timed=False)
        print(f"{name}: {full['rounds']:.0f} rounds in {seconds} s: {full['bytes_per_round']:.0f} request bytes/round, "
              f"leader CPU {full['cpu_ms_per_round']:.2f} ms/round ({full['net_cpu_ms_per_round']:.2f} ms above its "
              f"{idle * 1000:.1f} ms/s without fetches)", flush=True)
        print(f"  N vs N/2: {half['rounds']:.0f} vs {full['rounds']:.0f} rounds (ratio {check.ratio:.2f}"
              f"{'' if check.ok else ', OUT OF RANGE'}); at N/2: {half['bytes_per_round']:.0f} B/round, "
              f"{half['cpu_ms_per_round']:.2f} ms/round ({half['net_cpu_ms_per_round']:.2f} net)", flush=True)
        return full
    finally:
        pair.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--baseline", type=Path, help="also run a pair of brokers of this checkout, first")
    args = parser.parse_args()
    client = ClientCpu().start()
    tmp = Path(tempfile.mkdtemp(prefix="bench-sessions-zk-"))
    zookeeper = ZooKeeperServer(tmp).start()
    try:
        results = {}
        if args.baseline is not None:
            results["baseline"] = run("baseline", args.baseline.resolve(), zookeeper, args.partitions, args.seconds)
        results["ours"] = run("ours", None, zookeeper, args.partitions, args.seconds)
    finally:
        zookeeper.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"client CPU (this script): {client.stop():.1f} s")
    if "baseline" in results:
        base, ours = results["baseline"], results["ours"]
        print(f"request bytes/round: {base['bytes_per_round']:.0f} -> {ours['bytes_per_round']:.0f} "
              f"({base['bytes_per_round'] / ours['bytes_per_round']:.1f}x lower)")
        for key, what in (("cpu_ms_per_round", "leader CPU/round"),
                          ("net_cpu_ms_per_round", "leader CPU/round above its idle work")):
            print(f"{what}: {base[key]:.2f} ms -> {ours[key]:.2f} ms ({base[key] / max(ours[key], 1e-6):.1f}x lower)")


if __name__ == "__main__":
    main()

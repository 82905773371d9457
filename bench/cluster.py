"""acks=all produce throughput with replication factor 3 vs 1, and leader failover time, on a real cluster.

    .venv/bin/python bench/cluster.py [--records 50000] [--size 100] [--failovers 3]

ZooKeeper and three brokers are started as real processes on loopback
(``support/zookeeper.py``, ``support/cluster.py``; ZooKeeper
session timeout 3 s).  Throughput: one librdkafka producer (confluent-kafka,
acks=all, linger.ms=5) sends ``--records`` values of ``--size`` bytes to a
one-partition topic with replication factor 1, then to one with
replication factor 3 and min.insync.replicas=2, both led by the same
broker; records per second from the first send to the last acknowledgement.
Failover: an acks=all producer sends continuously to the RF=3 topic, its
leader is killed with SIGKILL, and the time from the kill to the first
acknowledgement of a record sent after it is measured, ``--failovers``
times (the killed broker is restarted and rejoins the ISR in between).
Every process runs on the same machine: the figures compare RF=3 with RF=1
on that machine, they are not absolute.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from support.acked_producer import BackgroundProducer
from support.cluster import Cluster
from support.wait import wait_until
from support.zookeeper import ZooKeeperServer


def create(cluster: Cluster, name: str, replicas: list[int], min_isr: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    admin.create_topics([NewTopic(name, num_partitions=1, replica_assignment=[replicas],
                                  config={"min.insync.replicas": str(min_isr)})], operation_timeout=10)[name].result(30)
    cluster.wait_consistent(lambda md: name in md.topics and set(md.partitions(name)[0].isr) == set(replicas))


def throughput(bootstrap: str, topic: str, records: int, size: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000})
    value = b"x" * size
    acked = 0

    def report(err, msg):
        nonlocal acked
        if err is None:
            acked += 1

    producer.produce(topic, value, callback=report)     # connect and learn the leader first
    producer.flush(30)
    acked = 0
    start = time.monotonic()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, callback=report)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(120)
    elapsed = time.monotonic() - start
    assert acked == records, f"{records - acked} records not acknowledged"
    return records / elapsed


def failover(cluster: Cluster, topic: str) -> float:
    leader = cluster.metadata(cluster.running[0]).partitions(topic)[0].leader
    producer = BackgroundProducer(cluster.bootstrap(), topic).start()
    try:
        wait_until(lambda: len(producer.acked) >= 200, 30, what="records acknowledged before the kill")
        cluster.broker(leader).kill()
        killed = time.monotonic()
        resumed = wait_until(lambda: producer.first_ack_of_a_value_sent_after(killed), 60, what="failover")
    finally:
        producer.stop()
    cluster.broker(leader).start()
    cluster.wait_consistent(lambda md: md.broker_ids == [1, 2, 3] and set(md.partitions(topic)[0].isr) == {1, 2, 3},
                            timeout=60, what="the restarted broker back in the ISR")
    return resumed - killed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--failovers", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        zookeeper = ZooKeeperServer(Path(tmp) / "zookeeper").start()
        cluster = Cluster(Path(tmp), zookeeper, "/bench", overrides={"auto.leader.rebalance.enable": "false"})
        try:
            cluster.start()
            leader = cluster.wait_for_controller()
            others = [b for b in (1, 2, 3) if b != leader]
            create(cluster, "rf1", [leader], 1)
            create(cluster, "rf3", [leader, *others], 2)
            rf1 = throughput(cluster.bootstrap(), "rf1", args.records, args.size)
            rf3 = throughput(cluster.bootstrap(), "rf3", args.records, args.size)
            print(f"acks=all, {args.records} records of {args.size} B, one partition led by broker {leader}:")
            print(f"  RF=1: {rf1:,.0f} records/s")
            print(f"  RF=3 (min.insync.replicas=2): {rf3:,.0f} records/s ({rf3 / rf1:.0%} of RF=1)")
            times = [failover(cluster, "rf3") for _ in range(args.failovers)]
            print(f"leader failover, kill -9 to the first acknowledged produce (zookeeper.session.timeout.ms=3000): "
                  f"{', '.join(f'{t:.2f}' for t in times)} s (median {statistics.median(times):.2f} s)")
        finally:
            cluster.kill_all()
            zookeeper.stop()


if __name__ == "__main__":
    main()

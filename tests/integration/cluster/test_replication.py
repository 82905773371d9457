"""Replication in a three-broker ZooKeeper cluster: followers fetch from leaders, acks=all waits for the
ISR, the ISR follows the followers (AlterPartition), and no acknowledged record is lost when a leader
is killed.

Every test reads replicated records the way a consumer does: after leadership moved to the replica
whose log is checked, so what a follower wrote is what the next leader serves.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time

import pytest
from confluent_kafka import Consumer, ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaProducer
from kafka.errors import NotEnoughReplicasError

from support.acked_producer import BackgroundProducer
from support.cluster import SESSION_TIMEOUT_MS, Cluster
from support.wait import wait_until

#: Short enough for tests, long enough that a busy machine does not drop a follower by accident.
LAG_MS = 3000


def start_cluster(tmp_path, zookeeper, zk_chroot, **overrides) -> Cluster:
    cluster = Cluster(tmp_path, zookeeper, zk_chroot, overrides={
        "auto.leader.rebalance.enable": "false", "replica.lag.time.max.ms": str(LAG_MS),
        "replica.fetch.backoff.ms": "200", **overrides})
    return cluster.start()


def create_topic(cluster: Cluster, name: str, replicas: list[int], min_isr: int = 2) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    topic = NewTopic(name, num_partitions=1, replica_assignment=[replicas],
                     config={"min.insync.replicas": str(min_isr)})
    admin.create_topics([topic], operation_timeout=10)[name].result(30)
    cluster.wait_consistent(lambda md: name in md.topics and md.partitions(name)[0].leader == replicas[0]
                            and set(md.partitions(name)[0].isr) == set(replicas))


def produce(bootstrap: str, topic: str, values: list[bytes]) -> list[bytes]:
    """acks=all; the values acknowledged."""
    acked: list[bytes] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})

    def report(err, msg):
        if err is None:
            acked.append(msg.value())

    for value in values:
        producer.produce(topic, value, callback=report)
        producer.poll(0)
    assert producer.flush(30) == 0
    return acked


def consume_all(bootstrap: str, topic: str, expected: int, timeout: float = 30,
                wanted: set[bytes] | None = None) -> list[bytes]:
    """What a new consumer group reads from the start: ``expected`` values, or until it has every one of
    ``wanted``, or ``timeout`` seconds."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        seen: set[bytes] = set()
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
                seen.add(msg.value())
                if wanted is not None and wanted <= seen:
                    break
    finally:
        consumer.close()
    return values


class BackgroundConsumer:
    """A consumer group member reading ``topic`` in a thread, auto-committing; the values it saw."""

    def __init__(self, bootstrap: str, topic: str, group: str):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                                  "auto.offset.reset": "earliest", "auto.commit.interval.ms": 500,
                                  "topic.metadata.refresh.interval.ms": 1000})
        self.consumer.subscribe([topic])
        self.values: set[bytes] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            msg = self.consumer.poll(0.2)
            if msg is not None and msg.error() is None:
                self.values.add(msg.value())
        self.consumer.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def leader_of(cluster: Cluster, broker: int, topic: str) -> int:
    return cluster.metadata(broker).partitions(topic)[0].leader


def isr_of(cluster: Cluster, broker: int, topic: str) -> tuple[int, ...]:
    return tuple(sorted(cluster.metadata(broker).partitions(topic)[0].isr))


def resume_and_kill(cluster: Cluster) -> None:
    for broker in cluster.brokers.values():
        if broker.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(broker.pid, signal.SIGCONT)
    cluster.kill_all()


@pytest.fixture
def cluster(tmp_path, zookeeper, zk_chroot):
    cluster = start_cluster(tmp_path, zookeeper, zk_chroot)
    yield cluster
    resume_and_kill(cluster)


def test_records_replicate_to_every_follower(cluster):
    create_topic(cluster, "r", [1, 2, 3])
    values = [f"v{i}".encode() for i in range(500)]
    assert sorted(produce(cluster.bootstrap(), "r", values)) == sorted(values)
    # Leadership moves twice; each new leader serves everything from its own (replicated) log.
    cluster.broker(1).kill()
    wait_until(lambda: leader_of(cluster, 2, "r") == 2, 30, what="broker 2 leading")
    assert sorted(consume_all(cluster.bootstrap(2, 3), "r", len(values))) == sorted(values)
    cluster.broker(2).kill()
    wait_until(lambda: leader_of(cluster, 3, "r") == 3, 30, what="broker 3 leading")
    assert sorted(consume_all(cluster.bootstrap(3), "r", len(values))) == sorted(values)


def test_the_isr_follows_paused_followers_and_acks_all_needs_min_insync_replicas(tmp_path, zookeeper, zk_chroot):
    # A session timeout far above replica.lag.time.max.ms: the followers leave the ISR because they stop
    # fetching (the leader's AlterPartition), not because ZooKeeper lost them.
    cluster = start_cluster(tmp_path, zookeeper, zk_chroot, **{"zookeeper.session.timeout.ms": "60000"})
    try:
        leader = cluster.wait_for_controller()
        first, second = [b for b in (1, 2, 3) if b != leader]
        create_topic(cluster, "s", [leader, first, second])
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap(leader), acks="all", retries=0,
                                 request_timeout_ms=20000)
        producer.send("s", b"before").get(20)

        os.kill(cluster.broker(second).pid, signal.SIGSTOP)
        paused = time.monotonic()
        wait_until(lambda: isr_of(cluster, leader, "s") == tuple(sorted((leader, first))), 30,
                   what=f"broker {second} out of the ISR")
        assert time.monotonic() - paused >= LAG_MS / 1000 - 0.5
        producer.send("s", b"two in sync").get(20)           # min.insync.replicas=2 still met

        os.kill(cluster.broker(first).pid, signal.SIGSTOP)
        wait_until(lambda: isr_of(cluster, leader, "s") == (leader,), 30, what=f"broker {first} out of the ISR")
        with pytest.raises(NotEnoughReplicasError):
            producer.send("s", b"refused").get(20)

        for broker in (first, second):
            os.kill(cluster.broker(broker).pid, signal.SIGCONT)
        wait_until(lambda: isr_of(cluster, leader, "s") == (1, 2, 3), 30, what="the ISR expanded again")
        producer.send("s", b"after").get(20)
        producer.close()
        # Every broker agrees on the ISR (UpdateMetadata after each AlterPartition).
        cluster.wait_consistent(lambda md: tuple(sorted(md.partitions("s")[0].isr)) == (1, 2, 3))
    finally:
        resume_and_kill(cluster)


def test_killing_the_leader_loses_no_acknowledged_record_and_it_rejoins(cluster):
    """kill -9 of the leader under an acks=all idempotent producer and a consumer group: the producer continues
    after the ZooKeeper session timeout and the election, no acknowledged record is lost and none is written
    twice, the group reads them all;
    the killed broker restarts, catches up and rejoins the ISR, and serves every record as leader again."""
    controller = cluster.wait_for_controller()
    leader = next(b for b in (1, 2, 3) if b != controller)
    replicas = [leader] + [b for b in (1, 2, 3) if b != leader]
    create_topic(cluster, "f", replicas)
    producer = BackgroundProducer(cluster.bootstrap(), "f", idempotent=True).start()
    group = BackgroundConsumer(cluster.bootstrap(), "f", "through-failover")
    try:
        wait_until(lambda: len(producer.acked) >= 200, 30, what="records acknowledged before the kill")
        cluster.broker(leader).kill()
        killed = time.monotonic()
        resumed = wait_until(lambda: producer.first_ack_of_a_value_sent_after(killed), 60,
                             what="a record produced after the kill acknowledged")
        failover = resumed - killed
        print(f"\nleader failover (kill -9 to the first acknowledged produce): {failover:.2f} s")
        assert failover < SESSION_TIMEOUT_MS / 1000 + 10
        wait_until(lambda: len(producer.acked) >= 2 * len([v for v, t in producer.acked.items() if t <= resumed]),
                   30, what="more records acknowledged by the new leader")
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    acked = set(producer.acked)
    # The consumer group kept consuming through the failover (its coordinator may have moved too).
    try:
        wait_until(lambda: acked <= group.values, 60, what="the group consuming every acknowledged record")
    finally:
        group.stop()
    survivors = [b for b in (1, 2, 3) if b != leader]
    consumed = consume_all(cluster.bootstrap(*survivors), "f", 10**9, timeout=30, wanted=acked)
    assert acked <= set(consumed), f"{len(acked - set(consumed))} acknowledged record(s) lost"
    assert len(consumed) == len(set(consumed)), "duplicates despite enable.idempotence"

    # The killed broker comes back, catches up from the new leader and rejoins the ISR ...
    cluster.broker(leader).start()
    cluster.wait_consistent(lambda md: md.broker_ids == [1, 2, 3] and set(md.partitions("f")[0].isr) == {1, 2, 3},
                            timeout=60, what="the restarted broker back in the ISR")
    # ... with every record: it leads again (preferred election) and serves them all.
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
    result = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("f", 0)]).result(30)
    assert all(err is None for err in result.values()), result
    wait_until(lambda: leader_of(cluster, leader, "f") == leader, 30, what="the restarted broker leading")
    assert acked <= set(consume_all(cluster.bootstrap(leader), "f", 10**9, timeout=30, wanted=acked))


@pytest.mark.slow
def test_a_rolling_restart_with_controlled_shutdown_loses_no_acknowledged_record(cluster):
    create_topic(cluster, "roll", [1, 2, 3])
    producer = BackgroundProducer(cluster.bootstrap(), "roll").start()
    try:
        for broker in (1, 2, 3):
            before = len(producer.acked)
            wait_until(lambda b=before: len(producer.acked) >= b + 100, 30, what="records acknowledged")
            assert cluster.broker(broker).stop() == 0                # SIGTERM: controlled shutdown first
            md = cluster.wait_consistent(lambda md, b=broker: b not in md.broker_ids, what=f"broker {broker} gone")
            assert md.partitions("roll")[0].leader not in (-1, broker)   # the handoff happened before it exited
            cluster.broker(broker).start()
            cluster.wait_consistent(lambda md: md.broker_ids == [1, 2, 3] and set(md.partitions("roll")[0].isr)
                                    == {1, 2, 3}, timeout=60, what=f"broker {broker} back in the ISR")
    finally:
        producer.stop()
    assert not producer.failed, producer.failed[:5]
    acked = set(producer.acked)
    assert acked <= set(consume_all(cluster.bootstrap(), "roll", 10**9, timeout=30, wanted=acked))

"""Transactions in a two-broker ZooKeeper cluster: the coordinator's markers reach partitions led by the
other broker (WriteTxnMarkers over the inter-broker listener), and ``__transaction_state`` is replicated."""

from __future__ import annotations

import time
import uuid

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import Cluster
from tests.support.raw_client import RawClient
from tests.support.wait import wait_until
from twisted_kafka.protocol import messages as m


def stable_offset(broker) -> int:
    """The partition's last stable offset as its leader answers ListOffsets LATEST with read_committed."""
    L = m.ListOffsetsRequest
    with RawClient(broker.data_port) as client:
        body = client.request(L(replica_id=-1, isolation_level=1, topics=[L.ListOffsetsTopic(
            name="moving", partitions=[L.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-1)])]), 5)
    (p,) = body.topics[0].partitions
    return p.offset if p.error_code == 0 else -1


def test_markers_reach_partitions_led_by_either_broker(tmp_path, zookeeper, zk_chroot):
    cluster = Cluster(tmp_path, zookeeper, zk_chroot, size=2, overrides={
        "transaction.state.log.num.partitions": "4", "offsets.topic.num.partitions": "2"}).start()
    try:
        bootstrap = cluster.bootstrap()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        spread = NewTopic("spread", num_partitions=4, replica_assignment=[[1], [2], [1], [2]])
        admin.create_topics([spread])["spread"].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": "tx-cluster",
                                             "log_level": 0})
        producer.init_transactions(30)
        for outcome in ("c", "a"):
            producer.begin_transaction()
            for i in range(8):
                producer.produce("spread", f"{outcome}{i}".encode(), partition=i % 4)
            producer.flush(30)
            if outcome == "c":
                producer.commit_transaction(30)
            else:
                producer.abort_transaction(30)
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                                             "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                             "enable.partition.eof": True})
        consumer.subscribe(["spread"])
        values, at_end = [], set()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(at_end) < 4:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                continue
            at_end.discard(msg.partition())
            values.append(msg.value())
        consumer.close()
        assert sorted(values) == sorted(f"c{i}".encode() for i in range(8))
        metadata = cluster.metadata(1)
        replicas = {p: len(v.replicas) for p, v in metadata.partitions("__transaction_state").items()}
        assert replicas == {p: 2 for p in range(4)}, "replication factor 3 capped at the two brokers"
    finally:
        cluster.stop()


def test_a_transaction_survives_its_partition_leader_and_its_coordinator_stopping(tmp_path, zookeeper, zk_chroot):
    """Broker 1 leads the partition (and maybe coordinates the id); it stops mid-transaction: broker 2 took
    the producer's open transaction with the replicated log, loads __transaction_state, and commits."""
    cluster = Cluster(tmp_path, zookeeper, zk_chroot, size=2, overrides={
        "transaction.state.log.num.partitions": "2", "offsets.topic.num.partitions": "2",
        "transaction.state.log.min.isr": "1"}).start()
    try:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap()})
        moving = NewTopic("moving", num_partitions=1, replica_assignment=[[1, 2]],
                          config={"min.insync.replicas": "1"})
        admin.create_topics([moving])["moving"].result(30)
        producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap(),
                                             "transactional.id": "tx-moving", "log_level": 0})
        producer.init_transactions(30)
        producer.begin_transaction()
        for i in range(5):
            producer.produce("moving", f"m{i}".encode(), partition=0)
        assert producer.flush(30) == 0
        cluster.broker(1).stop()                      # controlled shutdown: broker 2 leads everything
        # the follower kept the producer's open transaction: the new leader holds read_committed at its start
        wait_until(lambda: stable_offset(cluster.broker(2)) >= 0, what="broker 2 leads moving-0")
        assert stable_offset(cluster.broker(2)) == 0
        producer.commit_transaction(60)              # answered once PrepareCommit is durable; markers follow
        wait_until(lambda: stable_offset(cluster.broker(2)) == 6, what="the marker on the new leader")
        consumer = confluent_kafka.Consumer({"bootstrap.servers": cluster.bootstrap(2), "group.id": "after",
                                             "auto.offset.reset": "earliest",
                                             "isolation.level": "read_committed"})
        consumer.subscribe(["moving"])
        values = []
        deadline = time.monotonic() + 30
        while len(values) < 5 and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                values.append(msg.value())
        consumer.close()
        assert values == [f"m{i}".encode() for i in range(5)]
    finally:
        cluster.stop()

"""Transactions in a two-broker ZooKeeper cluster: the coordinator's markers reach partitions led by the
other broker (WriteTxnMarkers over the inter-broker listener), and ``__transaction_state`` is replicated."""

from __future__ import annotations

import time
import uuid

import confluent_kafka
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.cluster import Cluster


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

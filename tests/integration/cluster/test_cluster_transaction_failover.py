"""A transaction over partitions led by three brokers, and its coordinator killed (kill -9) after EndTxn.

ZooKeeper and three broker processes.  A confluent-kafka transactional
producer writes to a topic whose three partitions are led by brokers 1, 2
and 3 (replication factor 2) and commits; the moment ``commit_transaction``
returns -- EndTxn answered, PrepareCommit in ``__transaction_state``, the
markers on their way (each is acks=all, so it waits for the followers) --
the broker that coordinates the transactional id is killed with SIGKILL.
Another broker becomes the leader of its ``__transaction_state`` partition,
loads the transaction in PrepareCommit and sends the markers again (Kafka's
``TransactionStateManager`` on load).  Every partition then shows the
commit: a read_committed consumer sees all of the transaction's records,
and every partition's last stable offset reaches its high watermark (no
partition is left with the transaction open).  Repeated ``ROUNDS`` times,
with a new transactional id and topic each time, the killed broker started
again in between.
"""

from __future__ import annotations

import re
import time
import uuid

import confluent_kafka
from confluent_kafka import IsolationLevel, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from support.cluster import Cluster
from support.raw_client import RawClient
from support.wait import wait_until
from twisted_kafka.protocol import messages as m

ROUNDS = 2
RECORDS = 30


def coordinator_of(cluster: Cluster, transactional_id: str) -> int:
    broker = cluster.running[0]
    with RawClient(cluster.broker(broker).data_port) as client:
        answer = client.request(m.FindCoordinatorRequest(key=transactional_id, key_type=1), 3)
    assert answer.error_code == 0, answer
    return answer.node_id


def read_committed(bootstrap: str, topic: str, partitions: int, timeout: float = 60) -> list[bytes]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                                         "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                                         "enable.partition.eof": True, "log_level": 0})
    consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and len(at_end) < partitions:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition() or 0)
                continue
            at_end.discard(msg.partition() or 0)
            values.append(msg.value() or b"")
    finally:
        consumer.close()
    return values


def stable(bootstrap: str, topic: str, partitions: int) -> bool:
    """Every partition's last stable offset equals its high watermark: no transaction open anywhere.

    A new client each time: librdkafka's ListOffsets sends the leader epoch it knows, and an admin client
    that knew the old leader keeps being answered FENCED_LEADER_EPOCH."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    def offsets(isolation) -> dict[int, int]:
        futures = admin.list_offsets({TopicPartition(topic, p): OffsetSpec.latest() for p in range(partitions)},
                                     isolation_level=isolation, request_timeout=10)
        return {tp.partition: f.result(10).offset for tp, f in futures.items()}
    try:
        return offsets(IsolationLevel.READ_COMMITTED) == offsets(IsolationLevel.READ_UNCOMMITTED)
    except (confluent_kafka.KafkaException, TimeoutError):
        return False                        # a leader moving: ask again


def test_a_commit_survives_its_coordinator_killed_after_end_txn(tmp_path, zookeeper, zk_chroot):
    cluster = Cluster(tmp_path, zookeeper, zk_chroot, size=3, overrides={
        "transaction.state.log.num.partitions": "6", "offsets.topic.num.partitions": "3",
        "auto.leader.rebalance.enable": "false"}).start()
    resent = 0
    try:
        for round_ in range(ROUNDS):
            cluster.wait_consistent(lambda md: md.broker_ids == [1, 2, 3])
            bootstrap = cluster.bootstrap()
            admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
            topic = f"spread-{round_}-{uuid.uuid4().hex[:6]}"
            spread = NewTopic(topic, num_partitions=3, replica_assignment=[[1, 2], [2, 3], [3, 1]])
            admin.create_topics([spread])[topic].result(30)
            md = cluster.wait_consistent(lambda md, topic=topic: topic in md.topics
                                         and sorted(md.leaders(topic).values()) == [1, 2, 3])
            assert sorted(md.leaders(topic).values()) == [1, 2, 3], "a partition led by each broker"
            tid = f"failover-{round_}-{uuid.uuid4().hex[:6]}"
            producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                                                 "log_level": 0})
            producer.init_transactions(60)
            coordinator = coordinator_of(cluster, tid)
            marks = {b: cluster.broker(b).log_mark() for b in cluster.running}
            values = [f"{round_}-{i}".encode() for i in range(RECORDS)]
            producer.begin_transaction()
            for i, value in enumerate(values):
                producer.produce(topic, value, partition=i % 3)
            producer.flush(60)
            producer.commit_transaction(60)
            cluster.broker(coordinator).kill()          # EndTxn answered; the markers may be on their way
            del producer
            survivors = cluster.running
            wait_until(lambda topic=topic: stable(cluster.bootstrap(), topic, 3), 60,
                       what="every partition's marker after the failover", interval=0.2)
            assert sorted(read_committed(cluster.bootstrap(), topic, 3)) == sorted(values), \
                "the committed transaction, whole, on every partition"
            for b in survivors:
                if re.search(r"[1-9][0-9]* transaction\(s\) to complete", cluster.broker(b).log_text()[marks[b]:]):
                    resent += 1
            if round_ < ROUNDS - 1:
                cluster.broker(coordinator).start()
    finally:
        cluster.kill_all()
    # At least once the new coordinator found the transaction still PrepareCommit and sent its markers.
    assert resent >= 1, "no round killed the coordinator before its markers were complete"

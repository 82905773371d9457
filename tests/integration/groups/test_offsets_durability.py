"""Committed offsets survive the broker: a clean restart, and ``kill -9`` right after the commits.

Commits are records in ``__consumer_offsets`` (Kafka's format) and the
broker answers a commit only once its record is in the log; on start the
broker replays the partitions it leads.  So after either kind of restart:

* every group's committed offsets come back with their metadata and leader
  epoch, for librdkafka (OffsetFetch v9), kafka-python (v8) and aiokafka (v3);
* a consumer that subscribes again resumes exactly after its last commit;
* the group metadata (generation, members) came back too: the last
  generation's members are known to the coordinator until their sessions
  expire.
"""

from __future__ import annotations

import asyncio
import time

from confluent_kafka import Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KTopicPartition

from support.groups import Group
from tests.integration.data.helpers import stored_batches

from .conftest import GROUP_OVERRIDES, create_topic

PARTITIONS = 3
BATCH = 30


def consume_and_commit(bootstrap: str, group_id: str, topic: str, n: int, metadata: str) -> dict[int, int]:
    """Subscribe, consume ``n`` messages, commit each partition's next offset with ``metadata``; returns
    the committed offsets.  The consumer then closes."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000, "fetch.wait.max.ms": 50})
    consumer.subscribe([topic])
    positions: dict[int, int] = {}
    got = 0
    deadline = time.monotonic() + 30
    try:
        while got < n:
            assert time.monotonic() < deadline, f"consumed {got} of {n}"
            for msg in consumer.consume(100, timeout=0.2):
                if msg.error() is None and got < n:
                    positions[msg.partition()] = msg.offset() + 1
                    got += 1
        consumer.commit(offsets=[TopicPartition(topic, p, o, metadata=metadata) for p, o in positions.items()],
                        asynchronous=False)
    finally:
        consumer.close()
    return positions


def committed_confluent(bootstrap: str, group_id: str, topic: str) -> dict[int, tuple[int, str]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_id})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
    finally:
        consumer.close()
    return {tp.partition: (tp.offset, tp.metadata) for tp in found}


def committed_kafka_python(bootstrap: str, group_id: str, topic: str) -> dict[int, tuple[int, str]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group_id, enable_auto_commit=False)
    try:
        out = {}
        for p in range(PARTITIONS):
            meta = consumer._coordinator.fetch_committed_offsets([KTopicPartition(topic, p)])
            entry = meta.get(KTopicPartition(topic, p))
            out[p] = (entry.offset, entry.metadata) if entry is not None else (-1001, None)
        return out
    finally:
        consumer.close()


def committed_aiokafka(bootstrap: str, group_id: str, topic: str) -> dict[int, tuple[int, str]]:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as ATopicPartition

    async def run():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group_id, enable_auto_commit=False)
        await consumer.start()
        try:
            offsets = await consumer._coordinator.fetch_committed_offsets(
                [ATopicPartition(topic, p) for p in range(PARTITIONS)])
            return {tp.partition: (value.offset, value.metadata) for tp, value in offsets.items()}
        finally:
            await consumer.stop()

    return asyncio.run(run())


def assert_committed_everywhere(bootstrap: str, group_id: str, topic: str, expected: dict[int, tuple[int, str]]):
    """Every client reads the same commits.  librdkafka writes the metadata string with its C
    terminator (confluent-kafka commits "first" as the 6 bytes "first\\0", and reads it back
    as "first"); the broker keeps the bytes as sent, so the Python clients see the NUL."""
    assert committed_confluent(bootstrap, group_id, topic) == expected
    with_nul = {p: (o, m + "\x00") for p, (o, m) in expected.items()}
    assert committed_kafka_python(bootstrap, group_id, topic) == with_nul
    assert committed_aiokafka(bootstrap, group_id, topic) == with_nul


def resume(bootstrap: str, group_id: str, topic: str, after: dict[int, int], produced: int) -> None:
    """A member subscribing again reads exactly the messages after the commits."""
    group = Group(bootstrap, group_id, topic, PARTITIONS)
    try:
        member = group.add("confluent")
        expected = {(p, o) for p in range(PARTITIONS) for o in range(after.get(p, 0), produced // PARTITIONS)}
        # A member that started below a commit would get those earlier offsets first (each
        # partition is fetched in order), so the count is reached with the wrong records.
        group.wait_consumed(len(expected))
        assert sorted(member.messages) == sorted(expected)
    finally:
        group.stop_all()


def test_commits_survive_a_clean_restart_and_kill_9(broker_factory):
    broker = broker_factory({**GROUP_OVERRIDES, "num.partitions": str(PARTITIONS)})
    topic, group_id = "durable-offsets", "durable"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    writer = Group(broker.bootstrap, group_id, topic, PARTITIONS)
    writer.produce(BATCH * 2)

    committed = consume_and_commit(broker.bootstrap, group_id, topic, BATCH, metadata="first")
    # A second group stores offsets only (commit with generation -1, as with assign()).
    simple = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "simple-durable"})
    simple.commit(offsets=[TopicPartition(topic, p, 7, metadata="simple-é") for p in range(PARTITIONS)],
                  asynchronous=False)
    simple.close()
    expected = {p: (committed.get(p, -1001), "first" if p in committed else "") for p in range(PARTITIONS)}
    expected = {p: v for p, v in expected.items() if v[0] >= 0}

    assert broker.restart() is broker
    assert {p: v for p, v in committed_confluent(broker.bootstrap, group_id, topic).items() if v[0] >= 0} == expected
    assert committed_confluent(broker.bootstrap, "simple-durable", topic) == {
        p: (7, "simple-é") for p in range(PARTITIONS)}

    # Commit more and crash right after the acknowledgement.
    second = consume_and_commit(broker.bootstrap, group_id, topic, BATCH, metadata="second")
    after_crash = {**expected, **{p: (o, "second") for p, o in second.items()}}
    second = {**committed, **second}
    assert sum(second.values()) == BATCH * 2
    broker.kill()
    broker.start()
    assert_committed_everywhere(broker.bootstrap, group_id, topic, after_crash)

    writer.produce(BATCH)
    resume(broker.bootstrap, group_id, topic, second, writer.produced)

    # The records on disk are Kafka's: version-prefixed OffsetCommit keys in __consumer_offsets.
    batches = [b for p in range(50) for b in stored_batches(broker, "__consumer_offsets", p)]
    assert batches and all(h.magic == 2 for _, _, h in batches)


def test_kill_9_during_a_stream_of_commits_loses_no_acknowledged_commit(broker_factory):
    """Commits go out back to back on one connection; the broker is killed mid-stream.  After
    the restart each partition's committed offset is at least the last one acknowledged (and no
    more than the last one sent: the record may have reached the log before the answer left)."""
    from support.raw_client import Closed, RawClient
    from twisted_kafka.protocol import messages as m

    broker = broker_factory({**GROUP_OVERRIDES, "num.partitions": str(PARTITIONS)})
    topic = "crash-commits"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    coordinator = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "crash"})
    coordinator.committed([TopicPartition(topic, 0)], timeout=20)       # creates __consumer_offsets
    coordinator.close()
    R = m.OffsetCommitRequest
    acked = dict.fromkeys(range(PARTITIONS), -1)
    sent = dict.fromkeys(range(PARTITIONS), -1)
    with RawClient(broker.data_port) as client:
        try:
            for i in range(1, 100_000):
                partition = i % PARTITIONS
                sent[partition] = i
                response = client.request(R(version=8, group_id="crash", generation_id_or_member_epoch=-1,
                                            member_id="", group_instance_id=None, topics=[
                                                R.OffsetCommitRequestTopic(name=topic, partitions=[
                                                    R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                                        partition_index=partition, committed_offset=i,
                                                        committed_leader_epoch=-1, committed_metadata=f"c{i}")])]),
                                          8, timeout=5)
                assert response.topics[0].partitions[0].error_code == 0
                acked[partition] = i
                if i == 300:
                    broker.process.kill()
        except (Closed, OSError):
            pass
    broker.kill()
    assert min(acked.values()) > 0
    broker.start()
    found = committed_kafka_python(broker.bootstrap, "crash", topic)
    for p in range(PARTITIONS):
        offset, metadata = found[p]
        assert acked[p] <= offset <= sent[p], (p, acked[p], offset, sent[p])
        assert metadata == f"c{offset}"

"""Log compaction end to end: a real broker process, real clients.

* 100,000 updates over 1,000 keys on a ``cleanup.policy=compact`` topic read
  back to the last value of every key after the cleaner has run -- and after
  the broker was killed (SIGKILL) while the cleaner was rewriting segments:
  the cleaner is throttled (``log.cleaner.io.max.bytes.per.second``) so the
  test can see its ``.cleaned``/``.swap`` output on disk and kill the broker
  then; the restarted broker completes or abandons the swap and loses nothing.
* Offsets never change: the compacted log has gaps, and librdkafka,
  kafka-python and aiokafka read across them (from the log start, and, with
  librdkafka, from an offset that compaction removed).
* A tombstone stays for ``delete.retention.ms`` after the cleaning that
  first saw it, so consumers can see the delete, and is removed by a later
  cleaning.
* Transactions (KIP-98): the cleaning keeps committed data only -- a
  read_uncommitted consumer no longer sees an aborted record -- and the
  COMMIT/ABORT markers whose transactions have no data left go
  ``delete.retention.ms`` after the cleaning that emptied them.
"""

from __future__ import annotations

import asyncio
import glob
import os
import random
import time

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from support.wait import wait_until

from .helpers import partition_dir, segment_files, stored_batches

pytestmark = pytest.mark.integration

KEYS = 1000
UPDATES = 100_000
SEGMENT_BYTES = 1 << 20
THROTTLE = 2 * 1024 * 1024          # bytes/s: a cleaning of the ~8 MB log takes seconds


def create_topic(bootstrap: str, name: str, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config.setdefault("cleanup.policy", "compact")
    admin.create_topics([NewTopic(name, 1, 1, config=config)])[name].result(15)


def produce(bootstrap: str, topic: str, pairs, **config) -> None:
    """Produce ``(key, value)`` pairs (value None: a tombstone) to partition 0, all acknowledged."""
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20,
                         "enable.idempotence": False, "batch.num.messages": 5000, **config})
    for key, value in pairs:
        while True:
            try:
                producer.produce(topic, value, key, partition=0,
                                 on_delivery=lambda err, msg: err is not None and errors.append(err))
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    assert producer.flush(60) == 0
    assert not errors, errors[:3]


def read_confluent(bootstrap: str, topic: str, start: int | None = None) -> list[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of every record from ``start`` (default: the log start) to the end, aborted
    transactions' records included (read_uncommitted; librdkafka's default is read_committed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_uncommitted"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=15)
        consumer.assign([TopicPartition(topic, 0, low if start is None else start)])
        got: list[tuple[int, bytes, bytes | None]] = []
        while True:
            message = consumer.poll(15)
            assert message is not None, f"no record after {got[-1:] or 'the start'} (high watermark {high})"
            if message.error() is not None:
                assert message.error().code() == -191, message.error()          # _PARTITION_EOF
                if message.offset() >= high:
                    return got
                continue
            got.append((message.offset(), message.key(), message.value()))
    finally:
        consumer.close()


def read_kafka_python(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", consumer_timeout_ms=10_000)
    try:
        tp = KpTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        high = consumer.end_offsets([tp])[tp]
        got: list[tuple[int, bytes, bytes | None]] = []
        while consumer.position(tp) < high:
            for records in consumer.poll(timeout_ms=5000).values():
                got.extend((r.offset, r.key, r.value) for r in records)
        return got
    finally:
        consumer.close()


def read_aiokafka(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    async def read():
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            tp = AioTopicPartition(topic, 0)
            consumer.assign([tp])
            high = (await consumer.end_offsets([tp]))[tp]
            got: list[tuple[int, bytes, bytes | None]] = []
            while await consumer.position(tp) < high:
                for records in (await consumer.getmany(timeout_ms=5000)).values():
                    got.extend((r.offset, r.key, r.value) for r in records)
            return got
        finally:
            await consumer.stop()

    return asyncio.run(read())


def last_values(records) -> dict[bytes, bytes | None]:
    return {key: value for _, key, value in records}


def check_compacted_read(records, expected: dict[bytes, bytes]) -> None:
    offsets = [offset for offset, _, _ in records]
    assert offsets == sorted(set(offsets)), "offsets must be strictly increasing"
    assert last_values(records) == expected


def cleaner_output(broker, topic: str) -> list[str]:
    directory = partition_dir(broker, topic, 0)
    return glob.glob(os.path.join(directory, "*.cleaned")) + glob.glob(os.path.join(directory, "*.swap"))


def test_100k_updates_over_1k_keys_compact_to_the_last_value_per_key_across_a_kill_during_cleaning(
        broker_factory):
    broker = broker_factory({"log.cleaner.backoff.ms": "100",
                             "log.cleaner.io.max.bytes.per.second": str(THROTTLE)})
    topic = "compacted-100k"
    create_topic(broker.bootstrap, topic, **{"segment.bytes": str(SEGMENT_BYTES),
                                             "min.cleanable.dirty.ratio": "0.01"})
    expected: dict[bytes, bytes] = {}

    rng = random.Random(9)

    def updates():
        for i in range(UPDATES):
            # Every key once, then keys at random: the last updates of the keys are spread
            # over the log, so the compacted log has gaps everywhere.
            key = b"key-%04d" % (i if i < KEYS else rng.randrange(KEYS))
            value = (b"%s=%06d;" % (key, i)).ljust(64, b".")
            expected[key] = value
            yield key, value

    produce(broker.bootstrap, topic, updates())
    assert len(expected) == KEYS

    # Every update is acknowledged.  Kill the broker while the throttled cleaner has output on disk.
    wait_until(lambda: cleaner_output(broker, topic), 60, "the cleaner's .cleaned/.swap output", interval=0.01)
    broker.kill()
    assert cleaner_output(broker, topic), "the kill must come while the cleaner is rewriting segments"

    broker.overrides.pop("log.cleaner.io.max.bytes.per.second")
    mark = broker.log_mark()
    broker.start()
    broker.wait_for_log("removing unfinished compaction output|completing the interrupted swap", after=mark)
    # Right after the restart (the cleaner may be working meanwhile): nothing lost.
    check_compacted_read(read_confluent(broker.bootstrap, topic), expected)

    broker.wait_for_log(rf"Cleaner: cleaned {topic}-0 ", 120, after=mark)
    records = read_confluent(broker.bootstrap, topic)
    check_compacted_read(records, expected)
    active_base = int(os.path.basename(segment_files(broker, topic, 0)[-1]).split(".")[0])
    cleaned_keys = [key for offset, key, _ in records if offset < active_base]
    assert len(cleaned_keys) == len(set(cleaned_keys)), "the cleaned section keeps one record per key"
    assert len(records) < UPDATES // 4, f"{len(records)} records left of {UPDATES}"
    assert records[-1][0] == UPDATES - 1                        # the last offset is kept

    # Offsets are preserved: gaps.  librdkafka reads from inside a gap, kafka-python across them.
    offsets = [offset for offset, _, _ in records]
    gap = next(o + 1 for o, following in zip(offsets, offsets[1:], strict=False) if following > o + 1)
    assert gap > offsets[0]
    from_gap = read_confluent(broker.bootstrap, topic, start=gap)
    assert from_gap == [r for r in records if r[0] >= gap]
    assert read_kafka_python(broker.bootstrap, topic) == records


def test_tombstones_stay_for_delete_retention_ms_then_go(broker_factory):
    broker = broker_factory({"log.cleaner.backoff.ms": "100"})
    topic = "compacted-tombstones"
    retention_ms = 4000
    create_topic(broker.bootstrap, topic, **{"segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01",
                                             "delete.retention.ms": str(retention_ms)})
    small = {"batch.size": 2048}            # batches fit the 16 KiB segments
    produce(broker.bootstrap, topic, [(b"k%02d" % i, b"v1-%02d" % i) for i in range(100)], **small)
    produce(broker.bootstrap, topic, [(b"k%02d" % i, None) for i in range(50)], **small)
    deleted_at = time.monotonic()
    filler = iter(range(1_000_000))

    def roll() -> None:
        """Records of another key, enough to roll the active segment (only finished ones are cleaned)."""
        produce(broker.bootstrap, topic, [(b"filler", (b"%08d" % next(filler)).ljust(200, b"."))
                                          for _ in range(100)], **small)

    def tombstones_only():
        roll()
        records = read_confluent(broker.bootstrap, topic)
        keyed = [(key, value) for _, key, value in records if key != b"filler"]
        return keyed if len(keyed) == 100 else None

    # First the old values of the deleted keys go; their tombstones stay (a consumer sees the delete).
    keyed = wait_until(tombstones_only, 30, "the first cleaning")
    assert sorted(keyed) == sorted([(b"k%02d" % i, None) for i in range(50)]
                                   + [(b"k%02d" % i, b"v1-%02d" % i) for i in range(50, 100)])

    # delete.retention.ms after that cleaning, a later cleaning removes them.
    def tombstones_gone():
        roll()
        records = read_confluent(broker.bootstrap, topic)
        return [key for _, key, value in records if key != b"filler"] == [b"k%02d" % i for i in range(50, 100)]

    wait_until(tombstones_gone, 60, "the tombstones to be removed", interval=0.5)
    assert time.monotonic() - deleted_at >= retention_ms / 1000
    # Rebuilt batches (some fillers removed, some kept) read the same with every client.
    assert any(header.base_offset + header.records_count - 1 < header.last_offset
               for _, _, header in stored_batches(broker, topic, 0))
    records = read_confluent(broker.bootstrap, topic)
    assert read_kafka_python(broker.bootstrap, topic) == records
    assert read_aiokafka(broker.bootstrap, topic) == records


def test_consumer_offsets_is_compacted_and_the_latest_commit_survives(broker_factory):
    """``__consumer_offsets`` is a compacted topic like any other: the cleaner keeps each
    group's latest commit, which a restarted broker loads."""
    broker = broker_factory({"log.cleaner.backoff.ms": "100", "offsets.topic.num.partitions": "1",
                             "offsets.topic.segment.bytes": "8192"})
    create_topic(broker.bootstrap, "committed", **{"cleanup.policy": "delete"})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "compacted-commits",
                         "enable.auto.commit": False})
    try:
        for offset in range(1, 301):
            consumer.commit(offsets=[TopicPartition("committed", 0, offset)], asynchronous=False)
    finally:
        consumer.close()
    line = broker.wait_for_log(r"Cleaner: cleaned __consumer_offsets-0 ", 60)
    assert " 0 kept" not in line
    broker.restart()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "compacted-commits",
                         "enable.auto.commit": False})
    try:
        [committed] = consumer.committed([TopicPartition("committed", 0)], timeout=15)
        assert committed.offset == 300
    finally:
        consumer.close()


def test_the_cleaner_throttle_is_changed_at_run_time(broker_factory):
    """``log.cleaner.io.max.bytes.per.second`` is a dynamic broker config: a cleaning crawling
    at 20 kB/s finishes within seconds once an admin client lifts the limit."""
    broker = broker_factory({"log.cleaner.backoff.ms": "100", "log.cleaner.io.max.bytes.per.second": "20000"})
    topic = "compacted-throttled"
    create_topic(broker.bootstrap, topic, **{"segment.bytes": str(SEGMENT_BYTES), "min.cleanable.dirty.ratio": "0.01"})
    expected: dict[bytes, bytes] = {}

    def updates():
        for i in range(30_000):
            key = b"key-%03d" % (i % 100)
            expected[key] = (b"%06d" % i).ljust(64, b".")
            yield key, expected[key]

    mark = broker.log_mark()
    produce(broker.bootstrap, topic, updates())
    broker.wait_for_log(f"Cleaner: beginning cleaning of {topic}-0", 30)
    # A cleaning reads at least one 1 MiB segment twice: at 20 kB/s, over a minute and a half.
    assert f"Cleaner: cleaned {topic}-0 " not in broker.log_text()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    entry = ConfigEntry("log.cleaner.io.max.bytes.per.second", "1000000000",
                        incremental_operation=AlterConfigOpType.SET)
    futures = admin.incremental_alter_configs([ConfigResource(ResourceType.BROKER, "0",
                                                              incremental_configs=[entry])])
    for future in futures.values():
        future.result(15)
    started = time.monotonic()
    broker.wait_for_log(rf"Cleaner: cleaned {topic}-0 ", 20, after=mark)
    assert time.monotonic() - started < 10, "the throttle's pending wait ends when the rate changes"
    check_compacted_read(read_confluent(broker.bootstrap, topic), expected)


def test_an_idempotent_producer_goes_on_after_cleaning_and_a_kill(broker_factory):
    """Compaction and idempotence together: a librdkafka idempotent producer writes a compacted
    topic, the cleaner compacts it (keeping the producer's last batch header, rebuilt batches
    keep their producer id, epoch and sequences), the broker is killed and restarted (producer
    state from the snapshots and the cleaned segments), and the producer, still running, goes
    on with its next sequence numbers: no OUT_OF_ORDER_SEQUENCE_NUMBER, no fatal error,
    nothing duplicated, the last value of every key read back."""
    broker = broker_factory({"log.cleaner.backoff.ms": "100"})
    topic = "compacted-idempotent"
    create_topic(broker.bootstrap, topic, **{"segment.bytes": "65536", "min.cleanable.dirty.ratio": "0.01"})
    errors: list = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 5,
                         "batch.size": 16384, "max.in.flight.requests.per.connection": 5,
                         "error_cb": lambda error: errors.append(error)})
    expected: dict[bytes, bytes] = {}
    acked: list[int] = []

    def send(first: int, count: int) -> None:
        for i in range(first, first + count):
            key = b"key-%02d" % (i % 50)
            expected[key] = (b"%06d" % i).ljust(100, b".")
            while True:
                try:
                    producer.produce(topic, expected[key], key, partition=0, on_delivery=lambda err, msg: (
                        errors.append(err) if err is not None else acked.append(msg.offset())))
                    break
                except BufferError:
                    producer.poll(0.1)
            producer.poll(0)
        assert producer.flush(60) == 0

    try:
        mark = broker.log_mark()
        send(0, 20_000)
        broker.wait_for_log(rf"Cleaner: cleaned {topic}-0 ", 60, after=mark)
        broker.kill()
        broker.start()
        send(20_000, 2_000)
    finally:
        producer.flush(10)
    # While the broker was down the producer saw transport errors only: nothing fatal, no
    # OUT_OF_ORDER_SEQUENCE_NUMBER, and every record delivered once.
    assert not [e for e in errors if e.fatal() or e.code() == KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER], errors
    assert len(acked) == 22_000 and len(set(acked)) == 22_000
    check_compacted_read(read_confluent(broker.bootstrap, topic), expected)


def test_compaction_keeps_committed_transactions_only_and_removes_markers_after_delete_retention(broker_factory):
    """KIP-98 on a compacted topic: transaction A commits every key, B (aborted) writes every key and keys of
    its own, C commits every key again.  The cleaner removes B's records whatever their keys (they never
    shadow a committed value), then A's records (C's are newer); once a cleaning finds no data of A or B, their
    markers get a delete horizon and go ``delete.retention.ms`` later.  C's marker stays with C's records."""
    broker = broker_factory({"log.cleaner.backoff.ms": "100", "transaction.state.log.num.partitions": "2",
                             "offsets.topic.num.partitions": "2"})
    topic = "compacted-transactions"
    retention_ms = 5000
    # Nothing is cleaned until the read below has seen the aborted records (min.compaction.lag.ms, then 0).
    create_topic(broker.bootstrap, topic, **{"segment.bytes": "16384", "min.cleanable.dirty.ratio": "0.01",
                                             "delete.retention.ms": str(retention_ms),
                                             "min.compaction.lag.ms": "3600000"})
    keys = [b"k%02d" % i for i in range(50)]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "compacted-txn",
                         "batch.size": 2048, "linger.ms": 5, "log_level": 0})
    producer.init_transactions(30)
    for outcome, tag in (("commit", b"A"), ("abort", b"B"), ("commit", b"C")):
        producer.begin_transaction()
        for key in keys:
            producer.produce(topic, tag + b"-" + key.ljust(100, b"."), key, partition=0)
        if tag == b"B":
            for i in range(50):
                producer.produce(topic, b"B-only", b"aborted-only-%02d" % i, partition=0)
        producer.flush(30)
        if outcome == "commit":
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
    aborted_seen = [v for _, _, v in read_confluent(broker.bootstrap, topic) if v is not None and v[:1] == b"B"]
    assert len(aborted_seen) == 100, "read_uncommitted sees the aborted records before the cleaning"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    lag = ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)
    for future in admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, topic,
                                                                  incremental_configs=[lag])]).values():
        future.result(15)
    filler = iter(range(1_000_000))

    def roll() -> None:
        """Records of another key, enough to roll the active segment (only finished segments are cleaned)."""
        produce(broker.bootstrap, topic, [(b"filler", (b"%08d" % next(filler)).ljust(200, b"."))
                                          for _ in range(100)], **{"batch.size": 2048})

    expected = {key: b"C-" + key.ljust(100, b".") for key in keys}

    def committed_only():
        roll()
        records = read_confluent(broker.bootstrap, topic)
        keyed = {key: value for _, key, value in records if key != b"filler"}
        counts = [key for _, key, _ in records if key != b"filler"]
        return keyed == expected and len(counts) == len(keys)

    wait_until(committed_only, 60, "the cleaning to leave C's records only", interval=0.3)

    def controls() -> list:
        return [h for _, _, h in stored_batches(broker, topic, 0) if h.is_control]

    assert len(controls()) >= 2, "the markers stay for delete.retention.ms after the cleaning that emptied them"

    def markers_gone():
        roll()
        return len(controls()) == 1

    wait_until(markers_gone, 60, "the markers of A and B to be removed", interval=0.5)
    (left,) = controls()
    records = read_confluent(broker.bootstrap, topic)
    assert left.base_offset > max(offset for offset, key, _ in records if key in expected), "C's marker stays"
    assert {key: value for _, key, value in records if key != b"filler"} == expected
    # kafka-python (read_uncommitted by default) reads the same transactional records (the cleaner may have
    # removed more fillers meanwhile)
    assert [r for r in read_kafka_python(broker.bootstrap, topic) if r[1] != b"filler"] == [
        r for r in records if r[1] != b"filler"]

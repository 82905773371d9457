"""Restart, crash and torn-tail recovery of a real broker process.

* Clean restart (SIGTERM, start again): every record is there, offsets
  continue, and the topic keeps its id and leader epoch — a producer that
  lives through the restart keeps working (librdkafka ignores metadata whose
  leader epoch went backwards, and treats a new topic id as a new topic).
* Crash (SIGKILL while a producer runs) with ``log.flush.interval.messages=1``
  and acks=all: every record whose delivery report said "ok" is present, at
  the offset it was acknowledged with.  ``test_crash_loop`` repeats it
  (marked slow).
* A segment cut in the middle of its last batch by a crash recovers to the
  last whole batch, and new appends continue at the right offset; cut after
  a clean shutdown (below the recovery point: damage from outside) the batch
  is reported (CORRUPT_MESSAGE) and its offsets are never given out again.
"""

from __future__ import annotations

import os
import threading

import pytest
from confluent_kafka import Producer

from support.raw_client import RawClient, auto_create_topic
from support.reading import read_to_end
from support.wait import wait_until
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.records.batch import iter_batch_headers
from twisted_kafka.protocol.records.builder import build_batch

from .helpers import (
    fetch_request,
    list_offsets_request,
    produce_request,
    segment_files,
    stored_batches,
)

PARTITIONS = 2


def topic_state(broker, topic: str) -> tuple:
    """(topic id, {partition: leader epoch}) from Metadata v12."""
    with RawClient(broker.data_port) as client:
        response = client.request(m.MetadataRequest(
            version=12, topics=[m.MetadataRequest.MetadataRequestTopic(name=topic, topic_id=None)],
            allow_auto_topic_creation=False, include_topic_authorized_operations=False), 12)
    (entry,) = response.topics
    assert entry.error_code == 0, entry
    return entry.topic_id, {p.partition_index: p.leader_epoch for p in entry.partitions}


def read_all(bootstrap: str, topic: str, partitions: int, timeout: float = 20) -> dict[int, list]:
    """Every (offset, key, value) of each partition, read to its high watermark."""
    return read_to_end(bootstrap, topic, partitions, timeout=timeout)


def log_end_offsets(broker, topic: str, partitions: int) -> dict[int, int]:
    with RawClient(broker.data_port) as client:
        response = client.request(list_offsets_request({topic: {p: -1 for p in range(partitions)}}, version=2), 2)
    return {p.partition_index: p.offset for p in response.topics[0].partitions}


# -- clean restart ------------------------------------------------------------------------------


def test_restart_keeps_records_offsets_topic_id_and_epoch(broker_factory):
    broker = broker_factory({"num.partitions": str(PARTITIONS)})
    topic = "restart"
    acked: list = []

    def delivered(err, msg):
        assert err is None, err
        acked.append((msg.partition(), msg.offset(), msg.value()))

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2,
                         "topic.metadata.refresh.interval.ms": 500})
    for i in range(5000):
        producer.produce(topic, b"before-%d" % i, partition=i % PARTITIONS, on_delivery=delivered)
    assert producer.flush(20) == 0
    before = topic_state(broker, topic)

    broker.restart()
    assert "had no clean shutdown" not in broker.log_text(since_start=True)
    assert topic_state(broker, topic) == before

    # The same producer carries on: it reconnects and its offsets continue.
    for i in range(5000):
        producer.produce(topic, b"after-%d" % i, partition=i % PARTITIONS, on_delivery=delivered)
    assert producer.flush(30) == 0
    for p in range(PARTITIONS):
        offsets = [o for part, o, _ in acked if part == p]
        assert offsets == list(range(5000)), f"partition {p} acknowledged offsets do not continue"

    stored = read_all(broker.bootstrap, topic, PARTITIONS)
    for p in range(PARTITIONS):
        assert [(o, v) for o, _, v in stored[p]] == [(o, v) for part, o, v in acked if part == p]
    # ... and once more, after a second restart.
    broker.restart()
    assert topic_state(broker, topic) == before
    assert log_end_offsets(broker, topic, PARTITIONS) == {p: 5000 for p in range(PARTITIONS)}


# -- crash ----------------------------------------------------------------------------------------

CRASH_OVERRIDES = {"num.partitions": str(PARTITIONS), "log.flush.interval.messages": "1"}


class BackgroundProducer:
    """A confluent-kafka producer (acks=all) sending as fast as it can from a thread."""

    def __init__(self, bootstrap: str, topic: str, tag: str):
        self.topic = topic
        self.tag = tag
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed = 0
        self._stop = threading.Event()
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 1,
                                  "message.timeout.ms": 60_000, "retries": 0,
                                  "reconnect.backoff.max.ms": 200})
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg):
        if err is None:
            self.acked.append((msg.partition(), msg.offset(), msg.value()))
        else:
            self.failed += 1

    def _run(self):
        i = 0
        while not self._stop.is_set():
            try:
                self.producer.produce(self.topic, b"%s-%d" % (self.tag.encode(), i), partition=i % PARTITIONS,
                                      on_delivery=self._delivered)
                i += 1
            except BufferError:
                pass
            self.producer.poll(0.0005 if i % 50 == 0 else 0)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        """Stop sending; fail whatever is still queued (the broker may be dead)."""
        self._stop.set()
        self.thread.join(10)
        self.producer.purge()
        self.producer.flush(5)
        return self


def crash_once(broker, topic: str, tag: str, acked_before_crash: int) -> list:
    """Produce while the broker is SIGKILLed; restart it (on the same ports); return the acknowledged records.

    The kill comes once the producer has had ``acked_before_crash``
    acknowledgements, with more records in flight: it keeps sending.
    """
    producer = BackgroundProducer(broker.bootstrap, topic, tag).start()
    wait_until(lambda: len(producer.acked) >= acked_before_crash, timeout=30,
               what=f"{acked_before_crash} acknowledgements")
    broker.kill()
    producer.stop()
    broker.start()
    return producer.acked


def check_acked_present(broker, topic: str, acked: list) -> dict[int, list]:
    stored = read_all(broker.bootstrap, topic, PARTITIONS)
    by_offset = {p: {o: v for o, _, v in stored[p]} for p in stored}
    for p in stored:
        assert [o for o, _, _ in stored[p]] == list(range(len(stored[p]))), f"offsets of partition {p} have a gap"
    missing = [(p, o, v) for p, o, v in acked if by_offset[p].get(o) != v]
    assert not missing, f"{len(missing)} acknowledged record(s) lost or changed, e.g. {missing[:3]}"
    return stored


def test_crash_keeps_every_acknowledged_record(broker_factory):
    broker = broker_factory(CRASH_OVERRIDES)
    topic = "crash"
    acked = crash_once(broker, topic, "crash", acked_before_crash=1000)
    assert "had no clean shutdown" in broker.log_text(since_start=True)
    stored = check_acked_present(broker, topic, acked)
    # New appends continue after what survived.
    ends = {p: len(stored[p]) for p in stored}
    with RawClient(broker.data_port) as client:
        response = client.request(produce_request({topic: {p: build_batch([(None, b"after-crash")])
                                                           for p in range(PARTITIONS)}}))
    assert {p.index: (p.error_code, p.base_offset) for p in response.responses[0].partition_responses} == \
        {p: (0, end) for p, end in ends.items()}


@pytest.mark.slow
def test_crash_loop(broker_factory):
    broker = broker_factory(CRASH_OVERRIDES)
    topic = "crash-loop"
    acked: list = []
    for round_ in range(12):
        acked += crash_once(broker, topic, f"round{round_}", acked_before_crash=300 + 300 * (round_ % 5))
        check_acked_present(broker, topic, acked)


# -- a torn tail --------------------------------------------------------------------------------


def test_segment_truncated_mid_batch_recovers_to_last_whole_batch(broker_factory):
    """A crash tore the last batch (it was never flushed: the recovery point is
    below it): recovery cuts it off and the offsets go on from there."""
    broker = broker_factory({"num.partitions": "1"})
    topic = "torn"
    with RawClient(broker.data_port) as client:
        auto_create_topic(client, topic, partitions=1)
        for b in range(5):
            response = client.request(produce_request({topic: {0: build_batch(
                [(b"k%d" % i, b"value-%d" % i) for i in range(b * 10, b * 10 + 10)])}}))
            assert response.responses[0].partition_responses[0].base_offset == b * 10
    broker.kill()
    (path,) = segment_files(broker, topic, 0)
    *_, (_, last_pos, last) = stored_batches(broker, topic, 0)
    assert last.base_offset == 40 and os.path.getsize(path) == last_pos + last.size
    os.truncate(path, last_pos + last.size // 2)

    broker.start()
    assert log_end_offsets(broker, topic, 1) == {0: 40}
    stored = read_all(broker.bootstrap, topic, 1)
    assert [(o, v) for o, _, v in stored[0]] == [(i, b"value-%d" % i) for i in range(40)]
    assert os.path.getsize(path) == last_pos, "the torn batch is cut off the file"
    with RawClient(broker.data_port) as client:
        response = client.request(produce_request({topic: {0: build_batch([(None, b"next")])}}))
    assert response.responses[0].partition_responses[0].base_offset == 40
    stored = read_all(broker.bootstrap, topic, 1)
    assert stored[0][-1][0] == 40 and stored[0][-1][2] == b"next"
    # The repaired log survives another restart unchanged.
    broker.restart()
    assert log_end_offsets(broker, topic, 1) == {0: 41}


def test_last_batch_cut_after_a_clean_shutdown_is_reported_and_its_offsets_kept(broker_factory):
    """After a clean shutdown everything was flushed (the recovery point is the log
    end): a batch cut later was damaged from outside.  Its offsets were
    acknowledged, so they are not given out again: fetches of them fail with
    CORRUPT_MESSAGE, the rest reads as before, appends go on after them."""
    broker = broker_factory({"num.partitions": "1"})
    topic = "torn-clean"
    with RawClient(broker.data_port) as client:
        auto_create_topic(client, topic, partitions=1)
        for b in range(5):
            client.request(produce_request({topic: {0: build_batch(
                [(b"k%d" % i, b"value-%d" % i) for i in range(b * 10, b * 10 + 10)])}}))
    assert broker.stop() == 0
    (path,) = segment_files(broker, topic, 0)
    *_, (_, last_pos, last) = stored_batches(broker, topic, 0)
    os.truncate(path, last_pos + last.size // 2)

    broker.start()
    assert log_end_offsets(broker, topic, 1) == {0: 50}
    assert "damaged data" in broker.log_text(since_start=True)
    with RawClient(broker.data_port) as client:
        fetched = client.request(fetch_request({topic: {0: 40}}))
        assert fetched.responses[0].partitions[0].error_code == ErrorCode.CORRUPT_MESSAGE
        response = client.request(produce_request({topic: {0: build_batch([(None, b"next")])}}))
        assert response.responses[0].partition_responses[0].base_offset == 50
    broker.restart()
    assert log_end_offsets(broker, topic, 1) == {0: 51}
    with RawClient(broker.data_port) as client:
        fetched = client.request(fetch_request({topic: {0: 0}}))
        (entry,) = fetched.responses[0].partitions
        assert entry.error_code == 0 and entry.high_watermark == 51
        assert [h.base_offset for _, h in iter_batch_headers(bytes(entry.records))] == [0, 10, 20, 30]
        assert client.request(fetch_request({topic: {0: 45}})).responses[0].partitions[0].error_code \
            == ErrorCode.CORRUPT_MESSAGE
        fetched = client.request(fetch_request({topic: {0: 50}}))
        assert [h.base_offset for _, h in iter_batch_headers(bytes(fetched.responses[0].partitions[0].records))] \
            == [50]


# -- many segments ------------------------------------------------------------------------------


def test_reads_span_rolled_segments_before_and_after_restart(broker_factory):
    broker = broker_factory({"num.partitions": "1", "log.segment.bytes": "200000"})
    topic = "rolled"
    acked = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2, "batch.size": 16384})
    for i in range(20_000):
        producer.produce(topic, b"value-%06d-" % i + b"r" * 50, b"%d" % i,
                         on_delivery=lambda err, msg: acked.append((err, msg.offset())))
    assert producer.flush(30) == 0
    assert [e for e, _ in acked if e is not None] == []
    assert len(segment_files(broker, topic, 0)) >= 5

    def check():
        stored = read_all(broker.bootstrap, topic, 1)[0]
        assert [o for o, _, _ in stored] == list(range(20_000))
        assert [v for _, _, v in stored] == [b"value-%06d-" % i + b"r" * 50 for i in range(20_000)]

    check()
    broker.kill()          # unclean: the active segment is recovered, the rolled ones are checked
    broker.start()
    check()
    broker.restart()
    check()
    with RawClient(broker.data_port) as client:
        response = client.request(produce_request({topic: {0: build_batch([(None, b"next")])}}))
    assert response.responses[0].partition_responses[0].base_offset == 20_000

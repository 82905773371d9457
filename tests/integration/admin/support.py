"""Helpers of the admin API tests: futures, produce, offsets, raw requests."""

from __future__ import annotations

import uuid

from support.raw_client import RawClient
from support.wait import wait_until
from twisted_kafka.protocol import messages as m

__all__ = ["outcomes", "produce", "watermarks", "wait_until", "raw_request", "ZERO_UUID", "confluent_admin"]

ZERO_UUID = uuid.UUID(int=0)


def confluent_admin(broker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 10000})


def outcomes(futures: dict, timeout: float = 15) -> dict:
    """key -> result, or the exception the future failed with (confluent-kafka admin futures)."""
    out = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(timeout)
        except Exception as exc:  # the test inspects it
            out[key] = exc
    return out


def error_code(exc) -> int | None:
    """The Kafka error code inside a confluent-kafka KafkaException (None for a success)."""
    if not isinstance(exc, Exception):
        return None
    return exc.args[0].code()


def produce(bootstrap: str, topic: str, count: int, *, partition: int = 0, value_size: int = 100,
            flush_each: bool = False) -> None:
    """``count`` records to ``topic``-``partition`` with confluent-kafka; one batch each with ``flush_each``."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "acks": "all"})
    errors = []

    def report(err, msg):
        if err is not None:
            errors.append(err)

    for i in range(count):
        producer.produce(topic, value=(b"v%d-" % i).ljust(value_size, b"x"), partition=partition,
                         on_delivery=report)
        if flush_each:
            producer.flush(10)
    assert producer.flush(15) == 0, "records left unsent"
    assert not errors, errors


def watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    """(earliest, latest) offsets from ListOffsets, through confluent-kafka."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "admin-tests-watermarks",
                         "enable.auto.commit": False})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    finally:
        consumer.close()


def raw_request(broker, body, version: int):
    """Send one request on a fresh connection; the decoded response."""
    with RawClient(broker.data_port) as client:
        return client.request(body, version)


def topic_id(broker, topic: str) -> uuid.UUID:
    """The topic id Metadata v12 reports."""
    response = raw_request(broker, m.MetadataRequest(topics=[m.MetadataRequest.MetadataRequestTopic(name=topic)],
                                                     allow_auto_topic_creation=False,
                                                     include_topic_authorized_operations=False), 12)
    return response.topics[0].topic_id


def produce_one(broker, topic: str, partition: int = 0) -> int:
    """Produce one record with a raw Produce v7; the partition's error code."""
    from twisted_kafka.protocol.records.builder import build_batch

    P = m.ProduceRequest
    request = P(transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        P.TopicProduceData(name=topic, partition_data=[
            P.TopicProduceData.PartitionProduceData(index=partition, records=build_batch([(b"k", b"v")]))])])
    response = raw_request(broker, request, 7)
    return response.responses[0].partition_responses[0].error_code


def fetch_log_start_offset(broker, topic: str, partition: int = 0, offset: int = 0) -> tuple[int, int]:
    """(error code, log_start_offset) of a raw Fetch v11 of one partition."""
    F = m.FetchRequest
    request = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
                session_epoch=-1, topics=[F.FetchTopic(topic=topic, partitions=[
                    F.FetchTopic.FetchPartition(partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                                                log_start_offset=-1, partition_max_bytes=1 << 20)])],
                forgotten_topics_data=[], rack_id="")
    response = raw_request(broker, request, 11)
    part = response.responses[0].partitions[0]
    return part.error_code, part.log_start_offset

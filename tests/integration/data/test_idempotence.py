"""Idempotent producers while their connections are cut and the broker restarts: exactly once, in order.

librdkafka (``enable.idempotence=true``, 5 requests in flight) produces
through a loopback proxy that cuts its connections at random byte counts --
inside a request, between a request and its answer, inside an answer -- so
the producer retries batches the broker may already have written; and
across a clean restart and a kill -9 of the broker, after which the broker
knows the producer's last batches only from its snapshot and the segments.
Every partition must then hold exactly the values sent to it, in send
order, at the offsets the producer was told: no duplicate, no gap.

kafka-python (idempotent by default) and aiokafka (``enable_idempotence``,
InitProducerId v0) do the same through the proxy.
"""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaProducer

from support.cutting_proxy import CuttingProxy
from support.raw_client import RawClient
from support.wait import wait_until
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.records import build_batch

PARTITIONS = 3
#: Values are sent round-robin to the partitions; each carries its own number.
N = 30_000


def value(i: int) -> bytes:
    return b"%08d-" % i + b"v" * (i % 97)


class Ledger:
    """What was sent to each partition (in send order) and the offsets the producer was told."""

    def __init__(self):
        self.sent: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        self.acked: dict[tuple[int, bytes], int] = {}
        self.errors: list = []
        self.lock = threading.Lock()

    def send(self, partition: int, v: bytes) -> None:
        self.sent[partition].append(v)

    def ack(self, partition: int, v: bytes, offset: int) -> None:
        with self.lock:
            assert (partition, v) not in self.acked, f"{v!r} acknowledged twice"
            self.acked[(partition, v)] = offset

    def check_offsets(self) -> None:
        assert not self.errors, self.errors[:5]
        for p, values in self.sent.items():
            offsets = [self.acked[(p, v)] for v in values]
            assert offsets == list(range(len(values))), f"partition {p}: offsets not 0..{len(values) - 1} in order"

    def check_log(self, bootstrap: str, topic: str) -> None:
        """The partitions hold exactly the values sent, in send order."""
        assert read_back(bootstrap, topic, {p: len(v) for p, v in self.sent.items()}) == self.sent


def read_back(bootstrap: str, topic: str, expected: dict[int, int]) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "idempotence-check", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    try:
        for p, n in expected.items():
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            assert (low, high) == (0, n), f"partition {p} holds offsets [{low}, {high}), {n} values were sent"
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        got: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        total = sum(expected.values())
        while sum(map(len, got.values())) < total:
            msgs = consumer.consume(1000, timeout=5)
            assert msgs, f"nothing read within 5 s; {sum(map(len, got.values()))} of {total}"
            for msg in msgs:
                assert msg.error() is None, msg.error()
                assert msg.offset() == len(got[msg.partition()])
                got[msg.partition()].append(msg.value())
        return got
    finally:
        consumer.close()


def librdkafka_producer(bootstrap: str, ledger: Ledger) -> tuple[Producer, callable]:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "max.in.flight.requests.per.connection": 5, "linger.ms": 2, "batch.num.messages": 200,
                         "message.timeout.ms": 120_000, "retry.backoff.ms": 20, "reconnect.backoff.ms": 10,
                         "reconnect.backoff.max.ms": 200, "socket.connection.setup.timeout.ms": 5000})

    def delivered(err, msg):
        if err is not None:
            ledger.errors.append(err)
        else:
            ledger.ack(msg.partition(), msg.value(), msg.offset())

    def produce(topic: str, start: int, stop: int) -> None:
        for i in range(start, stop):
            partition, v = i % PARTITIONS, value(i)
            ledger.send(partition, v)
            while True:
                try:
                    producer.produce(topic, v, partition=partition, on_delivery=delivered)
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)

    return producer, produce


def assert_cut(proxy: CuttingProxy, at_least: int) -> None:
    """The proxy cut connections, some of them inside an answer (a request the broker carried out
    whose answer was lost, so the producer's retry is a duplicate)."""
    print(f"proxy: {proxy.connections} connections, {proxy.cuts} cut, "
          f"{proxy.cuts_after_response_bytes} of them inside an answer")
    assert proxy.cuts >= at_least and proxy.cuts_after_response_bytes >= 1, (
        proxy.cuts, proxy.cuts_after_response_bytes)


@pytest.fixture
def proxied_broker(broker_factory):
    """A broker advertising a cutting proxy's port: clients always come back through the proxy."""
    proxy = CuttingProxy(cut_every=48 * 1024, seed=9).start()
    broker = broker_factory({
        "num.partitions": str(PARTITIONS),
        "listeners": "PLAINTEXT://127.0.0.1:{port:PLAINTEXT},CONTROLLER://127.0.0.1:{port:CONTROLLER}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port},CONTROLLER://127.0.0.1:{{port:CONTROLLER}}",
    })
    proxy.target_port = broker.data_port
    try:
        yield broker, proxy
    finally:
        proxy.stop()


def test_librdkafka_through_cut_connections(proxied_broker):
    broker, proxy = proxied_broker
    bootstrap = f"127.0.0.1:{proxy.port}"
    ledger = Ledger()
    producer, produce = librdkafka_producer(bootstrap, ledger)
    produce("rdk-cut", 0, N)
    assert producer.flush(120) == 0, "messages left undelivered"
    assert_cut(proxy, 10)
    ledger.check_offsets()
    proxy.cutting = False
    ledger.check_log(bootstrap, "rdk-cut")


@pytest.mark.parametrize("how", ["restart", "kill -9"])
def test_librdkafka_across_a_broker_restart(broker_factory, how):
    broker = broker_factory({"num.partitions": str(PARTITIONS)})
    ledger = Ledger()
    producer, produce = librdkafka_producer(broker.bootstrap, ledger)
    topic = "rdk-" + how.replace(" ", "").replace("-", "")
    produce(topic, 0, N // 3)
    # Mid-stream: part of the first third acknowledged, the rest queued or in flight.
    wait_until(lambda: producer.poll(0) is not None and len(ledger.acked) >= N // 10, timeout=60,
               what="a tenth acknowledged")
    if how == "restart":
        broker.restart()
    else:
        broker.kill()
        broker.start()
    produce(topic, N // 3, N)
    assert producer.flush(120) == 0, "messages left undelivered"
    ledger.check_offsets()
    ledger.check_log(broker.bootstrap, topic)


def test_kafka_python_default_producer_through_cut_connections(proxied_broker):
    """kafka-python's default producer is idempotent; no option given."""
    broker, proxy = proxied_broker
    bootstrap = f"127.0.0.1:{proxy.port}"
    ledger = Ledger()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    n = N // 3
    try:
        assert producer.config["enable_idempotence"] is True
        futures = []
        for i in range(n):
            partition, v = i % PARTITIONS, value(i)
            ledger.send(partition, v)
            futures.append((partition, v, producer.send("kp-cut", v, partition=partition)))
        producer.flush(120)
        for partition, v, future in futures:
            ledger.ack(partition, v, future.get(timeout=10).offset)
    finally:
        producer.close(timeout=10)
    assert_cut(proxy, 2)
    ledger.check_offsets()
    proxy.cutting = False
    ledger.check_log(bootstrap, "kp-cut")


def test_aiokafka_idempotent_producer_through_cut_connections(proxied_broker):
    """aiokafka's idempotent producer asks InitProducerId v0."""
    broker, proxy = proxied_broker
    bootstrap = f"127.0.0.1:{proxy.port}"
    ledger = Ledger()
    n = N // 3

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=2,
                                    retry_backoff_ms=20, request_timeout_ms=10_000)
        await producer.start()
        try:
            futures = []
            for i in range(n):
                partition, v = i % PARTITIONS, value(i)
                ledger.send(partition, v)
                futures.append((partition, v, await producer.send("aio-cut", v, partition=partition)))
            for partition, v, future in futures:
                ledger.ack(partition, v, (await future).offset)
        finally:
            await producer.stop()

    asyncio.run(run())
    assert_cut(proxy, 2)
    ledger.check_offsets()
    proxy.cutting = False
    ledger.check_log(bootstrap, "aio-cut")


# -- the broker's producer state after a kill -9, seen through raw requests ---------------------


def raw_produce(client: RawClient, topic: str, producer_id: int, epoch: int, seq: int) -> tuple[int, int]:
    data = build_batch([(None, b"seq-%d-" % seq + b"p" * 300, (), None)], producer_id=producer_id,
                       producer_epoch=epoch, base_sequence=seq)
    body = client.request(m.ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
        m.ProduceRequest.TopicProduceData(name=topic, partition_data=[
            m.ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=data)])]), 9)
    (answer,) = body.responses[0].partition_responses
    return answer.error_code, answer.base_offset


def test_producer_state_is_rebuilt_after_kill_9(broker_factory):
    """Segments roll every few batches (a snapshot at each roll); after a kill -9 the broker still
    answers the producer's last five batches with their offsets, and refuses gaps and older batches."""
    broker = broker_factory({"num.partitions": "1", "log.segment.bytes": "4096"})
    topic = "raw-idem"
    with RawClient(broker.data_port) as client:
        init = client.request(m.InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60_000,
                                                      producer_id=-1, producer_epoch=-1), 4)
        assert init.error_code == ErrorCode.NONE
        pid, epoch = init.producer_id, init.producer_epoch
        client.metadata(1, [topic])             # Metadata v1 creates the topic
        wait_until(lambda: raw_produce(client, topic, pid, epoch, 0) == (ErrorCode.NONE, 0), timeout=10,
                   what="the topic to be created and the first batch written")
        for seq in range(1, 60):
            assert raw_produce(client, topic, pid, epoch, seq) == (ErrorCode.NONE, seq)
    snapshots = [n for n in os.listdir(os.path.join(broker.log_dirs[0], f"{topic}-0")) if n.endswith(".snapshot")]
    assert snapshots, "segments rolled, each roll writes a snapshot"
    broker.kill()
    broker.start()
    with RawClient(broker.data_port) as client:
        for seq in range(55, 60):               # the last five: duplicates, answered with their offsets
            assert raw_produce(client, topic, pid, epoch, seq) == (ErrorCode.NONE, seq)
        assert raw_produce(client, topic, pid, epoch, 54)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert raw_produce(client, topic, pid, epoch, 62)[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert raw_produce(client, topic, pid, epoch, 60) == (ErrorCode.NONE, 60)     # nothing was written twice

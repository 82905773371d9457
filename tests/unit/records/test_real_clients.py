"""Batches written by real Kafka clients validate and decode to exactly what was sent.

Each client produces the same messages with each codec to a ``CapturePeer``
(a scripted broker that shares no code with twisted_kafka); the captured
Produce payloads must pass ``validate_records`` (CRC, header, client rules,
decompression) and ``iter_records`` must give back the keys, values and
headers in order.  The codec is asserted too: the payload is compressible,
so a batch sent uncompressed would mean the codec path went untested
(librdkafka and kafka-python send a batch uncompressed when compressing does
not make it smaller).
"""

from __future__ import annotations

import asyncio
import shutil
import subprocess

import pytest

from support.capture_peer import CapturePeer
from support.wait import WaitTimeout, wait_until
from twisted_kafka.protocol.records import CompressionType, iter_records, validate_records, verify_crc

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
MESSAGES = [(b"key-%03d" % i, b"value-%03d|" % i * 12, [("trace", b"t-%d" % i), ("app", b"records-test")])
            for i in range(60)]
KCAT = shutil.which("kcat") or "kcat"  # make test installs it (bin/install-system-deps)


@pytest.fixture(scope="module")
def peer():
    with CapturePeer(partitions=1) as capture:
        yield capture


def _captured(peer: CapturePeer, topic: str, expected: int):
    """Wait until ``expected`` records arrived for ``topic``; returns its captures (what arrived, if not all)."""
    def captures():
        return [c for c in peer.produce_records if c.topic == topic]

    try:
        return wait_until(lambda: sum(_count(c.records) for c in captures()) >= expected and captures(),
                          timeout=30, what=f"{expected} records of {topic}")
    except WaitTimeout:
        return captures()


def _count(blob: bytes) -> int:
    try:
        return sum(h.records_count for _, h in validate_records(blob))
    except Exception:
        return 0


def _check(peer: CapturePeer, topic: str, codec: str, messages=MESSAGES, with_headers=True):
    caps = _captured(peer, topic, len(messages))
    assert caps, f"nothing captured for {topic}: {peer.requests} {peer.errors}"
    decoded = []
    codecs = set()
    for cap in caps:
        batches = validate_records(cap.records, produce_version=cap.api_version, max_batch_size=1048588,
                                   deep=True)
        for pos, header in batches:
            verify_crc(cap.records, pos, header)
            assert header.magic == 2
            codecs.add(header.compression)
            records = list(iter_records(cap.records, pos, header))
            assert len(records) == header.records_count
            assert [r.offset_delta for r in records] == list(range(header.records_count))
            decoded += [(r.key, r.value, r.headers if with_headers else []) for r in records]
    expected = [(k, v, h if with_headers else []) for k, v, h in messages]
    assert decoded == expected
    assert codecs == {CompressionType[codec.upper()]}, f"{topic}: sent as {codecs}"
    return caps


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka(peer, codec):
    import confluent_kafka
    topic = f"confluent-{codec}"
    producer = confluent_kafka.Producer({"bootstrap.servers": peer.bootstrap, "compression.type": codec,
                                         "linger.ms": 20, "enable.idempotence": codec == "zstd"})
    for key, value, headers in MESSAGES:
        producer.produce(topic, key=key, value=value, headers=headers)
    assert producer.flush(20) == 0
    caps = _check(peer, topic, codec)
    if codec == "zstd":             # idempotent: a producer id and sequences in the header
        _, header = validate_records(caps[0].records)[0]
        assert header.producer_id >= 1000 and header.base_sequence == 0


@pytest.mark.parametrize("codec", CODECS)
def test_kcat(peer, codec):
    topic = f"kcat-{codec}"
    lines = b"".join(k + b"\t" + v + b"\n" for k, v, _ in MESSAGES)
    subprocess.run([KCAT, "-P", "-b", peer.bootstrap, "-t", topic, "-z", codec, "-K", "\t",
                    "-X", "linger.ms=20", "-H", "trace=kcat", "-H", "app=records-test"],
                   input=lines, check=True, timeout=60, capture_output=True)
    expected = [(k, v, [("trace", b"kcat"), ("app", b"records-test")]) for k, v, _ in MESSAGES]
    _check(peer, topic, codec, messages=expected)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python(peer, codec):
    import kafka
    topic = f"kafka-python-{codec}"
    producer = kafka.KafkaProducer(bootstrap_servers=peer.bootstrap,
                                   compression_type=None if codec == "none" else codec, linger_ms=20)
    try:
        for key, value, headers in MESSAGES:
            producer.send(topic, key=key, value=value, headers=headers)
        producer.flush(timeout=20)
    finally:
        producer.close(timeout=5)
    caps = _check(peer, topic, codec)
    if codec == "snappy":               # kafka-python frames snappy the xerial way
        assert caps[0].records[61:69] == b"\x82SNAPPY\x00"


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka(peer, codec):
    import aiokafka
    topic = f"aiokafka-{codec}"

    async def produce():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=peer.bootstrap, linger_ms=20,
                                             compression_type=None if codec == "none" else codec)
        await producer.start()
        try:
            futures = [await producer.send(topic, key=k, value=v, headers=h) for k, v, h in MESSAGES]
            await asyncio.gather(*futures)
        finally:
            await producer.stop()

    asyncio.run(produce())
    caps = _check(peer, topic, codec)
    if codec == "snappy":
        assert caps[0].records[61:69] == b"\x82SNAPPY\x00"


def test_peer_saw_only_producer_apis(peer):
    """The peer answered every request it got (runs last in this module)."""
    assert peer.errors == []
    assert {key for key, _, _ in peer.requests} <= {0, 3, 18, 22}

"""Four real clients produce and consume over an SSL listener, trusting a CA made in the test (trustme).

One broker for the module: PLAINTEXT, SSL (``ssl.client.auth=requested``)
and the CONTROLLER control plane.  Each client writes its own topic and reads
it back; librdkafka and kcat check the broker's host name (``localhost``,
in the certificate's subject alternative names), kafka-python and aiokafka
too (``ssl_check_hostname``).
"""

from __future__ import annotations

import asyncio
import ssl
import subprocess
import time

import pytest

from support.tls import Pki, librdkafka_ssl, tls_overrides

pytestmark = pytest.mark.timeout(120)

MESSAGES = [f"message-{i}".encode() for i in range(20)]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory, pki):
    from support.broker_process import BrokerProcess

    overrides = tls_overrides(pki, pki.server_keystore("localhost", "127.0.0.1"), client_auth="requested")
    broker = BrokerProcess(tmp_path_factory.mktemp("tls-broker"), overrides).start()
    yield broker
    if broker.running:
        assert broker.stop() == 0, broker.log_text()[-4000:]


@pytest.fixture
def ssl_bootstrap(tls_broker):
    return f"localhost:{tls_broker.port('SSL')}"


def consume_with_confluent(conf: dict, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer({**conf, "group.id": f"{topic}-group", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while len(values) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                values.append(message.value())
    finally:
        consumer.close()
    return values


def test_confluent_kafka(pki, ssl_bootstrap):
    from confluent_kafka import Producer

    producer = Producer(librdkafka_ssl(pki, ssl_bootstrap))
    for value in MESSAGES:
        producer.produce("tls-confluent", value)
    assert producer.flush(30) == 0
    assert consume_with_confluent(librdkafka_ssl(pki, ssl_bootstrap), "tls-confluent", len(MESSAGES)) == MESSAGES


def test_kcat(pki, ssl_bootstrap):
    common = ["kcat", "-b", ssl_bootstrap, "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca_file}",
              "-X", "ssl.endpoint.identification.algorithm=https"]
    subprocess.run([*common, "-P", "-t", "tls-kcat"], input=b"\n".join(MESSAGES) + b"\n", check=True, timeout=60)
    out = subprocess.run([*common, "-C", "-t", "tls-kcat", "-o", "beginning", "-c", str(len(MESSAGES)), "-e"],
                         capture_output=True, check=True, timeout=60)
    assert out.stdout.split(b"\n")[:len(MESSAGES)] == MESSAGES


def test_kafka_python(pki, ssl_bootstrap):
    from kafka import KafkaConsumer, KafkaProducer

    settings = {"bootstrap_servers": ssl_bootstrap, "security_protocol": "SSL", "ssl_cafile": pki.ca_file,
                "ssl_check_hostname": True}
    producer = KafkaProducer(enable_idempotence=False, **settings)   # no idempotence here yet
    for value in MESSAGES:
        producer.send("tls-kafka-python", value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer("tls-kafka-python", auto_offset_reset="earliest", consumer_timeout_ms=20000,
                             group_id="tls-kafka-python", **settings)
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == len(MESSAGES):
            break
    consumer.close()
    assert values == MESSAGES


def test_aiokafka(pki, ssl_bootstrap):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> list[bytes]:
        context = ssl.create_default_context(cafile=pki.ca_file)
        producer = AIOKafkaProducer(bootstrap_servers=ssl_bootstrap, security_protocol="SSL", ssl_context=context)
        await producer.start()
        try:
            for value in MESSAGES:
                await producer.send("tls-aiokafka", value)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("tls-aiokafka", bootstrap_servers=ssl_bootstrap, security_protocol="SSL",
                                    ssl_context=context, auto_offset_reset="earliest", group_id="tls-aiokafka")
        await consumer.start()
        values: list[bytes] = []
        try:
            async with asyncio.timeout(60):
                async for message in consumer:
                    values.append(message.value)
                    if len(values) == len(MESSAGES):
                        break
        finally:
            await consumer.stop()
        return values

    assert asyncio.run(run()) == MESSAGES


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2], ids=["TLSv1.3", "TLSv1.2"])
def test_reconnecting_client_resumes_its_session(pki, tls_broker, version):
    """A client offering the session (ticket) of its last connection resumes it instead of a full handshake."""
    import socket
    import struct

    from support.raw_client import api_versions_frame

    context = ssl.create_default_context(cafile=pki.ca_file)
    context.minimum_version = context.maximum_version = version
    api_versions = api_versions_frame(correlation_id=1)

    def connect(session):
        raw = socket.create_connection(("127.0.0.1", tls_broker.port("SSL")), timeout=10)
        with context.wrap_socket(raw, server_hostname="localhost", session=session) as sock:
            sock.sendall(api_versions)
            answer = b""
            while len(answer) < 4 or len(answer) < 4 + struct.unpack_from(">i", answer)[0]:
                chunk = sock.recv(65536)
                assert chunk, "the broker closed the connection"
                answer += chunk
            assert struct.unpack_from(">ih", answer, 4) == (1, 0)      # correlation id, error code
            return sock.session, sock.session_reused, sock.version()

    session, reused, negotiated = connect(None)
    assert not reused and negotiated == version.name.replace("_", ".")
    assert session is not None and session.has_ticket
    for _ in range(2):
        session, reused, _ = connect(session)
        assert reused

"""Raw bytes from librdkafka (confluent-kafka 2.16 and kcat with librdkafka 2.0.2).

A throwaway TCP server on 127.0.0.1 answers with nothing but this codec:
ApiVersions (the registry's client-facing table) and Metadata (itself as the
only broker, one topic, assembled from a fragment). The tests check both
directions: the requests librdkafka really sends decode -- its first frame is
ApiVersions v3 with a flexible header and the client software name/version --
and librdkafka accepts our ApiVersions and Metadata responses, which shows in
the metadata it reports back.
"""

from __future__ import annotations

import json
import shutil
import socket
import struct
import subprocess
import threading
import uuid

import pytest

from twisted_kafka.protocol import codec, metadata_response
from twisted_kafka.protocol.exceptions import ProtocolDecodeError
from twisted_kafka.protocol.header import parse_request_header
from twisted_kafka.protocol.registry import CONTROLLER_API_KEYS, REGISTRY, ApiKey

CLIENT_KEYS = [spec.api_key for spec in REGISTRY if spec.api_key not in CONTROLLER_API_KEYS]
TOPIC = "codec-wire-topic"
TOPIC_ID = uuid.UUID("5f0c6a3e-9d4b-4c2a-8a39-0b1d7c7e9f11")
CLUSTER_ID = "twisted-kafka-codec-test"
NODE_ID = 1


def _recv_exact(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


class CodecOnlyBroker:
    """Answers ApiVersions and Metadata with this codec; records every decoded request."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.requests: list[tuple] = []  # (header, body or exception)
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket):
        with conn:
            while True:
                size_bytes = _recv_exact(conn, 4)
                if size_bytes is None:
                    return
                frame = _recv_exact(conn, struct.unpack(">i", size_bytes)[0])
                if frame is None:
                    return
                header = parse_request_header(frame)
                try:
                    body = codec.decode_request_body(header, frame)
                except ProtocolDecodeError as exc:
                    body = exc
                with self.lock:
                    self.requests.append((header, body, frame))
                answer = self._answer(header, body)
                if answer is None:
                    return  # like Kafka: no response, close the connection
                conn.sendall(b"".join(answer))

    def _answer(self, header, body):
        if header.api_key == ApiKey.API_VERSIONS:
            if not REGISTRY[ApiKey.API_VERSIONS].is_advertised(header.api_version):
                return codec.encode_api_versions_error(header)
            return codec.encode_response(header, codec.api_versions_response(CLIENT_KEYS, header.api_version))
        if header.api_key == ApiKey.METADATA and not isinstance(body, Exception):
            version = header.api_version
            topic = metadata_response.TopicMetadata(
                version=version, error_code=0, name=TOPIC, topic_id=TOPIC_ID, is_internal=False,
                partitions=[metadata_response.TopicMetadata.MetadataResponsePartition(
                    version=version, error_code=0, partition_index=0, leader_id=NODE_ID, leader_epoch=0,
                    replica_nodes=[NODE_ID], isr_nodes=[NODE_ID], offline_replicas=[])],
                authorized_operations=None)
            fragments = [metadata_response.encode_topic_fragment(version, topic)]
            return metadata_response.assemble(header, version, 0, [(NODE_ID, "127.0.0.1", self.port, None)],
                                              CLUSTER_ID, NODE_ID, fragments)
        return None

    def seen(self, api_key):
        with self.lock:
            return [(h, b, f) for h, b, f in self.requests if h.api_key == api_key]

    def close(self):
        self.closed = True
        self.listener.close()


@pytest.fixture
def broker():
    server = CodecOnlyBroker()
    yield server
    server.close()


def _check_api_versions_v3(header, body):
    assert (header.api_key, header.api_version, header.header_version) == (18, 3, 2)
    assert not isinstance(body, Exception), body
    assert body.client_software_name and body.client_software_version
    return body


def test_confluent_kafka_handshake_and_metadata(broker):
    import confluent_kafka
    producer = confluent_kafka.Producer({
        "bootstrap.servers": f"127.0.0.1:{broker.port}", "broker.address.family": "v4",
        "client.id": "codec-wire-test", "socket.timeout.ms": 10000,
    })
    try:
        metadata = producer.list_topics(timeout=15)
    finally:
        producer.flush(0)
        del producer

    # librdkafka parsed our ApiVersions (v3 body, header v0) and Metadata responses:
    assert metadata.cluster_id == CLUSTER_ID
    assert metadata.controller_id == NODE_ID
    assert [(b.id, b.host, b.port) for b in metadata.brokers.values()] == [(NODE_ID, "127.0.0.1", broker.port)]
    assert list(metadata.topics) == [TOPIC]
    (partition,) = metadata.topics[TOPIC].partitions.values()
    assert (partition.id, partition.leader, partition.replicas, partition.isrs) == (0, NODE_ID, [NODE_ID], [NODE_ID])

    # The first frame of every connection is ApiVersions v3 with a flexible header:
    first_header, first_body, first_frame = broker.requests[0]
    body = _check_api_versions_v3(first_header, first_body)
    assert first_header.client_id == "codec-wire-test"
    assert body.client_software_name == "confluent-kafka-python"
    assert body.client_software_version.startswith("2.")
    assert first_header.header_size < len(first_frame)

    metadata_requests = broker.seen(ApiKey.METADATA)
    for md_header, md_body, _ in metadata_requests:
        assert REGISTRY[ApiKey.METADATA].is_advertised(md_header.api_version) and md_header.api_version >= 12
        assert not isinstance(md_body, Exception), md_body

    # librdkafka's all-topics MetadataRequest (v9+) leaves 3 bytes after the body
    # (an unfinalized 4-byte array-count placeholder); Kafka ignores them, so must we.
    all_topics = [(h, f) for h, b, f in metadata_requests if b.topics is None]
    assert all_topics
    for md_header, frame in all_topics:
        with pytest.raises(ProtocolDecodeError, match="3 unexpected trailing byte"):
            codec.decode_request_body(md_header, frame, strict=True)


def test_kcat_handshake_and_metadata(broker):
    kcat = shutil.which("kcat") or "kcat"  # make test installs it (bin/install-system-deps)
    result = subprocess.run([kcat, "-b", f"127.0.0.1:{broker.port}", "-L", "-J", "-m", "10",
                             "-X", "broker.address.family=v4"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    listing = json.loads(result.stdout)
    assert [b["id"] for b in listing["brokers"]] == [NODE_ID]
    assert listing["brokers"][0]["name"] == f"127.0.0.1:{broker.port}"
    assert [t["topic"] for t in listing["topics"]] == [TOPIC]

    first_header, first_body, _ = broker.requests[0]
    body = _check_api_versions_v3(first_header, first_body)
    assert body.client_software_name == "librdkafka"
    assert body.client_software_version.startswith("2.0")
    (md_header, md_body, _), *_ = broker.seen(ApiKey.METADATA)
    assert md_header.api_version == 4 and not isinstance(md_body, Exception)


def test_kip_511_fallback_from_an_unknown_api_versions_version(broker):
    """An ApiVersions v99 request gets the v0-format error listing ApiVersions 0-4."""
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        frame = struct.pack(">hhi", 18, 99, 31) + b"\x00\x04test" + b"\x00" + b"\x07future-bytes"
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        response = _recv_exact(sock, size)
    correlation_id, message = codec.decode_response(18, 99, response)
    assert correlation_id == 31
    assert message.version == 0 and message.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in message.api_keys] == [(18, 0, 4)]

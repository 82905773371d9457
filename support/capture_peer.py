"""A scripted Kafka peer that records what real clients produce.

``CapturePeer`` listens on 127.0.0.1 and plays a one-broker cluster just
well enough for a producer: it answers ApiVersions (v0-v3), Metadata (v0-v5:
itself as the only broker, every requested topic with ``partitions``
partitions led by itself), InitProducerId (v0-v1, for idempotent producers)
and Produce (v0-v7, success per partition with increasing base offsets; no
response for acks=0).  Every Produce partition's raw ``records`` bytes are
kept in ``produce_records``, in arrival order.

It deliberately shares no code with ``twisted_kafka``: messages are encoded
and decoded with kafka-python's protocol classes, and connections are plain
sockets served by one thread each.  So a batch captured here is what the
client really sent, whatever the broker's codec does with it.

    with CapturePeer(partitions=1) as peer:
        producer = confluent_kafka.Producer({"bootstrap.servers": f"127.0.0.1:{peer.port}"})
        ...
        peer.wait_for_records(1)
        blob = peer.produce_records[0].records

The advertised versions (``DEFAULT_API_VERSIONS``) keep every client on
magic-v2 batches with all four codecs: Produce 0-7 contains v0, v3 and v7
(librdkafka 2.0.2, i.e. kcat, compresses only if v0 is in range), Fetch 0-10
contains v4 and v10 (librdkafka's MsgVer2 and ZSTD feature checks) and makes
kafka-python and aiokafka infer a 2.1+ broker (zstd), and FindCoordinator
must be advertised at all or librdkafka silently sends lz4 batches
uncompressed (its LZ4 feature stands for "broker >= 0.10, KIP-57 framing"
and is keyed on FindCoordinator).  Fetch, ListOffsets and FindCoordinator
are advertised for those checks only; a producer never sends them.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from dataclasses import dataclass

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse, ProduceRequest, ProduceResponse

__all__ = ["CapturePeer", "CapturedProduce", "DEFAULT_API_VERSIONS"]

PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR, API_VERSIONS, INIT_PRODUCER_ID = 0, 1, 2, 3, 10, 18, 22
UNSUPPORTED_VERSION = 35
NODE_ID = 1

DEFAULT_API_VERSIONS = {
    PRODUCE: (0, 7),
    FETCH: (0, 10),
    LIST_OFFSETS: (0, 2),
    METADATA: (0, 5),
    FIND_COORDINATOR: (0, 2),
    API_VERSIONS: (0, 3),
    INIT_PRODUCER_ID: (0, 1),
}


@dataclass(frozen=True)
class CapturedProduce:
    """One partition of one Produce request, as the client sent it."""

    client_id: str | None
    api_version: int
    acks: int
    topic: str
    partition: int
    records: bytes


class CapturePeer:
    """A fake single-broker Kafka cluster that records Produce payloads (see module docstring)."""

    def __init__(self, *, partitions: int = 1, api_versions: dict[int, tuple[int, int]] | None = None,
                 host: str = "127.0.0.1"):
        self.partitions = partitions
        self.api_versions = dict(api_versions or DEFAULT_API_VERSIONS)
        self.host = host
        self.port: int | None = None
        self.produce_records: list[CapturedProduce] = []
        self.requests: list[tuple[int, int, str | None]] = []   # (api_key, api_version, client_id)
        self.errors: list[str] = []
        self._topics: dict[str, int] = {}
        self._next_offset: dict[tuple[str, int], int] = {}
        self._next_producer_id = 1000
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._listener: socket.socket | None = None
        self._connections: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> CapturePeer:
        self.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, 0))
        listener.listen(64)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._spawn(self._accept_loop)

    def stop(self) -> None:
        self._stopping = True
        if self._listener is not None:
            # close() alone does not wake the thread blocked in accept() (Linux); shutdown() does.
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
        with self._lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        for thread in self._threads:
            thread.join(timeout=5)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def wait_for_records(self, count: int, timeout: float = 20.0) -> list[CapturedProduce]:
        """Block until at least ``count`` partitions' records were captured; returns them all."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.produce_records) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"captured {len(self.produce_records)} of {count} partition records;"
                                       f" requests seen: {self.requests}; errors: {self.errors}")
                self._changed.wait(left)
            return list(self.produce_records)

    # ------------------------------------------------------------------ serving

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self) -> None:
        while not self._stopping:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._connections.add(conn)
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        try:
            while True:
                size_bytes = _recv_exactly(conn, 4)
                if size_bytes is None:
                    return
                (size,) = struct.unpack(">i", size_bytes)
                frame = _recv_exactly(conn, size)
                if frame is None:
                    return
                response = self._handle(frame)
                if response is not None:
                    conn.sendall(response)
        except (ConnectionError, OSError):
            pass                        # the client went away: normal at producer close
        except Exception as exc:  # a test helper: keep the failure visible, drop the connection
            if not self._stopping:
                self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._connections.discard(conn)
            conn.close()

    def _handle(self, frame: bytes) -> bytes | None:
        api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame)
        supported = self.api_versions.get(api_key)
        if api_key == API_VERSIONS and not (supported[0] <= api_version <= supported[1]):
            # Error bodies are always v0, and must list ApiVersions' own range.
            self.requests.append((api_key, api_version, None))
            return self._encode(ApiVersionsResponse[0](error_code=UNSUPPORTED_VERSION, api_keys=[
                ApiVersionsResponse.ApiVersion(api_key=API_VERSIONS, min_version=supported[0],
                                               max_version=supported[1])]), correlation_id)
        handler = {API_VERSIONS: self._api_versions, METADATA: self._metadata,
                   PRODUCE: self._produce, INIT_PRODUCER_ID: self._init_producer_id}.get(api_key)
        if handler is None or not (supported[0] <= api_version <= supported[1]):
            raise ValueError(f"unexpected request api_key={api_key} api_version={api_version}")
        request_class = {API_VERSIONS: ApiVersionsRequest, METADATA: MetadataRequest,
                         PRODUCE: ProduceRequest, INIT_PRODUCER_ID: InitProducerIdRequest}[api_key]
        request = request_class.decode(frame, version=api_version, header=True)
        client_id = request.header.client_id
        self.requests.append((api_key, api_version, client_id))
        body = handler(request, api_version, client_id)
        return None if body is None else self._encode(body, correlation_id)

    @staticmethod
    def _encode(body, correlation_id: int) -> bytes:
        body.with_header(correlation_id=correlation_id)
        return bytes(body.encode(header=True, framed=True))

    # ------------------------------------------------------------------ APIs

    def _api_versions(self, request, version, client_id):
        return ApiVersionsResponse[version](error_code=0, throttle_time_ms=0, api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=key, min_version=lo, max_version=hi)
            for key, (lo, hi) in sorted(self.api_versions.items())])

    def _metadata(self, request, version, client_id):
        with self._lock:
            if request.topics:
                for topic in request.topics:
                    self._topics.setdefault(topic.name, self.partitions)
                names = [topic.name for topic in request.topics]
            elif request.topics is None or version == 0:
                names = sorted(self._topics)          # null (v1+) or empty (v0): all topics
            else:
                names = []                            # empty list in v1+: brokers only
            topics = [(name, self._topics[name]) for name in names]
        Topic = MetadataResponse.MetadataResponseTopic
        Partition = Topic.MetadataResponsePartition
        return MetadataResponse[version](
            throttle_time_ms=0, cluster_id="capture-peer", controller_id=NODE_ID,
            brokers=[MetadataResponse.MetadataResponseBroker(node_id=NODE_ID, host=self.host, port=self.port,
                                                             rack=None)],
            topics=[Topic(error_code=0, name=name, is_internal=False, partitions=[
                Partition(error_code=0, partition_index=index, leader_id=NODE_ID, leader_epoch=0,
                          replica_nodes=[NODE_ID], isr_nodes=[NODE_ID], offline_replicas=[])
                for index in range(count)]) for name, count in topics])

    def _init_producer_id(self, request, version, client_id):
        with self._lock:
            producer_id = self._next_producer_id
            self._next_producer_id += 1
        return InitProducerIdResponse[version](throttle_time_ms=0, error_code=0, producer_id=producer_id,
                                               producer_epoch=0)

    def _produce(self, request, version, client_id):
        TopicResponse = ProduceResponse.TopicProduceResponse
        PartitionResponse = TopicResponse.PartitionProduceResponse
        responses = []
        with self._changed:
            for topic in request.topic_data:
                partitions = []
                for data in topic.partition_data:
                    records = bytes(data.records or b"")
                    self.produce_records.append(CapturedProduce(
                        client_id, version, request.acks, topic.name, data.index, records))
                    key = (topic.name, data.index)
                    base_offset = self._next_offset.get(key, 0)
                    self._next_offset[key] = base_offset + _count_records(records)
                    partitions.append(PartitionResponse(index=data.index, error_code=0, base_offset=base_offset,
                                                        log_append_time_ms=-1, log_start_offset=0))
                responses.append(TopicResponse(name=topic.name, partition_responses=partitions))
            self._changed.notify_all()
        if request.acks == 0:
            return None
        return ProduceResponse[version](responses=responses, throttle_time_ms=0)


def _recv_exactly(conn: socket.socket, size: int) -> bytes | None:
    chunks = []
    while size:
        chunk = conn.recv(min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _count_records(blob: bytes) -> int:
    """Records in a blob of v2 batches (recordsCount at byte 57); legacy messages count one each."""
    count = 0
    pos = 0
    while pos + 17 <= len(blob):
        (length,) = struct.unpack_from(">i", blob, pos + 8)
        if blob[pos + 16] == 2 and pos + 61 <= len(blob):
            count += struct.unpack_from(">i", blob, pos + 57)[0]
        else:
            count += 1
        pos += 12 + max(length, 0)
    return count

"""Deterministic pieces for unit tests of the network layer.

The classes under test are the real ones (Acceptor, Processor, ConnectionQuotas,
RequestChannel, SocketServer); only the reactor (``MemoryReactorClock``), the
listening port and the transports are fakes, so time and I/O are driven by
the test.
"""

from __future__ import annotations

from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionAborted, ConnectionDone
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure

from twisted_kafka.config import KafkaConfig
from twisted_kafka.metrics import MetricsRegistry
from twisted_kafka.network.listeners import parse_listeners
from twisted_kafka.network.socket_server import SocketServer
from twisted_kafka.protocol.codec import decode_response, encode_request

BASE_PROPS = {
    "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "control.plane.listener.name": "CONTROLLER",
    "log.dirs": "/nonexistent/twisted-kafka-unit",
}

THREE_LISTENERS = {
    "listeners": "CLIENT://127.0.0.1:9092,INTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
    "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
    "control.plane.listener.name": "CONTROLLER",
}


def make_config(props: dict[str, str] | None = None, **overrides: str) -> KafkaConfig:
    """A broker config: BASE_PROPS, then ``props``, then ``overrides`` (``max_connections="3"``)."""
    merged = dict(BASE_PROPS)
    merged.update(props or {})
    merged.update({key.replace("_", "."): str(value) for key, value in overrides.items()})
    return KafkaConfig.from_props(merged)


class FakePort:
    """The listening port as the Acceptor uses it: it can stop and start reading."""

    def __init__(self, port: int = 9092):
        self.reading = True
        self.stops = 0
        self.port = port
        self.stopped = False

    def stopReading(self):
        self.reading = False
        self.stops += 1

    def startReading(self):
        self.reading = True

    def stopListening(self):
        self.stopped = True
        return None

    def getHost(self):
        return IPv4Address("TCP", "127.0.0.1", self.port)


class FakeTransport(StringTransport):
    """A transport whose close reaches the protocol one reactor turn later, as TCP's does."""

    def __init__(self, protocol, clock, peer: IPv4Address):
        super().__init__(peerAddress=peer)
        self._lenient = True
        self.protocol = protocol
        self.clock = clock
        self.aborted = False
        self.closed = False

    def loseConnection(self):
        if not self.disconnecting:
            self.disconnecting = True
            self.clock.callLater(0, self._lost, ConnectionDone)

    def abortConnection(self):
        if not self.disconnecting:
            self.aborted = True
            self.disconnecting = True
            self.clock.callLater(0, self._lost, ConnectionAborted)

    def client_closes(self):
        """The peer closed: the protocol learns it at once."""
        if not self.disconnecting:
            self.disconnecting = True
            self._lost(ConnectionDone)

    def _lost(self, kind):
        if not self.closed:
            self.closed = True
            self.protocol.connectionLost(Failure(kind()))

    @property
    def paused(self) -> bool:
        return self.producerState == "paused"


class Stack:
    """A SocketServer on a MemoryReactorClock, with fake ports and a way to open fake connections."""

    def __init__(self, props: dict[str, str] | None = None, *, served_spec=None, **overrides: str):
        self.clock = MemoryReactorClock()
        self.config = make_config(props, **overrides)
        self.listeners = parse_listeners(self.config)
        self.metrics = MetricsRegistry(clock=self.clock.seconds)
        from twisted_kafka.server.handlers.api_versions import ApiVersionsHandler
        from twisted_kafka.server.kafka_apis import KafkaApis

        self.apis = KafkaApis([])
        self.apis.register(ApiVersionsHandler(self.apis))
        if served_spec is None:
            served_spec = self.apis.served_spec
        self.server = SocketServer(config=self.config, listeners=self.listeners, reactor=self.clock,
                                   metrics=self.metrics, served_spec=served_spec)
        self.ports: dict[str, FakePort] = {}
        for name, acceptor in self.server.acceptors.items():
            acceptor.port = self.ports[name] = FakePort(acceptor.endpoint.port)
        self._client_ports = iter(range(40000, 65000))

    @property
    def quotas(self):
        return self.server.quotas

    def acceptor(self, listener: str = "PLAINTEXT"):
        return self.server.acceptors[listener]

    def connect(self, listener: str = "PLAINTEXT", ip: str = "127.0.0.1"):
        """What Twisted's port does on accept: buildProtocol, then makeConnection.

        Returns the processor (or None when the acceptor refused the socket).
        """
        addr = IPv4Address("TCP", ip, next(self._client_ports))
        processor = self.acceptor(listener).buildProtocol(addr)
        if processor is None:
            return None
        processor.makeConnection(FakeTransport(processor, self.clock, addr))
        return processor

    def channel(self, plane: str = "data"):
        return (self.server.data_plane if plane == "data" else self.server.control_plane).channel

    def serve(self, plane: str = "data", count: int = 1) -> list:
        """Take ``count`` queued requests off a plane's channel and answer them through KafkaApis."""
        from twisted.internet.defer import ensureDeferred

        served = []
        for _ in range(count):
            got = []
            self.channel(plane).receive_request().addCallback(got.append)
            assert got, f"no request queued on the {plane} plane"
            served.append(got[0])
            ensureDeferred(self.apis.handle(got[0]))
        return served

    def flush(self) -> None:
        """Run what is due now (deferred connection losses)."""
        self.clock.advance(0)


def request_bytes(body, version: int | None = None, correlation_id: int = 1, client_id: str | None = "unit") -> bytes:
    if version is None:
        version = body.version
    return b"".join(encode_request(body, version, correlation_id, client_id))


def split_frames(data: bytes) -> list[bytes]:
    frames = []
    pos = 0
    while pos < len(data):
        size = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        frames.append(data[pos + 4:pos + 4 + size])
        pos += 4 + size
    return frames


def decode(api_key: int, version: int, frame: bytes):
    return decode_response(api_key, version, frame)

"""Deterministic pieces for unit tests of the network layer.

The classes under test are the real ones (Acceptor, Processor, ConnectionQuotas,
RequestChannel, SocketServer, and KafkaApis with the real ApiVersions handler);
only the reactor (``MemoryReactorClock``), the listening ports and the
transports are fakes, so time and I/O are driven by the test.

Listeners are bound the way the broker binds them (``Acceptor.listen`` through
a Twisted server endpoint, here on a reactor whose ``listenTCP`` hands out
``FakePort``s), which leaves them bound but not accepting; the Stack then
enables request processing, as the broker does once it is ready.
"""

from __future__ import annotations

from twisted.internet import abstract
from twisted.internet.address import IPv4Address
from twisted.internet.defer import ensureDeferred
from twisted.internet.error import ConnectionAborted, ConnectionDone
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure

from twisted_kafka.config import KafkaConfig
from twisted_kafka.metrics import MetricsRegistry
from twisted_kafka.network.listeners import parse_listeners
from twisted_kafka.network.request_metrics import RequestMetrics
from twisted_kafka.network.socket_server import SocketServer
from twisted_kafka.protocol.codec import decode_response, encode_request
from twisted_kafka.server.authorization import ALLOW_ALL
from twisted_kafka.server.handlers.api_versions import ApiVersionsHandler
from twisted_kafka.server.kafka_apis import KafkaApis

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


class FakeSocket:
    """The listening socket's options, as the Acceptor sets them."""

    def __init__(self):
        self.options: dict[tuple[int, int], int] = {}

    def setsockopt(self, level: int, option: int, value: int) -> None:
        self.options[(level, option)] = value


class FakePort:
    """The listening port as the Acceptor uses it: it can stop and start reading.

    Like Twisted's TCP port it is reading as soon as it listens; the Acceptor
    stops it until it is enabled.
    """

    def __init__(self, port: int = 9092, interface: str = "127.0.0.1", backlog: int = 50):
        self.reading = True
        self.stops = 0
        self.port = port
        self.interface = interface
        self.backlog = backlog
        self.stopped = False
        self.socket = FakeSocket()

    def stopReading(self):
        self.reading = False
        self.stops += 1

    def startReading(self):
        self.reading = True

    def stopListening(self):
        self.stopped = True
        return None

    def getHost(self):
        return IPv4Address("TCP", self.interface, self.port)


class FakeListeningReactor(MemoryReactorClock):
    """A MemoryReactorClock whose ``listenTCP`` returns a FakePort (port 0 gets an ephemeral number)."""

    def __init__(self):
        super().__init__()
        self.fake_ports: list[FakePort] = []
        self._ephemeral = iter(range(50000, 60000))

    def listenTCP(self, port, factory, backlog=50, interface=""):
        self.tcpServers.append((port, factory, backlog, interface))
        fake = FakePort(port or next(self._ephemeral), interface or "0.0.0.0", backlog)
        self.fake_ports.append(fake)
        return fake


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


class WindowTransport(abstract.FileDescriptor):
    """A transport with Twisted's own write buffer over a fake socket the test fills and drains.

    Everything about buffering, the 64 KiB limit and the registered producer
    is Twisted's ``FileDescriptor``; only the socket is fake: ``writeSomeData``
    takes at most ``window`` bytes (what the peer's receive window would
    take), and ``pump()`` is one "writable" event of the reactor.  Reading is
    paused and resumed through the reactor's reader set, as for TCP.
    """

    def __init__(self, protocol, clock, peer: IPv4Address):
        super().__init__(reactor=clock)
        self.protocol = protocol
        self.peer = peer
        self.connected = 1
        self.window = 0
        self.received = bytearray()      # what the peer got
        self.aborted = False
        self.startReading()

    def getPeer(self):
        return self.peer

    def getHost(self):
        return IPv4Address("TCP", "127.0.0.1", 9092)

    def fileno(self) -> int:
        return -1

    def writeSomeData(self, data) -> int:
        taken = min(len(data), self.window)
        self.received += bytes(data[:taken])
        self.window -= taken
        return taken

    def peer_reads(self, size: int) -> None:
        """The peer reads ``size`` more bytes; the reactor reports the socket writable once."""
        self.window += size
        self.pump()

    def pump(self) -> None:
        if self.disconnected or self not in self.reactor.writers:
            return
        result = self.doWrite()
        if result is not None:
            self.connectionLost(Failure(result))

    def abortConnection(self):
        if not self.disconnected:
            self.aborted = True
            self.connectionLost(Failure(ConnectionAborted()))

    def connectionLost(self, reason):
        super().connectionLost(reason)
        self.protocol.connectionLost(reason)

    @property
    def unsent(self) -> int:
        return len(self.dataBuffer) - self.offset + self._tempDataLen

    @property
    def paused(self) -> bool:
        return self not in self.reactor.readers


class Stack:
    """A SocketServer on a fake reactor, bound and enabled, with a way to open fake connections.

    ``handlers`` are served by the Stack's ``KafkaApis`` beside the real
    ApiVersions handler, which advertises what the connection's plane serves.
    ``sasl`` maps SASL listeners to their ``SaslServerConfig``.
    With ``enable=False`` the listeners are bound but not accepting.
    """

    def __init__(self, props: dict[str, str] | None = None, *, handlers=(), enable: bool = True, sasl=None,
                 **overrides: str):
        self.clock = FakeListeningReactor()
        self.config = make_config(props, **overrides)
        self.listeners = parse_listeners(self.config)
        self.metrics = MetricsRegistry(clock=self.clock.seconds)
        # A handler of ``handlers`` for ApiVersions replaces the real one (the later of a key wins).
        self.apis = KafkaApis([ApiVersionsHandler(lambda context: self.server.plane(context.plane).served_keys()),
                               *handlers], authorization=ALLOW_ALL)
        self.request_metrics = RequestMetrics(self.metrics)
        self.server = SocketServer(config=self.config, listeners=self.listeners, reactor=self.clock,
                                   metrics=self.metrics, apis=self.apis, request_metrics=self.request_metrics,
                                   sasl=sasl)
        self.ports: dict[str, FakePort] = {}
        for name, acceptor in self.server.acceptors.items():
            bound = []
            acceptor.listen().addCallback(bound.append)
            assert bound, f"listener {name} did not bind"
            self.ports[name] = bound[0]
        if enable:
            self.server.enable_request_processing()
        self._client_ports = iter(range(40000, 65000))

    @property
    def quotas(self):
        return self.server.quotas

    def acceptor(self, listener: str = "PLAINTEXT"):
        return self.server.acceptors[listener]

    def connect(self, listener: str = "PLAINTEXT", ip: str = "127.0.0.1", port: int | None = None,
                transport=FakeTransport):
        """What Twisted's port does on accept: buildProtocol, then makeConnection.

        Returns the processor (or None when the acceptor refused the socket).
        It does not check that the port is reading: Twisted accepts several
        sockets per readiness event, so a connection can arrive just after
        the Acceptor stopped reading (tests assert on ``ports[...].reading``).
        """
        addr = IPv4Address("TCP", ip, next(self._client_ports) if port is None else port)
        processor = self.acceptor(listener).buildProtocol(addr)
        if processor is None:
            return None
        processor.makeConnection(transport(processor, self.clock, addr))
        return processor

    def plane(self, name: str = "data"):
        return self.server.plane(name)

    def channel(self, plane: str = "data"):
        return self.server.plane(plane).channel

    def take(self, plane: str = "data"):
        """The next queued request of a plane (as a handler takes it), without answering it."""
        got = []
        self.channel(plane).receive_request().addCallback(got.append)
        assert got, f"no request queued on the {plane} plane"
        return got[0]

    def serve(self, plane: str = "data", count: int = 1) -> list:
        """Take ``count`` queued requests off a plane's channel, answer them through KafkaApis
        and hand each answer to that plane's channel, as the plane's handler pool does."""
        served = []
        channel = self.channel(plane)
        for _ in range(count):
            request = self.take(plane)
            served.append(request)
            answered = []
            ensureDeferred(self.apis.handle(request)).addCallback(answered.append)
            assert answered, f"{request} did not complete synchronously"
            channel.send_response(answered[0])
        return served

    def flush(self) -> None:
        """Run what is due now (deferred connection losses)."""
        self.clock.advance(0)


def reactor_turn(clock) -> None:
    """One turn of the reactor: run the calls due now, but not those they schedule for now.

    ``Clock.advance(0)`` runs those too, as if ``callLater(0, ...)`` did not
    give the reactor back; a real reactor polls its sockets in between.
    """
    now = clock.seconds()
    for call in [call for call in clock.calls if call.getTime() <= now]:
        if call in clock.calls:                 # not cancelled by an earlier one
            clock.calls.remove(call)
            call.called = 1
            call.func(*call.args, **call.kw)


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

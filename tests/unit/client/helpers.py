"""An in-memory broker for the client's tests: the broker's real sans-IO side over fake transports.

``FakeBroker`` is a ``ServerConnection`` (the broker's own framing, header
parsing and per-connection ordering) behind a Protocol that answers each
request with whatever the test's ``respond`` returns -- at once, or only when
the test says so (``auto=False``), to observe what is in flight.
``Brokers`` listens on a ``MemoryReactorClock`` and completes or refuses the
client's connection attempts on demand, connecting both sides with
``twisted.test.iosim``; time moves only when the test advances the clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.test import iosim

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.codec import decode_request, encode_response
from twisted_kafka.protocol.connection import ProtocolViolation, RequestReceived, ServerConnection
from twisted_kafka.protocol.framing import FrameBuffer
from twisted_kafka.protocol.registry import REGISTRY, ApiKey


def update_metadata(epoch: int = 1) -> Any:
    """A small UpdateMetadata request (v8, what the controller sends); ``epoch`` tells requests apart."""
    return m.UpdateMetadataRequest(version=8, controller_id=1, is_k_raft_controller=False, controller_epoch=epoch,
                                   broker_epoch=5, topic_states=[], live_brokers=[])


def default_response(event: RequestReceived) -> Any:
    """Error code = the request's controller epoch, so a test sees which request a response answers."""
    if event.header.api_key == ApiKey.UPDATE_METADATA:
        return m.UpdateMetadataResponse(version=event.header.api_version, error_code=event.body.controller_epoch)
    raise AssertionError(f"no default response for api key {event.header.api_key}")


def requests_written(transport: StringTransport) -> list:
    """``(header, body)`` of every request written to ``transport`` since the last call."""
    frames = FrameBuffer(2**31 - 1)
    frames.feed(transport.value())
    transport.clear()
    out = []
    while frames.complete():
        out.append(decode_request(frames.pop()))
    return out


def response_bytes(header, body) -> bytes:
    return b"".join(encode_response(header, body))


class FakeBroker(Protocol):
    """The broker's side of one connection."""

    def __init__(self, brokers: Brokers):
        self.brokers = brokers
        self.connection = ServerConnection(max_request_size=100 * 1024 * 1024, serves=REGISTRY.get)
        self.pending: RequestReceived | None = None
        self.lost = False

    def dataReceived(self, data: bytes) -> None:
        self.connection.receive_data(data)
        self._next()

    def _next(self) -> None:
        event = self.connection.next_event()
        if isinstance(event, RequestReceived):
            self.pending = event
            self.brokers.received.append(event)
            if self.brokers.auto:
                self.answer()
        elif isinstance(event, ProtocolViolation):
            raise AssertionError(f"the client broke the protocol: {event.message}")

    def answer(self, body: Any = None) -> None:
        event, self.pending = self.pending, None
        assert event is not None, "no request to answer"
        self.transport.writeSequence(encode_response(event.header, body or self.brokers.respond(event)))
        self.connection.response_complete()
        self._next()

    def connectionLost(self, reason=None) -> None:
        self.lost = True


class Brokers:
    """Brokers listening on a MemoryReactorClock, and the connections the client made to them."""

    def __init__(self, respond: Callable[[RequestReceived], Any] = default_response, *, auto: bool = True):
        self.reactor = MemoryReactorClock()
        self.respond = respond
        self.auto = auto
        self.received: list[RequestReceived] = []
        self.connections: list[tuple[FakeBroker, iosim.IOPump]] = []

    def listen(self, port: int) -> None:
        self.reactor.listenTCP(port, Factory.forProtocol(lambda: FakeBroker(self)))

    def attempts(self) -> list[tuple[str, int, float]]:
        """``(host, port, timeout)`` of connection attempts not yet completed, refused or abandoned."""
        self._forget_abandoned()
        return [(host, port, timeout) for host, port, _, timeout, _ in self.reactor.tcpClients]

    def _forget_abandoned(self) -> None:
        reactor = self.reactor
        for index in reversed(range(len(reactor.connectors))):
            if reactor.connectors[index].stoppedConnecting:
                del reactor.connectors[index]
                del reactor.tcpClients[index]

    def accept(self) -> FakeBroker:
        """Complete the oldest connection attempt (its port must be listening)."""
        self._forget_abandoned()
        host, port, factory, _, _ = self.reactor.tcpClients.pop(0)
        self.reactor.connectors.pop(0)
        server_factory = next(f for p, f, _, _ in self.reactor.tcpServers if p == port)
        client = factory.buildProtocol(IPv4Address("TCP", host, port))
        broker = server_factory.buildProtocol(IPv4Address("TCP", "127.0.0.1", 50000 + len(self.connections)))
        pump = iosim.connect(broker, iosim.makeFakeServer(broker), client, iosim.makeFakeClient(client),
                             greet=False, clock=self.reactor)
        self.connections.append((broker, pump))
        self.flush()
        return broker

    def refuse(self) -> None:
        """Fail the oldest connection attempt as a closed port would."""
        self._forget_abandoned()
        _, _, factory, _, _ = self.reactor.tcpClients.pop(0)
        factory.clientConnectionFailed(self.reactor.connectors.pop(0), Failure(ConnectionRefusedError()))

    def flush(self) -> None:
        """Deliver every byte in both directions (and the closes), until nothing moves."""
        moved = True
        while moved:
            moved = False
            for _, pump in self.connections:
                moved = pump.flush(advanceClock=False) or moved

    def drop(self, broker: FakeBroker) -> None:
        """The broker closes the connection (as when it restarts)."""
        broker.transport.loseConnection()
        self.flush()

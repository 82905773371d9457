"""ControllerChannelManager: the controller's connections to brokers' control planes.

Kafka's controller keeps one connection and one send thread per broker and
sends LeaderAndIsr, UpdateMetadata and StopReplica one at a time, in order,
retrying on connection failure.  The same holds here — including for the
controller's own broker, which it reaches over its control-plane listener
like any other, so a single node exercises exactly the path a cluster uses.

A request that cannot be sent within ``controller.socket.timeout.ms`` of a
connection attempt is retried after a backoff; requests are never reordered.
"""

from __future__ import annotations

from collections import deque
from itertools import count

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP6ClientEndpoint
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.protocols.basic import Int32StringReceiver

from twisted_kafka.protocol.codec import decode_response, encode_request
from twisted_kafka.protocol.exceptions import ProtocolDecodeError

RECONNECT_BACKOFF_SECONDS = 0.1


class _ControllerClient(Int32StringReceiver):
    """One connection to a broker: frames out, responses matched by correlation id."""

    MAX_LENGTH = 2**31 - 1

    def __init__(self, channel: "BrokerChannel"):
        self.channel = channel

    def connectionMade(self) -> None:
        self.channel._connected(self)

    def stringReceived(self, frame: bytes) -> None:
        self.channel._response(frame)

    def connectionLost(self, reason) -> None:
        self.channel._disconnected(self, reason)


class BrokerChannel:
    """The queue of controller requests to one broker (Kafka's RequestSendThread)."""

    log = Logger(namespace="twisted_kafka.controller.BrokerChannel")

    def __init__(self, *, reactor, broker_id: int, host: str, port: int, controller_id: int, timeout: float):
        self.reactor = reactor
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.client_id = f"controller-{controller_id}"
        self.timeout = timeout
        self._queue: deque[tuple[int, int, object, Deferred]] = deque()
        self._inflight: tuple[int, int, object, Deferred, int] | None = None
        self._protocol: _ControllerClient | None = None
        self._connecting = False
        self._closed = False
        self._ids = count(1)
        self._retry_call = None

    def send(self, api_key: int, version: int, request) -> Deferred:
        """Queue ``request``; the Deferred fires with the decoded response message."""
        d: Deferred = Deferred()
        self._queue.append((api_key, version, request, d))
        self._pump()
        return d

    def close(self) -> None:
        self._closed = True
        if self._retry_call is not None and self._retry_call.active():
            self._retry_call.cancel()
        if self._protocol is not None:
            self._protocol.transport.loseConnection()
        pending = [entry[3] for entry in self._queue]
        self._queue.clear()
        if self._inflight is not None:
            pending.append(self._inflight[3])
            self._inflight = None
        for d in pending:
            d.errback(ConnectionError(f"channel to broker {self.broker_id} closed"))

    def _pump(self) -> None:
        if self._closed or self._inflight is not None or not self._queue:
            return
        if self._protocol is None:
            self._connect()
            return
        api_key, version, request, d = self._queue.popleft()
        correlation_id = next(self._ids)
        self._inflight = (api_key, version, request, d, correlation_id)
        self._protocol.transport.writeSequence(encode_request(request, version, correlation_id, self.client_id))

    def _connect(self) -> None:
        if self._connecting or self._closed:
            return
        self._connecting = True
        endpoint_class = TCP6ClientEndpoint if ":" in self.host else TCP4ClientEndpoint
        endpoint = endpoint_class(self.reactor, self.host, self.port, timeout=self.timeout)
        factory = Factory.forProtocol(lambda: _ControllerClient(self))
        factory.noisy = False
        d = endpoint.connect(factory)
        d.addErrback(self._connect_failed)

    def _connect_failed(self, failure) -> None:
        self._connecting = False
        self.log.warn("Controller cannot reach broker {broker_id} at {host}:{port}: {reason}; retrying",
                      broker_id=self.broker_id, host=self.host, port=self.port, reason=failure.getErrorMessage())
        self._retry_call = self.reactor.callLater(RECONNECT_BACKOFF_SECONDS, self._pump)

    def _connected(self, protocol: _ControllerClient) -> None:
        self._connecting = False
        self._protocol = protocol
        self._pump()

    def _response(self, frame: bytes) -> None:
        if self._inflight is None:
            return
        api_key, version, _, d, correlation_id = self._inflight
        try:
            got, message = decode_response(api_key, version, frame)
        except ProtocolDecodeError as exc:
            self._inflight = None
            self._protocol.transport.loseConnection()
            d.errback(exc)
            return
        if got != correlation_id:
            self._protocol.transport.loseConnection()
            return
        self._inflight = None
        d.callback(message)
        self._pump()

    def _disconnected(self, protocol, reason) -> None:
        if protocol is not self._protocol:
            return
        self._protocol = None
        if self._inflight is not None:
            # Resend the in-flight request first on the next connection: order is kept.
            api_key, version, request, d, _ = self._inflight
            self._inflight = None
            self._queue.appendleft((api_key, version, request, d))
        if not self._closed and self._queue:
            self._retry_call = self.reactor.callLater(RECONNECT_BACKOFF_SECONDS, self._pump)


class ControllerChannelManager:
    """One ``BrokerChannel`` per live broker."""

    def __init__(self, *, reactor, controller_id: int, timeout_ms: int):
        self.reactor = reactor
        self.controller_id = controller_id
        self.timeout = timeout_ms / 1000.0
        self.channels: dict[int, BrokerChannel] = {}

    def add_broker(self, broker_id: int, host: str, port: int) -> None:
        existing = self.channels.get(broker_id)
        if existing is not None and (existing.host, existing.port) == (host, port):
            return
        if existing is not None:
            existing.close()
        self.channels[broker_id] = BrokerChannel(reactor=self.reactor, broker_id=broker_id, host=host, port=port,
                                                 controller_id=self.controller_id, timeout=self.timeout)

    def remove_broker(self, broker_id: int) -> None:
        channel = self.channels.pop(broker_id, None)
        if channel is not None:
            channel.close()

    def send(self, broker_id: int, api_key: int, version: int, request) -> Deferred:
        return self.channels[broker_id].send(api_key, version, request)

    def close(self) -> None:
        for channel in self.channels.values():
            channel.close()
        self.channels.clear()

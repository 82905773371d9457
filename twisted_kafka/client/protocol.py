"""``KafkaClientProtocol``: a Twisted ``Protocol`` over the sans-IO ``ClientConnection``.

Framing, correlation ids and response matching live in
``twisted_kafka.protocol.client_connection`` (no Twisted there, so they are
tested with bytes alone).  This adapter only moves bytes between a transport
and that state machine and turns its events into Deferreds:

* ``request()`` returns a Deferred per request; any number may be
  outstanding (pipelining), and Kafka answers them in order;
* a ``ProtocolViolation`` (a bad frame, a body that does not decode, an
  out-of-order correlation id) is logged and the connection aborted: nothing
  later on that stream can be trusted;
* when the connection ends, for whatever reason, every outstanding request
  fails with a ``ConnectionLost`` naming the peer and the request, so callers
  never wait for a response that cannot come.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.protocol import Factory, Protocol, connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.protocol.client_connection import DEFAULT_MAX_RESPONSE_SIZE, ClientConnection, ResponseReceived
from twisted_kafka.protocol.connection import ProtocolViolation
from twisted_kafka.protocol.registry import REGISTRY

from .errors import ConnectionLost, KafkaConnectionError, ProtocolViolationError


def describe_address(host: str, port: int, name: str | None = None) -> str:
    """``host:port`` (``[v6]:port``), prefixed by ``name`` when given: ``broker 2 at host:9093``."""
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"{name} at {where}" if name else where


def describe_request(api_key: int, api_version: int, correlation_id: int) -> str:
    spec = REGISTRY.get(api_key)
    name = spec.name if spec is not None else f"api key {api_key}"
    return f"{name} v{api_version} (correlation id {correlation_id})"


@dataclass(frozen=True, slots=True)
class _Waiting:
    deferred: Deferred
    api_key: int
    api_version: int


class KafkaClientProtocol(Protocol):
    """One connection to a broker; see the module docstring.

    ``peer`` names the other end in errors and logs (the connector passes
    ``broker 2 at host:9093``); without it the transport's peer address is used.
    """

    log = Logger()
    # Twisted's interfaces are zope Interfaces, whose methods mypy cannot check without a plugin.
    transport: Any = None

    def __init__(self, *, client_id: str | None, peer: str | None = None,
                 max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE):
        self._connection = ClientConnection(client_id=client_id, max_response_size=max_response_size)
        self._peer = peer
        self._waiting: dict[int, _Waiting] = {}
        self._violation: str | None = None
        self._closing = False
        self._lost: KafkaConnectionError | None = None
        self._on_close: list[Deferred] = []

    # -- API --------------------------------------------------------------------------

    @property
    def peer(self) -> str:
        if self._peer is not None:
            return self._peer
        if self.transport is not None:
            address = self.transport.getPeer()
            if isinstance(address, IPv4Address | IPv6Address):
                return describe_address(address.host, address.port)
            return str(address)
        return "an unconnected peer"

    @property
    def is_open(self) -> bool:
        """True from ``connectionMade`` until the connection ends, a violation or ``close()``."""
        return self.transport is not None and self._lost is None and not self._closing \
            and self._violation is None

    @property
    def outstanding(self) -> int:
        """Requests sent whose responses have not arrived yet."""
        return self._connection.outstanding

    def request(self, body, version: int, *, expect_response: bool = True) -> Deferred:
        """Send ``body`` (a message object) at ``version``.

        The Deferred fires with the decoded response body, or with None at
        once for a request Kafka does not answer (``expect_response=False``:
        Produce with acks=0).  It fails with ``ConnectionLost`` (or
        ``ProtocolViolationError``) if the connection ends first, and at
        once if it already has -- or if ``body`` cannot be encoded, so a
        caller's error handling sees every failure in one place.
        """
        if self._lost is not None:
            return fail(ConnectionLost(self.peer, self._lost.reason))
        if self.transport is None:
            return fail(ConnectionLost(self.peer, "not connected yet"))
        if self._violation is not None:
            return fail(ProtocolViolationError(self.peer, f"closing after a protocol violation: {self._violation}"))
        if self._closing:
            return fail(ConnectionLost(self.peer, "closing"))
        try:
            correlation_id, chunks = self._connection.send_request(body, version, expect_response=expect_response)
        except Exception:
            return fail()
        result: Deferred
        if expect_response:
            result = Deferred()
            # Registered before writing: a transport may deliver data re-entrantly.
            self._waiting[correlation_id] = _Waiting(result, type(body).API_KEY, version)
        else:
            result = succeed(None)
        self.transport.writeSequence(chunks)
        return result

    def close(self) -> None:
        """Close after writing what is queued; outstanding requests fail with ``ConnectionLost``."""
        if self.transport is not None and self._lost is None:
            self._closing = True
            self.transport.loseConnection()

    def when_closed(self) -> Deferred:
        """A Deferred that fires, with the ``KafkaConnectionError`` saying why, once the connection ends.

        It never fails: the end of a connection is an event for its owner
        (to reconnect, say), not an error of its own.
        """
        if self._lost is not None:
            return succeed(self._lost)
        d: Deferred = Deferred()
        self._on_close.append(d)
        return d

    # -- Protocol ---------------------------------------------------------------------

    def dataReceived(self, data: bytes) -> None:
        connection = self._connection
        connection.receive_data(data)
        while True:
            event: Any = connection.next_event()
            if isinstance(event, ResponseReceived):
                waiting = self._waiting.pop(event.correlation_id)
                waiting.deferred.callback(event.body)
            elif isinstance(event, ProtocolViolation):
                self._protocol_violation(event.message)
                return
            else:  # NEED_DATA or CLOSED
                return

    def _protocol_violation(self, message: str) -> None:
        self._violation = message
        self.log.warn("Closing the connection to {peer}: it violated the Kafka protocol: {message}",
                      peer=self.peer, message=message)
        # Abort, not lose: nothing more must be written to or read from a stream out of step.
        self.transport.abortConnection()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self._connection.fail_outstanding()
        error_class: type[ConnectionLost]
        if self._violation is not None:
            error_class, cause = ProtocolViolationError, f"protocol violation: {self._violation}"
        else:
            error_class = ConnectionLost
            cause = "closed by this client" if self._closing else reason.getErrorMessage()
        error = self._lost = error_class(self.peer, cause)
        waiting, self._waiting = self._waiting, {}
        for correlation_id, entry in waiting.items():
            request = describe_request(entry.api_key, entry.api_version, correlation_id)
            entry.deferred.errback(error_class(self.peer, cause, request))
        on_close, self._on_close = self._on_close, []
        for d in on_close:
            d.callback(error)


class KafkaClientFactory(Factory):
    """Builds one ``KafkaClientProtocol`` per connection, with the connector's client id and peer name."""

    noisy = False

    def __init__(self, *, client_id: str | None, peer: str | None = None,
                 max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE):
        self.client_id = client_id
        self.peer = peer
        self.max_response_size = max_response_size

    def buildProtocol(self, addr) -> KafkaClientProtocol:
        protocol = KafkaClientProtocol(client_id=self.client_id, peer=self.peer,
                                       max_response_size=self.max_response_size)
        protocol.factory = self
        return protocol


__all__ = ["KafkaClientProtocol", "KafkaClientFactory", "describe_address", "describe_request"]

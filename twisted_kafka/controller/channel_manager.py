"""ControllerChannelManager: the controller's connections to brokers' control planes.

Kafka's controller keeps one connection and one send thread per broker
(``ControllerChannelManager`` / ``RequestSendThread``) and sends
LeaderAndIsr, UpdateMetadata and StopReplica one at a time, in order,
retrying on connection failure.  A SASL control listener is authenticated to
with ``sasl.mechanism.inter.broker.protocol`` and the listener's JAAS
credentials, as Kafka's controller does; a refusal is a failed attempt.  The same holds here -- including for the
controller's own broker, which it reaches over its control-plane listener
like any other, so a single node exercises exactly the path a cluster uses.

Each ``BrokerChannel`` is a queue over one ``twisted_kafka.client``
connection: a connection attempt gives up after
``controller.socket.timeout.ms``, a failed attempt or a lost connection is
retried after ``RECONNECT_BACKOFF_SECONDS``, and a request in flight when the
connection dropped is sent again first on the next one, so requests are
never reordered.  (They may reach a broker twice; the controller's requests
carry its epoch and full partition states, so applying one twice is harmless.)
A request the broker answers with bytes that break the protocol fails instead
of being resent: the same request would most likely break it again, and the
queue behind it must not stall.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.client import ConnectionLost, KafkaClientProtocol, ProtocolViolationError, connect
from twisted_kafka.client.connector import SASL_PROTOCOLS, TLS_PROTOCOLS
from twisted_kafka.config import ConfigError
from twisted_kafka.network.tls import ClientTls
from twisted_kafka.sasl.client import SaslClientConfig
from twisted_kafka.sasl.listener_config import sasl_client_config

RECONNECT_BACKOFF_SECONDS = 0.1


@dataclass(frozen=True, slots=True, eq=False)
class _Pending:
    version: int
    request: object
    deferred: Deferred


class BrokerChannel:
    """The queue of controller requests to one broker (Kafka's RequestSendThread)."""

    log = Logger(namespace="twisted_kafka.controller.BrokerChannel")

    def __init__(self, *, reactor, broker_id: int, host: str, port: int, controller_id: int, timeout: float,
                 security_protocol: str = "PLAINTEXT", tls: Callable[[], ClientTls] | None = None,
                 sasl: Callable[[], SaslClientConfig] | None = None):
        self.reactor = reactor
        self.tls = tls       # the TLS settings of an SSL control listener, built per connection attempt
        self.sasl = sasl     # the SASL settings of a SASL control listener, likewise
        self.broker_id = broker_id
        self.host = host
        self.port = port
        self.security_protocol = security_protocol
        self.client_id = f"controller-{controller_id}"
        self.timeout = timeout
        self._queue: deque[_Pending] = deque()
        self._inflight: _Pending | None = None
        self._client: KafkaClientProtocol | None = None
        self._connecting: Deferred | None = None
        self._retry_call = None
        self._closed = False

    def send(self, api_key: int, version: int, request) -> Deferred:
        """Queue ``request``; the Deferred fires with the decoded response message.

        It fails only when the channel is closed first, or when the broker's
        answer breaks the protocol (``ProtocolViolationError``); connection
        failures are retried.
        """
        if api_key != type(request).API_KEY:
            raise ValueError(f"api key {api_key} does not match {type(request).__name__}")
        d: Deferred = Deferred()
        self._queue.append(_Pending(version, request, d))
        self._pump()
        return d

    def close(self) -> None:
        """Stop for good: the connection is closed and every request not yet answered fails."""
        self._closed = True
        if self._retry_call is not None and self._retry_call.active():
            self._retry_call.cancel()
        if self._connecting is not None:
            self._connecting.cancel()
        if self._client is not None:
            self._client.close()
            self._client = None
        pending = list(self._queue)
        self._queue.clear()
        if self._inflight is not None:
            pending.append(self._inflight)
            self._inflight = None
        for entry in pending:
            entry.deferred.errback(ConnectionError(f"channel to broker {self.broker_id} closed"))

    # -- sending ----------------------------------------------------------------------

    def _pump(self) -> None:
        if self._closed or self._inflight is not None or not self._queue:
            return
        if self._client is None:
            self._connect()
            return
        if not self._client.is_open:
            return          # it is going away (a protocol violation): _disconnected reconnects
        pending = self._inflight = self._queue.popleft()
        self._client.request(pending.request, pending.version).addCallbacks(
            self._answered, self._failed, callbackArgs=(pending,), errbackArgs=(pending,))

    def _answered(self, response, pending: _Pending) -> None:
        if pending is not self._inflight:
            return          # the channel was closed meanwhile; the caller has had its error
        self._inflight = None
        pending.deferred.callback(response)
        self._pump()

    def _failed(self, failure: Failure, pending: _Pending) -> None:
        if pending is not self._inflight:
            return
        self._inflight = None
        if failure.check(ConnectionLost) and not failure.check(ProtocolViolationError):
            # Sent again first on the next connection (which _disconnected schedules): order is kept.
            self._queue.appendleft(pending)
            return
        pending.deferred.errback(failure)
        self._pump()

    # -- the connection ---------------------------------------------------------------

    def _retry_pending(self) -> bool:
        return self._retry_call is not None and self._retry_call.active()

    def _connect(self) -> None:
        if self._connecting is not None or self._closed or self._retry_pending():
            return
        try:
            # Built at each attempt: a key store reloaded in place is used by the next connection.
            tls = self.tls() if self.tls is not None else None
            sasl = self.sasl() if self.sasl is not None else None
            self._connecting = connect(self.reactor, self.host, self.port, client_id=self.client_id,
                                       timeout=self.timeout, security_protocol=self.security_protocol,
                                       name=f"broker {self.broker_id}", tls=tls, sasl=sasl)
        except (ConfigError, ValueError) as exc:
            self._connect_failed(Failure(exc))
            return
        self._connecting.addCallbacks(self._connected, self._connect_failed)

    def _connect_failed(self, failure: Failure) -> None:
        self._connecting = None
        if self._closed:
            return          # cancelled by close()
        self.log.warn("Controller cannot reach broker {broker_id}: {reason}; retrying in {backoff} s",
                      broker_id=self.broker_id, reason=failure.getErrorMessage(),
                      backoff=RECONNECT_BACKOFF_SECONDS)
        self._schedule_retry()

    def _connected(self, client: KafkaClientProtocol) -> None:
        self._connecting = None
        if self._closed:
            client.close()
            return
        self._client = client
        client.when_closed().addCallback(self._disconnected, client)
        self._pump()

    def _disconnected(self, reason: ConnectionError, client: KafkaClientProtocol) -> None:
        if client is not self._client:
            return
        self._client = None
        if self._queue:
            self.log.info("Controller lost its connection to broker {broker_id} with {count} request(s) "
                          "to send: {reason}; reconnecting in {backoff} s", broker_id=self.broker_id,
                          count=len(self._queue), reason=reason, backoff=RECONNECT_BACKOFF_SECONDS)
            self._schedule_retry()

    def _schedule_retry(self) -> None:
        if not self._closed and not self._retry_pending():
            self._retry_call = self.reactor.callLater(RECONNECT_BACKOFF_SECONDS, self._pump)


class ControllerChannelManager:
    """One ``BrokerChannel`` per live broker."""

    def __init__(self, *, reactor, controller_id: int, timeout_ms: int, config=None):
        """``config``: the controller's broker configuration, whose ``listener.name.<l>.ssl.*`` keys set up
        TLS to a broker's SSL / SASL_SSL control listener (Kafka's controller uses its own config for the
        control-plane listener the same way)."""
        self.reactor = reactor
        self.config = config
        self.controller_id = controller_id
        self.timeout = timeout_ms / 1000.0
        self.channels: dict[int, BrokerChannel] = {}

    def add_broker(self, broker_id: int, host: str, port: int, *, security_protocol: str = "PLAINTEXT",
                   listener_name: str | None = None) -> None:
        """Start a channel to ``broker_id`` (replacing one to a different address or security protocol)."""
        existing = self.channels.get(broker_id)
        if existing is not None and (existing.host, existing.port, existing.security_protocol) == \
                (host, port, security_protocol):
            return
        if existing is not None:
            existing.close()
        tls = None
        if security_protocol in TLS_PROTOCOLS:
            config, listener = self.config, listener_name or security_protocol
            if config is None:
                raise ValueError(f"broker {broker_id}: {security_protocol} control listener without TLS settings")

            def tls() -> ClientTls:
                return ClientTls.from_config(config, listener)
        sasl = None
        if security_protocol in SASL_PROTOCOLS:
            sasl_config, sasl_listener = self.config, listener_name or security_protocol
            if sasl_config is None:
                raise ValueError(f"broker {broker_id}: {security_protocol} control listener without SASL settings")

            def sasl() -> SaslClientConfig:
                return sasl_client_config(sasl_config, sasl_listener)
        self.channels[broker_id] = BrokerChannel(reactor=self.reactor, broker_id=broker_id, host=host, port=port,
                                                 controller_id=self.controller_id, timeout=self.timeout,
                                                 security_protocol=security_protocol, tls=tls, sasl=sasl)

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

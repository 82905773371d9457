"""ControllerChannelManager: the controller's connections to brokers' control planes.

Kafka's controller keeps one connection and one send thread per broker
(``ControllerChannelManager`` / ``RequestSendThread``) and sends
LeaderAndIsr, UpdateMetadata and StopReplica one at a time, in order,
retrying on connection failure.  A SASL control listener is authenticated to
with ``sasl.mechanism.inter.broker.protocol`` and the listener's JAAS
credentials, as Kafka's controller does; a refusal is a failed attempt.  The same holds here -- including for the
controller's own broker, which it reaches over its control-plane listener
like any other, so a single node exercises exactly the path a cluster uses.

Each broker's queue is a ``twisted_kafka.client.BrokerChannel`` (the one
way the broker sends requests to another broker, shared with the
inter-broker sender): a connection attempt gives up after
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

from dataclasses import dataclass

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from twisted_kafka.client import connect
from twisted_kafka.client.broker_channel import RECONNECT_BACKOFF_SECONDS, BrokerChannel
from twisted_kafka.client.connector import SASL_PROTOCOLS, TLS_PROTOCOLS
from twisted_kafka.client.listener_credentials import ListenerCredentials

log = Logger(namespace="twisted_kafka.controller.BrokerChannel")


@dataclass(frozen=True, slots=True)
class _Address:
    host: str
    port: int
    security_protocol: str


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
        self._addresses: dict[int, _Address] = {}

    def add_broker(self, broker_id: int, host: str, port: int, *, security_protocol: str = "PLAINTEXT",
                   listener_name: str | None = None) -> None:
        """Start a channel to ``broker_id`` (replacing one to a different address or security protocol)."""
        address = _Address(host, port, security_protocol)
        existing = self.channels.get(broker_id)
        if existing is not None and self._addresses.get(broker_id) == address:
            return
        if existing is not None:
            existing.close()
        credentials = None
        if security_protocol in TLS_PROTOCOLS | SASL_PROTOCOLS:
            if self.config is None:
                kind = "TLS" if security_protocol in TLS_PROTOCOLS else "SASL"
                raise ValueError(f"broker {broker_id}: {security_protocol} control listener without {kind} settings")
            credentials = ListenerCredentials(self.config, listener_name or security_protocol)
        self._addresses[broker_id] = address
        self.channels[broker_id] = BrokerChannel(
            reactor=self.reactor, broker_id=broker_id, owner="Controller", log=log,
            connect=lambda: self._connect(broker_id, address, credentials))

    def _connect(self, broker_id: int, address: _Address, credentials: ListenerCredentials | None) -> Deferred:
        # Built at each attempt: a key store reloaded in place is used by the next connection.
        protocol = address.security_protocol
        return connect(self.reactor, address.host, address.port, client_id=f"controller-{self.controller_id}",
                       timeout=self.timeout, security_protocol=protocol, name=f"broker {broker_id}",
                       tls=credentials.tls(protocol) if credentials is not None else None,
                       sasl=credentials.sasl(protocol) if credentials is not None else None)

    def remove_broker(self, broker_id: int) -> None:
        channel = self.channels.pop(broker_id, None)
        self._addresses.pop(broker_id, None)
        if channel is not None:
            channel.close()

    def send(self, broker_id: int, api_key: int, version: int, request) -> Deferred:
        """Queue ``request`` to ``broker_id``; see ``BrokerChannel.send``."""
        if api_key != type(request).API_KEY:
            raise ValueError(f"api key {api_key} does not match {type(request).__name__}")
        return self.channels[broker_id].send(version, request)

    def close(self) -> None:
        for channel in self.channels.values():
            channel.close()
        self.channels.clear()
        self._addresses.clear()


__all__ = ["ControllerChannelManager", "RECONNECT_BACKOFF_SECONDS"]

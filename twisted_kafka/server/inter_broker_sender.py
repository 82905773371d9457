"""InterBrokerSender: requests from this broker to other brokers over the inter-broker listener.

Besides replication, Kafka's brokers send each other requests from their
coordinators: the transaction coordinator writes a transaction's markers
to the leaders of the partitions it touched (WriteTxnMarkers, through
``TransactionMarkerChannelManager``, an ``InterBrokerSendThread``), over
the inter-broker listener, as the broker, retried until they are written.
This is that sender, for this broker's coordinators:

* ``send(broker_id, request, version)`` queues ``request`` on the
  destination's ``twisted_kafka.client.BrokerChannel`` and fires with its
  answer -- one connection per destination, requests sent one at a time,
  in order;
* the connection goes to the destination's inter-broker listener
  (``inter.broker.listener.name``, else the one named by
  ``security.inter.broker.protocol``) at the address the controller's
  UpdateMetadata announced, looked up at each connection attempt (a broker
  that restarted may listen elsewhere); it authenticates as this broker
  (``ListenerCredentials``: the listener's TLS settings, its SASL
  credentials), with client id ``broker-<id>-inter-broker``;
* an attempt that fails -- refused, not made within ``request.timeout.ms``,
  a destination no UpdateMetadata has named yet -- and a connection lost
  are retried after the channel's back-off, the request in flight sent
  again first, until the request is answered.  A request can therefore
  reach its broker twice: what is sent this way must be safe to apply
  twice (transaction markers are);
* a request is never resent after an answer that breaks the protocol (it
  fails with ``ProtocolViolationError``), and stopping the service closes
  every channel: what was not answered fails with ``ConnectionError``, as
  does a request sent afterwards.

It is a child service of the broker started right after the
``SocketServer`` (it may send to this very broker, as Kafka's coordinators
do to the partitions their broker leads) and stopped right before it.
"""

from __future__ import annotations

from twisted.application.service import Service
from twisted.internet.defer import Deferred, fail
from twisted.logger import Logger

from twisted_kafka.client import ConnectFailed, connect
from twisted_kafka.client.broker_channel import BrokerChannel
from twisted_kafka.client.listener_credentials import ListenerCredentials

from .metadata_cache import MetadataCache


class InterBrokerSender(Service):
    name = "inter-broker-sender"
    log = Logger(namespace="twisted_kafka.server.InterBrokerSender")

    def __init__(self, *, broker_id: int, config, reactor, metadata_cache: MetadataCache):
        self.broker_id = broker_id
        self.reactor = reactor
        self.metadata_cache = metadata_cache
        self.listener_name = config["inter.broker.listener.name"] or config["security.inter.broker.protocol"]
        self.credentials = ListenerCredentials(config, self.listener_name)
        self.client_id = f"broker-{broker_id}-inter-broker"
        self.timeout = config["request.timeout.ms"] / 1000.0
        #: One channel per destination broker, made on its first request.
        self.destinations: dict[int, BrokerChannel] = {}
        self._stopped = False

    def send(self, broker_id: int, request, version: int) -> Deferred:
        """``request`` (a message at ``version``) to ``broker_id``; fires with the decoded response."""
        if self._stopped:
            return fail(ConnectionError(f"the inter-broker sender of broker {self.broker_id} is stopped"))
        channel = self.destinations.get(broker_id)
        if channel is None:
            channel = self.destinations[broker_id] = BrokerChannel(
                reactor=self.reactor, broker_id=broker_id, owner=f"Broker {self.broker_id}", log=self.log,
                connect=lambda: self._connect(broker_id))
        return channel.send(version, request)

    def _connect(self, broker_id: int) -> Deferred:
        endpoint = self.metadata_cache.broker_endpoint(broker_id, self.listener_name)
        if endpoint is None:
            raise ConnectFailed(f"broker {broker_id}", f"its {self.listener_name} listener is not known yet")
        protocol = endpoint.security_protocol
        return connect(self.reactor, endpoint.host, endpoint.port, client_id=self.client_id, timeout=self.timeout,
                       security_protocol=protocol, name=f"broker {broker_id}", tls=self.credentials.tls(protocol),
                       sasl=self.credentials.sasl(protocol))

    def stopService(self) -> None:
        super().stopService()
        self._stopped = True
        for channel in self.destinations.values():
            channel.close()
        self.destinations.clear()


__all__ = ["InterBrokerSender"]

"""The Twisted server endpoint of each listener, chosen by its security protocol.

A listener is a Twisted endpoint built from a description string
(``tcp:port=9092:interface=127.0.0.1:backlog=50``), so the rest of the
network layer is the same whatever the transport: PLAINTEXT and
SASL_PLAINTEXT listen on plain TCP, SSL and SASL_SSL on TLS over TCP.  Adding
TLS is a matter of a different description and a context factory, not of
different connection code.
"""

from __future__ import annotations

from OpenSSL import SSL
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import quoteStringArgument, serverFromString
from twisted.internet.interfaces import IStreamServerEndpoint
from twisted.protocols.tls import BufferingTLSTransport, TLSMemoryBIOFactory

from .listeners import EndPoint

#: Security protocols whose connections are TLS-wrapped (Kafka's SecurityProtocol).
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
#: Security protocols that authenticate with SASL before serving other APIs (KIP-43).
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


def endpoint_description(endpoint: EndPoint, *, backlog: int) -> str:
    """The ``serverFromString`` description of a plain TCP listener for ``endpoint``."""
    kind = "tcp6" if ":" in endpoint.host else "tcp"
    description = f"{kind}:port={endpoint.port}:backlog={backlog}"
    if endpoint.host:
        description += f":interface={quoteStringArgument(endpoint.host)}"
    return description


def server_endpoint(reactor, endpoint: EndPoint, *, backlog: int) -> IStreamServerEndpoint:
    """The TCP endpoint a listener binds (TLS, if any, is layered on by ``listen``)."""
    return serverFromString(reactor, endpoint_description(endpoint, backlog=backlog))


class ServerTlsTransport(BufferingTLSTransport):
    """Twisted's TLS transport, remembering the first bytes the client sent, and closing
    without waiting for the client.

    When a handshake fails the first bytes tell an operator why: a Kafka
    request in plaintext means a PLAINTEXT client on an SSL port.

    Twisted's ``loseConnection`` sends close_notify and then waits for the
    client's close_notify before it closes the TCP connection.  A client
    that never sends one -- one that failed to authenticate on purpose, or
    whose connection is muted so its close_notify is never read -- would
    keep the descriptor and its connection-quota slot until
    ``connections.max.idle.ms``.  The initiator of a close need not wait for
    the peer's close_notify (RFC 8446 section 6.1; Kafka's
    ``SslTransportLayer.close`` does not either): the broker marks it as
    received, so the TLS shutdown completes once its own close_notify is
    written and the TCP connection closes after the bytes already written.
    """

    first_bytes = b""

    def dataReceived(self, data: bytes) -> None:
        if not self._handshakeDone and len(self.first_bytes) < 8:
            self.first_bytes += data[:8 - len(self.first_bytes)]
        super().dataReceived(data)

    def loseConnection(self) -> None:
        if self.connected and not self.disconnecting and self._handshakeDone:
            tls = self.getHandle()
            tls.set_shutdown(tls.get_shutdown() | SSL.RECEIVED_SHUTDOWN)
        super().loseConnection()


class TlsListenerFactory(TLSMemoryBIOFactory):
    """TLS over an acceptor: a connection the acceptor refuses (``None``) is closed at once, as on plain TCP."""

    protocol = ServerTlsTransport

    def buildProtocol(self, addr):
        wrapped = self.wrappedFactory.buildProtocol(addr)
        if wrapped is None:
            return None
        return self.protocol(self, wrapped)


def listen(reactor, endpoint: EndPoint, factory, *, backlog: int, tls=None) -> Deferred:
    """Bind ``endpoint`` for ``factory``: plain TCP, or TLS over TCP with ``tls`` (an
    ``IOpenSSLServerConnectionCreator``, the listener's ``ServerTls``) for SSL and SASL_SSL."""
    if endpoint.security_protocol in TLS_PROTOCOLS:
        if tls is None:
            raise ValueError(f"listener {endpoint.listener_name}: {endpoint.security_protocol} needs TLS settings")
        factory = TlsListenerFactory(tls, False, factory, clock=reactor)
    return server_endpoint(reactor, endpoint, backlog=backlog).listen(factory)


__all__ = ["server_endpoint", "endpoint_description", "listen", "TlsListenerFactory", "ServerTlsTransport",
           "TLS_PROTOCOLS", "SASL_PROTOCOLS"]

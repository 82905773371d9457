"""The close that ends a failed authentication happens at connection.failed.authentication.delay.ms,
whatever the client does -- on Twisted's own transports, driven by a ``MemoryReactorClock``.

Below the Processor are Twisted's real write path (``WindowTransport``: a ``FileDescriptor`` over a
fake socket the test fills and drains) and, on SASL_SSL, Twisted's real TLS transport as the listener
builds it (``TlsListenerFactory``) talking to a pyOpenSSL client in memory.  Reading stays muted after
the failure, as on a real socket: the client's bytes are delivered only while the transport reads.
"""

from __future__ import annotations

import contextlib

import trustme
from kafka.protocol.sasl import SaslHandshakeRequest
from OpenSSL import SSL
from twisted.internet.address import IPv4Address

from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.network.endpoints import TlsListenerFactory
from twisted_kafka.network.processor import FAILED_AUTHENTICATION_CLOSE_GRACE
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.sasl.authenticator import SaslServerConfig
from twisted_kafka.server.handlers.sasl import SaslAuthenticateHandler, SaslHandshakeHandler

from .helpers import Stack, WindowTransport, decode, request_bytes, split_frames

DELAY = 0.25


def unsupported_mechanism() -> bytes:
    return request_bytes(SaslHandshakeRequest(version=1, mechanism="GSSAPI"), correlation_id=1)


def sasl_stack(listener: str, **props: str) -> Stack:
    config = SaslServerConfig(listener, ("PLAIN",), {"alice": "alice-secret"}, None)
    return Stack({"listeners": f"PLAINTEXT://127.0.0.1:9092,{listener}://127.0.0.1:9095",
                  "listener.security.protocol.map": f"PLAINTEXT:PLAINTEXT,{listener}:{listener}",
                  "inter.broker.listener.name": "PLAINTEXT", "control.plane.listener.name": "",
                  "connection.failed.authentication.delay.ms": str(int(DELAY * 1000)), **props},
                 handlers=[SaslHandshakeHandler(), SaslAuthenticateHandler()], sasl={listener: config})


# -- SASL_SSL: the TLS close does not wait for the client's close_notify ----------------------------

class TlsPeer:
    """A pyOpenSSL client in memory BIOs, wired to the broker's TLS transport over a WindowTransport."""

    def __init__(self, stack: Stack, ca: trustme.CA, listener: str = "SASL_SSL"):
        factory = next(f for _, f, _, _ in stack.clock.tcpServers if isinstance(f, TlsListenerFactory))
        addr = IPv4Address("TCP", "127.0.0.1", 40001)
        self.stack = stack
        self.tls = factory.buildProtocol(addr)
        self.tcp = WindowTransport(self.tls, stack.clock, addr)
        self.tcp.window = 1 << 20                    # the client's kernel takes whatever is sent
        self.tls.makeConnection(self.tcp)
        self.processor = self.tls.wrappedProtocol
        context = SSL.Context(SSL.TLS_METHOD)
        ca.configure_trust(context)
        self.client = SSL.Connection(context, None)
        self.client.set_connect_state()
        self.client.set_tlsext_host_name(b"localhost")
        self.unsent = b""                            # the client's bytes the broker has not read yet
        self.close_notify = False

    def turn(self) -> None:
        """One reactor turn: the broker reads what the client sent (if it reads), writes, the client reads."""
        with contextlib.suppress(SSL.WantReadError):     # nothing to send
            self.unsent += self.client.bio_read(1 << 20)
        if self.unsent and not self.tcp.paused and not self.tcp.disconnected:
            data, self.unsent = self.unsent, b""
            self.tls.dataReceived(data)
        self.stack.clock.advance(0)                 # Twisted's TLS write aggregation
        self.tcp.pump()
        if self.tcp.received:
            self.client.bio_write(bytes(self.tcp.received))
            self.tcp.received.clear()

    def handshake(self) -> None:
        for _ in range(10):
            try:
                self.client.do_handshake()
                return
            except SSL.WantReadError:
                self.turn()
        raise AssertionError("no TLS handshake")

    def send(self, data: bytes) -> None:
        self.client.sendall(data)
        self.turn()

    def read(self) -> bytes:
        self.turn()
        data = b""
        while True:
            try:
                data += self.client.recv(1 << 16)
            except SSL.WantReadError:
                return data
            except SSL.ZeroReturnError:
                self.close_notify = True
                return data


def test_sasl_ssl_failed_login_is_closed_at_the_delay_without_the_clients_close_notify(tmp_path):
    ca = trustme.CA()
    server = ca.issue_cert("localhost")
    keystore = tmp_path / "broker.pem"
    keystore.write_bytes(server.private_key_pem.bytes() + b"".join(b.bytes() for b in server.cert_chain_pems))
    stack = sasl_stack("SASL_SSL", **{"listener.name.sasl_ssl.ssl.keystore.type": "PEM",
                                       "listener.name.sasl_ssl.ssl.keystore.location": str(keystore)})
    peer = TlsPeer(stack, ca)
    peer.handshake()
    peer.send(unsupported_mechanism())
    [frame] = split_frames(peer.read())
    assert decode(ApiKey.SASL_HANDSHAKE, 1, frame)[1].error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert peer.tcp.paused, "muted after the failure"
    assert stack.quotas.total == 1

    stack.clock.advance(DELAY - 0.001)
    peer.turn()
    assert not peer.tcp.disconnected and not peer.tcp.disconnecting, "closed before the delay"

    stack.clock.advance(0.001)
    peer.turn()             # close_notify written; the TCP connection closes once it has left
    assert peer.tcp.disconnected and not peer.tcp.aborted, \
        "the TCP connection must close at the delay, not wait for the client's close_notify"
    assert peer.read() == b"" and peer.close_notify, "the client got the broker's close_notify"
    assert stack.quotas.total == 0
    assert stack.quotas.closed == {("SASL_SSL", CloseReason.AUTHENTICATION): 1}
    assert not stack.clock.getDelayedCalls()


# -- a client that does not read its responses does not hold the close up ---------------------------

def test_a_failed_login_that_does_not_read_its_responses_is_aborted_after_the_grace():
    stack = sasl_stack("SASL_PLAINTEXT")
    p = stack.connect("SASL_PLAINTEXT", transport=WindowTransport)
    tcp = p.transport
    p.dataReceived(unsupported_mechanism())
    assert tcp.unsent, "the handshake's error response waits: the client reads nothing"

    stack.clock.advance(DELAY)
    tcp.pump()
    assert tcp.disconnecting and not tcp.disconnected, "a graceful close, held up by the unread response"
    stack.clock.advance(FAILED_AUTHENTICATION_CLOSE_GRACE - 0.001)
    assert not tcp.disconnected
    stack.clock.advance(0.001)
    assert tcp.disconnected and tcp.aborted
    assert stack.quotas.total == 0
    assert stack.quotas.closed == {("SASL_PLAINTEXT", CloseReason.AUTHENTICATION): 1}


def test_a_failed_login_whose_response_has_left_closes_at_the_delay_gracefully():
    stack = sasl_stack("SASL_PLAINTEXT")
    p = stack.connect("SASL_PLAINTEXT", transport=WindowTransport)
    tcp = p.transport
    tcp.window = 1 << 20
    p.dataReceived(unsupported_mechanism())
    tcp.pump()
    assert not tcp.unsent and split_frames(bytes(tcp.received))
    stack.clock.advance(DELAY)
    tcp.pump()
    assert tcp.disconnected and not tcp.aborted
    assert stack.quotas.closed == {("SASL_PLAINTEXT", CloseReason.AUTHENTICATION): 1}
    assert not stack.clock.getDelayedCalls(), "the grace timer went with the connection"

"""Connecting to a broker: a Twisted client endpoint chosen by security protocol, and a connect timeout.

As on the server side (``twisted_kafka.network.endpoints``), the transport is
a Twisted endpoint built from a description string, so the client code is
the same whatever the transport: PLAINTEXT and SASL_PLAINTEXT connect over
plain TCP (``tcp:host=...:port=...``), and SSL/SASL_SSL wrap that endpoint in
TLS (``wrapClientTLS``) with the listener's trust store, client certificate
and host name check (``network.tls.ClientTls``) -- another endpoint, not
other code.  SASL authentication is a conversation over the connection, not
a property of the transport: with ``sasl`` given, ``connect`` runs it
(``twisted_kafka.client.sasl``) before handing the connection over, so a
caller only ever sees authenticated connections.

``tcp:`` serves IPv6 literals too (Twisted's TCP client recognises them), so
there is no separate ``tcp6:`` description; Twisted has no client parser for
one.  The connect timeout (``controller.socket.timeout.ms`` for the
controller) is applied to the connection attempt with ``Deferred.addTimeout``
on the reactor's clock rather than by the description alone, whose ``timeout``
is whole seconds: the attempt is cancelled at the configured millisecond.
"""

from __future__ import annotations

import math
from typing import Any

from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.internet.endpoints import clientFromString, quoteStringArgument, wrapClientTLS
from twisted.internet.error import ConnectingCancelledError
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.python.failure import Failure

from twisted_kafka.network.tls import ClientTls
from twisted_kafka.protocol.client_connection import DEFAULT_MAX_RESPONSE_SIZE
from twisted_kafka.sasl.client import SaslClientConfig

from .errors import ConnectFailed
from .protocol import KafkaClientFactory, KafkaClientProtocol, describe_address
from .sasl import authenticate

#: Security protocols whose connections are TLS-wrapped (Kafka's SecurityProtocol).
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
#: Security protocols over plain TCP.
PLAIN_PROTOCOLS = frozenset({"PLAINTEXT", "SASL_PLAINTEXT"})
#: Security protocols whose connections authenticate with SASL first.
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})


def endpoint_description(host: str, port: int, *, timeout: float | None = None) -> str:
    """The ``clientFromString`` description of a plain TCP connection to ``host:port``.

    ``timeout`` (seconds) is rounded up to the whole seconds a description
    can hold, so the endpoint never gives up before the caller's timeout.
    """
    description = f"tcp:host={quoteStringArgument(host)}:port={port}"
    if timeout is not None:
        description += f":timeout={max(1, math.ceil(timeout))}"
    return description


def client_endpoint(reactor, host: str, port: int, *, security_protocol: str = "PLAINTEXT",
                    timeout: float | None = None, tls: ClientTls | None = None) -> IStreamClientEndpoint:
    """The endpoint that reaches a listener of ``security_protocol`` at ``host:port``.

    SSL and SASL_SSL need ``tls``: the ``ClientTls`` of the listener's keys
    (trust store, client certificate, host name check), layered on the TCP
    endpoint with Twisted's ``wrapClientTLS``.
    """
    if security_protocol not in PLAIN_PROTOCOLS | TLS_PROTOCOLS:
        raise ValueError(f"unknown security protocol {security_protocol!r}")
    tcp = clientFromString(reactor, endpoint_description(host, port, timeout=timeout))
    if security_protocol in TLS_PROTOCOLS:
        if tls is None:
            raise ValueError(f"cannot connect to {describe_address(host, port)}: {security_protocol} needs TLS "
                             "settings")
        return wrapClientTLS(tls.for_host(host), tcp)
    return tcp


def connect(reactor, host: str, port: int, *, client_id: str | None, timeout: float,
            security_protocol: str = "PLAINTEXT", name: str | None = None,
            max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE, tls: ClientTls | None = None,
            sasl: SaslClientConfig | None = None) -> Deferred:
    """Connect to the broker at ``host:port``; the Deferred fires with a connected ``KafkaClientProtocol``.

    SASL_PLAINTEXT and SASL_SSL need ``sasl``: the connection authenticates
    with it first, and a refusal fails the Deferred with
    ``SaslAuthenticationFailed`` (a ``ConnectFailed``) after closing it.
    The timeout covers the connection, TLS and SASL together.  ``name``
    (``"broker 2"``) goes into every error and log line about the connection.
    The Deferred fails with ``ConnectFailed`` if the connection is refused
    or not made within ``timeout`` seconds; cancelling it abandons the
    attempt (it then fails with Twisted's ``ConnectingCancelledError``).
    """
    peer = describe_address(host, port, name)
    # Any: mypy cannot check calls through a zope Interface (IStreamClientEndpoint) without a plugin.
    endpoint: Any = client_endpoint(reactor, host, port, security_protocol=security_protocol, timeout=timeout,
                                    tls=tls)
    if security_protocol in SASL_PROTOCOLS and sasl is None:
        raise ValueError(f"cannot connect to {peer}: {security_protocol} needs SASL settings")
    factory = KafkaClientFactory(client_id=client_id, peer=peer, max_response_size=max_response_size)
    d = endpoint.connect(factory)
    if security_protocol in SASL_PROTOCOLS:
        assert sasl is not None
        d.addCallback(_authenticated, sasl)

    def timed_out(result, timeout: float):
        raise ConnectFailed(peer, f"no connection within {timeout:g} s")

    def failed(failure: Failure):
        if failure.check(ConnectFailed, CancelledError, ConnectingCancelledError):
            return failure
        raise ConnectFailed(peer, failure.getErrorMessage())

    d.addTimeout(timeout, reactor, onTimeoutCancel=timed_out)
    return d.addErrback(failed)


def _authenticated(client: KafkaClientProtocol, sasl: SaslClientConfig) -> Deferred:
    """``client`` once SASL has succeeded; on any failure (or cancellation) the connection is closed."""
    def settle(result):
        if isinstance(result, Failure):
            client.close()
        if outer.called:
            return None          # cancelled meanwhile: the caller has had its CancelledError
        if isinstance(result, Failure):
            outer.errback(result)
        else:
            outer.callback(client)
        return None

    # Cancelling closes the connection; the exchange then fails and settle() finds ``outer`` called.
    outer: Deferred = Deferred(lambda _: client.close())
    ensureDeferred(authenticate(client, sasl)).addBoth(settle)
    return outer


__all__ = ["connect", "client_endpoint", "endpoint_description", "TLS_PROTOCOLS", "PLAIN_PROTOCOLS",
           "SASL_PROTOCOLS"]

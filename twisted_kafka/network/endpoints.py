"""The Twisted server endpoint of each listener, chosen by its security protocol.

A listener is a Twisted endpoint built from a description string
(``tcp:port=9092:interface=127.0.0.1:backlog=50``), so the rest of the
network layer is the same whatever the transport: PLAINTEXT and
SASL_PLAINTEXT listen on plain TCP, SSL and SASL_SSL on TLS over TCP.  Adding
TLS is a matter of a different description and a context factory, not of
different connection code.
"""

from __future__ import annotations

from twisted.internet.endpoints import quoteStringArgument, serverFromString
from twisted.internet.interfaces import IStreamServerEndpoint

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
    """The endpoint a listener binds, by its security protocol."""
    if endpoint.security_protocol in TLS_PROTOCOLS:
        raise ValueError(f"listener {endpoint.listener_name}: {endpoint.security_protocol} listeners need TLS "
                         "settings, which this build does not serve yet")
    return serverFromString(reactor, endpoint_description(endpoint, backlog=backlog))


__all__ = ["server_endpoint", "endpoint_description", "TLS_PROTOCOLS", "SASL_PROTOCOLS"]

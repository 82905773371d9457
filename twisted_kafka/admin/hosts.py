"""Which ``Host`` names the admin endpoint answers to when it has no token.

Without ``admin.rest.auth.token`` the read-only calls are open, and a web page
could read them through DNS rebinding: the page's own name is made to resolve
to the endpoint's address, so the browser treats the page's requests as
same-origin and lets its script read the answers (client IPs, principals,
client ids).  Those requests still carry the page's name in ``Host``, so the
endpoint serves only names that are its own: the listener's host, the address
the connection reached (which covers a wildcard listener), ``localhost``, and
``admin.rest.allowed.hosts``.  The port is not compared: ``Host`` always names
the port the browser connected to, so it says nothing about who sent the
request.  A request without ``Host`` did not come from a browser (browsers
always send it) and is served.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable


def host_name(value: str) -> str:
    """The name part of a ``Host`` value (``[::1]:9644`` -> ``::1``), lower case, without a trailing dot."""
    value = value.strip()
    if value.startswith("["):
        name = value[1:].partition("]")[0]
    else:
        head, colon, port = value.rpartition(":")
        name = head if colon and port.isdigit() and ":" not in head else value
    return name.rstrip(".").lower()


def _address(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


class HostRule:
    """The names and addresses one endpoint answers to without a token."""

    def __init__(self, listener_host: str, allowed: Iterable[str] = ()):
        names = {"localhost", *(host_name(entry) for entry in allowed if entry.strip())}
        listener = host_name(listener_host)
        listener_address = _address(listener)
        if listener_address is None:
            names.add(listener)
        self.names = frozenset(names)
        # A wildcard listener (0.0.0.0, ::) is no one's name: the address each connection reached is used instead.
        self.addresses = frozenset({listener_address} if listener_address is not None
                                   and not listener_address.is_unspecified else set())

    def allows(self, host: str, local_address: str) -> bool:
        """Whether a ``Host`` value names this endpoint, reached on ``local_address``."""
        name = host_name(host)
        if name in self.names or name == local_address:     # the usual cases, without parsing an address
            return True
        address = _address(name)
        return address is not None and (address in self.addresses or address == _address(local_address))

"""ConnectionStats: running totals of the connection events, per listener and plane, for operators.

A subscriber of the ``ConnectionEvents`` bus (see ``connection_events``):
every accept, rejection, failed authentication and close is counted by
listener, plane and reason, and rejections also by client IP.  Kafka has
these numbers only as JMX meters (``connection-accept-rate``,
``connection-close-rate``, ``failed-authentication-total``); here they are
plain counters the admin endpoint reads.

Rejection reasons are named for operators, whatever quota key the network
layer reported:

* ``per_ip`` -- ``max.connections.per.ip`` (or its override for the IP);
* ``listener_limit`` -- ``listener.name.<l>.max.connections``;
* ``broker_limit`` -- ``max.connections``;
* ``creation_rate`` -- a connection creation rate (KIP-612);
* ``authentication`` -- SASL authentication failed (the authenticator's event);
* ``tls`` -- the TLS handshake failed (a rejection reported with reason
  ``tls``, or the authentication failure the handshake reports -- Kafka counts
  both kinds as failed authentications, operators need them apart: a
  plaintext client on a TLS port is not a wrong password).

Every reason is always present (0 until it happens), so dashboards and
scrapers see a stable set of series.
"""

from __future__ import annotations

from collections import Counter

from .close_reasons import CloseReason
from .connection_events import ConnectionEvent, ConnectionEventKind, is_tls_failure

#: Client addresses counted one by one (``?ip=``); beyond this many, new addresses are counted in the
#: listener totals only, so a scan from many addresses cannot grow the broker's memory without bound.
MAX_TRACKED_IPS = 10_000

REJECT_REASONS = ("per_ip", "listener_limit", "broker_limit", "creation_rate", "authentication", "tls")
CLOSE_REASONS = tuple(value for name, value in vars(CloseReason).items() if name.isupper())


def reject_reason(quota: str | None) -> str:
    """The operator-facing name of a rejection reported with ``quota`` (a config key or "tls")."""
    if quota is None:
        return "broker_limit"
    if quota == "max.connections.per.ip" or quota.startswith("max.connections.per.ip"):
        return "per_ip"
    if "creation.rate" in quota:
        return "creation_rate"
    if quota.startswith("listener.name.") and quota.endswith(".max.connections"):
        return "listener_limit"
    if quota == "max.connections":
        return "broker_limit"
    if quota in ("tls", CloseReason.TLS):
        return "tls"
    if quota in ("authentication", CloseReason.AUTHENTICATION):
        return "authentication"
    return quota


class ConnectionStats:
    """Counters fed by the connection-event bus; see the module docstring."""

    def __init__(self) -> None:
        self.accepted: Counter[tuple[str, str]] = Counter()            # (listener, plane)
        self.rejected: Counter[tuple[str, str, str]] = Counter()       # (listener, plane, reason)
        self.closed: Counter[tuple[str, str, str]] = Counter()         # (listener, plane, reason)
        self.rejected_per_ip: Counter[str] = Counter()
        # The same by client IP too, for a view of one client (``?ip=``).
        self.accepted_per_ip: Counter[tuple[str, str, str]] = Counter()        # (listener, plane, ip)
        self.rejected_by_ip: Counter[tuple[str, str, str, str]] = Counter()    # (listener, plane, ip, reason)
        self.closed_by_ip: Counter[tuple[str, str, str, str]] = Counter()      # (listener, plane, ip, reason)
        self._tracked_ips: set[str] = set()

    def _tracked(self, ip: str) -> bool:
        if ip in self._tracked_ips:
            return True
        if len(self._tracked_ips) >= MAX_TRACKED_IPS:
            return False
        self._tracked_ips.add(ip)
        return True

    def __call__(self, event: ConnectionEvent) -> None:
        key = (event.listener, event.plane)
        if event.kind is ConnectionEventKind.ACCEPTED:
            self.accepted[key] += 1
            if self._tracked(event.ip):
                self.accepted_per_ip[(*key, event.ip)] += 1
        elif event.kind in (ConnectionEventKind.REJECTED, ConnectionEventKind.AUTHENTICATION_FAILED):
            if is_tls_failure(event):
                reason = "tls"
            elif event.kind is ConnectionEventKind.AUTHENTICATION_FAILED:
                reason = "authentication"
            else:
                reason = reject_reason(event.reason)
            self.rejected[(*key, reason)] += 1
            if self._tracked(event.ip):
                self.rejected_by_ip[(*key, event.ip, reason)] += 1
                self.rejected_per_ip[event.ip] += 1
        elif event.kind is ConnectionEventKind.CLOSED:
            reason = event.reason or CloseReason.CLIENT
            self.closed[(*key, reason)] += 1
            if self._tracked(event.ip):
                self.closed_by_ip[(*key, event.ip, reason)] += 1

    def rejected_by_reason(self, listener: str, plane: str, ip: str | None = None) -> dict[str, int]:
        """Rejections on ``listener`` by reason (of client ``ip`` only, if given); every reason present."""
        return _by_reason(REJECT_REASONS, self.rejected if ip is None else self.rejected_by_ip, listener, plane, ip)

    def closed_by_reason(self, listener: str, plane: str, ip: str | None = None) -> dict[str, int]:
        """Closes on ``listener`` by ``CloseReason`` (of client ``ip`` only, if given); every reason present."""
        return _by_reason(CLOSE_REASONS, self.closed if ip is None else self.closed_by_ip, listener, plane, ip)


def _by_reason(reasons, counter: Counter, listener: str, plane: str, ip: str | None) -> dict[str, int]:
    counts = {reason: 0 for reason in reasons}
    prefix = (listener, plane) if ip is None else (listener, plane, ip)
    for key, n in counter.items():
        if key[:-1] == prefix:
            counts[key[-1]] = counts.get(key[-1], 0) + n
    return counts


__all__ = ["ConnectionStats", "REJECT_REASONS", "CLOSE_REASONS", "reject_reason"]

"""Connection events: what happened to every connection, for whoever keeps history or counts.

The acceptors report each connection's life as events -- accepted (admitted
by the quotas), rejected (refused by a quota, naming it), authentication
failed (the reason the authenticator gave; the close that follows is a closed
event with reason "authentication"), closed (with the ``CloseReason``:
client, idle, quota, authentication, TLS, shutdown, ...) -- to one
``ConnectionEvents`` bus shared by both planes.  Subscribers are the
admin endpoint's live counters and the ``__connection_events`` topic that
keeps the history; the network layer knows neither.  A subscriber must not
raise or block: it is called on the reactor, inside the accept or close.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass

from twisted.logger import Logger

#: How the reason of an authentication failure of the TLS handshake begins: Kafka counts a failed handshake
#: as a failed authentication (SslAuthenticationException), so it is an AUTHENTICATION_FAILED event, and
#: counters that tell the two apart (the admin endpoint's "tls" and "authentication") go by this prefix.
TLS_FAILURE_PREFIX = "TLS handshake failed: "


class ConnectionEventKind(enum.Enum):
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    CLOSED = "closed"
    AUTHENTICATION_FAILED = "authentication_failed"


@dataclass(frozen=True, slots=True)
class ConnectionEvent:
    kind: ConnectionEventKind
    timestamp_ms: int
    listener: str
    plane: str                   # "data" or "control"
    ip: str
    port: int
    connection_id: str
    principal: str
    reason: str | None = None    # the quota of a rejection (a config key), the CloseReason of a close,
                                 # the authenticator's reason of an authentication failure


def is_tls_failure(event: ConnectionEvent) -> bool:
    """Whether ``event`` is the authentication failure of a TLS handshake (see ``TLS_FAILURE_PREFIX``)."""
    return event.kind is ConnectionEventKind.AUTHENTICATION_FAILED and \
        (event.reason or "").startswith(TLS_FAILURE_PREFIX)


class ConnectionEvents:
    """The bus: ``subscribe(callback)``; the network layer calls ``emit(event)``."""

    log = Logger(namespace="twisted_kafka.network.ConnectionEvents")

    def __init__(self) -> None:
        self._subscribers: list[Callable[[ConnectionEvent], None]] = []

    def subscribe(self, callback: Callable[[ConnectionEvent], None]) -> None:
        self._subscribers.append(callback)

    def unsubscribe(self, callback: Callable[[ConnectionEvent], None]) -> None:
        if callback in self._subscribers:
            self._subscribers.remove(callback)

    def emit(self, event: ConnectionEvent) -> None:
        for callback in self._subscribers:
            try:
                callback(event)
            except Exception:
                self.log.failure("A connection-event subscriber failed on {event}", event=event)


__all__ = ["ConnectionEvent", "ConnectionEventKind", "ConnectionEvents", "TLS_FAILURE_PREFIX", "is_tls_failure"]

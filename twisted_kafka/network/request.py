"""A decoded request on its way through a plane, and the three ways it can be answered.

Kafka's ``RequestChannel.Request`` carries a ``RequestContext`` -- who sent
it, on which listener, as which principal -- and handlers work from that
alone; they never see the connection.  The answer goes back through the
plane's ``RequestChannel.send_response`` as one of Kafka's response kinds:

* ``SendResponse`` -- bytes to write;
* ``NoOpResponse`` -- nothing to write (acks=0 Produce), the connection may
  read its next request;
* ``CloseConnectionResponse`` -- close the connection (an acks=0 Produce that
  failed, a response that could not be encoded).

A response may also carry ``ConnectionUpdate`` -- state the connection keeps
after this request (the SASL handshake's outcome, the authenticated
principal) -- so the handlers of SaslHandshake/SaslAuthenticate never touch
the connection either.

Timing follows Kafka: request queue, local, remote (waiting), response queue
and response send time are stamped with ``time.perf_counter_ns`` at the same
points Kafka takes them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from twisted_kafka.protocol.header import RequestHeader
    from twisted_kafka.protocol.registry import ApiSpec

ANONYMOUS = "User:ANONYMOUS"


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Where a request came from: what authorization, quotas, metrics and logs need."""

    connection_id: str
    listener_name: str
    security_protocol: str
    plane: str                     # "data" or "control"
    client_host: str
    client_port: int
    principal: str = ANONYMOUS
    client_id: str | None = None
    client_software_name: str | None = None
    client_software_version: str | None = None

    @property
    def client_address(self) -> str:
        return f"{self.client_host}:{self.client_port}"


class Request:
    """One request: its context, what it says, and when each stage ended.

    ``body`` is ``None`` only for an ApiVersions request whose version is not
    supported: KIP-511 says the broker answers it (in v0 format) without
    parsing a body it does not understand.
    """

    __slots__ = (
        "context", "header", "body", "spec", "size",
        "start_ns", "dequeue_ns", "local_complete_ns", "remote_complete_ns",
        "response_dequeue_ns", "complete_ns", "released", "on_local_complete",
    )

    def __init__(self, *, context: RequestContext, header: RequestHeader, body: Any, spec: ApiSpec, size: int,
                 start_ns: int | None = None):
        self.context = context
        self.header = header
        self.body = body
        self.spec = spec
        self.size = size
        self.start_ns = perf_counter_ns() if start_ns is None else start_ns
        self.dequeue_ns = 0
        self.local_complete_ns = 0
        self.remote_complete_ns = 0
        self.response_dequeue_ns = 0
        self.complete_ns = 0
        self.released = False
        self.on_local_complete: Callable[[], None] | None = None  # set by the handler pool: frees its slot

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def correlation_id(self) -> int:
        return self.header.correlation_id

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def listener_name(self) -> str:
        return self.context.listener_name

    @property
    def principal(self) -> str:
        return self.context.principal

    def mark_local_complete(self) -> None:
        """Called by a handler when its own work is done and it starts waiting.

        Time after this point (long-poll fetch, fsync, rebalance) is Kafka's
        RemoteTimeMs.  It also gives the handler slot back to the pool, as
        Kafka's handler threads move on once a request is parked in purgatory:
        ``num.io.threads`` bounds requests being *worked on*, not requests
        waiting.  A handler that never waits need not call it.
        """
        if not self.local_complete_ns:
            self.local_complete_ns = perf_counter_ns()
        if self.on_local_complete is not None:
            release, self.on_local_complete = self.on_local_complete, None
            release()

    def __repr__(self) -> str:
        ctx = self.context
        return (f"<Request {self.spec.name} v{self.header.api_version} correlation_id={self.header.correlation_id} "
                f"from {ctx.client_address} on {ctx.listener_name}>")


@dataclass(frozen=True, slots=True)
class ConnectionUpdate:
    """State the connection keeps once this response is on its way (SASL outcomes)."""

    sasl_handshake: str | None = None        # "framed" (SaslHandshake v1) or "raw" (v0)
    authenticated_principal: str | None = None


@dataclass(slots=True)
class SendResponse:
    request: Request
    chunks: Sequence                          # the framed response: bytes / memoryviews
    update: ConnectionUpdate | None = None


@dataclass(slots=True)
class NoOpResponse:
    request: Request
    update: ConnectionUpdate | None = None


@dataclass(slots=True)
class CloseConnectionResponse:
    request: Request
    reason: str                               # a CloseReason
    message: str | None = None
    graceful: bool = True                     # let responses already written leave first
    chunks: Sequence = field(default_factory=tuple)   # a last response to write before closing


Response = SendResponse | NoOpResponse | CloseConnectionResponse

__all__ = ["RequestContext", "Request", "ConnectionUpdate", "SendResponse", "NoOpResponse",
           "CloseConnectionResponse", "Response", "ANONYMOUS"]

"""A decoded request on its way through a plane, with Kafka's timing points.

Kafka splits a request's life into queue, local, remote (waiting), response
queue and response send time; operators read those histograms to tell a slow
disk from a full queue from a slow client.  The stamps are taken with
``time.perf_counter_ns`` at the same points Kafka takes them.
"""

from __future__ import annotations

from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from twisted_kafka.protocol.header import RequestHeader
    from twisted_kafka.protocol.registry import ApiSpec


class Request:
    """One request: where it came from, what it says, and when each stage ended.

    ``body`` is ``None`` only for an ApiVersions request whose version is not
    supported: KIP-511 says the broker answers it (in v0 format) without
    parsing a body it does not understand.
    """

    __slots__ = (
        "processor", "header", "body", "spec", "size", "plane",
        "listener_name", "security_protocol", "client_host", "client_port", "connection_id",
        "start_ns", "dequeue_ns", "local_complete_ns", "remote_complete_ns",
        "response_dequeue_ns", "complete_ns", "released", "on_local_complete",
    )

    def __init__(self, *, processor, header: RequestHeader, body: Any, spec: ApiSpec | None, size: int,
                 plane: str, listener_name: str, security_protocol: str, client_host: str,
                 client_port: int, connection_id: str, start_ns: int):
        self.processor = processor
        self.header = header
        self.body = body
        self.spec = spec
        self.size = size
        self.plane = plane
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.client_host = client_host
        self.client_port = client_port
        self.connection_id = connection_id
        self.start_ns = start_ns
        self.dequeue_ns = 0
        self.local_complete_ns = 0
        self.remote_complete_ns = 0
        self.response_dequeue_ns = 0
        self.complete_ns = 0
        self.released = False
        self.on_local_complete = None  # set by the handler pool: frees the handler slot

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
    def principal(self) -> str:
        return self.processor.principal

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
        name = self.spec.name if self.spec is not None else f"api_key={self.header.api_key}"
        return (f"<Request {name} v{self.header.api_version} correlation_id={self.header.correlation_id} "
                f"from {self.client_host}:{self.client_port} on {self.listener_name}>")

"""SocketServer: the broker's listeners, split into a data plane and a control plane.

Kafka's SocketServer owns the acceptors and processors of every listener and
the RequestChannel of each plane.  The control plane exists only when
``control.plane.listener.name`` is set; it then has its own acceptor, its own
channel of 20 requests and (in the server layer) its own handler pool of one,
so a flooded data plane cannot delay the controller.  Without it, controller
requests travel over the data plane, as in Kafka.

Each plane declares the APIs it serves.  With a control plane, the
controller's APIs (LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown) are served there and on no data-plane listener; the
control plane itself serves every API, as Kafka's does (a tool or broker may
ask it for Metadata).  Without a control plane the data plane serves
everything.  A request for an API its plane does not serve closes the
connection, as an unknown API does.

Both planes share one ``ConnectionQuotas`` and one ``ConnectionRegistry``
(for idle reaping and LRU eviction), so a connection is counted once.

Lifecycle, as Kafka's: every listener is bound at startup (so its port is
known and can be advertised, including port 0), the control plane accepts
at once, the data plane only once the broker enables request processing;
shutdown stops accepting, stops reading requests, drains what was read, then
closes connections.

``num.network.threads`` does not create threads here: the reactor's single
thread does all socket I/O (see docs/architecture.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from twisted.application.service import Service
from twisted.internet.defer import Deferred, DeferredList, gatherResults, inlineCallbacks
from twisted.internet.error import CannotListenError
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from twisted_kafka.config import ConfigError, StartupError
from twisted_kafka.metrics import MetricName, MetricsRegistry
from twisted_kafka.protocol.registry import CONTROLLER_API_KEYS, ApiSpec
from twisted_kafka.sasl.authenticator import SaslServerConfig

from .acceptor import Acceptor
from .close_reasons import CloseReason
from .connection_events import ConnectionEvents
from .connection_quotas import ConnectionQuotas
from .connection_stats import ConnectionStats
from .connections import ConnectionRegistry
from .endpoints import TLS_PROTOCOLS
from .listeners import EndPoint, ListenerConfig
from .processor import ControlPlaneProcessor, DataPlaneProcessor
from .readiness import ReadinessWatch, readiness_watch
from .request_channel import RequestChannel
from .request_metrics import RequestMetrics
from .tls import ServerTls

CONTROL_PLANE_QUEUE_SIZE = 20  # fixed in Kafka

@dataclass(frozen=True, slots=True)
class LiveConnection:
    """One open connection as operators see it (a snapshot, not the connection)."""

    connection_id: str           # Kafka's local-remote-index form
    listener: str
    plane: str
    security_protocol: str
    client_host: str
    client_port: int
    principal: str
    client_id: str | None
    client_software_name: str | None      # from ApiVersions v3+
    client_software_version: str | None
    connected_since: float       # seconds since the epoch (the reactor's clock)
    idle_ms: int
    requests: int
    bytes_in: int
    bytes_out: int
    inflight_api: str | None


class ServedApis(Protocol):
    """What the API layer tells the network layer: which APIs have handlers, at which versions."""

    def served_spec(self, api_key: int) -> ApiSpec | None: ...

    @property
    def served_keys(self) -> list[int]: ...


@dataclass
class Plane:
    """One plane's pieces: its channel, its connection class, and the APIs it serves."""

    name: str                     # "data" or "control"
    metric_prefix: str            # "" or "ControlPlane", as in Kafka's metric names
    channel: RequestChannel
    processor_class: type
    apis: ServedApis
    allows: Callable[[int], bool]  # whether this plane serves an API key (given it has a handler)
    request_metrics: RequestMetrics
    open: bool = True             # False once shutdown starts: no new requests are read
    wrote: bool = False           # a response was written since the last look (SocketServer.control_plane_waiting)
    readiness: ReadinessWatch | None = None   # the connections being read (the control plane's)

    def serves(self, api_key: int) -> ApiSpec | None:
        """The spec of ``api_key`` if this plane serves it, else None (the connection is then closed)."""
        return self.apis.served_spec(api_key) if self.allows(api_key) else None

    def served_keys(self) -> list[int]:
        """The API keys this plane advertises in ApiVersions."""
        return [key for key in self.apis.served_keys if self.allows(key)]


def _data_plane_beside_control_plane_allows(api_key: int) -> bool:
    return api_key not in CONTROLLER_API_KEYS


def _everything(api_key: int) -> bool:
    return True


class SocketServer(Service):
    log = Logger(namespace="twisted_kafka.network.SocketServer")

    def __init__(self, *, config, listeners: ListenerConfig, reactor, metrics: MetricsRegistry,
                 apis: ServedApis, request_metrics: RequestMetrics,
                 sasl: Mapping[str, SaslServerConfig] | None = None):
        """``request_metrics`` records each completed request's timings (both planes), shared with
        ``KafkaApis``, which counts the error codes of the answers there."""
        self.config = config
        self.listener_config = listeners
        self.reactor = reactor
        self.metrics = metrics
        self.quotas = ConnectionQuotas(config, listeners, reactor)
        self.registry = ConnectionRegistry()
        self.connection_events = ConnectionEvents()   # every accept, rejection and close, for subscribers
        self.connection_stats = ConnectionStats()     # their running totals, for operators
        self.connection_events.subscribe(self.connection_stats)
        has_control_plane = listeners.control_plane_listener is not None
        self.data_plane = Plane(
            "data", "",
            RequestChannel(plane="data", max_queued_requests=config["queued.max.requests"],
                           max_queued_bytes=config["queued.max.request.bytes"]),
            DataPlaneProcessor, apis,
            _data_plane_beside_control_plane_allows if has_control_plane else _everything, request_metrics)
        self.control_plane: Plane | None = None
        if has_control_plane:
            self.control_plane = Plane(
                "control", "ControlPlane",
                RequestChannel(plane="control", max_queued_requests=CONTROL_PLANE_QUEUE_SIZE),
                ControlPlaneProcessor, apis, _everything, request_metrics, readiness=readiness_watch())
        #: The TLS context of every SSL / SASL_SSL listener (ConfigError now if its keys are unusable).
        self.tls: dict[str, ServerTls] = {ep.listener_name: ServerTls(config, ep.listener_name, ep.security_protocol)
                                          for ep in listeners.listeners if ep.security_protocol in TLS_PROTOCOLS}
        self.acceptors: dict[str, Acceptor] = {}
        for ep in listeners.listeners:
            plane = self.data_plane
            if ep.listener_name == listeners.control_plane_listener_name and self.control_plane is not None:
                plane = self.control_plane
            self.acceptors[ep.listener_name] = Acceptor(
                endpoint=ep, plane=plane, quotas=self.quotas, registry=self.registry, reactor=reactor,
                config=config, processor_class=plane.processor_class,
                protected=listeners.is_protected(ep.listener_name), events=self.connection_events,
                tls=self.tls.get(ep.listener_name), sasl=(sasl or {}).get(ep.listener_name))
        self.max_idle_seconds = config["connections.max.idle.ms"] / 1000.0
        self._reaper: LoopingCall | None = None
        self._register_gauges()

    @property
    def planes(self) -> list[Plane]:
        return [p for p in (self.control_plane, self.data_plane) if p is not None]

    def plane(self, name: str) -> Plane:
        """The plane called ``name`` ("data" or "control")."""
        for plane in self.planes:
            if plane.name == name:
                return plane
        raise KeyError(name)

    def _register_gauges(self) -> None:
        for plane in self.planes:
            self.metrics.gauge(MetricName("kafka.network", "RequestChannel", f"{plane.metric_prefix}RequestQueueSize"),
                               self._queue_size_of(plane.channel))
        self.metrics.gauge(MetricName("kafka.network", "SocketServer", "ConnectionCount"),
                           lambda: self.quotas.total)
        for name in self.acceptors:
            self.metrics.gauge(MetricName("kafka.server", "socket-server-metrics", "connection-count",
                                          (("listener", name),)),
                               self._connection_count_of(name))

    @staticmethod
    def _queue_size_of(channel: RequestChannel) -> Callable[[], int]:
        return lambda: channel.queue_size

    def _connection_count_of(self, listener_name: str) -> Callable[[], int]:
        return lambda: self.quotas.per_listener[listener_name]

    # -- lifecycle --------------------------------------------------------------------

    @inlineCallbacks
    def bind(self):
        """Bind every listener (control plane first); none accepts until it is enabled.

        Fails if a port can't be bound.  Binding everything up front, as
        Kafka does, means every listener's port -- including one configured
        as 0 -- is known before the broker advertises its endpoints.
        """
        ordered = sorted(self.acceptors.values(), key=lambda a: a.plane.name != "control")
        for acceptor in ordered:
            if acceptor.port is None:
                try:
                    yield acceptor.listen()
                except CannotListenError as exc:
                    # Name the setting (Kafka: "Socket server failed to bind to host:port").
                    raise StartupError("listeners", acceptor.endpoint.connection_string, str(exc)) from exc
        if self._reaper is None:
            interval = min(max(self.max_idle_seconds / 10.0, 0.01), 1.0)
            self._reaper = LoopingCall(self.close_idle_connections)
            self._reaper.clock = self.reactor
            self._reaper.start(interval, now=False)

    def reload_tls(self, config) -> dict[str, str]:
        """Re-read every TLS listener's key and trust stores (SIGHUP, AlterConfigs): new connections get the
        new ones, open connections keep theirs.  Returns listener -> "reloaded" / "unchanged" / the error;
        a listener whose new material is unusable keeps serving the old."""
        outcome: dict[str, str] = {}
        for name, tls in self.tls.items():
            try:
                outcome[name] = "reloaded" if tls.reload(config) else "unchanged"
            except ConfigError as exc:
                self.log.error("TLS of listener {listener} not reloaded: {error}", listener=name, error=exc)
                outcome[name] = str(exc)
        return outcome

    def enable_request_processing(self, plane: str | None = None) -> None:
        """Start accepting on ``plane``'s listeners ("control" or "data"; None: all)."""
        for acceptor in self.acceptors.values():
            if plane is None or acceptor.plane.name == plane:
                acceptor.enable()

    def advertised_endpoints(self) -> tuple[EndPoint, ...]:
        """``advertised.listeners`` with a port of 0 replaced by the port its listener bound.

        Kafka does the same when it registers a broker, so a broker listening
        on port 0 (tests, ephemeral set-ups) advertises where it can be reached.
        """
        result = []
        for ep in self.listener_config.advertised:
            acceptor = self.acceptors.get(ep.listener_name)
            if ep.port == 0 and acceptor is not None and acceptor.port is not None:
                ep = EndPoint(ep.listener_name, ep.host, acceptor.bound_port, ep.security_protocol)
            result.append(ep)
        return tuple(result)

    # -- what operators see and do (the admin endpoint) ----------------------------------

    def live_connections(self) -> list[LiveConnection]:
        """Every admitted open connection, least recently active first."""
        now = self.reactor.seconds()
        return [LiveConnection(
            connection_id=p.connection_id, listener=p.listener_name, plane=p.plane_name,
            security_protocol=p.security_protocol, client_host=p.client_host, client_port=p.client_port,
            principal=p.principal, client_id=p.client_id, client_software_name=p.client_software_name,
            client_software_version=p.client_software_version, connected_since=p.connected_at,
            idle_ms=max(0, int((now - p.last_active) * 1000)), requests=p.requests_received,
            bytes_in=p.bytes_in, bytes_out=p.bytes_out, inflight_api=p.inflight_api)
            for p in self.registry if not p.closing]

    def close_connection(self, connection_id: str, reason: str = CloseReason.ADMIN) -> bool:
        """Close the open connection ``connection_id`` for ``reason``; False if there is none."""
        processor = self.registry.get(connection_id)
        if processor is None or processor.closing:
            return False
        processor.close(reason, f"closed by an operator ({reason})")
        return True

    def listener_planes(self) -> dict[str, str]:
        """Each listener's plane ("data" or "control")."""
        return {name: acceptor.plane.name for name, acceptor in self.acceptors.items()}

    def bound_port(self, listener_name: str) -> int:
        return self.acceptors[listener_name.upper()].bound_port

    def control_plane_waiting(self) -> bool:
        """Whether the control plane waits for the reactor: a control-plane connection has bytes
        to read, or a control-plane response was written since the last call.

        The data plane's handler pool asks before a slice (and lets the
        reactor poll once first: Twisted reads requests and writes responses
        out on a poll) and between requests of a slice (and ends it).
        """
        plane = self.control_plane
        if plane is None:
            return False
        if plane.wrote:
            plane.wrote = False
            return True
        return plane.readiness is not None and plane.readiness.ready()

    def close_idle_connections(self) -> int:
        """Close connections idle longer than ``connections.max.idle.ms``; returns how many."""
        cutoff = self.reactor.seconds() - self.max_idle_seconds
        idle = self.registry.idle_before(cutoff)
        max_idle_ms = self.config["connections.max.idle.ms"]
        for processor in idle:
            processor.close_idle(max_idle_ms)
        return len(idle)

    def stop_accepting(self) -> Deferred:
        """First step of shutdown: no new connections on any listener."""
        if self._reaper is not None and self._reaper.running:
            self._reaper.stop()
        stops = [a.stop_listening() for a in self.acceptors.values()]
        return DeferredList([d for d in stops if d is not None])

    def stop_processing_requests(self, planes: Iterable[str] | None = None) -> None:
        """Second step: the named planes (default: every plane) read no other request (those already
        read are still answered)."""
        names = None if planes is None else set(planes)
        for plane in self.planes:
            if names is None or plane.name in names:
                plane.open = False

    def drained(self) -> Deferred:
        """Fires once every request already read has been answered."""
        return gatherResults([plane.channel.when_idle() for plane in self.planes])

    def inflight_count(self) -> int:
        return sum(plane.channel.outstanding for plane in self.planes)

    def close_all(self) -> None:
        """Last step of shutdown: close every connection (and leave a summary in the log)."""
        self.log_summary()
        for acceptor in self.acceptors.values():
            for processor in list(acceptor.processors):
                processor.close(CloseReason.SHUTDOWN, None, abort=False)

    def log_summary(self) -> None:
        """One line per plane and one for the connections: what operators check after a run."""
        for plane in self.planes:
            channel = plane.channel
            self.log.info("{prefix}RequestChannel ({plane} plane): {total} request(s) queued in all, "
                          "peak queue size {peak} of {cap}, {queued} still queued",
                          prefix=plane.metric_prefix, plane=plane.name, total=channel.total_requests,
                          peak=channel.peak_queue_size, cap=channel.max_queued_requests, queued=channel.queue_size)
        quotas = self.quotas
        self.log.info("Connections at shutdown: {total} open (per listener {per_listener}); accepted {accepted}; "
                      "rejected {rejected}; closed {closed}",
                      total=quotas.total, per_listener=dict(quotas.per_listener), accepted=dict(quotas.accepted),
                      rejected={f"{listener}/{quota}": n for (listener, quota), n in quotas.rejected.items()},
                      closed={f"{listener}/{reason}": n for (listener, reason), n in quotas.closed.items()})

    def startService(self) -> Deferred:
        """Bind every listener; only the plane the controller reaches this broker through accepts yet.

        That is the control plane, or -- without one -- the data plane, which
        then carries the controller's requests as in Kafka.
        """
        super().startService()
        d = self.bind()
        d.addCallback(lambda _: self.enable_request_processing(
            "control" if self.control_plane is not None else "data"))
        return d

    def stopService(self) -> Deferred:
        """Stop accepting (if not yet) and close every connection."""
        super().stopService()
        d = self.stop_accepting()
        d.addCallback(lambda _: self.close_all())
        return d

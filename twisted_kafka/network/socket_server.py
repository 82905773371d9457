"""SocketServer: the broker's listeners, split into a data plane and a control plane.

Kafka's SocketServer owns the acceptors and processors of every listener and
the RequestChannel of each plane.  The control plane exists only when
``control.plane.listener.name`` is set; it then has its own acceptor, its own
channel of 20 requests and (in the server layer) its own handler pool of one,
so a flooded data plane cannot delay the controller.  Without it, controller
requests travel over the data plane, as in Kafka.

Both planes share one ``ConnectionQuotas`` and one ``ConnectionRegistry``
(for idle reaping and LRU eviction), so a connection is counted once.

``num.network.threads`` does not create threads here: the reactor's single
thread does all socket I/O (see docs/architecture.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from twisted.application.service import Service
from twisted.internet.defer import Deferred, DeferredList, inlineCallbacks
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from twisted_kafka.metrics import MetricName, MetricsRegistry

from .acceptor import Acceptor
from .connection_quotas import ConnectionQuotas
from .connections import ConnectionRegistry
from .listeners import ListenerConfig
from .processor import CloseReason, ControlPlaneProcessor, DataPlaneProcessor
from .request_channel import RequestChannel
from .request_metrics import RequestMetrics

CONTROL_PLANE_QUEUE_SIZE = 20  # fixed in Kafka


@dataclass
class Plane:
    """One plane's pieces: its channel, its connection class, and the APIs it serves."""

    name: str                     # "data" or "control"
    metric_prefix: str            # "" or "ControlPlane", as in Kafka's metric names
    channel: RequestChannel
    processor_class: type
    served_spec: Callable[[int], object]
    request_metrics: RequestMetrics
    open: bool = True             # False once shutdown starts: no new requests are read


class SocketServer(Service):
    log = Logger(namespace="twisted_kafka.network.SocketServer")

    def __init__(self, *, config, listeners: ListenerConfig, reactor, metrics: MetricsRegistry,
                 served_spec: Callable[[int], object]):
        self.config = config
        self.listener_config = listeners
        self.reactor = reactor
        self.metrics = metrics
        self.quotas = ConnectionQuotas(config, listeners, reactor)
        self.registry = ConnectionRegistry()
        request_metrics = RequestMetrics(metrics)
        self.data_plane = Plane(
            "data", "",
            RequestChannel(plane="data", max_queued_requests=config["queued.max.requests"],
                           max_queued_bytes=config["queued.max.request.bytes"]),
            DataPlaneProcessor, served_spec, request_metrics)
        self.control_plane: Plane | None = None
        if listeners.control_plane_listener is not None:
            self.control_plane = Plane(
                "control", "ControlPlane",
                RequestChannel(plane="control", max_queued_requests=CONTROL_PLANE_QUEUE_SIZE),
                ControlPlaneProcessor, served_spec, request_metrics)
        self.acceptors: dict[str, Acceptor] = {}
        for ep in listeners.listeners:
            plane = self.control_plane if ep.listener_name == listeners.control_plane_listener_name else self.data_plane
            self.acceptors[ep.listener_name] = Acceptor(
                endpoint=ep, plane=plane, quotas=self.quotas, registry=self.registry, reactor=reactor,
                config=config, processor_class=plane.processor_class,
                protected=listeners.is_protected(ep.listener_name))
        self.max_idle_seconds = config["connections.max.idle.ms"] / 1000.0
        self._reaper: LoopingCall | None = None
        self._register_gauges()

    @property
    def planes(self) -> list[Plane]:
        return [p for p in (self.control_plane, self.data_plane) if p is not None]

    def _register_gauges(self) -> None:
        for plane in self.planes:
            channel = plane.channel
            self.metrics.gauge(MetricName("kafka.network", "RequestChannel", f"{plane.metric_prefix}RequestQueueSize"),
                               lambda channel=channel: channel.queue_size)
        self.metrics.gauge(MetricName("kafka.network", "SocketServer", "ConnectionCount"),
                           lambda: self.quotas.total)
        for name in self.acceptors:
            self.metrics.gauge(MetricName("kafka.server", "socket-server-metrics", "connection-count",
                                          (("listener", name),)),
                               lambda name=name: self.quotas.per_listener[name])

    # -- lifecycle --------------------------------------------------------------------

    @inlineCallbacks
    def start_listening(self, plane: str | None = None):
        """Bind the listeners of ``plane`` ("control" or "data"; None: both, control first).

        The broker binds its control plane before the controller starts (the
        controller reaches its own broker through it) and its data plane only
        once partitions are online, as Kafka enables request processing only
        at the end of startup.  Fails if a port can't be bound.
        """
        ordered = sorted(self.acceptors.values(), key=lambda a: a.plane.name != "control")
        for acceptor in ordered:
            if (plane is None or acceptor.plane.name == plane) and acceptor.port is None:
                yield acceptor.listen()
        if self._reaper is None:
            interval = min(max(self.max_idle_seconds / 10.0, 0.01), 1.0)
            self._reaper = LoopingCall(self.close_idle_connections)
            self._reaper.clock = self.reactor
            self._reaper.start(interval, now=False)

    def bound_port(self, listener_name: str) -> int:
        return self.acceptors[listener_name.upper()].bound_port

    def close_idle_connections(self) -> int:
        """Close connections idle longer than ``connections.max.idle.ms``; returns how many."""
        cutoff = self.reactor.seconds() - self.max_idle_seconds
        idle = self.registry.idle_before(cutoff)
        for processor in idle:
            processor.close(CloseReason.IDLE, None)
        return len(idle)

    def stop_accepting(self) -> Deferred:
        """First step of shutdown: no new connections on any listener."""
        if self._reaper is not None and self._reaper.running:
            self._reaper.stop()
        stops = [a.stop_listening() for a in self.acceptors.values()]
        return DeferredList([d for d in stops if d is not None])

    def inflight_count(self) -> int:
        return sum(1 for p in self.registry if p.busy)

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

    def stopService(self):
        super().stopService()
        d = self.stop_accepting()
        d.addCallback(lambda _: self.close_all())
        return d

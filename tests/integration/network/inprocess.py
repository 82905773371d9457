"""The broker's network stack in the test process, on the real reactor (trial tests).

Some properties can only be checked from inside: that every count in
ConnectionQuotas, the connection registry, the acceptors and the request
channels is back to zero after thousands of connections closed every possible
way, or that the data plane's queue really is held at its cap.  There is no
admin endpoint to read them from yet, so those tests run the real network layer —
SocketServer, Acceptors, Processors, RequestChannels, handler pools and
KafkaApis with the real ApiVersions handler — in-process on real loopback
sockets, and drive it with clients in threads or other processes.

Extra handlers can be registered, e.g. ``GatedHandler`` (a Metadata handler
whose requests wait on a gate *without* freeing their handler slot, as a
handler doing slow local work does) to hold requests in the data plane.
"""

from __future__ import annotations

from time import monotonic

from twisted.internet import reactor as default_reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import deferLater

from twisted_kafka.config import KafkaConfig
from twisted_kafka.metrics import MetricsRegistry
from twisted_kafka.network.listeners import parse_listeners
from twisted_kafka.network.request_metrics import RequestMetrics
from twisted_kafka.network.socket_server import SocketServer
from twisted_kafka.protocol.messages import MetadataResponse
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.server.api_handler import ApiHandler
from twisted_kafka.server.authorization import ALLOW_ALL
from twisted_kafka.server.handlers.api_versions import ApiVersionsHandler
from twisted_kafka.server.kafka_apis import KafkaApis
from twisted_kafka.server.request_handler import DATA_PLANE_TURN_BUDGET, KafkaRequestHandlerPool

BASE = {
    "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "control.plane.listener.name": "CONTROLLER",
    "log.dirs": "/nonexistent/twisted-kafka-inprocess",
}


class GatedHandler(ApiHandler):
    """Metadata (3) answered with an empty cluster, once ``gate`` allows it.

    ``gate`` is None (answer at once), a Deferred (all requests wait for it),
    or a number of seconds each request takes (a slow handler that keeps its
    slot, so num.io.threads bounds how many run at once).
    """

    api_key = ApiKey.METADATA

    def __init__(self, reactor=default_reactor):
        self.reactor = reactor
        self.gate: Deferred | float | None = None
        self.handled = 0

    async def handle(self, request):
        gate = self.gate
        if isinstance(gate, Deferred):
            waiter = Deferred()
            gate.addBoth(lambda result: (waiter.callback(None), result)[1])
            await waiter
        elif gate:
            await deferLater(self.reactor, gate, lambda: None)
        self.handled += 1
        return self.error_response(request, 0)

    def error_response(self, request, error, message=None):
        version = request.api_version
        return MetadataResponse(version=version, throttle_time_ms=0, brokers=[], cluster_id=None,
                                controller_id=-1, topics=[])

    def response_version(self, request):
        return request.api_version


class InProcessBroker:
    def __init__(self, overrides: dict[str, str] | None = None, *, handlers=(), reactor=default_reactor):
        self.reactor = reactor
        self.config = KafkaConfig.from_props({**BASE, **(overrides or {})})
        self.listeners = parse_listeners(self.config)
        self.metrics = MetricsRegistry()
        request_metrics = RequestMetrics(self.metrics)
        versions = ApiVersionsHandler(lambda context: self.socket_server.plane(context.plane).served_keys())
        self.apis = KafkaApis([versions, *handlers], authorization=ALLOW_ALL, request_metrics=request_metrics)
        self.socket_server = SocketServer(config=self.config, listeners=self.listeners, reactor=reactor,
                                          metrics=self.metrics, apis=self.apis, request_metrics=request_metrics)
        self.pools = [KafkaRequestHandlerPool(channel=self.socket_server.data_plane.channel, apis=self.apis,
                                              num_handlers=self.config["num.io.threads"], reactor=reactor,
                                              metrics=self.metrics, turn_budget=DATA_PLANE_TURN_BUDGET,
                                              yield_to=self.socket_server.control_plane_waiting)]
        if self.socket_server.control_plane is not None:
            self.pools.append(KafkaRequestHandlerPool(channel=self.socket_server.control_plane.channel,
                                                      apis=self.apis, num_handlers=1, reactor=reactor,
                                                      metrics=self.metrics, metric_prefix="ControlPlane"))

    @property
    def quotas(self):
        return self.socket_server.quotas

    @property
    def data_channel(self):
        return self.socket_server.data_plane.channel

    def port(self, listener: str = "PLAINTEXT") -> int:
        return self.socket_server.bound_port(listener)

    async def start(self) -> InProcessBroker:
        for pool in self.pools:
            pool.startService()
        await self.socket_server.bind()
        self.socket_server.enable_request_processing()
        return self

    async def wait_until(self, predicate, timeout: float = 10.0, what: str = "condition") -> None:
        deadline = monotonic() + timeout
        while not predicate():
            if monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}; counts: {self.counts()}")
            await deferLater(self.reactor, 0.01, lambda: None)

    def open_processors(self) -> int:
        return sum(len(a.processors) for a in self.socket_server.acceptors.values())

    def counts(self) -> dict:
        """Every piece of per-connection state the network layer keeps."""
        server = self.socket_server
        return {
            "quotas.total": self.quotas.total,
            "quotas.per_ip": {ip: n for ip, n in self.quotas.per_ip.items() if n},
            "quotas.per_listener": {name: n for name, n in self.quotas.per_listener.items() if n},
            "registry": len(server.registry),
            "processors": self.open_processors(),
            "parked": sum(len(a._parked) for a in server.acceptors.values()),
            "paused_listeners": [name for name, a in server.acceptors.items() if a.paused_for is not None],
            **{f"{plane.name}.{key}": value for plane in server.planes for key, value in (
                ("queue", plane.channel.queue_size), ("held_bytes", plane.channel.held_bytes),
                ("waiting_processors", plane.channel.waiting_processors))},
            "inflight": server.inflight_count(),
        }

    def all_zero(self) -> bool:
        counts = self.counts()
        return all(not value for value in counts.values())

    async def stop(self) -> None:
        """The shutdown sequence of KafkaServer: stop accepting, drain, stop handlers, close all."""
        server = self.socket_server
        await server.stop_accepting()
        server.stop_processing_requests()
        await server.drained()
        for pool in self.pools:
            if pool.running:
                await pool.stopService()
        server.close_all()
        await self.wait_until(lambda: self.open_processors() == 0, what="connections to close")

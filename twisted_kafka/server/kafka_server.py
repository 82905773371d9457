"""KafkaServer: one broker, as a Twisted ``MultiService``.

Startup follows Kafka's order: identity (``meta.properties``), then the
handler pools, then the listeners (control plane first), so that the first
byte a client sends finds a broker ready to answer.  Shutdown (SIGTERM under
twistd) reverses it deliberately, step by step, because MultiService would
stop children concurrently:

1. stop accepting connections on every listener;
2. stop reading new requests, and wait (bounded) until every request already
   read has been answered;
3. stop the handler pools and close every connection;
4. stop the remaining services (log flush and checkpoints).
"""

from __future__ import annotations

import os
from time import monotonic

from twisted.application.service import MultiService
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import deferLater
from twisted.logger import Logger

from twisted_kafka.metrics import MetricsRegistry
from twisted_kafka.network.listeners import parse_listeners
from twisted_kafka.network.socket_server import SocketServer

from .broker_metadata import BrokerMetadata, load_or_create
from .handlers import build_handlers
from .kafka_apis import KafkaApis
from .metadata_cache import MetadataCache
from .request_handler import KafkaRequestHandlerPool

DRAIN_TIMEOUT_SECONDS = 30.0


class KafkaServer(MultiService):
    log = Logger(namespace="twisted_kafka.server.KafkaServer")

    def __init__(self, config, *, reactor=None):
        super().__init__()
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.config = config
        self.reactor = reactor
        self.listeners = parse_listeners(config)  # ConfigError now rather than at bind time
        self.log_dirs: list[str] = config.log_dirs
        self.metrics = MetricsRegistry()
        self.broker: BrokerMetadata | None = None
        self.metadata_cache = MetadataCache(listeners=self.listeners)
        self.apis = KafkaApis([])
        self.socket_server = SocketServer(config=config, listeners=self.listeners, reactor=reactor,
                                          metrics=self.metrics, served_spec=self.apis.served_spec)
        self.apis.request_metrics = self.socket_server.data_plane.request_metrics
        for handler in build_handlers(self):
            self.apis.register(handler)
        self.data_handler_pool = KafkaRequestHandlerPool(
            channel=self.socket_server.data_plane.channel, apis=self.apis,
            num_handlers=config["num.io.threads"], reactor=reactor, metrics=self.metrics)
        self.control_handler_pool = None
        if self.socket_server.control_plane is not None:
            self.control_handler_pool = KafkaRequestHandlerPool(
                channel=self.socket_server.control_plane.channel, apis=self.apis, num_handlers=1,
                reactor=reactor, metrics=self.metrics, metric_prefix="ControlPlane")
        self.started: Deferred = Deferred()
        self._startup_failed = False

    # -- startup ------------------------------------------------------------------------

    def startService(self) -> None:
        super().startService()
        d = ensureDeferred(self._startup())
        d.addCallbacks(self._started, self._fatal)

    async def _startup(self) -> None:
        began = monotonic()
        self.broker = load_or_create(self.log_dirs, self.config["broker.id"],
                                     reserved_broker_max_id=self.config["reserved.broker.max.id"])
        self.metadata_cache.set_local_broker(self.broker)
        for pool in (self.control_handler_pool, self.data_handler_pool):
            if pool is not None:
                pool.startService()
        await self.socket_server.start_listening()
        self.log.info("Broker {broker_id} of cluster {cluster_id} started in {elapsed:.3f}s; listeners: {listeners}",
                      broker_id=self.broker.broker_id, cluster_id=self.broker.cluster_id,
                      elapsed=monotonic() - began,
                      listeners=", ".join(f"{name}={a.bound_address}({a.plane.name})"
                                          for name, a in self.socket_server.acceptors.items()))

    def _started(self, _):
        self.started.callback(self)

    def _fatal(self, failure) -> None:
        """Startup failed: say why, and stop the process with a non-zero status."""
        self._startup_failed = True
        self.log.critical("Broker startup failed: {reason}", reason=failure.getErrorMessage(), log_failure=failure)
        self.started.errback(failure)
        if getattr(self.reactor, "running", False):
            self.reactor.addSystemEventTrigger("after", "shutdown", os._exit, 1)
            self.reactor.stop()

    # -- shutdown -----------------------------------------------------------------------

    def stopService(self):
        return ensureDeferred(self._shutdown())

    async def _shutdown(self) -> None:
        self.log.info("Broker shutting down")
        await self.socket_server.stop_accepting()
        for plane in self.socket_server.planes:
            plane.open = False
        deadline = monotonic() + DRAIN_TIMEOUT_SECONDS
        while self.socket_server.inflight_count() and monotonic() < deadline:
            await deferLater(self.reactor, 0.01, lambda: None)
        if self.socket_server.inflight_count():
            self.log.warn("{count} request(s) still in flight after {timeout}s; closing anyway",
                          count=self.socket_server.inflight_count(), timeout=DRAIN_TIMEOUT_SECONDS)
        for pool in (self.data_handler_pool, self.control_handler_pool):
            if pool is not None and pool.running:
                await pool.stopService()
        self.socket_server.close_all()
        await super().stopService()
        self.log.info("Broker shut down")

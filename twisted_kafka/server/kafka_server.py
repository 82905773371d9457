"""KafkaServer: one broker, as a Twisted ``MultiService``.

Startup follows Kafka's order, so the first byte a client sends finds a
broker ready to answer:

1. identity (``meta.properties``) and the controller's stored state;
2. the logs (loaded and, after a crash, recovered in the I/O thread pool);
3. the handler pools and the control-plane listener;
4. the controller, which tells this broker (over that listener, as it would
   tell any broker) which partitions it leads;
5. the data-plane listeners.

Shutdown (SIGTERM under twistd) reverses it deliberately, step by step,
because MultiService would stop children concurrently:

1. controlled shutdown (the broker asks the controller to move leadership);
2. stop accepting connections on every listener;
3. stop reading new requests, answer waiting fetches, and wait (bounded)
   until every request already read has been answered;
4. stop the handler pools, the controller and close every connection;
5. stop the logs (flush, checkpoints, clean-shutdown marker) and the pool.
"""

from __future__ import annotations

import os
import time
from time import monotonic

from twisted.application.service import MultiService
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import deferLater
from twisted.logger import Logger
from twisted.python.threadpool import ThreadPool

from twisted_kafka.config import ConfigError
from twisted_kafka.controller.channel_manager import ControllerChannelManager
from twisted_kafka.controller.kafka_controller import KafkaController, LiveBroker
from twisted_kafka.controller.metadata_store import MetadataStore
from twisted_kafka.log import LogManager
from twisted_kafka.metrics import MetricsRegistry
from twisted_kafka.network.listeners import parse_listeners
from twisted_kafka.network.socket_server import SocketServer
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.registry import ApiKey

from .broker_metadata import BrokerMetadata, load_or_create
from .handlers import build_handlers
from .handlers.broker_configs import load_dynamic_broker_configs
from .kafka_apis import KafkaApis
from .metadata_cache import MetadataCache
from .replica_manager import ReplicaManager
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
        if config["zookeeper.connect"]:
            raise ConfigError("zookeeper.connect", "ZooKeeper-coordinated clusters are not available yet; "
                                                   "leave it unset to run a single node")
        self.log_dirs: list[str] = [os.path.abspath(d) for d in config.log_dirs]
        self.metrics = MetricsRegistry()
        self.broker: BrokerMetadata | None = None
        # Broker epochs must grow across restarts (Kafka takes ZooKeeper's session id).
        self.broker_epoch = time.time_ns() // 1_000_000
        self.metadata_cache = MetadataCache(listeners=self.listeners)
        self.io_threadpool = ThreadPool(minthreads=1, maxthreads=max(4, config["num.io.threads"]),
                                        name="twisted-kafka-io")
        self.store = MetadataStore(self.log_dirs[0], reactor=reactor, threadpool=self.io_threadpool)
        self.log_manager = LogManager(config, reactor=reactor, threadpool=self.io_threadpool,
                                      topic_configs=self._stored_topic_overrides, broker_epoch=self.broker_epoch)
        self.replica_manager: ReplicaManager | None = None
        self.controller: KafkaController | None = None
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

    def _stored_topic_overrides(self, topic: str) -> dict:
        record = self.store.topics.get(topic)
        return dict(record.configs) if record is not None else {}

    async def _startup(self) -> None:
        began = monotonic()
        self.broker = load_or_create(self.log_dirs, self.config["broker.id"],
                                     reserved_broker_max_id=self.config["reserved.broker.max.id"])
        self.metadata_cache.set_local_broker(self.broker)
        self.store.load()
        load_dynamic_broker_configs(self)   # stored AlterConfigs of BROKER resources, before the logs load
        self.io_threadpool.start()
        await self.log_manager.startService()
        self.replica_manager = ReplicaManager(broker_id=self.broker.broker_id, log_manager=self.log_manager,
                                              reactor=self.reactor, topic_overrides=self._stored_topic_overrides)
        self.replica_manager.broker_epoch = self.broker_epoch
        for pool in (self.control_handler_pool, self.data_handler_pool):
            if pool is not None:
                pool.startService()
        control_plane = self.socket_server.control_plane is not None
        await self.socket_server.start_listening("control" if control_plane else None)
        await self._start_controller()
        await self.socket_server.start_listening()
        self.log.info("Broker {broker_id} of cluster {cluster_id} started in {elapsed:.3f}s; listeners: {listeners}",
                      broker_id=self.broker.broker_id, cluster_id=self.broker.cluster_id,
                      elapsed=monotonic() - began,
                      listeners=", ".join(f"{name}={a.bound_address}({a.plane.name})"
                                          for name, a in self.socket_server.acceptors.items()))

    async def _start_controller(self) -> None:
        """Single node: this broker is the controller (SPEC S9), reached over its control plane."""
        listeners = self.listeners
        self.controller = KafkaController(
            config=self.config, broker_id=self.broker.broker_id, store=self.store,
            channels=ControllerChannelManager(reactor=self.reactor, controller_id=self.broker.broker_id,
                                              timeout_ms=self.config["controller.socket.timeout.ms"]))
        self.controller.topic_config_listeners.append(self.replica_manager.update_topic_config)
        self.local_registration = LiveBroker(
            broker_id=self.broker.broker_id, epoch=self.broker_epoch, endpoints=listeners.advertised,
            control_listener=listeners.control_plane_listener_name or listeners.inter_broker_listener_name,
            rack=self.config["broker.rack"])
        await self.controller.startup([self.local_registration])

    def _started(self, _):
        self.started.callback(self)

    def _fatal(self, failure) -> None:
        """Startup failed: say why, and stop the process with a non-zero status.

        The failure may come before the reactor runs (twistd starts services
        first): the stop is then scheduled for when it does.
        """
        self._startup_failed = True
        self.log.critical("Broker startup failed: {reason}", reason=failure.getErrorMessage(), log_failure=failure)
        self.started.errback(failure)
        self.started.addErrback(lambda _: None)
        if hasattr(self.reactor, "addSystemEventTrigger"):
            self.reactor.addSystemEventTrigger("after", "shutdown", os._exit, 1)
            if getattr(self.reactor, "running", False):
                self.reactor.stop()
            else:
                self.reactor.callWhenRunning(self.reactor.stop)

    # -- shutdown -----------------------------------------------------------------------

    def stopService(self):
        return ensureDeferred(self._shutdown())

    async def _controlled_shutdown(self) -> None:
        """Ask the controller, over its control plane, to move leadership away (Kafka's controlled shutdown)."""
        if not (self.config["controlled.shutdown.enable"] and self.controller is not None and self.controller.active):
            return
        channel = self.controller.channels.channels.get(self.broker.broker_id)
        if channel is None:
            return
        request = m.ControlledShutdownRequest(broker_id=self.broker.broker_id, broker_epoch=self.broker_epoch)
        for attempt in range(self.config["controlled.shutdown.max.retries"]):
            try:
                response = await channel.send(ApiKey.CONTROLLED_SHUTDOWN, 3, request)
            except Exception as exc:
                self.log.warn("Controlled shutdown request failed: {error}", error=exc)
                break
            if not response.error_code and not response.remaining_partitions:
                self.log.info("Controlled shutdown succeeded")
                return
            self.log.warn("Controlled shutdown incomplete ({count} partition(s) remain led here); retrying",
                          count=len(response.remaining_partitions))
            await deferLater(self.reactor, self.config["controlled.shutdown.retry.backoff.ms"] / 1000.0,
                             lambda: None)

    async def _shutdown(self) -> None:
        self.log.info("Broker shutting down")
        if self.started.called and not self._startup_failed:
            await self._controlled_shutdown()
        await self.socket_server.stop_accepting()
        for plane in self.socket_server.planes:
            plane.open = False
        if self.replica_manager is not None:
            self.replica_manager.purgatory.complete_all()
        deadline = monotonic() + DRAIN_TIMEOUT_SECONDS
        while self.socket_server.inflight_count() and monotonic() < deadline:
            await deferLater(self.reactor, 0.01, lambda: None)
        if self.socket_server.inflight_count():
            self.log.warn("{count} request(s) still in flight after {timeout}s; closing anyway",
                          count=self.socket_server.inflight_count(), timeout=DRAIN_TIMEOUT_SECONDS)
        for pool in (self.data_handler_pool, self.control_handler_pool):
            if pool is not None and pool.running:
                await pool.stopService()
        if self.controller is not None:
            self.controller.shutdown()
        self.socket_server.close_all()
        await super().stopService()
        if self.log_manager.running:
            await self.log_manager.stopService()
        if self.io_threadpool.started:
            self.io_threadpool.stop()
        self.log.info("Broker shut down")

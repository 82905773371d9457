"""KafkaServer: one broker, as a Twisted ``MultiService`` whose children start in order.

Kafka's ``KafkaServer.startup`` brings a broker up in a fixed order so the
first byte a client sends finds it ready to answer; here that order is the
order of the child services, each started only once the previous one has
finished starting (its ``startService`` Deferred fired):

1. the I/O thread pool;
2. the ``LogManager`` (logs loaded and, after a crash, recovered);
3. the ``GroupCoordinatorService``, ready before the first LeaderAndIsr makes
   this broker the leader of ``__consumer_offsets`` partitions (whose groups it
   then loads);
4. the handler pools of both planes;
5. the ``SocketServer``: every listener bound (so ports -- even port 0 -- are
   known before they are advertised), the control plane accepting; then the
   ``InterBrokerSender``, for the coordinators' requests to other brokers
   (connections are made as requests come);
6. the ``ControllerService`` (a single node is its own controller): it tells
   this broker, over its control plane, its topic and broker configs and
   which partitions it hosts;
7. the ``ConnectionEventLog`` (unless ``connection.events.enable`` is false):
   it writes the connection events -- buffered since the server was built,
   the controller's own connection included -- to ``__connection_events``,
   creating the topic through the controller on first use;
8. the ``RequestDrain``: nothing to do at start;
9. the ``ReplicaManager`` -- serving the controller's requests since it was
   built -- with, in a cluster, its ``IsrManager`` and
   ``ReplicaFetcherManager`` as its own children: starting it starts the ISR
   checks (fetchers start as partitions are followed);
10. the ``BrokerLifecycleManager``: the data plane starts accepting clients.

Children stop in the reverse order, each after the one before has finished
stopping: controlled shutdown, no more connections accepted nor requests
read on the data plane (10), fetchers and ISR checks stopped and every
waiting fetch and acks=all produce answered (9), the coordinators' waiting
members answered and every request read answered, within the drain timeout
(8) -- ``broker_lifecycle`` --, the connection events still buffered
written (7), the controller (6), the inter-broker sender's connections and
every client connection closed (5), the handlers
(4), the group coordinator's timers (3), the logs flushed with their
checkpoints and clean-shutdown marker (2), the pool (1).  The whole stop is
bounded (``StopDeadline``): past the controlled shutdown's own bound, the
drain timeout and ``STOP_GRACE_SECONDS`` -- the last two only, from the
moment the drain begins -- the process exits with status 1, naming the
child still stopping.

Each part is given what it needs when it is made.  Where two parts need
each other the seam is one named reader, used when a request comes rather
than at construction: the ApiVersions handler reads what the socket server's
planes serve (``_advertised_keys``), the controller's registration of this
broker reads the bound ports (``_registration``), and the dynamic config
stores re-encoded passwords through the controller client built after it
(``DynamicBrokerConfig.store_reencoded``).  The broker epoch is one
``BrokerEpoch`` holder, read by those who need it and updated by the
ZooKeeper registration.

The broker's identity (``meta.properties``) is read when the server is built,
so every part is built with the broker id it runs as -- after every log dir
is locked (``.lock``: one broker per directory) -- and the open-file limit is
raised and shared out then too (``descriptor_budget``): the log manager
keeps at most its share of segment files open, and the controller learns the
broker's partition budget when the broker registers.

In a ZooKeeper cluster (``zookeeper.connect``) building the server also
opens the ZooKeeper session and settles the identity there (persistent
paths, ``/cluster/id``, a generated broker id), before the reactor runs, as
Kafka's startup does.  The children are then: the pool, ``ZooKeeperSession``
(closes the session once everything else has stopped), the LogManager, the
group coordinator, the handler pools, the SocketServer, the inter-broker
sender, ``BrokerRegistration``
(the ephemeral ``/brokers/ids/<id>`` with the bound ports; its czxid is the
broker epoch), ``ZkControllerService`` (competes for ``/controller``; returns
once a controller has told this broker its metadata), the connection event
log, the request drain, the replica manager and the lifecycle manager.
"""

from __future__ import annotations

import os
from time import monotonic

from twisted.application.service import MultiService, Service
from twisted.internet.defer import Deferred, ensureDeferred, maybeDeferred
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger, LogLevel
from twisted.python.threadpool import ThreadPool

from twisted_kafka.admin import AdminRestService, AdminRestSettings
from twisted_kafka.admin.web import AdminBackend
from twisted_kafka.config import ConfigError, StartupError
from twisted_kafka.controller.client import ControllerClient
from twisted_kafka.controller.cluster_client import ClusterControllerClient
from twisted_kafka.controller.controller_service import ControllerService
from twisted_kafka.controller.interface import LiveBroker
from twisted_kafka.controller.zk_controller_service import ZkControllerService
from twisted_kafka.coordinator.group.service import GroupCoordinatorService
from twisted_kafka.coordinator.transaction import FileProducerIdBlockStore, ProducerIdBlockStore, ProducerIdManager
from twisted_kafka.coordinator.transaction.service import TransactionCoordinatorService
from twisted_kafka.coordinator.transaction.zk_producer_id_store import ZkProducerIdBlockStore
from twisted_kafka.log import LogManager
from twisted_kafka.log.cleaner import register_cleaner_metrics
from twisted_kafka.metrics import MetricsRegistry
from twisted_kafka.network.listeners import parse_listeners
from twisted_kafka.network.request import ANONYMOUS, RequestContext
from twisted_kafka.network.request_metrics import RequestMetrics
from twisted_kafka.network.socket_server import SocketServer
from twisted_kafka.network.ssl_principal import NoMatchingRule
from twisted_kafka.sasl.credential_store import STORE_FILE as SCRAM_STORE_FILE
from twisted_kafka.sasl.credential_store import FileScramCredentialStore, ScramCredentialStore
from twisted_kafka.sasl.listener_config import SASL_PROTOCOLS, sasl_client_config, sasl_server_configs
from twisted_kafka.security.authorizer import AclAuthorizer
from twisted_kafka.zk import data as zk_data
from twisted_kafka.zk import registration as zk_registration
from twisted_kafka.zk.admin import ZkAdmin
from twisted_kafka.zk.client import KazooException, ZkClient, ZkConnectError
from twisted_kafka.zk.data import RegisteredEndpoint
from twisted_kafka.zk.registration import BrokerRegistration
from twisted_kafka.zk.scram_store import ZkScramCredentialStore
from twisted_kafka.zk.session import ZooKeeperSession

from .admin_manager import AdminManager
from .api_table import broker_handlers
from .authorization import Authorization
from .broker_epoch import BrokerEpoch
from .broker_lifecycle import DRAIN_TIMEOUT_SECONDS, STOP_GRACE_SECONDS, BrokerLifecycleManager, RequestDrain
from .broker_metadata import BrokerMetadata, LogDirLocks, generate_cluster_id, load_or_create
from .broker_metrics import register_broker_metrics
from .cluster_view import LocalClusterView
from .config_repository import ConfigRepository
from .connection_event_log import ConnectionEventLog
from .controller_requests import ControllerRequestGuard, new_broker_epoch
from .descriptor_budget import DescriptorBudget, descriptor_budget, raise_open_file_limit
from .dynamic_config import ConnectionLimits, DynamicBrokerConfig, ListenerTls, LogDefaults, ProducerIdExpiration
from .handlers.fetch import FetchHandler
from .inter_broker_sender import InterBrokerSender
from .kafka_apis import KafkaApis
from .metadata_cache import MetadataCache
from .replica_manager import ReplicaManager, Replication
from .request_handler import DATA_PLANE_TURN_BUDGET, KafkaRequestHandlerPool
from .startup import debug_enabled, failure_line
from .stop_deadline import StopDeadline


class ThreadPoolService(Service):
    """A Twisted ``ThreadPool`` as a service: the broker's blocking disk work runs here."""

    def __init__(self, pool: ThreadPool):
        self.pool = pool

    def startService(self) -> None:
        super().startService()
        self.pool.start()

    def stopService(self) -> None:
        super().stopService()
        if self.pool.started:
            self.pool.stop()


class KafkaServer(MultiService):
    log = Logger(namespace="twisted_kafka.server.KafkaServer")

    def __init__(self, config, *, reactor=None):
        super().__init__()
        if reactor is None:
            from twisted.internet import reactor as default_reactor
            reactor = default_reactor
        self.reactor = reactor
        self.listeners = parse_listeners(config)  # ConfigError now rather than at bind time
        self.log_dirs: list[str] = [os.path.abspath(d) for d in config.log_dirs]
        #: The ZooKeeper session of a cluster member (``zookeeper.connect``), None for a single node.
        self.zk: ZkClient | None = None
        # Before anything in them is read or written: a second broker on these dirs stops here.
        self.log_dir_locks = LogDirLocks(self.log_dirs)
        self.started: Deferred = Deferred()
        self._startup_failed = False
        self._children_started: set[int] = set()   # id() of each child whose startService finished
        self._stopping: Service | None = None       # the child whose stopService runs
        try:
            self._build(config, reactor)
        except BaseException:
            if self.zk is not None:
                self.zk.close_now()
            self.log_dir_locks.release()
            raise

    def _build(self, config, reactor) -> None:
        """Every part, each given what it needs when it is made; then the child services, in order."""
        cluster = bool(config["zookeeper.connect"])
        self.broker, self.broker_epoch = self._identity(config, reactor, cluster)
        broker_id = self.broker.broker_id
        self.descriptors = self._descriptor_budget(config)
        self.metrics = MetricsRegistry()
        pool = ThreadPool(minthreads=1, maxthreads=max(4, config["num.io.threads"]), name="twisted-kafka-io")
        self.io_threads = ThreadPoolService(pool)
        # Encrypting a password derives a key (PBKDF2): in the pool, not on the reactor.
        self.dynamic_config = DynamicBrokerConfig(config, broker_id, run_blocking=lambda function: deferToThreadPool(
            reactor, pool, function))
        self.config_repository = ConfigRepository()
        self.metadata_cache = MetadataCache(listeners=self.listeners, local_broker_id=broker_id,
                                            cluster_id=self.broker.cluster_id)
        self.log_manager = LogManager(config, reactor=reactor, threadpool=pool,
                                      topic_configs=self.config_repository.topic_overrides,
                                      broker_epoch=lambda: self.broker_epoch.current,
                                      max_open_files=self.descriptors.log_files)
        self.scram_store = self._scram_store(config, reactor, pool)
        self.authorization = Authorization(AclAuthorizer.from_config(config))
        self.registration: BrokerRegistration | None = None
        controller_service, controller = (self._cluster_controller(config, reactor) if cluster
                                          else self._local_controller(config, reactor, pool))
        self.controller_client = controller
        # Passwords stored with password.encoder.old.secret are stored again, encoded with the new secret.
        self.dynamic_config.store_reencoded = controller.alter_broker_configs
        # Replication (a cluster): followers fetch from leaders; leaders change their ISR through the controller.
        self.replica_manager = ReplicaManager(
            broker_id=broker_id, log_manager=self.log_manager, reactor=reactor,
            topic_overrides=self.config_repository.topic_overrides, metrics=self.metrics,
            replication=Replication(config, self.metadata_cache, controller, self.broker_epoch) if cluster else None)
        self.controller_guard = ControllerRequestGuard(
            broker_id=broker_id, cluster_id=self.broker.cluster_id, broker_epoch=self.broker_epoch,
            known_controller=lambda: controller.controller_id, refresh=self._refresh_controller if cluster else None,
            authorization=self.authorization, own_principal=self._inter_broker_principal)
        self.admin_manager = AdminManager(controller=controller, metadata_cache=self.metadata_cache,
                                          config_repository=self.config_repository,
                                          dynamic_config=self.dynamic_config, reactor=reactor)
        self.producer_ids = ProducerIdManager(broker_id, self._producer_id_blocks(reactor, pool))
        self.group_coordinator = GroupCoordinatorService(
            config=config, replica_manager=self.replica_manager, admin_manager=self.admin_manager,
            metadata_cache=self.metadata_cache, reactor=reactor, broker_id=broker_id)
        # For the coordinators' requests to other brokers (the transaction coordinator's markers).
        self.inter_broker_sender = InterBrokerSender(broker_id=broker_id, config=config, reactor=reactor,
                                                     metadata_cache=self.metadata_cache)
        self.transaction_coordinator = TransactionCoordinatorService(
            config=config, replica_manager=self.replica_manager, admin_manager=self.admin_manager,
            metadata_cache=self.metadata_cache, producer_ids=self.producer_ids,
            group_coordinator=self.group_coordinator.coordinator, sender=self.inter_broker_sender, reactor=reactor,
            broker_id=broker_id)
        register_broker_metrics(self.metrics, replica_manager=self.replica_manager, metadata_cache=self.metadata_cache,
                                group_coordinator=self.group_coordinator.coordinator)
        controller_service.register_metrics(self.metrics)
        self.apis, self.socket_server = self._request_path(config, reactor)
        self._register_reconfigurables()
        self.connection_event_log = self._connection_event_log(config, reactor)
        pools = self._handler_pools(config, reactor)
        self.stop_deadline = StopDeadline(reactor, describe=self._still_stopping)
        self.lifecycle = BrokerLifecycleManager(config=config, broker_id=broker_id, broker_epoch=self.broker_epoch,
                                                socket_server=self.socket_server, controller=controller,
                                                reactor=reactor, stop_deadline=self.stop_deadline)
        self.drain = RequestDrain(socket_server=self.socket_server, reactor=reactor, handler_pools=pools,
                                  coordinators=[self.group_coordinator.coordinator])
        self.admin_rest = self._admin_rest(config, reactor)
        self._add_children(controller_service, pools)

    def _identity(self, config, reactor, cluster: bool) -> tuple[BrokerMetadata, BrokerEpoch]:
        """This broker's id and cluster (``meta.properties``; in a cluster settled in ZooKeeper) and its epoch."""
        if cluster:
            # The czxid of this broker's registration, once registered (BrokerRegistration updates it).
            return self._join_zookeeper(config, reactor), BrokerEpoch()
        broker = load_or_create(self.log_dirs, config["broker.id"],
                                reserved_broker_max_id=config["reserved.broker.max.id"])
        # KIP-380: grows across restarts (Kafka takes ZooKeeper's session id), and cannot be guessed.
        return broker, BrokerEpoch(new_broker_epoch())

    @staticmethod
    def _descriptor_budget(config) -> DescriptorBudget:
        """The open-file limit, raised as far as allowed, shared out between connections, logs and partitions."""
        limit, hard, raised_from = raise_open_file_limit()
        return descriptor_budget(limit, hard, max_connections=config["max.connections"], raised_from=raised_from)

    def _scram_store(self, config, reactor, pool: ThreadPool) -> ScramCredentialStore:
        """SCRAM credentials (salted): in ZooKeeper for a cluster (every broker sees them, Kafka's
        /config/users), else in the first log dir, the file written on the I/O pool."""
        if self.zk is not None:
            zk_store = ZkScramCredentialStore(self.zk)
            try:
                zk_store.load_now()
            except KazooException as exc:
                raise StartupError("zookeeper.connect", config["zookeeper.connect"],
                                   f"cannot read SCRAM credentials: {exc!r}") from None
            zk_store.start()
            leftover = os.path.join(self.log_dirs[0], SCRAM_STORE_FILE)
            if os.path.exists(leftover):
                self.log.warn("{path} is not read in a ZooKeeper cluster (credentials live in ZooKeeper's "
                              "/config/users); add its users with twisted-kafka-scram --zookeeper", path=leftover)
            return zk_store
        try:
            return FileScramCredentialStore(self.log_dirs[0], run_blocking=lambda function, *args: deferToThreadPool(
                reactor, pool, function, *args))
        except (OSError, ValueError) as exc:
            raise StartupError("log.dirs", self.log_dirs[0], str(exc)) from None

    def _local_controller(self, config, reactor, pool: ThreadPool) -> tuple[ControllerService, ControllerClient]:
        """A single node is its own controller."""
        service = self.controller_service = ControllerService(
            config=config, broker_id=self.broker.broker_id, cluster_id=self.broker.cluster_id,
            metadata_dir=self.log_dirs[0], log_dirs=self.log_dirs, reactor=reactor, threadpool=pool,
            registration=self._registration, space=self.log_manager.dir_space(self.log_dirs[0]))
        return service, service.client

    def _producer_id_blocks(self, reactor, pool: ThreadPool) -> ProducerIdBlockStore:
        """Producer ids (InitProducerId): blocks claimed in ZooKeeper in a cluster, recorded in the log dirs
        on a single node."""
        if self.zk is not None:
            return ZkProducerIdBlockStore(self.zk)
        return FileProducerIdBlockStore(self.log_dirs, reactor=reactor, threadpool=pool)

    def _request_path(self, config, reactor) -> tuple[KafkaApis, SocketServer]:
        """The API handlers, ``KafkaApis`` dispatching to them, and the ``SocketServer`` feeding it."""
        handlers = broker_handlers(
            advertised_keys=self._advertised_keys, replica_manager=self.replica_manager,
            metadata_cache=self.metadata_cache, admin_manager=self.admin_manager,
            config_repository=self.config_repository, dynamic_config=self.dynamic_config,
            controller=self.controller_client, controller_guard=self.controller_guard,
            group_coordinator=self.group_coordinator.coordinator, offsets_topic=self.group_coordinator,
            transactions=self.transaction_coordinator,
            producer_ids=self.producer_ids, clock=reactor, authorization=self.authorization,
            scram_store=self.scram_store)
        for handler in handlers:
            if isinstance(handler, FetchHandler):
                handler.sessions.cache.register_metrics(self.metrics)
        request_metrics = RequestMetrics(self.metrics)
        apis = KafkaApis(handlers, authorization=self.authorization, request_metrics=request_metrics)
        socket_server = SocketServer(config=config, listeners=self.listeners, reactor=reactor, metrics=self.metrics,
                                     apis=apis, request_metrics=request_metrics,
                                     sasl=sasl_server_configs(config, self.listeners, self.scram_store))
        return apis, socket_server

    def _advertised_keys(self, context: RequestContext) -> list[int]:
        """What ApiVersions advertises on the connection's plane: the handler table filtered by the plane
        (a cycle: the table holds the ApiVersions handler; read when a request comes)."""
        return self.socket_server.plane(context.plane).served_keys()

    def _register_reconfigurables(self) -> None:
        """The parts that apply dynamic broker configs at runtime."""
        add = self.dynamic_config.add_reconfigurable
        add(LogDefaults(self.log_manager, self.config_repository))
        add(self.log_manager.cleaner)        # log.cleaner.threads, ...
        register_cleaner_metrics(self.log_manager.cleaner, self.metrics)
        add(ConnectionLimits(self.socket_server.quotas))
        add(ProducerIdExpiration(self.log_manager))
        add(ListenerTls(self.socket_server.tls))

    def _connection_event_log(self, config, reactor) -> ConnectionEventLog | None:
        """The connection events' writer (unless ``connection.events.enable`` is false), subscribed from now
        on: the controller's connection at startup is an event too."""
        if not config["connection.events.enable"]:
            return None
        return ConnectionEventLog.from_config(
            config, events=self.socket_server.connection_events, replica_manager=self.replica_manager,
            admin_manager=self.admin_manager, metadata_cache=self.metadata_cache, reactor=reactor,
            broker_id=self.broker.broker_id, metrics=self.metrics)

    def _handler_pools(self, config, reactor) -> list[KafkaRequestHandlerPool]:
        """The data plane's handler pool, and the control plane's (one handler) when there is one."""
        pools = [KafkaRequestHandlerPool(channel=self.socket_server.data_plane.channel, apis=self.apis,
                                         num_handlers=config["num.io.threads"], reactor=reactor,
                                         metrics=self.metrics, turn_budget=DATA_PLANE_TURN_BUDGET,
                                         yield_to=self.socket_server.control_plane_waiting)]
        if self.socket_server.control_plane is not None:
            pools.append(KafkaRequestHandlerPool(channel=self.socket_server.control_plane.channel, apis=self.apis,
                                                 num_handlers=1, reactor=reactor, metrics=self.metrics,
                                                 metric_prefix="ControlPlane"))
        return pools

    def _admin_rest(self, config, reactor) -> AdminRestService | None:
        """The admin REST endpoint, when ``admin.rest.*`` asks for one."""
        settings = AdminRestSettings.from_config(config)
        if settings is None:
            return None
        return AdminRestService(settings, AdminBackend(
            socket_server=self.socket_server, admin_manager=self.admin_manager, dynamic_config=self.dynamic_config,
            metrics=self.metrics, broker_id=self.broker.broker_id, readiness=self.readiness,
            reload_certificates=self.reload_certificates, replica_manager=self.replica_manager,
            metadata_cache=self.metadata_cache, group_coordinator=self.group_coordinator.coordinator), reactor, config)

    def _add_children(self, controller_service: Service, pools: list[KafkaRequestHandlerPool]) -> None:
        """The child services in start order (the module docstring).  The admin REST endpoint starts right
        after the pool: its health checks answer (not ready) while the logs load, and a bad admin.rest.*
        setting stops startup early.  The request drain, the replica manager and the lifecycle manager
        come last, so they stop first, in that reverse order (``broker_lifecycle``)."""
        admin = [] if self.admin_rest is None else [self.admin_rest]
        event_log = [] if self.connection_event_log is None else [self.connection_event_log]
        if self.zk is not None:
            assert self.registration is not None
            head = [self.io_threads, *admin, ZooKeeperSession(self.zk), self.log_manager, self.group_coordinator,
                    self.transaction_coordinator, *pools, self.socket_server, self.inter_broker_sender,
                    self.registration]
        else:
            head = [self.io_threads, *admin, self.log_manager, self.group_coordinator, self.transaction_coordinator,
                    *pools, self.socket_server, self.inter_broker_sender]
        for child in (*head, controller_service, *event_log, self.drain, self.replica_manager, self.lifecycle):
            child.setServiceParent(self)

    @property
    def config(self):
        """The running configuration (static keys plus the dynamic broker configs in effect)."""
        return self.dynamic_config.current

    def reload_certificates(self) -> dict[str, str]:
        """Re-read the key and trust stores of every TLS listener and of the https admin endpoint (SIGHUP;
        the admin endpoint's ``POST /v1/tls/reload``).

        New connections get the new certificates, open ones keep theirs; a
        listener whose new files are unusable keeps the old ones and says why.
        Returns listener -> "reloaded" / "unchanged" / the error, the admin
        endpoint under ``admin.rest``.
        """
        outcome = self.socket_server.reload_tls(self.config)
        if self.admin_rest is not None:
            admin = self.admin_rest.reload_tls(self.config)
            if admin is not None:
                outcome[self.admin_rest.TLS_NAME] = admin
        self.log.info("TLS certificates: {outcome}",
                      outcome=", ".join(f"{name} {what}" for name, what in outcome.items()) or "no TLS listener")
        return outcome

    def readiness(self) -> dict[str, bool]:
        """What ``/v1/health/ready`` checks: the logs loaded (recovered after a crash), every
        listener bound and accepting, and the broker not shutting down."""
        acceptors = self.socket_server.acceptors.values()
        return {
            "log_recovered": id(self.log_manager) in self._children_started,
            "listeners_bound": all(a.port is not None for a in acceptors),
            "accepting": id(self.lifecycle) in self._children_started and all(a.enabled for a in acceptors),
            "running": bool(self.running) and not self._startup_failed and self.socket_server.data_plane.open,
        }

    # -- a ZooKeeper cluster ----------------------------------------------------------------

    def _join_zookeeper(self, config, reactor) -> BrokerMetadata:
        """Open the ZooKeeper session and settle this broker's identity (before the reactor runs, as
        Kafka's startup does): persistent paths, the cluster id, a generated broker id if needed."""
        if config["zookeeper.set.acl"]:
            raise ConfigError("zookeeper.set.acl",
                              "secure ZooKeeper ACLs need an authenticated ZooKeeper connection (SASL or TLS), "
                              "which this broker cannot make yet (Kafka refuses the same setting without one)",
                              "true")
        try:
            self.zk = ZkClient.connect(config["zookeeper.connect"],
                                       session_timeout_ms=config["zookeeper.session.timeout.ms"],
                                       connection_timeout_ms=config["zookeeper.connection.timeout.ms"],
                                       reactor=reactor)
        except ZkConnectError as exc:
            raise StartupError("zookeeper.connect", config["zookeeper.connect"], str(exc)) from None
        kazoo = self.zk.kazoo
        cluster_id = zk_registration.identify(kazoo, generate_cluster_id())
        generate = None
        if config["broker.id.generation.enable"]:
            def generate() -> int:
                return zk_registration.generate_broker_id(kazoo, config["reserved.broker.max.id"])
        broker = load_or_create(self.log_dirs, config["broker.id"],
                                reserved_broker_max_id=config["reserved.broker.max.id"], cluster_id=cluster_id,
                                generate_broker_id=generate)
        self.log.info("Broker {broker_id} joins cluster {cluster_id} through ZooKeeper {connect}",
                      broker_id=broker.broker_id, cluster_id=cluster_id, connect=config["zookeeper.connect"])
        return broker

    def _cluster_controller(self, config, reactor) -> tuple[ZkControllerService, ControllerClient]:
        """The ZooKeeper registration, the controller that competes for ``/controller``, and the
        ControllerClient brokers use in a cluster."""
        assert self.zk is not None
        zk = self.zk
        broker_id = self.broker.broker_id
        self.registration = BrokerRegistration(
            zk=zk, broker_id=broker_id, rack=config["broker.rack"], on_epoch=self.broker_epoch.update,
            endpoints=lambda: [RegisteredEndpoint(e.listener_name, e.host, e.port, e.security_protocol)
                               for e in self.socket_server.advertised_endpoints()],
            reactor=reactor, session_timeout_ms=config["zookeeper.session.timeout.ms"])
        service = self.zk_controller_service = ZkControllerService(
            config=config, broker_id=broker_id, cluster_id=self.broker.cluster_id, zk=zk, reactor=reactor,
            ready=self._metadata_received, on_fatal=self._controller_fatal)
        view = LocalClusterView(metadata_cache=self.metadata_cache, config_repository=self.config_repository,
                                dynamic_config=self.dynamic_config, reactor=reactor)
        client = ClusterControllerClient(config=config, broker_id=broker_id, admin=ZkAdmin(zk), view=view,
                                         local=service.local, known_controller=lambda: service.controller_id,
                                         reactor=reactor)
        return service, client

    def _inter_broker_principal(self) -> str | None:
        """The principal this broker presents where the controller connects (``control.plane.listener.name``,
        else ``inter.broker.listener.name``): on SSL its key store certificate's subject through the
        listener's ``ssl.principal.mapping.rules`` (when the listener asks for client certificates;
        ``ssl.client.auth=none``: ``User:ANONYMOUS``), on PLAINTEXT ``User:ANONYMOUS``; None if no mapping
        rule applies (such a certificate cannot authenticate at all).  On SASL_PLAINTEXT and SASL_SSL it is
        ``User:<username>`` of the listener's JAAS configuration for ``sasl.mechanism.inter.broker.protocol``:
        the SASL identity wins over a certificate there, as in Kafka."""
        listeners = self.listeners
        listener = listeners.control_plane_listener_name or listeners.inter_broker_listener_name
        if any(endpoint.listener_name == listener and endpoint.security_protocol in SASL_PROTOCOLS
               for endpoint in listeners.listeners):
            return f"User:{sasl_client_config(self.config, listener).username}"
        tls = self.socket_server.tls.get(listener)
        if tls is None or tls.settings.client_auth == "none":
            return ANONYMOUS
        settings = tls.settings
        try:
            return settings.mapper.principal(settings.certificate) or ANONYMOUS
        except NoMatchingRule:
            return None

    async def _refresh_controller(self) -> None:
        """What the controller-request guard re-checks before refusing: a registration in progress
        (its new epoch), and ``/controller`` (a new controller may be faster than the watch)."""
        assert self.zk is not None and self.registration is not None
        await self.registration.registered()
        data, _ = await self.zk.get_or_none(zk_data.CONTROLLER)
        self.zk_controller_service.controller_id = zk_data.decode_controller(data)

    def _metadata_received(self, timeout: float) -> Deferred:
        """Fires (True) once a controller has told this broker the cluster's metadata, itself included."""
        broker_id = self.broker.broker_id
        return self.metadata_cache.wait_until(lambda: broker_id in self.metadata_cache.brokers, self.reactor,
                                              timeout)

    def _controller_fatal(self, failure) -> None:
        if not self.started.called:
            self._fatal(failure)
            return
        self.log.critical("{line}", line=failure_line(failure.value, self.log_dirs))
        self.reactor.stop()

    def _registration(self) -> LiveBroker:
        """This broker as the controller registers it: its advertised endpoints, with bound ports."""
        listeners = self.listeners
        control_listener = listeners.control_plane_listener_name or listeners.inter_broker_listener_name
        return LiveBroker(broker_id=self.broker.broker_id, epoch=self.broker_epoch.current,
                          endpoints=self.socket_server.advertised_endpoints(), control_listener=control_listener,
                          rack=self.config["broker.rack"], partition_budget=self.descriptors.partitions)

    # -- startup ------------------------------------------------------------------------

    def startService(self) -> None:
        Service.startService(self)   # children are started one after another below, not all at once
        d = ensureDeferred(self._start_children())
        d.addCallbacks(self._started, self._fatal)

    async def _start_children(self) -> None:
        began = monotonic()
        self.log.info("{budget}", budget=self.descriptors.describe())
        for child in self:
            await maybeDeferred(child.startService)
            self._children_started.add(id(child))
            if child is self.log_manager:
                self._check_budget()
        admin = f"; admin REST: {self.admin_rest.url}" if self.admin_rest is not None else ""
        self.log.info("Broker {broker_id} of cluster {cluster_id} started in {elapsed:.3f}s; listeners: {listeners}"
                      "{admin}", broker_id=self.broker.broker_id, cluster_id=self.broker.cluster_id,
                      elapsed=monotonic() - began,
                      listeners=", ".join(f"{name}={a.bound_address}({a.plane.name})"
                                          for name, a in self.socket_server.acceptors.items()),
                      admin=admin)

    def _check_budget(self) -> None:
        hosted, budget = len(self.log_manager.all_logs()), self.descriptors.partitions
        if hosted > budget:
            self.log.warn("{hosted} partitions are on disk, more than the partition budget of {budget} the "
                          "open-file limit allows: all are served (idle partitions' files are closed and reopened "
                          "as they are used), but no partition can be added until the limit is raised",
                          hosted=hosted, budget=budget)

    def _started(self, _):
        self.started.callback(self)

    def _fatal(self, failure) -> None:
        """Startup failed: say why in one line, and stop the process with status 1.

        The line names the key, the value and the reason (``startup.py``); the
        traceback is logged too, at debug level, only with ``TWISTED_KAFKA_DEBUG=1``.
        The failure may come before the reactor runs (twistd starts services
        first): the stop is then scheduled for when it does.
        """
        self._startup_failed = True
        if debug_enabled():
            self.log.failure("Broker startup failure", failure, level=LogLevel.debug)
        self.log.critical("{line}", line=failure_line(failure.value, self.log_dirs))
        self.started.errback(failure)
        self.started.addErrback(lambda _: None)
        if hasattr(self.reactor, "addSystemEventTrigger"):
            self.reactor.addSystemEventTrigger("after", "shutdown", os._exit, 1)
            if getattr(self.reactor, "running", False):
                self.reactor.stop()
            else:
                self.reactor.callWhenRunning(self.reactor.stop)

    # -- shutdown -----------------------------------------------------------------------

    def stopService(self) -> Deferred:
        """Stop the children in reverse order, within a last-resort bound (``StopDeadline``): the
        controlled shutdown's own bound, the drain timeout and ``STOP_GRACE_SECONDS`` (re-armed to the
        last two when the drain begins).  Past it, the process exits with status 1, saying what was
        still stopping."""
        Service.stopService(self)
        self.stop_deadline.arm(self.lifecycle.controlled_shutdown_bound() + DRAIN_TIMEOUT_SECONDS
                               + STOP_GRACE_SECONDS, "controlled shutdown")
        d = ensureDeferred(self._stop_children())
        d.addBoth(self._stopped)
        return d

    def _stopped(self, result):
        self.stop_deadline.disarm()
        return result

    async def _stop_children(self) -> None:
        self.log.info("Broker shutting down")
        for child in reversed(list(self)):
            if child.running:
                self._stopping = child
                await maybeDeferred(child.stopService)
        self._stopping = None
        self.log_dir_locks.release()
        self.log.info("Broker shut down")

    def _still_stopping(self) -> str:
        """What the last-resort bound's log line names: the child still stopping, requests in flight."""
        child = self._stopping
        name = getattr(child, "name", None) or type(child).__name__ if child is not None else "nothing"
        return f"{name} still stopping, {self.socket_server.inflight_count()} request(s) in flight"

"""``EmbeddedBroker`` and ``EmbeddedCluster``: a real Kafka broker for another project's tests.

    with EmbeddedBroker() as broker:
        topic = broker.create_topic("orders", partitions=3)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers})

The broker is a child process (``twisted_kafka.testing.process``): the test
process's event loop, reactor and signal handlers are never touched, and a
test that crashes the client cannot take the broker with it.  It binds
loopback port 0 (several brokers -- one per pytest-xdist worker -- never
collide), keeps its logs in a temporary directory removed when it stops, and
takes any broker key as an override.

On top of Kafka's defaults it sets what makes a test broker quick
(``TEST_DEFAULTS``): ``__consumer_offsets`` and ``__transaction_state`` with one
partition instead of 50 (the first consumer group or transactional producer does
not wait for 50 logs), no initial rebalance
delay (a group's first join completes at once instead of after 3 s), no
``__connection_events`` topic (a test sees only the topics it made) --
overrides win over these.

Security: ``security="SSL"``, ``"SASL_PLAINTEXT"`` or ``"SASL_SSL"`` gives the
clients' listener that protocol, with a test CA and a broker certificate made
on the spot (``tls.py``) and SASL users accepted with PLAIN, SCRAM-SHA-256 and
SCRAM-SHA-512 (SCRAM credentials are created with AlterUserScramCredentials,
the broker's own API).  ``client_config()`` gives the matching settings for
confluent-kafka, kafka-python or aiokafka.  A secured broker also has an
INTERNAL PLAINTEXT listener on loopback, which the broker uses between its own
planes and this class for its admin requests.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import shutil
import ssl
import tempfile
import uuid
import warnings
from collections.abc import Mapping
from pathlib import Path

from .process import BrokerProcess, BrokerStartupError
from .tls import TestPki
from .zookeeper import ZooKeeperServer, zookeeper_classpath

__all__ = ["EmbeddedBroker", "EmbeddedCluster", "TEST_DEFAULTS", "SECURITY_PROTOCOLS", "SASL_MECHANISMS",
           "unique_topic_name"]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

#: What a test broker sets beyond Kafka's defaults (any override wins over these).
TEST_DEFAULTS: Mapping[str, str] = {
    "broker.id": "0",
    # The first consumer group creates __consumer_offsets: one partition, not 50.
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    # The first transactional producer creates __transaction_state: one partition, not 50.
    "transaction.state.log.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    # A new group's first rebalance completes once its members joined, not 3 s later.
    "group.initial.rebalance.delay.ms": "0",
    # No topic the test did not make (connection events are an operator's record: docs/operations.md).
    "connection.events.enable": "false",
}

_CLIENTS, _INTERNAL, _CONTROLLER = "CLIENTS", "INTERNAL", "CONTROLLER"
_CLIENT_FLAVOURS = {"confluent-kafka": "confluent", "confluent": "confluent", "librdkafka": "confluent",
                    "kafka-python": "kafka-python", "kafka": "kafka-python", "aiokafka": "aiokafka"}


def unique_topic_name(hint: str = "topic") -> str:
    """``<hint>-<8 hex digits>``, with only the characters Kafka allows in a topic name, at most 249 of them."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "-", hint).strip("-._") or "topic"
    return f"{cleaned[:200]}-{uuid.uuid4().hex[:8]}"


class EmbeddedBroker:
    """A single broker in a child process; ``start()``/``stop()`` or a ``with`` block."""

    def __init__(self, overrides: Mapping[str, object] | None = None, *, security: str = "PLAINTEXT",
                 sasl_mechanism: str = "SCRAM-SHA-512", users: Mapping[str, str] | None = None,
                 directory=None, startup_timeout: float = 60.0):
        self.security_protocol = security.upper()
        if self.security_protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"security must be one of {', '.join(SECURITY_PROTOCOLS)}, not {security!r}")
        self.sasl_mechanism = sasl_mechanism.upper()
        if self.sasl_mechanism not in SASL_MECHANISMS:
            raise ValueError(f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)}, not {sasl_mechanism!r}")
        self.overrides = {str(k): str(v) for k, v in (overrides or {}).items()}
        #: SASL users and their passwords (a SASL broker gets one made up if none is given).
        self.users: dict[str, str] = dict(users or {})
        if self.sasl and not self.users:
            self.users = {"alice": secrets.token_urlsafe(12)}
        self.startup_timeout = startup_timeout
        self._parent = Path(directory) if directory is not None else None
        self._owned_dir: Path | None = None
        self._pki: TestPki | None = None
        self.process: BrokerProcess | None = None

    # -- what it is -----------------------------------------------------------------

    @property
    def sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.security_protocol.endswith("SSL")

    @property
    def secured(self) -> bool:
        return self.security_protocol != "PLAINTEXT"

    def _started(self) -> BrokerProcess:
        if self.process is None or not self.process.ports:
            raise RuntimeError(f"{self!r} is not started: call start() (or use it in a with block)")
        return self.process

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the clients' listener."""
        return self._started().bootstrap

    @property
    def admin_rest_url(self) -> str | None:
        """The admin REST endpoint's base URL (``http://127.0.0.1:<port>``): docs/admin-rest.md."""
        return self._started().admin_url

    @property
    def ports(self) -> dict[str, int]:
        """Every listener's port, by listener name."""
        return dict(self._started().ports)

    @property
    def directory(self) -> Path:
        """The broker's directory: its configuration, ``broker.log``, its log dirs, its certificates."""
        if self.process is None:
            raise RuntimeError(f"{self!r} is not started")
        return self.process.dir

    @property
    def log_path(self) -> Path:
        return Path(self._spawned().log_path)

    def _spawned(self) -> BrokerProcess:
        if self.process is None:
            raise RuntimeError(f"{self!r} is not started")
        return self.process

    def log_text(self) -> str:
        """Everything the broker printed."""
        return self.process.log_text() if self.process is not None else ""

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running

    @property
    def ca_file(self) -> Path | None:
        """The test CA's certificate (PEM) a TLS client must trust; None without TLS."""
        return self._pki.ca_file if self._pki is not None else None

    def ssl_context(self) -> ssl.SSLContext:
        """A client ``ssl.SSLContext`` trusting the broker's certificate (aiokafka's ``ssl_context``)."""
        if self._pki is None:
            raise RuntimeError(f"{self!r} has no TLS listener")
        return self._pki.ssl_context()

    def client_config(self, client: str = "confluent-kafka", *, user: str | None = None) -> dict:
        """The settings a client needs to reach the broker, in that client's names.

        ``client``: ``"confluent-kafka"`` (librdkafka's dotted keys),
        ``"kafka-python"`` or ``"aiokafka"`` (keyword arguments).  On a SASL
        broker the first user (or ``user``) and the broker's ``sasl_mechanism``.
        """
        flavour = _CLIENT_FLAVOURS.get(client.lower())
        if flavour is None:
            raise ValueError(f"client must be one of {', '.join(sorted(_CLIENT_FLAVOURS))}, not {client!r}")
        name = user if user is not None else next(iter(self.users), None)
        password = self.users.get(name) if name is not None else None
        if flavour == "confluent":
            config: dict = {"bootstrap.servers": self.bootstrap_servers}
            if self.secured:
                config["security.protocol"] = self.security_protocol
            if self.tls:
                config["ssl.ca.location"] = str(self.ca_file)
            if self.sasl:
                config.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": name,
                               "sasl.password": password})
            return config
        config = {"bootstrap_servers": self.bootstrap_servers, "security_protocol": self.security_protocol}
        if self.tls:
            if flavour == "aiokafka":
                config["ssl_context"] = self.ssl_context()
            else:
                config["ssl_cafile"] = str(self.ca_file)
        if self.sasl:
            config.update({"sasl_mechanism": self.sasl_mechanism, "sasl_plain_username": name,
                           "sasl_plain_password": password})
        return config

    # -- lifecycle ------------------------------------------------------------------

    def _listener_overrides(self) -> dict[str, str]:
        if not self.secured:
            return {}      # BrokerProcess's own layout: PLAINTEXT and CONTROLLER
        listeners = ",".join(f"{name}://127.0.0.1:{{port:{name}}}" for name in (_CLIENTS, _INTERNAL, _CONTROLLER))
        return {"listeners": listeners, "advertised.listeners": listeners,
                "listener.security.protocol.map": f"{_CLIENTS}:{self.security_protocol},{_INTERNAL}:PLAINTEXT,"
                                                  f"{_CONTROLLER}:PLAINTEXT",
                "inter.broker.listener.name": _INTERNAL, "control.plane.listener.name": _CONTROLLER}

    def _security_config(self, directory: Path) -> dict[str, str]:
        """The base configuration's security keys; the certificates are made in ``directory``."""
        config = {}
        if self.tls:
            self._pki = TestPki.create(directory)
            config.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self._pki.keystore_file)})
        if self.sasl:
            plain_users = " ".join(f'user_{name}="{password}"' for name, password in self.users.items())
            config.update({
                "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
                f"listener.name.{_CLIENTS.lower()}.plain.sasl.jaas.config":
                    f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"})
        return config

    def spawn(self) -> EmbeddedBroker:
        """Start the broker's process without waiting for it (``wait_started()`` waits)."""
        if self.running:
            raise RuntimeError(f"{self!r} is already running")
        if self.process is None:
            if self._parent is None:
                self._owned_dir = Path(tempfile.mkdtemp(prefix="twisted-kafka-"))
            parent = self._parent or self._owned_dir
            assert parent is not None
            parent.mkdir(parents=True, exist_ok=True)
            process = BrokerProcess(parent, {**self._listener_overrides(), **self.overrides},
                                    base_config=TEST_DEFAULTS)
            assert isinstance(process.base_config, dict)
            process.base_config.update(self._security_config(process.dir / "tls"))
            self.process = process
        self.process.spawn()
        return self

    def wait_started(self) -> EmbeddedBroker:
        """Wait for a spawned broker; raises ``BrokerStartupError`` (its one-line ``reason``) if it cannot start."""
        process = self._spawned()
        try:
            process.wait_started(self.startup_timeout)
            if self.sasl:
                with self.admin_connection() as admin:
                    for name, password in self.users.items():
                        admin.add_scram_user(name, password)
        except BaseException:
            self._cleanup()
            raise
        return self

    def start(self) -> EmbeddedBroker:
        """Start the broker and return once it answers clients; ``BrokerStartupError`` if it cannot start."""
        return self.spawn().wait_started()

    def stop(self, timeout: float = 30) -> int | None:
        """Stop the broker cleanly (SIGTERM); its exit status (0), None if it never started."""
        if self.process is None:
            return None
        try:
            return self.process.stop(timeout) if self.process.process is not None else None
        finally:
            self._cleanup()

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process is not None:
            self.process.kill()

    def _cleanup(self) -> None:
        if self.process is not None and self.process.running:
            self.process.kill()
        if self._owned_dir is not None:
            shutil.rmtree(self._owned_dir, ignore_errors=True)
            self._owned_dir = None
            self.process = None

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self.process.bootstrap if self.process is not None and self.process.ports else "not started"
        return f"<EmbeddedBroker {self.security_protocol} {where}>"

    # -- admin ----------------------------------------------------------------------

    def admin_connection(self, timeout: float = 30.0):
        """A blocking admin connection (``twisted_kafka.testing.wire``) to a listener without authentication."""
        with warnings.catch_warnings():
            # kafka-python's message schemas load through importlib.resources' legacy API: not the test's concern.
            warnings.simplefilter("ignore", DeprecationWarning)
            from .wire import AdminConnection

        process = self._started()
        port = process.port(_INTERNAL) if self.secured else process.data_port
        return AdminConnection("127.0.0.1", port, timeout=timeout)

    def create_topic(self, name: str | None = None, partitions: int = 1, replication_factor: int = 1,
                     config: Mapping[str, object] | None = None, *, timeout: float = 30.0) -> str:
        """Create a topic and wait until every partition has a leader; its name (a unique one if none given).

        ``config``: topic-level keys (``cleanup.policy``, ``retention.ms``, ...).
        Raises ``twisted_kafka.testing.wire.AdminError`` (``.code``, Kafka's
        error name) if the broker refuses.
        """
        name = name or unique_topic_name()
        with self.admin_connection(timeout) as admin:
            admin.create_topic(name, partitions, replication_factor, config)
            admin.wait_for_leaders(name, partitions)
        return name

    def delete_topic(self, name: str, *, timeout: float = 30.0) -> None:
        with self.admin_connection(timeout) as admin:
            admin.delete_topics([name])

    def topic_names(self) -> list[str]:
        """The topics the broker has (internal ones included)."""
        with self.admin_connection() as admin:
            return admin.topic_names()


class EmbeddedCluster:
    """Three brokers (``size``) of a ZooKeeper-mode cluster and their ZooKeeper, all child processes.

    ZooKeeper is Debian's package run by Java (``zookeeper.py``); where it is
    missing, ``start()`` raises ``ZooKeeperUnavailable`` naming what to
    install (the pytest fixture ``kafka_cluster`` skips with that reason).
    Brokers are numbered 1..size and use PLAINTEXT.
    """

    def __init__(self, size: int = 3, overrides: Mapping[str, object] | None = None, *, directory=None,
                 startup_timeout: float = 90.0):
        if size < 1:
            raise ValueError("a cluster needs at least one broker")
        self.size = size
        self.overrides = {str(k): str(v) for k, v in (overrides or {}).items()}
        self.startup_timeout = startup_timeout
        self._parent = Path(directory) if directory is not None else None
        self._owned_dir: Path | None = None
        self.zookeeper: ZooKeeperServer | None = None
        self.brokers: list[EmbeddedBroker] = []

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(broker.bootstrap_servers for broker in self.brokers if broker.running)

    def start(self) -> EmbeddedCluster:
        zookeeper_classpath()          # ZooKeeperUnavailable before anything is made
        if self._parent is None:
            self._owned_dir = Path(tempfile.mkdtemp(prefix="twisted-kafka-cluster-"))
        parent = self._parent or self._owned_dir
        assert parent is not None
        try:
            self.zookeeper = ZooKeeperServer(parent).start(self.startup_timeout)
            connect = self.zookeeper.connect_string("/twisted-kafka")
            self.brokers = [
                EmbeddedBroker({"broker.id": broker_id, "zookeeper.connect": connect,
                                "offsets.topic.replication.factor": min(3, self.size),
                                "default.replication.factor": min(3, self.size),
                                **self.overrides},
                               directory=parent / f"broker-{broker_id}", startup_timeout=self.startup_timeout)
                for broker_id in range(1, self.size + 1)]
            for broker in self.brokers:
                broker.spawn()
            for broker in self.brokers:
                broker.wait_started()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> dict[int, int | None]:
        """Stop every broker (one after another, each with a controlled shutdown), then ZooKeeper."""
        statuses: dict[int, int | None] = {}
        try:
            for number, broker in enumerate(self.brokers, start=1):
                with contextlib.suppress(Exception):
                    statuses[number] = broker.stop()
        finally:
            for broker in self.brokers:
                broker.kill()
            if self.zookeeper is not None:
                self.zookeeper.stop()
            if self._owned_dir is not None:
                shutil.rmtree(self._owned_dir, ignore_errors=True)
                self._owned_dir = None
        return statuses

    def create_topic(self, name: str | None = None, partitions: int = 1, replication_factor: int | None = None,
                     config: Mapping[str, object] | None = None, *, timeout: float = 30.0) -> str:
        """Create a topic (replicated on every broker, up to 3, by default) and wait until each broker
        knows a leader for every partition."""
        name = name or unique_topic_name()
        factor = replication_factor if replication_factor is not None else min(3, self.size)
        with self.brokers[0].admin_connection(timeout) as admin:
            admin.create_topic(name, partitions, factor, config)
        for broker in self.brokers:
            with broker.admin_connection(timeout) as admin:
                admin.wait_for_leaders(name, partitions)
        return name

    def delete_topic(self, name: str, *, timeout: float = 30.0) -> None:
        self.brokers[0].delete_topic(name, timeout=timeout)

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"<EmbeddedCluster of {self.size} brokers {self.bootstrap_servers or '(not started)'}>"


# BrokerStartupError is what start() raises: importable from here as well.
__all__ += ["BrokerStartupError"]

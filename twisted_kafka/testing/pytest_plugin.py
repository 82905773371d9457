"""pytest fixtures that give a test a real Kafka broker (registered as the ``twisted_kafka`` plugin).

Fixtures:

* ``kafka_broker`` -- a started ``EmbeddedBroker``; one per session by
  default (ini ``kafka_broker_scope`` or ``--kafka-broker-scope``: session,
  package, module, class or function).  Under pytest-xdist every worker
  starts its own (its own port, its own directory).
* ``kafka_bootstrap_servers`` -- its ``host:port``.
* ``kafka_client_config`` -- confluent-kafka settings for it (bootstrap
  servers, and security settings on a secured broker), a new dict for every
  test.
* ``kafka_topic`` -- a new topic for this test only, uniquely named,
  deleted afterwards; ``@pytest.mark.kafka_topic(partitions=3,
  config={...})`` shapes it.
* ``kafka_admin`` -- a confluent-kafka ``AdminClient`` for it (skipped, with
  the reason, where confluent-kafka is not installed).
* ``kafka_cluster`` -- an ``EmbeddedCluster`` of three brokers and ZooKeeper,
  one per session (skipped, with the reason, where ZooKeeper is not
  installed).

Broker settings: ini options ``kafka_broker_overrides`` (``key=value`` lines),
``kafka_broker_security`` and ``kafka_broker_sasl_mechanism`` set the
default broker; ``@pytest.mark.kafka_broker(security=..., overrides={...},
sasl_mechanism=...)`` on a test, class or module gives those tests a broker
of their own (shared by every test asking for the same settings).

A broker that cannot start fails the fixture at once with the broker's own
one-line reason (``Broker startup failed: ...``), and its output is attached
to the test's report (section "kafka broker log"); a test that fails with a
broker attaches what the broker printed during the test.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal, cast

import pytest

from .embedded import SASL_MECHANISMS, SECURITY_PROTOCOLS, EmbeddedBroker, EmbeddedCluster, unique_topic_name
from .process import BrokerStartupError

Scope = Literal["session", "package", "module", "class", "function"]
SCOPES: tuple[Scope, ...] = ("session", "package", "module", "class", "function")
#: Lines of a broker's output attached to a failed test's report, at most.
LOG_LINES_ATTACHED = 400
_SECTION = "kafka broker log"


@dataclass(frozen=True)
class BrokerSpec:
    """What a broker is started with; equal specs share a broker."""

    security: str = "PLAINTEXT"
    sasl_mechanism: str = "SCRAM-SHA-512"
    overrides: tuple[tuple[str, str], ...] = ()

    @property
    def id(self) -> str:
        parts = [self.security] + [f"{k}={v}" for k, v in self.overrides]
        return "kafka-" + ",".join(parts)


def broker_failed(reason: str, log: str) -> BaseException:
    """The error a broker fixture raises when its broker cannot start: pytest's own failure (reported as
    ``Failed: kafka_broker could not start: <the broker's line>``, no traceback), carrying the broker's
    output for the report."""
    failure = pytest.fail.Exception(f"kafka_broker could not start: {reason}", pytrace=False)
    failure.kafka_broker_log = log       # type: ignore[attr-defined]
    return failure


# -- options --------------------------------------------------------------------------

def pytest_addoption(parser):
    group = parser.getgroup("twisted_kafka", "Kafka broker fixtures (twisted_kafka.testing)")
    group.addoption("--kafka-broker-scope", default=None, choices=SCOPES,
                    help="scope of the kafka_broker fixture (default: the ini option, else session)")
    parser.addini("kafka_broker_scope", "scope of the kafka_broker fixture: session (default), package, module, "
                  "class or function", default="session")
    parser.addini("kafka_broker_overrides", "broker configuration for kafka_broker, one key=value a line",
                  type="linelist", default=[])
    parser.addini("kafka_broker_security", "security protocol of kafka_broker's client listener: PLAINTEXT "
                  "(default), SSL, SASL_PLAINTEXT or SASL_SSL", default="PLAINTEXT")
    parser.addini("kafka_broker_sasl_mechanism", "SASL mechanism client_config() names for a SASL broker: "
                  "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (default)", default="SCRAM-SHA-512")
    parser.addini("kafka_broker_startup_timeout", "seconds a broker may take to start (default 60)", default="60")


def pytest_configure(config):
    config.addinivalue_line("markers", "kafka_broker(security=None, overrides=None, sasl_mechanism=None): start "
                            "the kafka_broker of these tests with these settings (twisted_kafka.testing)")
    config.addinivalue_line("markers", "kafka_topic(partitions=1, config=None, replication_factor=1): the "
                            "kafka_topic fixture's partitions and topic configuration")


def _scope(fixture_name: str, config: pytest.Config) -> Scope:
    scope = config.getoption("kafka_broker_scope", None) or config.getini("kafka_broker_scope") or "session"
    if scope not in SCOPES:
        raise pytest.UsageError(f"kafka_broker_scope must be one of {', '.join(SCOPES)}, not {scope!r}")
    return cast(Scope, scope)


def _parse_overrides(lines, where: str) -> dict[str, str]:
    overrides = {}
    for line in lines:
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise pytest.UsageError(f"{where}: {line!r} is not key=value")
        overrides[key.strip()] = value.strip()
    return overrides


def _spec(config, marker=None) -> BrokerSpec:
    overrides = _parse_overrides(config.getini("kafka_broker_overrides"), "kafka_broker_overrides")
    security = config.getini("kafka_broker_security") or "PLAINTEXT"
    mechanism = config.getini("kafka_broker_sasl_mechanism") or "SCRAM-SHA-512"
    if marker is not None:
        if marker.args:
            raise pytest.UsageError("kafka_broker marker: pass security=, overrides=, sasl_mechanism= by name")
        unknown = set(marker.kwargs) - {"security", "overrides", "sasl_mechanism"}
        if unknown:
            raise pytest.UsageError(f"kafka_broker marker: unknown argument(s) {', '.join(sorted(unknown))}")
        security = marker.kwargs.get("security") or security
        mechanism = marker.kwargs.get("sasl_mechanism") or mechanism
        marked = marker.kwargs.get("overrides") or {}
        if not isinstance(marked, Mapping):
            raise pytest.UsageError("kafka_broker marker: overrides must be a dict of broker keys to values")
        overrides.update({str(k): str(v) for k, v in marked.items()})
    security, mechanism = security.upper(), mechanism.upper()
    if security not in SECURITY_PROTOCOLS:
        raise pytest.UsageError(f"kafka broker security must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                                f"not {security!r}")
    if mechanism not in SASL_MECHANISMS:
        raise pytest.UsageError(f"kafka broker sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)}, "
                                f"not {mechanism!r}")
    return BrokerSpec(security, mechanism, tuple(sorted(overrides.items())))


def pytest_generate_tests(metafunc):
    """A test marked ``kafka_broker(...)`` gets the broker of those settings: ``kafka_broker`` is
    parametrized (indirectly) with them, so pytest keeps one broker per distinct settings."""
    if "kafka_broker" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("kafka_broker")
    if marker is None:
        return
    spec = _spec(metafunc.config, marker)
    metafunc.parametrize("kafka_broker", [spec], indirect=True, ids=[spec.id],
                         scope=_scope("kafka_broker", metafunc.config))


# -- brokers --------------------------------------------------------------------------

class _Brokers:
    """The session's brokers by spec: a session-scoped ``kafka_broker`` is taken from here, so tests
    with other settings in between do not restart it.  A spec whose broker could not start keeps
    its failure: every test asking for it fails at once with the same reason."""

    def __init__(self, tmp_path_factory, timeout: float):
        self.tmp_path_factory = tmp_path_factory
        self.timeout = timeout
        self.brokers: dict[BrokerSpec, EmbeddedBroker] = {}
        self.failures: dict[BrokerSpec, BaseException] = {}

    def start(self, spec: BrokerSpec) -> EmbeddedBroker:
        directory = self.tmp_path_factory.mktemp("kafka-broker")
        broker = EmbeddedBroker(dict(spec.overrides), security=spec.security, sasl_mechanism=spec.sasl_mechanism,
                                directory=directory, startup_timeout=self.timeout)
        try:
            return broker.start()
        except BrokerStartupError as exc:
            raise broker_failed(exc.reason, exc.log) from None

    def get(self, spec: BrokerSpec) -> EmbeddedBroker:
        if spec in self.failures:
            raise self.failures[spec]
        if spec not in self.brokers:
            try:
                self.brokers[spec] = self.start(spec)
            except pytest.fail.Exception as exc:
                self.failures[spec] = exc
                raise
        return self.brokers[spec]

    def stop_all(self) -> None:
        for broker in self.brokers.values():
            with contextlib.suppress(Exception):
                broker.stop()
        self.brokers.clear()


@pytest.fixture(scope="session")
def _kafka_brokers(tmp_path_factory, pytestconfig):
    brokers = _Brokers(tmp_path_factory, float(pytestconfig.getini("kafka_broker_startup_timeout")))
    yield brokers
    brokers.stop_all()


@pytest.fixture(scope=_scope)
def kafka_broker(request, _kafka_brokers):
    """A started ``EmbeddedBroker`` (see the module's docstring for its settings and scope)."""
    spec = getattr(request, "param", None) or _spec(request.config)
    if request.scope == "session":
        yield _kafka_brokers.get(spec)
        return
    broker = _kafka_brokers.start(spec)
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture(scope=_scope)
def kafka_bootstrap_servers(kafka_broker) -> str:
    """``host:port`` of ``kafka_broker``'s client listener."""
    return kafka_broker.bootstrap_servers


@pytest.fixture
def kafka_client_config(kafka_broker) -> dict:
    """confluent-kafka settings for ``kafka_broker``: a new dict for every test, to add keys to freely (a
    fixture of a broader scope calls ``kafka_broker.client_config()`` itself)."""
    return kafka_broker.client_config("confluent-kafka")


@pytest.fixture
def kafka_topic(request, kafka_broker) -> Iterator[str]:
    """A new topic for this test only (``<test name>-<8 hex digits>``), deleted after the test."""
    marker = request.node.get_closest_marker("kafka_topic")
    options = dict(marker.kwargs) if marker is not None else {}
    unknown = set(options) - {"partitions", "config", "replication_factor"}
    if unknown:
        raise pytest.UsageError(f"kafka_topic marker: unknown argument(s) {', '.join(sorted(unknown))}")
    name = kafka_broker.create_topic(unique_topic_name(request.node.name), partitions=options.get("partitions", 1),
                                     replication_factor=options.get("replication_factor", 1),
                                     config=options.get("config"))
    yield name
    if kafka_broker.running:
        kafka_broker.delete_topic(name)


@pytest.fixture(scope=_scope)
def kafka_admin(kafka_broker):
    """A confluent-kafka ``AdminClient`` for ``kafka_broker``."""
    admin = pytest.importorskip(
        "confluent_kafka.admin",
        reason="kafka_admin is a confluent-kafka AdminClient: pip install confluent-kafka")
    return admin.AdminClient(kafka_broker.client_config("confluent-kafka"))


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory):
    """An ``EmbeddedCluster``: ZooKeeper and three brokers (skipped where ZooKeeper is not installed)."""
    from .zookeeper import ZooKeeperUnavailable

    cluster = EmbeddedCluster(directory=tmp_path_factory.mktemp("kafka-cluster"))
    try:
        cluster.start()
    except ZooKeeperUnavailable as exc:
        pytest.skip(f"kafka_cluster needs ZooKeeper: {exc}")
    except BrokerStartupError as exc:
        raise broker_failed(exc.reason, exc.log) from None
    yield cluster
    cluster.stop()


# -- reports --------------------------------------------------------------------------

_LOG_MARK = pytest.StashKey[tuple[EmbeddedBroker, int]]()


def _tail(text: str, lines: int = LOG_LINES_ATTACHED) -> str:
    kept = text.splitlines()
    if len(kept) <= lines:
        return text
    return f"[... {len(kept) - lines} earlier line(s) left out ...]\n" + "\n".join(kept[-lines:])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach a broker's output to the report: the whole of it when the broker could not start, what it
    printed during the test when a test with a broker failed."""
    excinfo = call.excinfo
    if excinfo is not None and getattr(excinfo.value, "kafka_broker_log", None) is not None:
        item.add_report_section(call.when, _SECTION, _tail(excinfo.value.kafka_broker_log))
    elif call.when == "setup" and excinfo is None:
        broker = getattr(item, "funcargs", {}).get("kafka_broker")
        if isinstance(broker, EmbeddedBroker) and broker.process is not None:
            item.stash[_LOG_MARK] = (broker, broker.process.log_mark())
    elif call.when == "call" and excinfo is not None and _LOG_MARK in item.stash:
        broker, mark = item.stash[_LOG_MARK]
        if broker.process is not None:
            item.add_report_section(call.when, _SECTION, _tail(broker.process.log_text()[mark:]))
    yield

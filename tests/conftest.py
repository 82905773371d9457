"""Fixtures shared by the whole suite.

* ``broker`` — a started ``BrokerProcess`` with the default configuration
  (data plane PLAINTEXT and control plane CONTROLLER on loopback, on the
  ports the kernel gave the broker; it reports them when it is ready);
  stopped with SIGTERM at teardown, which must exit 0.
* ``broker_factory(overrides=None, *, control_plane=True, start=True)`` —
  brokers with overrides; every broker it made is stopped at teardown.

* ``zookeeper`` — a real ZooKeeper (``support/zookeeper.py``) shared by
  a test module, started on loopback port 0 and stopped after the module;
  ``zk_chroot`` — a chroot of its own for each test (``/<test name>``), so a
  test's brokers form a new cluster: ``zookeeper.connect`` is
  ``zookeeper.connect_string(zk_chroot)``.

Tests using ``broker``, ``broker_factory`` or ``zookeeper`` are marked ``integration``.

Under pytest-xdist (``make test``: ``--dist loadfile``) each test file goes to
one worker, except that every Spark test goes to the same worker: a local
Spark session is a JVM with two cores of its own, and two or three of them on
a 2-core machine starve each other and every broker.  The Spark files and
the ZooKeeper cluster files are collected first, so the longest units start
first instead of finishing last.
"""

from __future__ import annotations

import re
import resource
import weakref

import pytest

from support.broker_process import BrokerProcess
from support.zookeeper import ZooKeeperServer
from twisted_kafka.log.file_handles import FileHandleCache


def pytest_configure(config):
    """Raise this process's open-file soft limit to its hard limit, as the broker does at start.

    A worker runs hundreds of in-process broker harnesses, clients and
    ZooKeeper sessions one after the other; the default soft limit of 1024
    is a limit of the machine's defaults, not of anything a test checks
    (the descriptor tests set their own limits on the brokers they start).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else 1 << 20, hard))


#: Every segment-file descriptor cache alive in this process (each ``LogManager`` makes one, and
#: so does ``tests/unit/log/helpers.new_log``), and the ones made during the running test, held
#: until the test's idle descriptors are closed (a dropped cache is otherwise collected with its
#: descriptors still open).
_FILE_CACHES: weakref.WeakSet[FileHandleCache] = weakref.WeakSet()
_FILE_CACHES_OF_THIS_TEST: list[FileHandleCache] = []
_make_file_cache = FileHandleCache.__init__


def _tracked_file_cache(self: FileHandleCache, capacity: int) -> None:
    _make_file_cache(self, capacity)
    _FILE_CACHES.add(self)
    _FILE_CACHES_OF_THIS_TEST.append(self)


FileHandleCache.__init__ = _tracked_file_cache  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def close_idle_segment_files():
    """Close the idle descriptors of every segment file cache after each test.

    Many unit tests drop a ``Log`` or a ``LogManager`` without closing it;
    its cache (``twisted_kafka.log.file_handles.FileHandleCache``, one per
    log manager) keeps its files open until evicted, and its capacity is
    half this session's raised open-file limit, so a worker would otherwise
    hold every segment file of hundreds of tests.  A closed idle descriptor
    is reopened on its next use, so a module-scoped log is unaffected.
    """
    yield
    for cache in list(_FILE_CACHES):
        cache.close_idle()
    _FILE_CACHES_OF_THIS_TEST.clear()


SPARK_TESTS = "tests/integration/spark/"
LONG_FIRST = (SPARK_TESTS, "tests/integration/cluster/")


def pytest_collection_modifyitems(config, items):
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if {"broker", "broker_factory", "zookeeper"} & fixtures or "/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)
    items.sort(key=lambda item: not item.nodeid.startswith(LONG_FIRST))      # stable: file order kept


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile``, with all of tests/integration/spark/ as one unit of work."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LoadFileSparkTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return SPARK_TESTS if nodeid.startswith(SPARK_TESTS) else super()._split_scope(nodeid)

    return LoadFileSparkTogether(config, log)


@pytest.fixture
def broker_factory(tmp_path):
    brokers: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None, *, control_plane: bool = True, start: bool = True,
             timeout: float = 30) -> BrokerProcess:
        broker = BrokerProcess(tmp_path, overrides, control_plane=control_plane)
        brokers.append(broker)
        if start:
            broker.start(timeout)
        return broker

    yield make
    errors = []
    for broker in brokers:
        if broker.running:
            try:
                broker.stop()
            except Exception as exc:  # keep stopping the others
                errors.append(exc)
    if errors:
        raise errors[0]


@pytest.fixture
def broker(broker_factory):
    broker = broker_factory()
    yield broker
    if broker.running:
        status = broker.stop()
        assert status == 0, f"clean stop exited with status {status}\n{broker.log_text()[-4000:]}"


@pytest.fixture(scope="module")
def module_broker(request, tmp_path_factory):
    """One broker shared by a test module (a broker process costs about a second to start).

    A module sets ``BROKER_OVERRIDES = {...}`` to start it with overrides; it is
    stopped with SIGTERM after the module, and the clean stop must exit 0.
    """
    overrides = getattr(request.module, "BROKER_OVERRIDES", None)
    broker = BrokerProcess(tmp_path_factory.mktemp("module-broker"), overrides).start()
    yield broker
    if broker.running:
        status = broker.stop()
        assert status == 0, f"clean stop exited with status {status}\n{broker.log_text()[-4000:]}"


@pytest.fixture(scope="module")
def zookeeper(tmp_path_factory):
    """One real ZooKeeper per test module (about 1.5 s to start: the JVM compiles the launcher first)."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper")).start()
    yield server
    server.stop()


@pytest.fixture
def zk_chroot(request) -> str:
    """A ZooKeeper chroot of this test's own (``zookeeper.connect=host:port/<chroot>``): a new cluster."""
    return "/" + re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name).strip("-")[:80]

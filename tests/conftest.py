"""Fixtures shared by the whole suite.

* ``broker`` — a started ``BrokerProcess`` with the default configuration
  (data plane PLAINTEXT and control plane CONTROLLER on loopback, on the
  ports the kernel gave the broker; it reports them when it is ready);
  stopped with SIGTERM at teardown, which must exit 0.
* ``broker_factory(overrides=None, *, control_plane=True, start=True)`` —
  brokers with overrides; every broker it made is stopped at teardown.

Tests using either fixture are marked ``integration``.
"""

from __future__ import annotations

import pytest

from tests.support.broker_process import BrokerProcess


def pytest_collection_modifyitems(config, items):
    for item in items:
        if {"broker", "broker_factory"} & set(getattr(item, "fixturenames", ())) or "/integration/" in str(item.path):
            item.add_marker(pytest.mark.integration)


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

"""Fixtures of the admin API tests.

``admin_broker`` is one broker shared by a test module (the admin tests use
their own topic names, so they can share it); a module sets
``BROKER_OVERRIDES = {...}`` to start it with overrides.  It must stop
cleanly (exit 0) at the end of the module.  Tests that restart a broker, or
need a broker configured differently, use ``broker_factory``.
"""

from __future__ import annotations

import pytest

from tests.support.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def admin_broker(request, tmp_path_factory):
    overrides = getattr(request.module, "BROKER_OVERRIDES", None)
    broker = BrokerProcess(tmp_path_factory.mktemp("admin"), overrides).start()
    yield broker
    if broker.running:
        status = broker.stop()
        assert status == 0, f"clean stop exited with status {status}\n{broker.log_text()[-4000:]}"


@pytest.fixture
def admin(admin_broker):
    """A confluent-kafka AdminClient of ``admin_broker``."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": admin_broker.bootstrap, "socket.timeout.ms": 10000})

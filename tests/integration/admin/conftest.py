"""Fixtures of the admin API tests.

``admin_broker`` is one broker shared by a test module (the admin tests use
their own topic names, so they can share it); a module sets
``BROKER_OVERRIDES = {...}`` to start it with overrides.  It must stop
cleanly (exit 0) at the end of the module.  Tests that restart a broker, or
need a broker configured differently, use ``broker_factory``.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def admin_broker(module_broker):
    return module_broker


@pytest.fixture
def admin(admin_broker):
    """A confluent-kafka AdminClient of ``admin_broker``."""
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": admin_broker.bootstrap, "socket.timeout.ms": 10000})

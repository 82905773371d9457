"""Fixtures of the data-path tests: ``data_broker`` is the module's shared broker.

The data-path tests each use their own topics, so a module can share one
broker; a module sets ``BROKER_OVERRIDES = {...}`` to configure it.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def data_broker(module_broker):
    return module_broker

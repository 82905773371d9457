"""Fixtures of the data-path tests.

``data_broker`` is one broker shared by a test module (starting a broker
process costs about a second; the data-path tests each use their own topics,
so they can share it).  A module sets ``BROKER_OVERRIDES = {...}`` to start it
with overrides.  It is stopped with SIGTERM at the end of the module, and the
clean stop must exit 0.
"""

from __future__ import annotations

import pytest

from tests.support.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def data_broker(request, tmp_path_factory):
    overrides = getattr(request.module, "BROKER_OVERRIDES", None)
    broker = BrokerProcess(tmp_path_factory.mktemp("data"), overrides).start()
    yield broker
    if broker.running:
        status = broker.stop()
        assert status == 0, f"clean stop exited with status {status}\n{broker.log_text()[-4000:]}"

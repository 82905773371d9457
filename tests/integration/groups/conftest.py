"""Fixtures of the consumer group tests: one broker per module, set up for fast rebalances.

Rebalances here are not about the initial delay (``group.initial.rebalance.delay.ms=0``)
and members use short sessions where a test waits for one to expire, which
the broker must allow (``group.min.session.timeout.ms=1000``).  A module sets
``BROKER_OVERRIDES`` to add to these.
"""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from support.broker_process import BrokerProcess

GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


@pytest.fixture(scope="module")
def group_broker(request, tmp_path_factory):
    overrides = {**GROUP_OVERRIDES, **getattr(request.module, "BROKER_OVERRIDES", {})}
    broker = BrokerProcess(tmp_path_factory.mktemp("group-broker"), overrides).start()
    yield broker
    if broker.running:
        status = broker.stop()
        assert status == 0, f"clean stop exited with status {status}\n{broker.log_text()[-4000:]}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)
    futures[name].result(15)

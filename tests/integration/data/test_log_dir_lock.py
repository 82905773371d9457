"""One broker per log directory: ``.lock`` in each of ``log.dirs``, held while the broker runs.

Kafka locks every log dir (``<dir>/.lock``) at startup and refuses to start
when another process holds it; two brokers writing one directory would
corrupt it (here: INCONSISTENT_TOPIC_ID after the next restart).
"""

from __future__ import annotations

import pytest

from support.broker_process import BrokerExited
from tests.integration.admin.support import produce_one, raw_request
from twisted_kafka.protocol import messages as m

pytestmark = pytest.mark.integration

CT = m.CreateTopicsRequest


def test_second_broker_on_the_same_log_dirs_refuses_to_start(broker_factory):
    first = broker_factory()
    shared = first.log_dirs[0]
    raw_request(first, CT(topics=[CT.CreatableTopic(name="mine", num_partitions=1, replication_factor=1,
                                                    assignments=[], configs=[])],
                          timeout_ms=10000, validate_only=False), 4)
    assert produce_one(first, "mine") == 0

    second = broker_factory({"log.dirs": shared}, start=False)
    with pytest.raises(BrokerExited) as exited:
        second.start()
    assert exited.value.returncode == 1
    lines = [line for line in second.log_text().splitlines() if "Broker startup failed" in line]
    assert len(lines) == 1, second.log_text()[-3000:]
    assert "log.dirs" in lines[0] and shared in lines[0] and str(first.pid) in lines[0]

    # The first broker is untouched; once it stops, the directory is free again.
    assert produce_one(first, "mine") == 0
    assert first.stop() == 0
    second.start()
    assert produce_one(second, "mine") == 0
    assert second.stop() == 0
    first.start()
    assert produce_one(first, "mine") == 0

"""The default log has no debug lines: a broker started from the shipped ``etc/server.properties``
logs at info and above (Kafka's log4j root level), through a topic created, records produced, a
consumer group joined and its offsets committed -- which log at debug (the group coordinator's
elections, among others).  ``TWISTED_KAFKA_DEBUG=1`` keeping them is shown on the observer itself
(tests/unit/server/test_startup.py).
"""

from __future__ import annotations

import re
import time

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from support.broker_process import BrokerProcess

pytestmark = pytest.mark.integration

DEBUG_LINE = re.compile(r"^\S+ \[[^\]]*#debug\] ", re.MULTILINE)


def traffic(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("logged", 1, 1)])["logged"].result(15)
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("logged", b"%d" % i)
    assert producer.flush(15) == 0
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "logged",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["logged"])
        got, deadline = 0, time.monotonic() + 30     # a bound on a broken broker, not a pause
        while got < 10 and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is not None and not message.error():
                got += 1
        assert got == 10
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def test_the_shipped_config_logs_no_debug_lines(tmp_path):
    broker = BrokerProcess(tmp_path).start()
    traffic(broker)
    assert broker.stop() == 0
    log = broker.log_text()
    assert "Broker shut down" in log
    assert DEBUG_LINE.findall(log) == [], DEBUG_LINE.findall(log)[:5]

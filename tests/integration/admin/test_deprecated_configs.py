"""Keys Kafka 3.x has deprecated but still accepts are accepted here too, with a warning.

``message.format.version`` / ``log.message.format.version`` (KIP-724: ignored
from inter-broker protocol 3.0) and ``message.timestamp.difference.max.ms`` /
``log.message.timestamp.difference.max.ms`` (KIP-937: replaced by the
``before``/``after`` pair).  Tools and old configurations still send them, and
a Kafka 3.x broker answers them without an error: a topic created with
``message.format.version=2.8`` exists, a ``server.properties`` that sets
``log.message.format.version`` starts.  Each is warned about in the broker log.
"""

from __future__ import annotations

import re

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from support.broker_process import BrokerProcess

pytestmark = pytest.mark.integration


def test_deprecated_keys_are_accepted_with_a_warning(tmp_path):
    broker = BrokerProcess(tmp_path, {"log.message.format.version": "2.8",
                                      "log.message.timestamp.difference.max.ms": "3600000"}).start()
    try:
        log = broker.log_text()
        assert re.search(r"log\.message\.format\.version=2\.8 is deprecated.*KIP-724", log), log
        assert "Ignoring unknown configuration log.message.format.version" not in log
        mark = broker.log_mark()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        created = admin.create_topics([NewTopic("old-format", 1, 1, config={
            "message.format.version": "2.8", "message.timestamp.difference.max.ms": "60000"})])
        assert created["old-format"].result(10) is None
        broker.wait_for_log(r"message\.format\.version.*old-format.*deprecated", after=mark)
        [described] = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "old-format")]).values()
        configs = described.result(10)
        assert configs["message.format.version"].value == "2.8"
        assert configs["message.timestamp.difference.max.ms"].value == "60000"
        # A value Kafka's validator refuses is still refused.
        refused = admin.create_topics([NewTopic("bad-format", 1, 1, config={"message.format.version": "x.y"})])
        with pytest.raises(Exception) as failed:
            refused["bad-format"].result(10)
        assert "message.format.version" in str(failed.value)
    finally:
        assert broker.stop() == 0

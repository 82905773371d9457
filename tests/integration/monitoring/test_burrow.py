"""Burrow (Debian's package, run for real) reports a real consumer group's lag, as the CLI and /metrics do.

A consumer group reads part of a topic and commits where it stopped, then
leaves; the lag is then fixed.  Burrow consumes ``__consumer_offsets`` to
learn the commits and asks the broker every partition's latest offset
(ListOffsets v0: Burrow 1.2 sends nothing newer, which is why the broker
keeps v0 -- without it Burrow's offset requests got their connection closed
and it never knew the group).  Its per-partition ``current_lag`` must equal
``twisted-kafka-consumer-groups --describe``'s LAG column and the broker's
``kafka_consumergroup_group_lag`` series.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.burrow import BURROW, Burrow
from support.scrape import scrape
from support.wait import wait_until
from tests.integration.tools.support import run

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(not shutil.which(BURROW), reason="needs Debian's burrow (bin/install-system-deps)")]

TOPIC, GROUP = "burrowed", "lagging"
PRODUCED = {0: 100, 1: 80, 2: 60}
COMMITTED = {0: 40, 1: 80, 2: 15}
LAG = {p: PRODUCED[p] - COMMITTED[p] for p in PRODUCED}


@pytest.fixture(scope="module")
def lagging_group(module_broker):
    """The group ``lagging`` has committed COMMITTED of a topic holding PRODUCED records, and left."""
    bootstrap = module_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, len(PRODUCED), 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, count in PRODUCED.items():
        for i in range(count):
            producer.produce(TOPIC, value=b"v%d" % i, partition=partition)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([TOPIC])

    def a_message() -> bool:
        message = consumer.poll(0.2)
        return message is not None and not message.error()

    wait_until(a_message, timeout=30, what="the group's first message")     # joined, assigned, reading
    done = consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in COMMITTED.items()], asynchronous=False)
    assert all(tp.error is None for tp in done)
    consumer.close()
    return module_broker


def test_burrow_reports_the_lag_the_cli_and_metrics_report(lagging_group, zookeeper, tmp_path):
    broker = lagging_group
    with zookeeper.client() as client:      # ZooKeeper serves sessions (Burrow does not retry its first)
        client.get_children("/")
    burrow = Burrow(tmp_path, zookeeper.hosts, broker.bootstrap).start()
    started = time.monotonic()
    try:
        status = burrow.wait_for_lag(GROUP, lambda s: len(s["partitions"]) == len(PRODUCED)
                                     and s["totallag"] == sum(LAG.values()))
        print(f"Burrow reported the group {time.monotonic() - started:.1f} s after it started")
        by_burrow = {p["partition"]: p["current_lag"] for p in status["partitions"] if p["topic"] == TOPIC}
        assert by_burrow == LAG
        assert {p["partition"]: p["end"]["offset"] for p in status["partitions"]} == COMMITTED
        topic = burrow.get(f"/v3/kafka/{burrow.cluster}/topic/{TOPIC}")
        assert topic["offsets"] == [PRODUCED[p] for p in sorted(PRODUCED)]        # from ListOffsets v0
    finally:
        burrow.stop()
    assert '"failed to fetch offsets from broker"' not in burrow.log_text()

    described = run("consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe", "--group", GROUP)
    assert described.code == 0 and described.err_lines == [f"Consumer group '{GROUP}' has no active members."]
    rows = [line.split() for line in described.lines if line.startswith(GROUP + " ")]
    by_cli = {int(row[2]): int(row[5]) for row in rows if row[1] == TOPIC}
    assert by_cli == LAG

    metrics = scrape(broker.admin_url)
    by_metrics = {int(dict(labels)["partition"]): value
                  for labels, value in metrics.series("kafka_consumergroup_group_lag").items()
                  if dict(labels)["group"] == GROUP and dict(labels)["topic"] == TOPIC}
    assert by_metrics == LAG
    assert metrics.value("kafka_consumergroup_group_sum_lag", group=GROUP) == sum(LAG.values())
    assert metrics.value("kafka_consumergroup_group_max_lag", group=GROUP) == max(LAG.values())
    assert metrics.value("kafka_consumergroup_group_state", group=GROUP, state="Empty") == 1
    with urllib.request.urlopen(broker.admin_url + f"/v1/groups?group={GROUP}", timeout=10) as response:
        [group] = json.loads(response.read())["groups"]
    assert (group["state"], group["member_count"], group["total_lag"]) == ("Empty", 0, sum(LAG.values()))

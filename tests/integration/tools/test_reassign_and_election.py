"""twisted-kafka-reassign-partitions, -leader-election and the topics tool's reports on a three-broker cluster.

One ZooKeeper cluster for the module: partitions are moved to other brokers
(--generate, --execute, --verify, --list), a broker is stopped so the
topics tool reports under-replicated and unavailable partitions (and the
brokers' UnderReplicatedPartitions and OfflinePartitionsCount metrics and
admin views show them) and an unclean election has no replica to elect, and once it is back a preferred
election gives its partitions back to it.  What the tools did is checked in
the brokers' Metadata answers (they must all agree) and by reading the
moved data back.
"""

from __future__ import annotations

import json
import re
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from support.cluster import Cluster
from support.scrape import scrape
from support.wait import wait_until

from .support import fails, ok, run


def admin_get(broker, path: str) -> dict:
    with urllib.request.urlopen(broker.admin_url + path, timeout=10) as response:
        return json.loads(response.read())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, zookeeper):
    cluster = Cluster(tmp_path_factory.mktemp("tools-cluster"), zookeeper, "/tools-cluster",
                      overrides={"auto.leader.rebalance.enable": "false", "num.partitions": "1"}).start()
    yield cluster
    statuses = cluster.stop()
    assert set(statuses.values()) <= {0}, statuses


def test_generate_execute_verify_moves_the_partitions(cluster, tmp_path):
    bootstrap = cluster.bootstrap()
    ok("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "moving", "--replica-assignment", "1:2,2:1")
    cluster.wait_consistent(lambda md: "moving" in md.topics and all(len(v.isr) == 2 for v in
                                                                     md.partitions("moving").values()))
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        producer.produce("moving", f"r{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0

    topics_file = tmp_path / "topics.json"
    topics_file.write_text(json.dumps({"version": 1, "topics": [{"topic": "moving"}]}))
    generated = ok("reassign-partitions", "--bootstrap-server", bootstrap, "--generate", "--topics-to-move-json-file",
                   str(topics_file), "--broker-list", "2,3")
    lines = generated.lines
    assert lines[0] == "Current partition replica assignment" and lines[2] == ""
    assert lines[3] == "Proposed partition reassignment configuration" and len(lines) == 5
    assert json.loads(lines[1]) == {"version": 1, "partitions": [
        {"topic": "moving", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
        {"topic": "moving", "partition": 1, "replicas": [2, 1], "log_dirs": ["any", "any"]}]}
    proposal = json.loads(lines[4])
    targets = {p["partition"]: p["replicas"] for p in proposal["partitions"]}
    assert set(targets) == {0, 1} and all(sorted(r) == [2, 3] for r in targets.values())

    plan = tmp_path / "plan.json"
    plan.write_text(lines[4])
    executed = ok("reassign-partitions", "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file",
                  str(plan))
    assert executed.lines == ["Current partition replica assignment", "", lines[1], "",
                              "Save this to use as the --reassignment-json-file option during rollback",
                              "Successfully started partition reassignments for moving-0,moving-1"]

    def verified():
        ran = ok("reassign-partitions", "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file",
                 str(plan))
        return ran.lines if "is still in progress" not in ran.out else None

    assert wait_until(verified, timeout=30, what="the reassignment to complete") == [
        "Status of partition reassignment:", "Reassignment of partition moving-0 is completed.",
        "Reassignment of partition moving-1 is completed.", "Clearing broker-level throttles on brokers 1,2,3",
        "Clearing topic-level throttles on topic moving"]
    md = cluster.wait_consistent(lambda md: {p: list(v.replicas) for p, v in md.partitions("moving").items()}
                                 == targets)
    assert all(set(v.isr) == {2, 3} for v in md.partitions("moving").values())
    assert ok("reassign-partitions", "--bootstrap-server", bootstrap, "--list").lines == [
        "No partition reassignments found."]

    # the data moved with the partitions: broker 3, which had none of it, serves all of it
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap(3), "group.id": "moved", "auto.offset.reset":
                         "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition("moving", 0, 0), TopicPartition("moving", 1, 0)])
    values = set()
    while len(values) < 20:
        message = consumer.poll(10)
        assert message is not None and message.error() is None, message and message.error()
        values.add(message.value())
    consumer.close()
    assert values == {f"r{i}".encode() for i in range(20)}

    assert fails("reassign-partitions", "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file",
                 str(plan), "--broker-list", "1") == (
        'twisted-kafka-reassign-partitions: Option "[broker-list]" can\'t be used with action "[execute]"')
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [7]}]}))
    assert fails("reassign-partitions", "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file",
                 str(plan)) == "Error: Unknown broker id 7"


def test_reports_and_elections_around_a_stopped_broker(cluster, tmp_path):
    bootstrap = cluster.bootstrap()
    ok("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "led", "--replica-assignment", "1:2")
    ok("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "solo", "--replica-assignment", "1")
    cluster.wait_consistent(lambda md: {"led", "solo"} <= set(md.topics) and md.leaders("led") == {0: 1}
                            and len(md.partitions("led")[0].isr) == 2 and md.leaders("solo") == {0: 1})
    assert cluster.broker(1).stop() == 0
    cluster.wait_consistent(lambda md: md.broker_ids == [2, 3] and md.leaders("led") == {0: 2}
                            and md.leaders("solo") == {0: -1})
    bootstrap = cluster.bootstrap()

    under = ok("topics", "--bootstrap-server", bootstrap, "--describe", "--under-replicated-partitions").lines
    assert "\tTopic: led\tPartition: 0\tLeader: 2\tReplicas: 1,2\tIsr: 2\tElr: N/A\tLastKnownElr: N/A" in under
    assert not any("Topic: moving" in line for line in under)            # fully replicated on 2 and 3
    # (the broker's internal topics may have replicas on broker 1 too: they are listed by the same rules)
    assert all(re.search(r"\tReplicas: ([\d,]*,)?1(,[\d,]*)?\t", line) for line in under), under
    unavailable = ok("topics", "--bootstrap-server", bootstrap, "--describe", "--unavailable-partitions").lines
    assert "\tTopic: solo\tPartition: 0\tLeader: none\tReplicas: 1\tIsr: 1\tElr: N/A\tLastKnownElr: N/A" in unavailable
    assert all("\tLeader: none\tReplicas: 1\t" in line for line in unavailable), unavailable

    # what the brokers' /metrics say meanwhile: broker 2 leads led-0 with broker 1 out of the ISR, and the
    # controller counts solo-0 (its only replica on broker 1) offline; one controller in the cluster
    metrics = {b: scrape(cluster.broker(b).admin_url) for b in (2, 3)}
    assert metrics[2].value("kafka_server_replicamanager_underreplicatedpartitions") >= 1
    controller = cluster.controller_id()
    assert metrics[controller].value("kafka_controller_kafkacontroller_offlinepartitionscount") >= 1
    assert sum(m.value("kafka_controller_kafkacontroller_activecontrollercount") for m in metrics.values()) == 1
    (other,) = {2, 3} - {controller}
    assert metrics[other].value("kafka_controller_kafkacontroller_offlinepartitionscount") == 0    # not the controller
    topics = {t["name"]: t for t in admin_get(cluster.broker(2), "/v1/topics")["topics"]}
    assert topics["led"]["under_replicated"] == 1 and topics["solo"]["offline"] == 1
    brokers = admin_get(cluster.broker(3), "/v1/brokers")
    assert [b["broker_id"] for b in brokers["brokers"]] == [2, 3] and brokers["replicas_on_missing_brokers"]["1"] >= 2

    # an unclean election needs a live replica; solo's only one is down
    unclean = run("leader-election", "--bootstrap-server", bootstrap, "--election-type", "unclean", "--topic", "solo",
                  "--partition", "0")
    assert unclean.code == 1 and unclean.err_lines == ["1 replica(s) could not be elected"]
    assert unclean.lines[0].startswith("Error completing leader election (UNCLEAN) for partition: solo-0: ")

    cluster.broker(1).start()
    cluster.wait_consistent(lambda md: md.broker_ids == [1, 2, 3] and set(md.partitions("led")[0].isr) == {1, 2})
    assert cluster.metadata(1).leaders("led") == {0: 2}                  # no automatic rebalance
    elections = tmp_path / "elections.json"
    elections.write_text(json.dumps({"partitions": [{"topic": "led", "partition": 0}]}))
    assert ok("leader-election", "--bootstrap-server", bootstrap, "--election-type", "preferred",
              "--path-to-json-file", str(elections)).lines == [
        "Successfully completed leader election (PREFERRED) for partitions led-0"]
    cluster.wait_consistent(lambda md: md.leaders("led") == {0: 1})
    assert ok("leader-election", "--bootstrap-server", bootstrap, "--election-type", "preferred", "--topic", "led",
              "--partition", "0").lines == ["Valid replica already elected for partitions led-0"]
    assert fails("leader-election", "--bootstrap-server", bootstrap, "--election-type", "preferred") == (
        "twisted-kafka-leader-election: One and only one of the following options is required: topic, "
        "all-topic-partitions, path-to-json-file")

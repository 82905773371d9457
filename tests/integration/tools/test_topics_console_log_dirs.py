"""twisted-kafka-topics, -console-producer, -console-consumer and -log-dirs against one broker process.

Each command runs as the installed console script outside any virtualenv;
its printed lines are checked against Kafka's forms, and what it did is
checked independently with confluent-kafka's own clients (and the files in
the broker's log directory).
"""

from __future__ import annotations

import json
import os
import re
import time

import pytest
from confluent_kafka import Consumer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient

from support.wait import wait_until

from .support import fails, ok, run

BROKER_OVERRIDES = {"num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}
PARTITION_LINE = re.compile(r"^\tTopic: (\S+)\tPartition: (\d+)\tLeader: (\d+|none)\tReplicas: ([\d,]*)\tIsr: ([\d,]*)"
                            r"\tElr: N/A\tLastKnownElr: N/A$")


@pytest.fixture(scope="module")
def bootstrap(module_broker) -> str:
    return module_broker.bootstrap


@pytest.fixture(scope="module")
def admin(bootstrap) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def describe(admin: AdminClient, topic: str):
    return admin.describe_topics(TopicCollection([topic]))[topic].result(timeout=30)


def test_create_describe_alter_list_delete(bootstrap, admin):
    assert ok("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "orders", "--partitions", "3",
              "--replication-factor", "1", "--config", "retention.ms=60000").lines == ["Created topic orders."]
    line = fails("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "orders", "--partitions", "3")
    assert line.startswith("Error while executing topic command : ") and "already exists" in line
    assert "TOPIC_ALREADY_EXISTS" in line
    assert ok("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "orders", "--if-not-exists").out == ""

    truth = describe(admin, "orders")
    described = ok("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "orders").lines
    head = re.fullmatch(r"Topic: orders\tTopicId: (\S+)\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: (.*)",
                        described[0])
    assert head is not None, described
    # Java's Uuid.toString: URL-safe base64 (confluent-kafka prints the standard alphabet)
    assert head[1] == str(truth.topic_id).replace("+", "-").replace("/", "_")
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", head[1]) and "retention.ms=60000" in head[2].split(",")
    assert ok("topics", "--bootstrap-server", bootstrap, "--describe", "--topic-id", head[1]).lines == described
    rows = [PARTITION_LINE.fullmatch(line) for line in described[1:]]
    assert all(rows) and len(rows) == 3, described
    expected = {p.id: (str(p.leader.id), ",".join(str(r.id) for r in p.replicas), ",".join(str(r.id) for r in p.isr))
                for p in truth.partitions}
    assert {int(r[2]): (r[3], r[4], r[5]) for r in rows} == expected

    ok("topics", "--bootstrap-server", bootstrap, "--alter", "--topic", "orders", "--partitions", "5")
    assert len(describe(admin, "orders").partitions) == 5
    assert "\tPartitionCount: 5\t" in ok("topics", "--bootstrap-server", bootstrap, "--describe", "--topic",
                                         "orders").lines[0]
    # a single in-sync replica per partition: nothing to report, for the report flags
    for report in ("--under-replicated-partitions", "--unavailable-partitions"):
        assert ok("topics", "--bootstrap-server", bootstrap, "--describe", report).out == ""

    ok("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "orders.dlq")
    assert ok("topics", "--bootstrap-server", bootstrap, "--list", "--topic", "ord.*").lines == ["orders", "orders.dlq"]
    assert ok("topics", "--bootstrap-server", bootstrap, "--list", "--topic", "orders").lines == ["orders"]
    assert "__connection_events" not in ok("topics", "--bootstrap-server", bootstrap, "--list",
                                           "--exclude-internal").lines

    ok("topics", "--bootstrap-server", bootstrap, "--delete", "--topic", "orders\\.dlq")
    wait_until(lambda: "orders.dlq" not in admin.list_topics(timeout=10).topics, what="topic deleted")
    assert fails("topics", "--bootstrap-server", bootstrap, "--delete", "--topic", "orders.dlq") == \
        "Error while executing topic command : Topic 'orders.dlq' does not exist as expected"
    assert ok("topics", "--bootstrap-server", bootstrap, "--delete", "--topic", "orders.dlq", "--if-exists").out == ""


def test_bad_commands_are_one_line_and_exit_1(bootstrap):
    assert fails("topics", "--bootstrap-server", bootstrap, "--list", "--create") == (
        "twisted-kafka-topics: Command must include exactly one action: --list, --describe, --create, --alter or "
        "--delete")
    assert fails("topics", "--bootstrap-server", bootstrap, "--create") == \
        'twisted-kafka-topics: Missing required argument "[topic]"'
    assert fails("topics", "--bootstrap-server", bootstrap, "--alter", "--topic", "x", "--partitions", "2",
                 "--config", "a=b").startswith('twisted-kafka-topics: Option "[config]" can\'t be used')
    assert fails("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", "nope") == \
        "Error while executing topic command : Topic 'nope' does not exist as expected"
    started = time.monotonic()
    line = fails("topics", "--bootstrap-server", "127.0.0.1:1", "--list")
    assert line.startswith("Error while executing topic command : cannot reach 127.0.0.1:1: ")
    assert "Connection refused" in line and time.monotonic() - started < 20
    assert run("topics").code == 1                   # no argument: the options, and Kafka's exit status


def test_the_bin_wrapper_runs_outside_a_virtualenv(bootstrap):
    ok("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "wrapped", wrapper=True)
    assert "wrapped" in ok("topics", "--bootstrap-server", bootstrap, "--list", wrapper=True).lines


def test_console_producer_and_consumer_round_trip(bootstrap):
    ok("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "console", "--partitions", "1")
    lines = "h1:x,h2:y|k1\tone\nh1:z|k2\ttwo\nNULL|NULL\tthree\n"
    ok("console-producer", "--bootstrap-server", bootstrap, "--topic", "console", "--property", "parse.key=true",
       "--property", "parse.headers=true", "--property", "headers.delimiter=|", "--property", "null.marker=NULL",
       input=lines)
    consumed = run("console-consumer", "--bootstrap-server", bootstrap, "--topic", "console", "--from-beginning",
                   "--max-messages", "3", "--property", "print.key=true", "--property", "print.headers=true",
                   "--property", "print.partition=true", "--property", "print.offset=true")
    assert consumed.code == 0, consumed.err
    assert consumed.lines == ["Partition:0\tOffset:0\th1:x,h2:y\tk1\tone", "Partition:0\tOffset:1\th1:z\tk2\ttwo",
                              "Partition:0\tOffset:2\tNO_HEADERS\tnull\tthree"]
    assert consumed.err_lines == ["Processed a total of 3 messages"]

    # the records as a librdkafka consumer reads them
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "console-check", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("console", 0, 0)])
    records = []
    while len(records) < 3:
        message = consumer.poll(10)
        assert message is not None and message.error() is None
        records.append((message.key(), message.value(), message.headers()))
    consumer.close()
    assert records == [(b"k1", b"one", [("h1", b"x"), ("h2", b"y")]), (b"k2", b"two", [("h1", b"z")]),
                       (None, b"three", None)]

    # one partition from an offset, ending when nothing more comes
    tail = run("console-consumer", "--bootstrap-server", bootstrap, "--topic", "console", "--partition", "0",
               "--offset", "1", "--timeout-ms", "1500")
    assert (tail.code, tail.lines, tail.err_lines) == (0, ["two", "three"], ["Processed a total of 2 messages"])

    # a line without the key separator stops the producer with Kafka's message, after what came before
    refused = run("console-producer", "--bootstrap-server", bootstrap, "--topic", "console", "--property",
                  "parse.key=true", input="k4\tfour\nno separator\n")
    assert refused.code == 1 and refused.err_lines == ["No key separator found on line number 2: 'no separator'"]
    last = run("console-consumer", "--bootstrap-server", bootstrap, "--topic", "console", "--partition", "0",
               "--offset", "3", "--timeout-ms", "1500")
    assert last.lines == ["four"]


def test_log_dirs_describes_the_broker_directory(bootstrap, module_broker):
    ok("topics", "--bootstrap-server", bootstrap, "--create", "--topic", "sized", "--partitions", "2")
    ok("console-producer", "--bootstrap-server", bootstrap, "--topic", "sized", input="a\n" * 50)
    ran = ok("log-dirs", "--bootstrap-server", bootstrap, "--describe", "--topic-list", "sized")
    assert ran.lines[:2] == ["Querying brokers for log directories information",
                             "Received log directory information from brokers 0"]
    described = json.loads(ran.lines[2])
    log_dir = os.path.abspath(module_broker.effective("log.dirs"))
    assert described["version"] == 1 and [b["broker"] for b in described["brokers"]] == [0]
    (directory,) = described["brokers"][0]["logDirs"]
    assert directory["logDir"] == log_dir and directory["error"] is None
    on_disk = {f"sized-{p}": sum(os.path.getsize(os.path.join(log_dir, f"sized-{p}", name))
                                 for name in os.listdir(os.path.join(log_dir, f"sized-{p}")) if name.endswith(".log"))
               for p in (0, 1)}
    assert {p["partition"]: p["size"] for p in directory["partitions"]} == on_disk
    assert sum(on_disk.values()) > 0
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in directory["partitions"])
    assert fails("log-dirs", "--bootstrap-server", bootstrap, "--describe", "--broker-list", "7") == (
        "ERROR: The given brokers do not exist from --broker-list: 7. Current existent brokers: 0")

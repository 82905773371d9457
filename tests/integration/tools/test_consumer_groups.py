"""twisted-kafka-consumer-groups against one broker process, with real confluent-kafka consumers.

The lag the tool prints is the lag the group's own consumer measures (its
committed offsets against the high watermarks librdkafka reports), and an
offset reset moves a stopped group's offsets: a consumer joining the group
afterwards starts exactly there.  ``--dry-run`` changes nothing.
"""

from __future__ import annotations

import datetime
import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.wait import wait_until

from .support import fails, ok, run

BROKER_OVERRIDES = {"num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}
TOPIC = "events"
PARTITIONS = 3
PER_PARTITION = 10
COLUMNS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
           "CLIENT-ID"]


@pytest.fixture(scope="module")
def cluster(module_broker):
    """The broker, an admin client, and ``events``: 10 records a partition, record i stamped base + i s."""
    bootstrap = module_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(timeout=30)
    base = (int(time.time()) - 3600) * 1000
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(PARTITIONS):
        for i in range(PER_PARTITION):
            producer.produce(TOPIC, f"{partition}-{i}".encode(), partition=partition, timestamp=base + i * 1000)
    assert producer.flush(30) == 0
    return bootstrap, admin, base


def consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"{group}-client",
                     "enable.auto.commit": False, "auto.offset.reset": "earliest", **extra})


def consume(c: Consumer, count: int) -> list:
    got = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        message = c.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message)
    assert len(got) == count
    return got


def committed(admin: AdminClient, group: str) -> dict[int, int]:
    request = [ConsumerGroupTopicPartitions(group)]
    answer = admin.list_consumer_group_offsets(request)[group].result(timeout=30)
    return {tp.partition: tp.offset for tp in answer.topic_partitions if tp.topic == TOPIC and tp.offset >= 0}


def table(out: str) -> list[dict[str, str]]:
    """Kafka's --describe table: the header, then rows split on whitespace (no field holds a space)."""
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0].split() == COLUMNS, out
    return [dict(zip(COLUMNS, line.split(), strict=True)) for line in lines[1:]]


def describe(bootstrap: str, group: str, *flags: str):
    return run("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group, *flags)


def test_lag_is_what_the_consumer_measures(cluster):
    bootstrap, admin, _ = cluster
    c = consumer(bootstrap, "lagging")
    c.subscribe([TOPIC])
    consume(c, 13)
    c.commit(asynchronous=False)
    partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    measured = {}
    for tp in c.committed(partitions, timeout=10):
        low, high = c.get_watermark_offsets(tp, timeout=10)
        measured[tp.partition] = (tp.offset, high, high - tp.offset) if tp.offset >= 0 else (None, high, None)
    assert sum(offset or 0 for offset, _, _ in measured.values()) == 13     # from 0: committed = consumed
    try:
        ran = describe(bootstrap, "lagging")
        assert ran.code == 0, ran.err
        rows = table(ran.out)
        assert sorted(int(r["PARTITION"]) for r in rows) == list(range(PARTITIONS))
        for row in rows:
            offset, high, lag = measured[int(row["PARTITION"])]
            assert row["GROUP"] == "lagging" and row["TOPIC"] == TOPIC
            assert row["CURRENT-OFFSET"] == ("-" if offset is None else str(offset))
            assert row["LOG-END-OFFSET"] == str(high)
            assert row["LAG"] == ("-" if lag is None else str(lag))
            assert row["CONSUMER-ID"] == c.memberid() and row["CLIENT-ID"] == "lagging-client"
            assert row["HOST"] == "/127.0.0.1"

        members = describe(bootstrap, "lagging", "--members", "--verbose")
        assert members.code == 0, members.err
        header, row = [line.split() for line in members.lines if line.strip()]
        assert header == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"]
        assert row == ["lagging", c.memberid(), "/127.0.0.1", "lagging-client", "3", "(0,1,2)"]

        state = describe(bootstrap, "lagging", "--state")
        header, row = [line.split("  ") for line in state.lines if line.strip()]
        assert [h.strip() for h in header if h.strip()][-1] == "#MEMBERS"
        assert [v.strip() for v in row if v.strip()][-2:] == ["Stable", "1"]

        # a group with a member cannot be reset: Kafka's message, exit 1, nothing changed
        before = committed(admin, "lagging")
        refused = run("consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", "lagging",
                      "--all-topics", "--to-earliest", "--execute")
        assert refused.code == 1
        assert refused.err_lines == ["Error: Assignments can only be reset if the group 'lagging' is inactive, but "
                                     "the current state is Stable."]
        assert committed(admin, "lagging") == before
    finally:
        c.close()
    listed = ok("consumer-groups", "--bootstrap-server", bootstrap, "--list", "--state")
    assert ["lagging", "Empty"] in [line.split() for line in listed.lines]


def test_reset_offsets_moves_a_stopped_group_and_it_resumes_there(cluster):
    bootstrap, admin, base = cluster
    c = consumer(bootstrap, "resetting")
    c.subscribe([TOPIC])
    consume(c, PARTITIONS * PER_PARTITION)
    c.commit(asynchronous=False)
    c.close()
    assert committed(admin, "resetting") == {p: PER_PARTITION for p in range(PARTITIONS)}

    def reset(*scenario: str) -> list[list[str]]:
        ran = run("consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", "resetting",
                  *scenario)
        assert ran.code == 0 and not ran.err_lines, (ran.out, ran.err)
        lines = [line.split() for line in ran.lines if line.strip()]
        assert lines[0] == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
        return lines[1:]

    # --dry-run: the plan is printed, nothing moves
    assert reset("--topic", f"{TOPIC}:0", "--to-offset", "2", "--dry-run") == [["resetting", TOPIC, "0", "2"]]
    assert committed(admin, "resetting") == {p: PER_PARTITION for p in range(PARTITIONS)}

    assert reset("--topic", f"{TOPIC}:0,1", "--to-offset", "4", "--execute") == [
        ["resetting", TOPIC, "0", "4"], ["resetting", TOPIC, "1", "4"]]
    assert committed(admin, "resetting") == {0: 4, 1: 4, 2: PER_PARTITION}

    assert reset("--all-topics", "--shift-by", "-3", "--execute") == [
        ["resetting", TOPIC, "0", "1"], ["resetting", TOPIC, "1", "1"], ["resetting", TOPIC, "2", "7"]]
    assert committed(admin, "resetting") == {0: 1, 1: 1, 2: 7}

    assert reset("--topic", f"{TOPIC}:0", "--to-earliest", "--execute") == [["resetting", TOPIC, "0", "0"]]
    assert reset("--topic", f"{TOPIC}:1", "--to-latest", "--execute") == [["resetting", TOPIC, "1", "10"]]
    assert committed(admin, "resetting") == {0: 0, 1: PER_PARTITION, 2: 7}

    # the first record stamped at or after base + 5.5 s is record 6, on every partition
    moment = datetime.datetime.fromtimestamp((base + 5500) / 1000, datetime.UTC)
    when = moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}"
    assert reset("--topic", f"{TOPIC}:2", "--to-datetime", when, "--execute") == [["resetting", TOPIC, "2", "6"]]
    assert committed(admin, "resetting") == {0: 0, 1: PER_PARTITION, 2: 6}

    exported = ok("consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", "resetting",
                  "--all-topics", "--to-current", "--export", "--dry-run")
    assert [line for line in exported.lines if line] == [f"{TOPIC},0,0", f"{TOPIC},1,10", f"{TOPIC},2,6"]

    # the group resumes where the offsets were put: partition 0 from its start, 2 from record 6, 1 at its end
    c = consumer(bootstrap, "resetting", **{"auto.offset.reset": "earliest"})
    c.subscribe([TOPIC])
    first: dict[int, tuple[int, bytes]] = {}
    got = consume(c, PER_PARTITION + (PER_PARTITION - 6))
    for message in got:
        first.setdefault(message.partition(), (message.offset(), message.value()))
    assert c.poll(1) is None                          # nothing more: partition 1 resumed at its end
    c.close()
    assert first == {0: (0, b"0-0"), 2: (6, b"2-6")}
    assert sorted(m.value() for m in got) == sorted([f"0-{i}".encode() for i in range(10)]
                                                    + [f"2-{i}".encode() for i in range(6, 10)])


def test_delete_offsets_and_groups(cluster):
    bootstrap, admin, _ = cluster
    c = consumer(bootstrap, "leaving")
    c.subscribe([TOPIC])
    consume(c, PARTITIONS * PER_PARTITION)
    c.commit(asynchronous=False)
    c.close()
    deleted = ok("consumer-groups", "--bootstrap-server", bootstrap, "--delete-offsets", "--group", "leaving",
                 "--topic", f"{TOPIC}:0")
    lines = [line.split() for line in deleted.lines if line.strip()]
    assert lines == [["Request", "succeed", "for", "deleting", "offsets", "with", "topic", f"{TOPIC}:0", "group",
                      "leaving"], ["TOPIC", "PARTITION", "STATUS"], [TOPIC, "0", "Successful"]]
    assert committed(admin, "leaving") == {1: PER_PARTITION, 2: PER_PARTITION}

    assert ok("consumer-groups", "--bootstrap-server", bootstrap, "--delete", "--group", "leaving").lines == [
        "Deletion of requested consumer groups ('leaving') was successful."]
    wait_until(lambda: "leaving" not in ok("consumer-groups", "--bootstrap-server", bootstrap, "--list").lines,
               what="group deleted")
    assert fails("consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", "leaving") == \
        "Error: Consumer group 'leaving' does not exist."
    assert fails("consumer-groups", "--bootstrap-server", bootstrap, "--reset-offsets", "--group", "x",
                 "--to-earliest") == \
        "twisted-kafka-consumer-groups: One of the reset scopes should be defined: --all-topics, --topic."

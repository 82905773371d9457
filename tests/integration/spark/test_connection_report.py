"""The connection report against a broker the test loads with accepted, quota-rejected and closed connections.

The broker (``max.connections.per.ip=2``) has three listeners: PLAINTEXT,
where the test's raw connections go (from 127.0.0.1 and 127.0.0.2), TOOLS,
where every client of the test's tooling goes (the consumer that waits for
the events, Spark's driver and executors), and the CONTROLLER control plane,
where the broker's own controller connects once at startup.  Tooling
connections are counted in other rows (listener TOOLS), so the PLAINTEXT
and CONTROLLER rows of the report must be exactly what the test did;
127.0.0.1 may hold more connections than 2 (``max.connections.per.ip.overrides``)
so the tooling is never refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC

import pytest

from support.broker_process import REPO_ROOT, BrokerProcess
from support.raw_client import RawClient
from twisted_kafka.spark.connection_report import CONNECTION_EVENTS_TOPIC, run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
REPORT_SCRIPT = REPO_ROOT / "bin" / "twisted-kafka-connection-report"
OVERRIDES = {
    "listeners": "PLAINTEXT://127.0.0.1:{port:PLAINTEXT},TOOLS://127.0.0.1:{port:TOOLS},"
                 "CONTROLLER://127.0.0.1:{port:CONTROLLER}",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,TOOLS:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "control.plane.listener.name": "CONTROLLER",
    "max.connections.per.ip": "2",
    "max.connections.per.ip.overrides": "127.0.0.1:1000",
}
REJECTED = ("rejected", "max.connections.per.ip")


@pytest.fixture(scope="module")
def events_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("connection-events"), OVERRIDES).start()
    yield broker
    if broker.running:
        status = broker.stop()
        assert status == 0, f"clean stop exited with status {status}\n{broker.log_text()[-4000:]}"


def tools(broker) -> str:
    return f"127.0.0.1:{broker.port('TOOLS')}"


def admitted(port: int, source: str | None = None) -> RawClient:
    """A connection the broker admitted: it answers ApiVersions."""
    client = RawClient(port, source=source)
    client.api_versions()
    return client


def refused(port: int, source: str) -> None:
    client = RawClient(port, source=source)
    try:
        assert client.wait_closed(), f"a connection from {source} over its limit was not closed"
    finally:
        client.close()


def closed_by_client(client: RawClient) -> None:
    client.close()


def closed_for_protocol_error(client: RawClient) -> None:
    client.send_raw(b"GET / HTTP/1.1\r\n\r\n")
    assert client.wait_closed()
    client.close()


def wait_for_events(broker, expected: Counter, timeout: float = 30) -> Counter:
    """Read ``__connection_events`` (through TOOLS) until its PLAINTEXT and CONTROLLER events are ``expected``."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": tools(broker), "group.id": "unused-assign-only",
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    seen: Counter = Counter()
    try:
        consumer.assign([TopicPartition(CONNECTION_EVENTS_TOPIC, 0, 0)])
        deadline = time.monotonic() + timeout
        while seen != expected and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.2):
                if msg.error() is not None:
                    continue            # the topic may not exist yet for the first polls
                event = json.loads(msg.value())
                assert msg.key() == f"{event['listener']}/{event['ip']}".encode()
                if event["listener"] != "TOOLS":
                    seen[(event["listener"], event["ip"], event["kind"], event["reason"])] += 1
    finally:
        consumer.close()
    assert seen == expected, f"events in {CONNECTION_EVENTS_TOPIC}: {seen}, expected {expected}"
    return seen


@pytest.fixture(scope="module")
def loaded(events_broker):
    """The test's connections; the events they make, by (listener, ip, kind, reason).

    A test that makes more connections adds their events to it.
    """
    port = events_broker.data_port
    local = [admitted(port) for _ in range(3)]                          # 127.0.0.1 may have 1000
    remote = [admitted(port, "127.0.0.2") for _ in range(2)]            # 127.0.0.2's limit: 2
    for _ in range(3):
        refused(port, "127.0.0.2")
    closed_by_client(local[0])
    closed_by_client(local[1])
    closed_by_client(remote[0])
    closed_for_protocol_error(remote[1])
    expected = Counter({
        ("CONTROLLER", "127.0.0.1", "accepted", None): 1,           # the broker's own controller, at startup
        ("PLAINTEXT", "127.0.0.1", "accepted", None): 3,
        ("PLAINTEXT", "127.0.0.1", "closed", "client"): 2,          # local[2] stays open
        ("PLAINTEXT", "127.0.0.2", "accepted", None): 2,
        ("PLAINTEXT", "127.0.0.2", *REJECTED): 3,
        ("PLAINTEXT", "127.0.0.2", "closed", "client"): 1,
        ("PLAINTEXT", "127.0.0.2", "closed", "protocol_error"): 1,
    })
    wait_for_events(events_broker, expected)
    yield expected
    local[2].close()


def parquet_rows(path: str) -> list[dict]:
    """The rows of the report's Parquet, read with pyarrow (not with the Spark that wrote them)."""
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def parquet_counts(path: str) -> Counter:
    """The Parquet's counts summed per (listener, ip, kind, reason), the tooling's listener left out."""
    counts: Counter = Counter()
    for row in parquet_rows(path):
        if row["listener"] != "TOOLS":
            counts[(row["listener"], row["ip"], row["kind"], row["reason"])] += row["count"]
    return counts


def check_outputs(report) -> None:
    with open(report.png_path, "rb") as png:
        data = png.read()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 1000
    with open(report.html_path, encoding="utf-8") as page:
        text = page.read()
    assert "<h2>Listener PLAINTEXT" in text and "<h2>Listener CONTROLLER" in text
    assert "127.0.0.2" in text and "max.connections.per.ip" in text and "data:image/png;base64," in text


def test_batch_report_counts_what_the_test_did(spark, events_broker, loaded, tmp_path):
    began_ms = int(time.time() * 1000)
    report = run(spark, bootstrap=tools(events_broker), output=tmp_path / "report")

    assert parquet_counts(report.counts_path) == loaded
    rows = parquet_rows(report.counts_path)
    assert list(rows[0]) == ["minute", "broker", "listener", "plane", "ip", "kind", "reason", "count"]
    assert {(r["listener"], r["plane"]) for r in rows} == {("PLAINTEXT", "data"), ("TOOLS", "data"),
                                                           ("CONTROLLER", "control")}
    assert any(r["listener"] == "TOOLS" and r["kind"] == "accepted" for r in rows), "the tooling's connections"
    for row in rows:
        minute_ms = int(row["minute"].replace(tzinfo=UTC).timestamp() * 1000)   # UTC, as Spark writes it
        assert minute_ms % 60000 == 0 and minute_ms <= began_ms
    assert {k: v for k, v in report.totals.items() if k[0] != "TOOLS"} == loaded
    check_outputs(report)

    # --since after every event: nothing is counted, and the outputs are still written
    empty = run(spark, bootstrap=tools(events_broker), output=tmp_path / "empty", since=began_ms + 60_000)
    assert empty.totals == {} and parquet_rows(empty.counts_path) == []
    with open(empty.png_path, "rb") as png:
        assert png.read().startswith(PNG_SIGNATURE)


def test_streaming_report_adds_only_what_is_new(spark, events_broker, loaded, tmp_path):
    output, checkpoint = tmp_path / "report", str(tmp_path / "checkpoint")
    first = run(spark, bootstrap=tools(events_broker), output=output, streaming=True, checkpoint=checkpoint)
    assert parquet_counts(first.counts_path) == loaded
    check_outputs(first)

    port = events_broker.data_port
    closed_by_client(admitted(port, "127.0.0.2"))
    loaded.update({("PLAINTEXT", "127.0.0.2", "accepted", None): 1, ("PLAINTEXT", "127.0.0.2", "closed", "client"): 1})
    expected = Counter(loaded)
    wait_for_events(events_broker, expected)

    second = run(spark, bootstrap=tools(events_broker), output=output, streaming=True, checkpoint=checkpoint)
    assert parquet_counts(second.counts_path) == expected, "each event counted once across runs"
    assert len(list((output / "increments").glob("batch_id=*"))) >= 2


def test_the_bin_script_explains_itself():
    done = subprocess.run([str(REPORT_SCRIPT), "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--bootstrap-server" in done.stdout and "--streaming" in done.stdout
    done = subprocess.run([str(REPORT_SCRIPT), "--bootstrap-server", "x:1", "--output", "o", "--streaming"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--checkpoint" in done.stderr


@pytest.mark.slow
def test_the_bin_script_writes_the_report(events_broker, loaded, tmp_path):
    """The whole job as an operator runs it: its own Spark application (a second JVM)."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    done = subprocess.run([str(REPORT_SCRIPT), "--bootstrap-server", tools(events_broker), "--output",
                           str(tmp_path / "report"), "--master", "local[2]"],
                          env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Parquet:" in done.stdout
    assert parquet_counts(str(tmp_path / "report" / "connection_counts")) == loaded
    assert (tmp_path / "report" / "connection_report.png").read_bytes().startswith(PNG_SIGNATURE)

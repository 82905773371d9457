"""/metrics, the topic and group views, the Grafana dashboard and the dashboard page, with real traffic.

One broker for the module.  A confluent-kafka producer sends at a steady
rate while a consumer group reads; the per-topic in and out rates the broker
exports (counter deltas over the producer's and the consumer's own measured
intervals) must be within 10% of what the clients measured, and errors the
test provokes must show in ErrorsPerSec.  Every PromQL expression of
``etc/grafana/twisted-kafka.json`` must name metrics the live broker
exports.  Headless chromium renders the dashboard while traffic runs; the
page must show non-zero rates, the topic and the group's lag, lay its cards
out without overlapping, and fill the window.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from support.chromium import CHROMIUM, Chromium
from support.scrape import scrape
from support.wait import wait_until

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
GRAFANA = REPO / "etc" / "grafana" / "twisted-kafka.json"
VALUE = b"v" * 1000
TOPIC_METER = "kafka_server_brokertopicmetrics_{}_total"


def meter(metrics, name: str, topic: str) -> float:
    return metrics.value(TOPIC_METER.format(name), 0.0, topic=topic)


def create_topics(bootstrap: str, *topics: NewTopic) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics(list(topics)).values():
        future.result(30)


class Reader(threading.Thread):
    """A consumer of a group reading ``topic`` until it has ``expected`` messages (or is stopped): what it
    received, and when the first and the last arrived."""

    def __init__(self, bootstrap: str, topic: str, group: str, expected: int | None = None, *,
                 pause: float = 0.0, **config):
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                  "auto.commit.interval.ms": 200, **config})
        self.consumer.subscribe([topic])
        self.expected, self.pause = expected, pause
        self.messages = self.bytes = 0
        self.first = self.last = 0.0
        self.stopping = threading.Event()

    def run(self) -> None:
        deadline = time.monotonic() + 90
        try:
            while not self.stopping.is_set() and time.monotonic() < deadline and (
                    self.expected is None or self.messages < self.expected):
                message = self.consumer.poll(0.1)
                if message is None or message.error():
                    continue
                now = time.monotonic()
                self.first = self.first or now
                self.last = now
                self.messages += 1
                self.bytes += len(message.value())
                if self.pause:
                    time.sleep(self.pause)      # a slow consumer: the group lags behind
        finally:
            self.consumer.close()


def produce_steadily(bootstrap: str, topic: str, rate: float, count: int, stop: threading.Event | None = None):
    """Send ``count`` messages at about ``rate`` per second; (messages acknowledged, bytes, seconds from the first
    send to the last acknowledgement)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "none"})
    acked = [0]

    def delivered(error, message):
        if error is None:
            acked[0] += 1

    started = time.monotonic()
    for i in range(count):
        if stop is not None and stop.is_set():
            break
        producer.produce(topic, value=VALUE, on_delivery=delivered)
        ahead = started + (i + 1) / rate - time.monotonic()
        if ahead > 0 and i % 50 == 49:
            producer.poll(0)
            time.sleep(ahead)           # pacing the producer, not waiting for the broker
    assert producer.flush(60) == 0
    return acked[0], acked[0] * len(VALUE), time.monotonic() - started


def test_topic_rates_match_what_the_producer_and_consumer_measured(module_broker):
    broker = module_broker
    create_topics(broker.bootstrap, NewTopic("metered", 2, 1))
    reader = Reader(broker.bootstrap, "metered", "meter-readers", expected=15_000)
    before = scrape(broker.admin_url)
    reader.start()
    messages, sent_bytes, seconds = produce_steadily(broker.bootstrap, "metered", rate=5_000, count=15_000)
    reader.join(90)
    assert reader.messages == messages == 15_000, (reader.messages, messages)
    after = scrape(broker.admin_url)

    def delta(name: str) -> float:
        return meter(after, name, "metered") - meter(before, name, "metered")

    # in: the producer's rate over its own interval, and the broker's counters over the same interval
    assert delta("messagesinpersec") / seconds == pytest.approx(messages / seconds, rel=0.10)
    assert delta("bytesinpersec") / seconds == pytest.approx(sent_bytes / seconds, rel=0.10)
    # out: the consumer's rate over its interval (the broker counts whole batches, the consumer values)
    consumed = reader.last - reader.first
    assert consumed > 0
    assert delta("bytesoutpersec") / consumed == pytest.approx(reader.bytes / consumed, rel=0.10)
    assert delta("replicationbytesoutpersec") == 0
    # broker-wide meters include this topic's
    wide = TOPIC_METER.format("messagesinpersec")
    assert after.value(wide) - before.value(wide) >= delta("messagesinpersec")
    assert after.value("kafka_log_log_size", topic="metered", partition="0") > 0
    assert sum(after.value("kafka_log_log_logendoffset", topic="metered", partition=str(p)) for p in (0, 1)) == 15_000

    with urllib.request.urlopen(broker.admin_url + "/v1/topics?topic=metered", timeout=10) as response:
        [topic] = json.loads(response.read())["topics"]
    assert topic["messages_in_total"] == 15_000 and topic["partition_count"] == 2
    assert topic["size"] == sum(p["size"] for p in topic["partitions"]) > 15_000_000


def test_errors_per_sec_counts_the_errors_the_test_provokes(module_broker):
    broker = module_broker
    create_topics(broker.bootstrap, NewTopic("small", 1, 1, config={"max.message.bytes": "2000"}))
    before = scrape(broker.admin_url)
    errors = "kafka_network_requestmetrics_errorspersec_total"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    [future] = admin.create_topics([NewTopic("small", 1, 1)]).values()
    with pytest.raises(Exception) as raised:
        future.result(30)
    assert raised.value.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS

    failures = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 100_000})
    producer.produce("small", value=b"x" * 5000, on_delivery=lambda error, message: failures.append(error))
    assert producer.flush(30) == 0
    assert [f.code() for f in failures] == [KafkaError.MSG_SIZE_TOO_LARGE]

    after = scrape(broker.admin_url)

    def delta(name: str, **labels: str) -> float:
        return after.value(name, 0.0, **labels) - before.value(name, 0.0, **labels)

    assert delta(errors, request="CreateTopics", error="TOPIC_ALREADY_EXISTS") == 1
    assert delta(errors, request="Produce", error="MESSAGE_TOO_LARGE") >= 1
    assert delta(TOPIC_METER.format("bytesrejectedpersec"), topic="small") > 5000
    assert delta(TOPIC_METER.format("failedproducerequestspersec"), topic="small") == 0     # expected, as in Kafka
    assert delta(TOPIC_METER.format("messagesinpersec"), topic="small") == 0


PROMQL_NAME = re.compile(r"\b((?:twisted_)?kafka_[a-z0-9_]+)\b")


def test_every_grafana_expression_names_metrics_the_broker_exports(module_broker):
    dashboard = json.loads(GRAFANA.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    expressions = [v["query"]["query"] for v in variables.values() if v["type"] == "query"]
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len(panels) >= 20
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
            expressions.append(target["expr"])
    # the panels sit on Grafana's 24-column grid without overlapping
    cells = [(p["gridPos"]["x"], p["gridPos"]["y"], p["gridPos"]["w"], p["gridPos"]["h"]) for p in dashboard["panels"]]
    for i, (x, y, w, h) in enumerate(cells):
        assert x + w <= 24
        for x2, y2, w2, h2 in cells[i + 1:]:
            assert x + w <= x2 or x2 + w2 <= x or y + h <= y2 or y2 + h2 <= y, (x, y, w, h, x2, y2, w2, h2)

    # a group with a committed offset, so the lag series exist
    create_topics(module_broker.bootstrap, NewTopic("graphed", 1, 1))
    consumer = Consumer({"bootstrap.servers": module_broker.bootstrap, "group.id": "graphed"})
    consumer.commit(offsets=[TopicPartition("graphed", 0, 0)], asynchronous=False)
    consumer.close()
    metrics = scrape(module_broker.admin_url)
    names = {name for expression in expressions for name in PROMQL_NAME.findall(expression)}
    assert len(names) >= 25
    missing = sorted(name for name in names if not metrics.declares(name))
    assert not missing
    # a series for all but the connection rejections, which have none until a connection is refused
    assert {name for name in names if name not in metrics.names} <= {"twisted_kafka_connections_rejected_total"}


@pytest.mark.skipif(not shutil.which(CHROMIUM), reason="needs Debian's chromium (bin/install-system-deps)")
def test_the_dashboard_shows_live_traffic_in_chromium(module_broker, tmp_path):
    broker = module_broker
    create_topics(broker.bootstrap, NewTopic("live", 3, 1))
    stop = threading.Event()
    producer = threading.Thread(target=produce_steadily, args=(broker.bootstrap, "live", 2_000, 200_000, stop),
                                daemon=True)
    reader = Reader(broker.bootstrap, "dashboard-readers", "dashboard-readers", pause=0.002)
    reader.consumer.unsubscribe()
    reader.consumer.subscribe(["live"])
    producer.start()
    reader.start()
    try:
        wait_until(lambda: reader.messages > 100, timeout=30, what="the reader to read")
        with Chromium(tmp_path, width=1400, height=1000) as browser:
            browser.open(broker.admin_url + "/")
            browser.wait_for("Number(document.body.dataset.refreshed || 0) >= 6 && "
                             "Number(document.getElementById('kpi-messages-in').dataset.value) > 0 && "
                             "Number(document.getElementById('kpi-bytes-out').dataset.value) > 0 && "
                             "Number(document.getElementById('kpi-lag').dataset.value) > 0",
                             timeout=60, what="the dashboard showing traffic")
            page = browser.evaluate(PAGE_STATE)
            screenshot = browser.screenshot(tmp_path / "dashboard.png")
    finally:
        stop.set()
        reader.stopping.set()
        producer.join(60)
        reader.join(30)
    print(f"dashboard screenshot: {screenshot}")

    assert page["messagesIn"] > 500 and page["bytesIn"] > 500_000 and page["bytesOut"] > 0
    live = page["topics"]["live"]
    assert live["partitions"] == "3" and float(live["messagesIn"]) > 500 and float(live["bytesOut"]) > 0
    assert page["groups"]["dashboard-readers"] > 0
    # the charts: an axis title with the unit, tick labels, a line per series with the latest rate
    charts = page["charts"]
    assert charts["chart-messages"]["title"] == "messages per second (msg/s)"
    assert charts["chart-bytes"]["title"] == "bytes per second (B/s)"
    for chart in charts.values():
        assert len(chart["ticks"]) >= 3 and "now" in chart["ticks"] and "-60 s" in chart["ticks"]
    assert charts["chart-messages"]["last"]["messages in"] > 0
    assert charts["chart-bytes"]["last"]["bytes out"] > 0
    # the layout: cards side by side and stacked, none over another, nothing wider than the window, the window
    # filled to its bottom
    cards = page["cards"]
    assert len(cards) >= 14
    for i, a in enumerate(cards):
        assert a["right"] <= page["width"] + 0.5 and a["left"] >= 0
        for b in cards[i + 1:]:
            assert (a["right"] <= b["left"] or b["right"] <= a["left"] or a["bottom"] <= b["top"]
                    or b["bottom"] <= a["top"]), (a, b)
    assert page["scrollWidth"] <= page["width"]
    assert page["height"] - 30 <= max(card["bottom"] for card in cards) <= page["height"]
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and screenshot.stat().st_size > 30_000


#: What the page shows, read in the browser: the figures, the tables' rows, the charts' axes and lines, the layout.
PAGE_STATE = """(() => {
  const value = id => Number(document.getElementById(id).dataset.value);
  const topics = {};
  for (const row of document.querySelectorAll("#topics tbody tr")) {
    const cells = [...row.children].map(td => td.textContent);
    topics[row.dataset.topic] = {partitions: cells[1], messagesIn: row.dataset.messagesIn,
                                 bytesOut: row.dataset.bytesOut};
  }
  const groups = {};
  for (const row of document.querySelectorAll("#groups tbody tr[data-group]")) groups[row.dataset.group] =
    Number(row.dataset.lag);
  const charts = {};
  for (const svg of document.querySelectorAll("svg[id^=chart-]")) {
    const last = {};
    for (const line of svg.querySelectorAll("polyline")) last[line.dataset.series] = Number(line.dataset.last);
    charts[svg.id] = {title: svg.querySelector(".y-title").textContent, last,
                      ticks: [...svg.querySelectorAll("text.tick")].map(t => t.textContent)};
  }
  const cards = [...document.querySelectorAll(".card")].map(card => {
    const r = card.getBoundingClientRect();
    return {id: card.querySelector("h2,.label").textContent, left: r.left, right: r.right, top: r.top,
            bottom: r.bottom};
  });
  return {messagesIn: value("kpi-messages-in"), bytesIn: value("kpi-bytes-in"), bytesOut: value("kpi-bytes-out"),
          topics, groups, charts, cards, width: window.innerWidth, height: window.innerHeight,
          scrollWidth: document.documentElement.scrollWidth};
})()"""

"""``GET /metrics``: the broker's Kafka metrics in the Prometheus text format (prometheus-client).

Names follow the usual JMX-exporter mapping of Kafka's MBeans:
``<group>_<type>_<name>`` in lower case with every other character an
underscore, tags as labels -- ``kafka.network:type=RequestMetrics,
name=TotalTimeMs,request=Produce`` becomes
``kafka_network_requestmetrics_totaltimems{request="Produce"}``.  Two
adjustments make the series easy to aggregate:

* the control plane's metrics (``ControlPlaneRequestQueueSize``,
  ``ControlPlaneRequestHandlerAvgIdlePercent``) share the data plane's name
  with a ``plane`` label ("control" or "data");
* ``socket-server-metrics`` is written ``socketserver``
  (``kafka_server_socketserver_connection_count{listener="PLAINTEXT"}``).

Meters are counters (``_total``); histograms are summaries with the 0.5,
0.75, 0.95, 0.98, 0.99 and 0.999 quantiles of the recent window; gauges are
gauges.  A family may hold series with different label sets, as the JMX
exporter writes them: Kafka's broker-wide
``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec`` and the per-topic
one with ``topic=...`` are both
``kafka_server_brokertopicmetrics_bytesinpersec_total``, the broker-wide one
without a ``topic`` label (``sum`` over the per-topic series, or the series
without the label: ``...{topic=""}``).  The connection statistics of ``/v1/connections`` are added as
``twisted_kafka_connections_{accepted,rejected,closed}_total`` with
``listener``, ``plane`` and ``reason`` labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from prometheus_client.core import CollectorRegistry, CounterMetricFamily, Metric
from prometheus_client.exposition import generate_latest

from twisted_kafka.metrics import MetricName, MetricsRegistry
from twisted_kafka.metrics.registry import Gauge, Histogram, Meter
from twisted_kafka.network.connection_stats import ConnectionStats

_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")
_TYPE_ALIASES = {"socket-server-metrics": "socketserver"}
_PLANE_TYPES = {"RequestChannel", "KafkaRequestHandlerPool"}
_CONTROL_PREFIX = "ControlPlane"
_QUANTILES = (("0.5", "50thPercentile"), ("0.75", "75thPercentile"), ("0.95", "95thPercentile"),
              ("0.98", "98thPercentile"), ("0.99", "99thPercentile"), ("0.999", "999thPercentile"))


def _safe(text: str) -> str:
    return _UNSAFE.sub("_", text).lower()


def prometheus_name(name: MetricName) -> tuple[str, dict[str, str]]:
    """The Prometheus family name and labels of a Kafka metric name."""
    labels = {_safe(key): value for key, value in name.tags}
    metric = name.name
    if name.type in _PLANE_TYPES:
        plane = "data"
        if metric.startswith(_CONTROL_PREFIX):
            metric, plane = metric[len(_CONTROL_PREFIX):], "control"
        labels["plane"] = plane
    kind = _TYPE_ALIASES.get(name.type, name.type)
    return f"{_safe(name.group)}_{_safe(kind)}_{_safe(metric)}", labels


class KafkaMetricsCollector:
    """A prometheus-client collector reading a ``MetricsRegistry`` (and the connection stats) when scraped."""

    def __init__(self, metrics: MetricsRegistry, stats: ConnectionStats | None = None):
        self.metrics = metrics
        self.stats = stats

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}

        def family(prom: str, name: MetricName, kind: str) -> Metric | None:
            found = families.get(prom)
            if found is None:
                found = families[prom] = Metric(prom, f"Kafka {name.group}:type={name.type},name={name.name}", kind)
            return found if found.type == kind else None    # one name, one kind: a clash is left out

        for name, metric in self.metrics:
            prom, labels = prometheus_name(name)
            if isinstance(metric, Meter):
                counter = family(prom, name, "counter")
                if counter is not None:
                    counter.add_sample(prom + "_total", labels, float(metric.count))
            elif isinstance(metric, Histogram):
                summary = family(prom, name, "summary")
                if summary is None:
                    continue
                snap = metric.snapshot()
                for quantile, key in _QUANTILES:
                    summary.add_sample(prom, {**labels, "quantile": quantile}, float(snap[key]))
                summary.add_sample(prom + "_count", dict(labels), float(metric.count))
                summary.add_sample(prom + "_sum", dict(labels), float(metric.sum))
            elif isinstance(metric, Gauge):
                try:
                    value = float(metric.value)
                except Exception:  # a gauge whose owner is gone reads as missing, not as a failed scrape
                    continue
                gauge = family(prom, name, "gauge")
                if gauge is not None:
                    gauge.add_sample(prom, labels, value)
        yield from families.values()
        if self.stats is not None:
            yield from self._connection_families(self.stats)

    @staticmethod
    def _connection_families(stats: ConnectionStats) -> Iterator[Metric]:
        accepted = CounterMetricFamily("twisted_kafka_connections_accepted", "Connections admitted",
                                       labels=["listener", "plane"])
        for (listener, plane), n in sorted(stats.accepted.items()):
            accepted.add_metric([listener, plane], n)
        yield accepted
        for kind, counter in (("rejected", stats.rejected), ("closed", stats.closed)):
            family = CounterMetricFamily(f"twisted_kafka_connections_{kind}", f"Connections {kind}, by reason",
                                         labels=["listener", "plane", "reason"])
            for (listener, plane, reason), n in sorted(counter.items()):
                family.add_metric([listener, plane, reason], n)
            yield family


def render(metrics: MetricsRegistry, stats: ConnectionStats | None = None) -> bytes:
    """The Prometheus text exposition of every metric."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(KafkaMetricsCollector(metrics, stats))
    return generate_latest(registry)

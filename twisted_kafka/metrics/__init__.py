"""In-process metrics under Apache Kafka's JMX names.

Operators' dashboards and alerts are written against names such as
``kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce``; the
broker records under exactly those names so the admin endpoint can expose
them (JMX-exporter style for Prometheus) without a translation table.
"""

from .registry import (
    Gauge,
    Histogram,
    Meter,
    MetricName,
    MetricsRegistry,
)

__all__ = ["Gauge", "Histogram", "Meter", "MetricName", "MetricsRegistry"]

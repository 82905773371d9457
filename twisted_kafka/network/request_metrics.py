"""Kafka's per-request timing breakdown, recorded when a response completes.

``kafka.network:type=RequestMetrics,name=<X>,request=<Api>`` for X in
RequestQueueTimeMs, LocalTimeMs, RemoteTimeMs, ResponseQueueTimeMs,
ResponseSendTimeMs, TotalTimeMs and RequestBytes, plus the RequestsPerSec
meter tagged with the version — the names operators already graph — and the
ErrorsPerSec meter tagged with the error's name: as Kafka's
``RequestChannel.updateErrorMetrics``, every response marks it once per
error code it carries, NONE included (``protocol/error_counts.py``).

"Response send" (ResponseSendTimeMs) ends when the response has left the
broker's buffer, as far as Twisted reports it: a response that fits under
the transport's limit of unsent bytes (64 KiB) is handed to the socket on the
reactor's next write event, and the time ends when it is handed to the
transport; a response that takes the transport over that limit ends when the
transport reports it has drained (the connection is its streaming producer,
``network.processor.ResponseFlow``), so a slow-reading client shows up here.
A response still unsent when its connection closes is recorded then, as Kafka
records the responses in flight at a disconnect.
"""

from __future__ import annotations

from collections.abc import Mapping

from twisted_kafka.metrics import MetricName, MetricsRegistry
from twisted_kafka.metrics.registry import Meter
from twisted_kafka.protocol.errors import ErrorCode

from .request import Request

_NS_PER_MS = 1_000_000.0


def request_name(request: Request) -> str:
    """Kafka's metric name of the request's API (``Produce``, ``Metadata``, ...)."""
    if request.spec is None:
        return f"ApiKey{request.api_key}"
    return request.spec.name


class RequestMetrics:
    def __init__(self, registry: MetricsRegistry):
        self.registry = registry
        self._per_api: dict[tuple[str, int], tuple] = {}
        self._errors: dict[tuple[str, int], Meter] = {}

    def _metrics_for(self, name: str, version: int) -> tuple:
        key = (name, version)
        metrics = self._per_api.get(key)
        if metrics is None:
            def hist(metric: str):
                return self.registry.histogram(MetricName("kafka.network", "RequestMetrics", metric,
                                                          (("request", name),)))
            metrics = self._per_api[key] = (
                self.registry.meter(MetricName("kafka.network", "RequestMetrics", "RequestsPerSec",
                                               (("request", name), ("version", str(version))))),
                hist("RequestQueueTimeMs"), hist("LocalTimeMs"), hist("RemoteTimeMs"),
                hist("ResponseQueueTimeMs"), hist("ResponseSendTimeMs"), hist("TotalTimeMs"),
                hist("RequestBytes"),
            )
        return metrics

    def record(self, request: Request) -> None:
        (requests_per_sec, queue_time, local_time, remote_time, response_queue_time,
         response_send_time, total_time, request_bytes) = self._metrics_for(request_name(request),
                                                                             request.api_version)
        start = request.start_ns
        dequeue = request.dequeue_ns or start
        remote_complete = request.remote_complete_ns or request.response_dequeue_ns or request.complete_ns
        local_complete = request.local_complete_ns or remote_complete
        response_dequeue = request.response_dequeue_ns or request.complete_ns
        requests_per_sec.mark()
        queue_time.update((dequeue - start) / _NS_PER_MS)
        local_time.update((local_complete - dequeue) / _NS_PER_MS)
        remote_time.update((remote_complete - local_complete) / _NS_PER_MS)
        response_queue_time.update((response_dequeue - remote_complete) / _NS_PER_MS)
        response_send_time.update((request.complete_ns - response_dequeue) / _NS_PER_MS)
        total_time.update((request.complete_ns - start) / _NS_PER_MS)
        request_bytes.update(request.size)

    def record_errors(self, request: Request, counts: Mapping[int, int]) -> None:
        """Mark ErrorsPerSec of the request's API once per error code of its response (``counts``)."""
        api = request_name(request)
        for code, count in counts.items():
            if not count:
                continue
            meter = self._errors.get((api, code))
            if meter is None:
                meter = self._errors[(api, code)] = self.registry.meter(MetricName(
                    "kafka.network", "RequestMetrics", "ErrorsPerSec", (("request", api), ("error", _name(code)))))
            meter.mark(count)


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"

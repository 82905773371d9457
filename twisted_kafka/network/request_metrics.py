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

The request log is written from here too, where the timings are known: with
``kafka.request.logger`` at DEBUG (``log.levels``, or IncrementalAlterConfigs
on the broker's BROKER_LOGGER resource at runtime), each completed request
logs one line on that namespace, as Kafka's ``RequestChannel`` does:

    Completed request: api=Metadata, version=12, correlation_id=3, client_id=rdkafka, client=127.0.0.1:50112,
    principal=User:ANONYMOUS, listener=PLAINTEXT, security_protocol=PLAINTEXT, connection=..., total_time_ms=0.412,
    request_queue_time_ms=0.031, local_time_ms=0.298, remote_time_ms=0.0, response_queue_time_ms=0.012,
    send_time_ms=0.071

(milliseconds with microsecond precision, as Kafka's); at TRACE the
request's body follows (``request=...``).  Disabled, it costs one attribute
read per request (a ``LevelGate`` kept current by ``LogLevels``).
"""

from __future__ import annotations

from collections.abc import Mapping

from twisted.logger import Logger

from twisted_kafka.logging import LOG_LEVELS, REQUEST_LOGGER, LevelGate
from twisted_kafka.metrics import MetricName, MetricsRegistry
from twisted_kafka.metrics.registry import Meter
from twisted_kafka.protocol.errors import ErrorCode

from .request import Request

_NS_PER_MS = 1_000_000.0

#: Kafka's request logger.
request_log = Logger(namespace=REQUEST_LOGGER)

_COMPLETED = ("Completed request: api={api}, version={version}, correlation_id={correlation_id}, "
              "client_id={client_id}, client={client}, principal={principal}, listener={listener}, "
              "security_protocol={security_protocol}, connection={connection}, total_time_ms={total_time_ms}, "
              "request_queue_time_ms={request_queue_time_ms}, local_time_ms={local_time_ms}, "
              "remote_time_ms={remote_time_ms}, response_queue_time_ms={response_queue_time_ms}, "
              "send_time_ms={send_time_ms}")


def _ms(nanoseconds: int) -> float:
    """Milliseconds with microsecond precision, never negative (Kafka's ``nanosToMs`` for the request log)."""
    return max(nanoseconds, 0) // 1000 / 1000


def request_name(request: Request) -> str:
    """Kafka's metric name of the request's API (``Produce``, ``Metadata``, ...)."""
    if request.spec is None:
        return f"ApiKey{request.api_key}"
    return request.spec.name


class RequestMetrics:
    def __init__(self, registry: MetricsRegistry, request_log_gate: LevelGate | None = None):
        self.registry = registry
        #: Whether kafka.request.logger is at DEBUG (or TRACE) now.
        self.request_log_gate = LOG_LEVELS.gate(REQUEST_LOGGER) if request_log_gate is None else request_log_gate
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
        if self.request_log_gate.debug:
            self._log_completed(request, start, dequeue, local_complete, remote_complete, response_dequeue)

    def _log_completed(self, request: Request, start: int, dequeue: int, local_complete: int,
                       remote_complete: int, response_dequeue: int) -> None:
        context = request.context
        fields = dict(
            api=request_name(request), version=request.api_version, correlation_id=request.correlation_id,
            client_id=request.client_id, client=context.client_address, principal=context.principal,
            listener=context.listener_name, security_protocol=context.security_protocol,
            connection=context.connection_id,
            total_time_ms=_ms(request.complete_ns - start),
            request_queue_time_ms=_ms(dequeue - start),
            local_time_ms=_ms(local_complete - dequeue),
            remote_time_ms=_ms(remote_complete - local_complete),
            response_queue_time_ms=_ms(response_dequeue - remote_complete),
            send_time_ms=_ms(request.complete_ns - response_dequeue),
        )
        if self.request_log_gate.trace:
            request_log.debug(_COMPLETED + ", request={request_body}", request_body=repr(request.body), **fields)
        else:
            request_log.debug(_COMPLETED, **fields)

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

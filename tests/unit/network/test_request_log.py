"""Kafka's request log (``kafka.request.logger``): one line per completed request at DEBUG, nothing below."""

from __future__ import annotations

import pytest
from twisted.logger import formatEvent, globalLogPublisher

from twisted_kafka.logging import LogLevels
from twisted_kafka.metrics import MetricsRegistry
from twisted_kafka.network.request_metrics import RequestMetrics
from twisted_kafka.protocol import messages as m

from ..server.helpers import make_request


@pytest.fixture
def request_log():
    """(metrics, levels, lines): RequestMetrics with its own levels; lines the request logger wrote."""
    levels = LogLevels()
    metrics = RequestMetrics(MetricsRegistry(), levels.gate("kafka.request.logger"))
    events: list[dict] = []

    def observe(event):
        if event.get("log_namespace") == "kafka.request.logger":
            events.append(event)

    globalLogPublisher.addObserver(observe)
    yield metrics, levels, events
    globalLogPublisher.removeObserver(observe)


def completed(metrics, correlation_id=3):
    request = make_request(m.MetadataRequest[12](topics=None, allow_auto_topic_creation=False,
                                                 include_topic_authorized_operations=False), 12,
                           correlation_id=correlation_id, client_id="rdkafka", principal="User:alice")
    ms = 1_000_000
    request.start_ns = 10 * ms
    request.dequeue_ns = 11 * ms
    request.local_complete_ns = 13 * ms
    request.remote_complete_ns = 17 * ms
    request.response_dequeue_ns = 17 * ms + 500_000
    request.complete_ns = 19 * ms + 1_234
    metrics.record(request)
    return request


def test_nothing_is_logged_below_debug(request_log):
    metrics, levels, events = request_log
    completed(metrics)
    levels.set_level("kafka.request.logger", "INFO")
    completed(metrics)
    assert events == []


def test_at_debug_each_completed_request_is_one_line_naming_client_api_and_times(request_log):
    metrics, levels, events = request_log
    levels.set_level("kafka.request.logger", "DEBUG")
    request = completed(metrics)
    [event] = events
    assert formatEvent(event) == (
        "Completed request: api=Metadata, version=12, correlation_id=3, client_id=rdkafka, "
        f"client={request.context.client_address}, principal=User:alice, listener=PLAINTEXT, "
        f"security_protocol={request.context.security_protocol}, connection={request.context.connection_id}, "
        "total_time_ms=9.001, request_queue_time_ms=1.0, local_time_ms=2.0, remote_time_ms=4.0, "
        "response_queue_time_ms=0.5, send_time_ms=1.501")
    assert (event["api"], event["client_id"], event["total_time_ms"]) == ("Metadata", "rdkafka", 9.001)
    levels.unset_level("kafka.request.logger")
    completed(metrics)
    assert len(events) == 1


def test_at_trace_the_request_body_follows(request_log):
    metrics, levels, events = request_log
    levels.set_level("kafka.request.logger", "TRACE")
    completed(metrics)
    [event] = events
    assert formatEvent(event).endswith(", request=MetadataRequest(version=12, topics=None, "
                                       "allow_auto_topic_creation=False, include_topic_authorized_operations=False)")

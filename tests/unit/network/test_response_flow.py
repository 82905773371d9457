"""Write-side flow control: a connection is its transport's streaming producer of responses.

The transport is Twisted's own write buffer (``FileDescriptor``, through
``WindowTransport``) over a fake socket the test fills and drains, so the
64 KiB limit, ``pauseProducing`` / ``resumeProducing`` and the close that
waits for a paused producer are Twisted's behaviour, not a model of it.
"""

from __future__ import annotations

import pytest
from twisted.logger import LogLevel, formatEvent, globalLogPublisher

from twisted_kafka.metrics import MetricName
from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.network.request import CloseConnectionResponse, SendResponse
from twisted_kafka.protocol.registry import ApiKey

from .helpers import FakeTransport, Stack, WindowTransport, split_frames
from .test_processor import Unreachable, api_versions

BIG = 100 * 1024          # a response over the transport's 64 KiB limit on its own


def answer(correlation_id: int, size: int) -> list[bytes]:
    """A framed response of ``size`` bytes after the size prefix (the Processor never looks inside)."""
    payload = correlation_id.to_bytes(4, "big") + b"r" * (size - 4)
    return [len(payload).to_bytes(4, "big") + payload]


def sent_correlation_ids(transport: WindowTransport) -> list[int]:
    return [int.from_bytes(frame[:4], "big") for frame in split_frames(bytes(transport.received))]


def requests_recorded(stack: Stack) -> int:
    meter = stack.metrics.get(MetricName("kafka.network", "RequestMetrics", "RequestsPerSec",
                                         (("request", "ApiVersions"), ("version", "0"))))
    return meter.count if meter is not None else 0


@pytest.fixture
def stack():
    return Stack(handlers=[Unreachable(ApiKey.METADATA)], connections_max_idle_ms="1000")


@pytest.fixture
def log_events():
    events = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


def test_the_connection_registers_as_its_transports_streaming_producer(stack):
    from twisted_kafka.network.processor import ResponseFlow

    p = stack.connect()
    assert isinstance(p.transport.producer, ResponseFlow) and p.transport.streaming


def test_a_response_under_the_limit_changes_nothing(stack):
    p = stack.connect(transport=WindowTransport)
    p.dataReceived(api_versions(1) + api_versions(2))
    stack.channel().send_response(SendResponse(stack.take(), answer(1, 1000)))
    assert not p.send_backlogged
    assert stack.take().correlation_id == 2, "the next request is handed out at once"


def test_a_response_over_the_limit_holds_the_next_request_and_mutes_until_the_buffer_drains(stack):
    p = stack.connect(transport=WindowTransport)
    transport = p.transport
    p.dataReceived(api_versions(1) + api_versions(2))
    channel = stack.channel()
    channel.send_response(SendResponse(stack.take(), answer(1, BIG)))
    assert p.send_backlogged and transport.unsent == BIG + 4
    assert transport.paused, "nothing more is read while the response waits"
    assert channel.queue_size == 0, "request 2 is not handed out: its answer would pile up behind"
    transport.peer_reads(BIG // 2)
    assert p.send_backlogged and channel.queue_size == 0, "half-way: Twisted resumes only once drained"
    transport.peer_reads(BIG)
    assert not p.send_backlogged and transport.unsent == 0
    assert stack.take().correlation_id == 2


def test_pipelined_responses_leave_in_order_one_buffer_at_a_time(stack):
    p = stack.connect(transport=WindowTransport)
    transport = p.transport
    count = 6
    p.dataReceived(b"".join(api_versions(cid) for cid in range(1, count + 1)))
    channel = stack.channel()
    for cid in range(1, count + 1):
        request = stack.take()
        assert request.correlation_id == cid and channel.queue_size == 0
        channel.send_response(SendResponse(request, answer(cid, BIG)))
        assert transport.unsent <= BIG + 4, "never more than one response waits in the transport"
        transport.peer_reads(BIG + 4)
    assert sent_correlation_ids(transport) == list(range(1, count + 1))
    assert not p.send_backlogged and not transport.paused


def test_response_send_time_ends_when_the_buffer_drains(stack):
    p = stack.connect(transport=WindowTransport)
    p.dataReceived(api_versions(1))
    request = stack.take()
    stack.channel().send_response(SendResponse(request, answer(1, BIG)))
    assert requests_recorded(stack) == 0 and request.complete_ns == 0, "not sent yet"
    p.transport.peer_reads(BIG + 4)
    assert requests_recorded(stack) == 1 and request.complete_ns >= request.response_dequeue_ns


def test_a_connection_lost_while_backlogged_records_its_last_response(stack):
    p = stack.connect(transport=WindowTransport)
    p.dataReceived(api_versions(1))
    stack.channel().send_response(SendResponse(stack.take(), answer(1, BIG)))
    p.transport.abortConnection()
    assert requests_recorded(stack) == 1
    assert stack.quotas.total == 0


def test_twisteds_repeated_pause_calls_count_once(stack):
    p = stack.connect(transport=WindowTransport)
    p.dataReceived(api_versions(1) + api_versions(2))
    stack.channel().send_response(SendResponse(stack.take(), answer(1, BIG)))
    p.transport.write(b"x" * 10)            # Twisted pauses its producer again on every write while full
    p.transport.peer_reads(BIG + 14)
    assert not p.send_backlogged and stack.take().correlation_id == 2


# -- idle reaping (connections.max.idle.ms) ------------------------------------------------

def test_a_connection_whose_responses_make_no_progress_is_closed_as_idle(stack, log_events):
    p = stack.connect(transport=WindowTransport)
    p.dataReceived(api_versions(1) + api_versions(2))
    stack.channel().send_response(SendResponse(stack.take(), answer(1, BIG)))
    stack.clock.advance(0.6)
    p.transport.peer_reads(1000)             # a little read: Twisted reports no progress until drained
    stack.clock.advance(0.5)
    assert stack.server.close_idle_connections() == 1
    assert p.transport.aborted and p.close_reason == CloseReason.IDLE
    assert stack.quotas.closed == {("PLAINTEXT", CloseReason.IDLE): 1}
    warnings = "\n".join(formatEvent(e) for e in log_events if e.get("log_level") >= LogLevel.warn)
    assert p.peer in warnings and "connections.max.idle.ms" in warnings and "not reading" in warnings


def test_a_drained_buffer_is_progress_for_the_idle_reaper(stack):
    p = stack.connect(transport=WindowTransport)
    p.dataReceived(api_versions(1))
    stack.channel().send_response(SendResponse(stack.take(), answer(1, BIG)))
    stack.clock.advance(0.9)
    p.transport.peer_reads(BIG + 4)
    stack.clock.advance(0.9)
    assert stack.server.close_idle_connections() == 0
    stack.clock.advance(0.2)
    assert stack.server.close_idle_connections() == 1, "idle from the drain on"


def test_an_idle_connection_with_nothing_unsent_is_closed_without_a_warning(stack, log_events):
    p = stack.connect(transport=WindowTransport)
    stack.clock.advance(1.1)
    assert stack.server.close_idle_connections() == 1
    assert p.close_reason == CloseReason.IDLE
    assert not [e for e in log_events if e.get("log_level") >= LogLevel.warn]


# -- closing -----------------------------------------------------------------------------

def test_a_graceful_close_waits_for_the_buffer_then_closes(stack):
    """Twisted does not close a transport whose producer is paused: the connection lets go of
    it once the buffer has drained, and the transport then closes."""
    p = stack.connect(transport=WindowTransport)
    p.dataReceived(api_versions(1) + api_versions(2))
    stack.channel().send_response(CloseConnectionResponse(stack.take(), CloseReason.PRODUCE_ERROR, None,
                                                          chunks=answer(1, BIG)))
    transport = p.transport
    assert transport.disconnecting and not transport.disconnected
    transport.peer_reads(BIG + 4)
    transport.pump()
    assert transport.disconnected and not transport.aborted
    assert sent_correlation_ids(transport) == [1]
    assert stack.quotas.closed == {("PLAINTEXT", CloseReason.PRODUCE_ERROR): 1}
    assert stack.channel().queue_size == 0, "request 2 is never read"


def test_a_graceful_close_whose_responses_are_never_read_is_aborted_by_the_idle_reaper(stack):
    p = stack.connect(transport=WindowTransport)
    p.dataReceived(api_versions(1))
    stack.channel().send_response(CloseConnectionResponse(stack.take(), CloseReason.PRODUCE_ERROR, None,
                                                          chunks=answer(1, BIG)))
    assert p.transport.disconnecting and not p.transport.disconnected
    stack.clock.advance(1.1)
    stack.server.close_idle_connections()
    assert p.transport.aborted and p.transport.disconnected
    assert stack.quotas.closed == {("PLAINTEXT", CloseReason.PRODUCE_ERROR): 1}, "closed for its first reason"


def test_a_graceful_close_with_nothing_unsent_closes_at_once(stack):
    p = stack.connect(transport=WindowTransport)
    p.dataReceived(api_versions(1))
    stack.channel().send_response(CloseConnectionResponse(stack.take(), CloseReason.PRODUCE_ERROR, None,
                                                          chunks=answer(1, 1000)))
    p.transport.peer_reads(1004)
    p.transport.pump()
    assert p.transport.disconnected and not p.transport.aborted


def test_string_transport_keeps_working_without_ever_pausing(stack):
    """The other unit tests' transport never calls the producer: nothing changes for them."""
    p = stack.connect(transport=FakeTransport)
    p.dataReceived(api_versions(1))
    stack.serve()
    assert not p.send_backlogged

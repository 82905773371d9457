"""Processor: muting and response order, protocol errors, backpressure, the failed-
authentication delay and idle reaping, with fake transports and a Clock."""

from __future__ import annotations

import struct

import pytest
from twisted.logger import LogLevel, globalLogPublisher

from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.messages import ApiVersionsRequest
from twisted_kafka.protocol.registry import ApiKey

from .helpers import Stack, decode, request_bytes, split_frames


class MetadataStub:
    """A served Metadata API whose handler the test never needs to run."""

    api_key = ApiKey.METADATA

    async def handle(self, request):
        raise AssertionError("not expected to be called")

    def error_response(self, request, error, message=None):
        raise AssertionError("not expected to be called")

    def response_version(self, request):
        return request.api_version


def api_versions(correlation_id: int, version: int = 0) -> bytes:
    if version >= 3:
        body = ApiVersionsRequest(version=version, client_software_name="unit", client_software_version="1")
    else:
        body = ApiVersionsRequest(version=version)
    return request_bytes(body, version, correlation_id)


@pytest.fixture
def stack():
    s = Stack()
    s.apis.register(MetadataStub())
    return s


@pytest.fixture
def log_events():
    events = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


def warnings_text(events) -> str:
    from twisted.logger import formatEvent
    return "\n".join(formatEvent(e) for e in events if e.get("log_level") >= LogLevel.warn)


def test_pipelined_requests_are_read_one_at_a_time_and_answered_in_order(stack):
    p = stack.connect()
    p.dataReceived(b"".join(api_versions(cid) for cid in range(1, 6)))
    channel = stack.channel()
    for _ in range(5):
        assert channel.queue_size == 1, "muted: one request of a connection at a time"
        assert p.transport.paused
        stack.serve()
    assert channel.queue_size == 0
    frames = split_frames(p.transport.value())
    assert [decode(18, 0, f)[0] for f in frames] == [1, 2, 3, 4, 5]
    assert not p.transport.paused, "unmuted once the last response is written"


def test_a_request_without_response_unmutes_at_once(stack):
    p = stack.connect()
    p.dataReceived(api_versions(1) + api_versions(2))
    taken = []
    stack.channel().receive_request().addCallback(taken.append)
    assert taken and taken[0].correlation_id == 1
    stack.channel().release(taken[0])
    p.send_response(taken[0], None)     # what KafkaApis does for acks=0 Produce
    assert p.transport.value() == b""
    assert stack.channel().queue_size == 1, "the next request is read right away"


@pytest.mark.parametrize("frame, reason", [
    (struct.pack(">hhih", 999, 0, 7, -1), "unknown or unserved api_key 999"),
    (struct.pack(">hhih", ApiKey.PRODUCE, 3, 7, -1) + b"\x00" * 20, "unknown or unserved api_key 0"),
    (struct.pack(">hhih", ApiKey.METADATA, 99, 7, -1) + b"\x00", "unsupported version 99 of Metadata"),
    (struct.pack(">hhih", ApiKey.METADATA, 1, 7, -1) + b"\x00\x00", "malformed Metadata request"),
    (b"\x00\x12\x00", "unreadable request header"),
    (api_versions(7, version=3)[4:-4], "malformed ApiVersions request"),
])
def test_protocol_errors_close_the_connection_without_an_answer(stack, log_events, frame, reason):
    p = stack.connect()
    other = stack.connect()
    p.dataReceived(struct.pack(">i", len(frame)) + frame)
    assert p.transport.aborted and p.transport.value() == b""
    assert stack.channel().queue_size == 0
    stack.flush()
    assert stack.quotas.closed[("PLAINTEXT", CloseReason.PROTOCOL_ERROR)] == 1
    assert stack.quotas.total == 1
    if reason:
        text = warnings_text(log_events)
        assert reason in text and p.peer in text
    other.dataReceived(api_versions(1))
    stack.serve()
    assert decode(18, 0, split_frames(other.transport.value())[0])[1].error_code == 0, "others unaffected"


def test_unsupported_api_versions_is_answered_in_v0_format(stack):
    p = stack.connect()
    # Header v2 (ApiVersions v3+ is flexible), then a body this broker cannot know.
    frame = struct.pack(">hhih", 18, 99, 42, -1) + b"\x00" + b"future body"
    p.dataReceived(struct.pack(">i", len(frame)) + frame)
    [request] = stack.serve()
    assert request.body is None
    frame = split_frames(p.transport.value())[0]
    correlation_id, response = decode(18, 0, frame)
    assert correlation_id == 42 and response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 4)]
    assert not p.transport.aborted


@pytest.mark.parametrize("size", [-1, -2147483648, 104857601])
def test_bad_frame_sizes_close_and_log_peer_and_size(stack, log_events, size):
    p = stack.connect()
    p.dataReceived(struct.pack(">i", size) + b"\x00" * 4)
    assert p.transport.aborted
    text = warnings_text(log_events)
    assert f"invalid request size {size}" in text and p.peer in text


def test_tls_client_hello_on_plaintext_names_the_likely_mistake(stack, log_events):
    p = stack.connect()
    p.dataReceived(bytes.fromhex("16030100f8010000f40303") + b"\x00" * 32)
    assert p.transport.aborted
    assert "TLS" in warnings_text(log_events)


def test_full_channel_pauses_processors_and_resumes_them_in_order():
    stack = Stack(queued_max_requests="2")
    processors = [stack.connect() for _ in range(4)]
    for n, p in enumerate(processors):
        p.dataReceived(api_versions(n))
    channel = stack.channel()
    assert channel.queue_size == 2 and channel.waiting_processors == 2
    assert all(p.transport.paused for p in processors)
    stack.serve()
    assert channel.queue_size == 2 and channel.waiting_processors == 1
    stack.serve(count=3)
    assert channel.peak_queue_size == 2
    answered = [decode(18, 0, split_frames(p.transport.value())[0])[0] for p in processors]
    assert answered == [0, 1, 2, 3]


def test_closing_while_the_request_is_queued_releases_once_and_drops_the_answer(stack):
    p = stack.connect()
    p.dataReceived(api_versions(1))
    p.transport.client_closes()
    assert stack.quotas.total == 0
    stack.serve()
    assert p.transport.value() == b""
    assert stack.channel().held_bytes == 0
    assert stack.quotas.closed == {("PLAINTEXT", CloseReason.CLIENT): 1}


def test_closing_a_connection_waiting_for_room_forgets_it():
    stack = Stack(queued_max_requests="1")
    first, second = stack.connect(), stack.connect()
    first.dataReceived(api_versions(1))
    second.dataReceived(api_versions(2))
    assert stack.channel().waiting_processors == 1
    second.transport.client_closes()
    assert stack.channel().waiting_processors == 0
    stack.serve()
    assert stack.channel().queue_size == 0


# -- failed authentication (connection.failed.authentication.delay.ms) ---------------------

def test_failed_authentication_mutes_then_closes_after_the_delay():
    stack = Stack(connection_failed_authentication_delay_ms="250")
    p = stack.connect()
    p.dataReceived(api_versions(1))
    [request] = stack.serve()
    p.close_after_authentication_failure("invalid credentials")
    p.dataReceived(api_versions(2))
    assert stack.channel().queue_size == 0, "muted: nothing more is read"
    assert p.transport.paused
    stack.clock.advance(0.249)
    assert not p.transport.disconnecting
    stack.clock.advance(0.002)
    assert p.transport.disconnecting and not p.transport.aborted, "graceful: the error response is flushed"
    stack.flush()
    assert stack.quotas.closed == {("PLAINTEXT", CloseReason.AUTHENTICATION): 1}
    assert stack.quotas.total == 0


def test_the_authentication_error_response_still_goes_out_during_the_delay():
    stack = Stack(connection_failed_authentication_delay_ms="100")
    p = stack.connect()
    p.dataReceived(api_versions(1) + api_versions(2))
    p.close_after_authentication_failure("bad password")   # decided while handling request 1
    stack.serve()
    assert len(split_frames(p.transport.value())) == 1
    assert stack.channel().queue_size == 0 and p.transport.paused, "request 2 is never read"
    stack.clock.advance(0.1)
    assert p.transport.disconnecting


def test_client_closing_during_the_delay_cancels_the_timer_and_counts_authentication():
    stack = Stack(connection_failed_authentication_delay_ms="100")
    p = stack.connect()
    p.close_after_authentication_failure("bad password")
    p.transport.client_closes()
    assert not stack.clock.getDelayedCalls()
    assert stack.quotas.closed == {("PLAINTEXT", CloseReason.AUTHENTICATION): 1}


def test_idle_reaper_does_not_close_a_connection_waiting_out_its_authentication_delay():
    stack = Stack(connection_failed_authentication_delay_ms="500", connections_max_idle_ms="1000")
    p = stack.connect()
    stack.clock.advance(0.9)
    p.close_after_authentication_failure("bad password")
    stack.clock.advance(0.2)
    assert stack.server.close_idle_connections() == 0
    stack.clock.advance(0.3)
    stack.flush()
    assert stack.quotas.closed == {("PLAINTEXT", CloseReason.AUTHENTICATION): 1}


# -- idle reaping (connections.max.idle.ms) --------------------------------------------

def test_idle_connections_are_closed_and_active_or_busy_ones_kept():
    stack = Stack(connections_max_idle_ms="1000")
    idle, active, busy = stack.connect(), stack.connect(), stack.connect()
    busy.dataReceived(api_versions(1))           # its request stays queued
    stack.clock.advance(0.6)
    active.dataReceived(b"\x00\x00")           # activity, even a partial frame
    stack.clock.advance(0.5)
    assert stack.server.close_idle_connections() == 1
    assert idle.closing and idle.close_reason == CloseReason.IDLE
    assert not active.closing and not busy.closing
    stack.flush()
    assert stack.quotas.closed == {("PLAINTEXT", CloseReason.IDLE): 1}
    stack.serve()                               # answered: the busy one becomes idle from now
    stack.clock.advance(1.01)
    assert stack.server.close_idle_connections() == 2


def test_the_reaper_runs_on_the_reactor_clock():
    stack = Stack(connections_max_idle_ms="200")
    stack.server.start_listening()             # ports are fakes already: only starts the reaper
    p = stack.connect()
    stack.clock.advance(0.1)
    assert not p.closing
    for _ in range(10):
        stack.clock.advance(0.02)
    assert p.closing and p.close_reason == CloseReason.IDLE
    stack.server.stop_accepting()

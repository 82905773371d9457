"""Processor: muting and response order, the three response kinds, protocol errors, per-plane
APIs, backpressure, the failed-authentication delay and idle reaping, with fake transports
and a MemoryReactorClock."""

from __future__ import annotations

import struct
import sys

import pytest
from twisted.logger import LogLevel, formatEvent, globalLogPublisher

from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.network.processor import READ_AHEAD_BYTES
from twisted_kafka.network.request import CloseConnectionResponse, ConnectionUpdate, NoOpResponse, SendResponse
from twisted_kafka.protocol.codec import encode_response
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.header import RequestHeader
from twisted_kafka.protocol.messages import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    LeaderAndIsrRequest,
    MetadataRequest,
)
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.server.api_handler import ApiHandler
from twisted_kafka.server.controller_requests import ControllerApiHandler
from twisted_kafka.server.handlers.api_versions import ApiVersionsHandler
from twisted_kafka.server.request_handler import KafkaRequestHandlerPool

from .helpers import Stack, decode, request_bytes, split_frames


class Unreachable(ApiHandler):
    """A served API whose handler the test never needs to run: it only makes the key served."""

    def __init__(self, api_key: int):
        self.api_key = api_key

    async def handle(self, request):
        raise AssertionError("not expected to be called")

    def error_response(self, request, error, message=None):
        raise AssertionError("not expected to be called")


class UnreachableController(ControllerApiHandler):
    """The same for a controller API (whose handler must be a ControllerApiHandler)."""

    def __init__(self, api_key: int):
        self.api_key = api_key

    async def serve(self, request):
        raise AssertionError("not expected to be called")

    def error_response(self, request, error, message=None):
        raise AssertionError("not expected to be called")


def api_versions(correlation_id: int, version: int = 0, client_id: str | None = "unit") -> bytes:
    if version >= 3:
        body = ApiVersionsRequest(version=version, client_software_name="unit-client", client_software_version="1.2")
    else:
        body = ApiVersionsRequest(version=version)
    return request_bytes(body, version, correlation_id, client_id)


def raw_request(api_key: int, version: int, correlation_id: int = 7, body: bytes = b"") -> bytes:
    """A frame with a v1 header (null client id) and whatever body: for requests that must be refused."""
    frame = struct.pack(">hhih", api_key, version, correlation_id, -1) + body
    return struct.pack(">i", len(frame)) + frame


def api_versions_answer(correlation_id: int) -> list[bytes]:
    """An ApiVersions v0 response framed for ``correlation_id`` (any bytes would do for the Processor)."""
    body = ApiVersionsResponse(version=0, error_code=0, api_keys=[])
    return encode_response(RequestHeader(ApiKey.API_VERSIONS, 0, correlation_id), body)


@pytest.fixture
def stack():
    return Stack(handlers=[Unreachable(ApiKey.METADATA)])


@pytest.fixture
def log_events():
    events = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


def warnings_text(events) -> str:
    return "\n".join(formatEvent(e) for e in events if e.get("log_level") >= LogLevel.warn)


def test_pipelined_requests_are_read_one_at_a_time_and_answered_in_order(stack):
    p = stack.connect()
    p.dataReceived(b"".join(api_versions(cid) for cid in range(1, 6)))
    channel = stack.channel()
    for _ in range(5):
        assert channel.queue_size == 1, "one request of a connection at a time"
        assert not p.transport.paused, "a few pipelined requests are read ahead, not muted"
        stack.serve()
    assert channel.queue_size == 0
    frames = split_frames(p.transport.value())
    assert [decode(18, 0, f)[0] for f in frames] == [1, 2, 3, 4, 5]
    assert not p.transport.paused


def test_a_connection_with_a_request_in_flight_reads_ahead_up_to_a_bound_then_mutes(stack):
    p = stack.connect()
    frame = api_versions(1)
    p.dataReceived(frame)
    assert stack.channel().queue_size == 1 and not p.transport.paused
    per_read = 100
    count = 1
    while not p.transport.paused:
        p.dataReceived(b"".join(api_versions(cid) for cid in range(count + 1, count + 1 + per_read)))
        count += per_read
        assert stack.channel().queue_size == 1, "still one request at a time"
    buffered = (count - 1) * len(frame)
    assert READ_AHEAD_BYTES <= buffered < READ_AHEAD_BYTES + per_read * len(frame)
    while p.connection.buffered_bytes >= READ_AHEAD_BYTES:
        assert p.transport.paused
        stack.serve()
    assert not p.transport.paused, "read again once under the bound"
    while stack.channel().queue_size:
        stack.serve()
    assert [decode(18, 0, f)[0] for f in split_frames(p.transport.value())] == list(range(1, count + 1))


def test_a_request_without_response_unmutes_at_once(stack):
    """NoOpResponse (what KafkaApis returns for acks=0 Produce) writes nothing, releases the
    request's budget and lets the connection read its next request right away."""
    p = stack.connect()
    p.dataReceived(api_versions(1) + api_versions(2))
    channel = stack.channel()
    first = stack.take()
    assert first.correlation_id == 1
    channel.send_response(NoOpResponse(first))
    assert p.transport.value() == b""
    assert channel.queue_size == 1, "the next request is read right away"
    assert channel.held_bytes == len(api_versions(2)), "only the second request's bytes are held"
    assert stack.take().correlation_id == 2


def test_close_connection_response_writes_its_last_chunks_then_closes_gracefully(stack):
    """CloseConnectionResponse: nothing further is read, the last response still leaves,
    and the close is counted under the response's reason."""
    p = stack.connect()
    p.dataReceived(api_versions(1) + api_versions(2))
    request = stack.take()
    stack.channel().send_response(CloseConnectionResponse(request, CloseReason.PRODUCE_ERROR, "acks=0 failed",
                                                          chunks=api_versions_answer(1)))
    assert [decode(18, 0, f)[0] for f in split_frames(p.transport.value())] == [1]
    assert p.transport.disconnecting and not p.transport.aborted
    assert stack.channel().queue_size == 0, "the pipelined request is never read"
    stack.flush()
    assert stack.quotas.closed == {("PLAINTEXT", CloseReason.PRODUCE_ERROR): 1}


def test_close_connection_response_without_grace_aborts(stack):
    p = stack.connect()
    p.dataReceived(api_versions(1))
    stack.channel().send_response(CloseConnectionResponse(stack.take(), CloseReason.PROTOCOL_ERROR,
                                                          "could not encode", graceful=False))
    assert p.transport.aborted and p.transport.value() == b""


def test_memoryview_chunks_are_written_as_one_bytes_write(stack):
    """Twisted transports take bytes only; record chunks read from segments may be memoryviews."""
    p = stack.connect()
    p.dataReceived(api_versions(1))
    [frame] = api_versions_answer(1)
    chunks = [frame[:6], memoryview(frame)[6:]]
    stack.channel().send_response(SendResponse(stack.take(), chunks))
    assert p.transport.value() == frame
    assert decode(18, 0, split_frames(p.transport.value())[0])[0] == 1


def test_a_stale_response_for_a_request_not_in_flight_is_ignored(stack):
    """Only the in-flight request is answered: a duplicate answer writes nothing and reads nothing."""
    p = stack.connect()
    p.dataReceived(api_versions(1) + api_versions(2))
    first = stack.take()
    stack.channel().send_response(SendResponse(first, api_versions_answer(1)))
    second = stack.take()
    written = p.transport.value()
    p.send(SendResponse(first, api_versions_answer(1)))
    assert p.transport.value() == written and p.busy, "request 2 is still in flight"
    stack.channel().send_response(SendResponse(second, api_versions_answer(2)))
    assert [decode(18, 0, f)[0] for f in split_frames(p.transport.value())] == [1, 2]


def test_requests_carry_the_connections_context(stack):
    """Handlers see a RequestContext only: who, where, which plane, and the client software
    named by an ApiVersions v3+ request (KIP-511) on later requests."""
    p = stack.connect()
    p.dataReceived(api_versions(1, version=3, client_id="app-1"))
    [first] = stack.serve()
    ctx = first.context
    assert (ctx.connection_id, ctx.listener_name, ctx.security_protocol, ctx.plane) == (
        p.connection_id, "PLAINTEXT", "PLAINTEXT", "data")
    assert ctx.client_address == p.peer and ctx.client_id == "app-1" and ctx.principal == "User:ANONYMOUS"
    assert (ctx.client_software_name, ctx.client_software_version) == ("unit-client", "1.2")
    p.dataReceived(api_versions(2, version=1, client_id=None))
    [second] = stack.serve()
    assert second.context.client_id == "app-1", "a null client id keeps the one the connection gave"
    assert second.context.client_software_name == "unit-client"
    control = stack.connect("CONTROLLER")
    control.dataReceived(api_versions(1))
    [third] = stack.serve("control")
    assert third.context.plane == "control" and third.context.listener_name == "CONTROLLER"


def test_a_connection_update_changes_the_principal_of_later_requests(stack):
    p = stack.connect()
    p.dataReceived(api_versions(1) + api_versions(2))
    first = stack.take()
    update = ConnectionUpdate(authenticated_principal="User:alice")
    stack.channel().send_response(SendResponse(first, api_versions_answer(1), update))
    assert first.context.principal == "User:ANONYMOUS"
    assert stack.take().context.principal == "User:alice"


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
    text = warnings_text(log_events)
    assert reason in text and p.peer in text
    other.dataReceived(api_versions(1))
    stack.serve()
    assert decode(18, 0, split_frames(other.transport.value())[0])[1].error_code == 0, "others unaffected"


# -- per-plane APIs ------------------------------------------------------------------

def test_controller_apis_are_served_on_no_data_plane_listener_beside_a_control_plane():
    """With a control plane, LeaderAndIsr on the data plane is an unserved API (the connection
    closes); the control plane serves every API, as Kafka's does (a tool or broker may ask it
    for Metadata); ApiVersions advertises each plane's own set."""
    stack = Stack(handlers=[Unreachable(ApiKey.METADATA), UnreachableController(ApiKey.LEADER_AND_ISR)])
    data = stack.connect()
    data.dataReceived(raw_request(ApiKey.LEADER_AND_ISR, 2))
    assert data.transport.aborted and stack.channel("data").queue_size == 0
    control = stack.connect("CONTROLLER")
    control.dataReceived(metadata_request(9))
    assert stack.take("control").correlation_id == 9 and not control.transport.disconnecting
    stack.flush()
    assert stack.quotas.closed == {("PLAINTEXT", CloseReason.PROTOCOL_ERROR): 1}

    def advertised(listener, plane):
        p = stack.connect(listener)
        p.dataReceived(api_versions(1))
        stack.serve(plane)
        _, response = decode(18, 0, split_frames(p.transport.value())[0])
        return {k.api_key for k in response.api_keys}

    assert advertised("PLAINTEXT", "data") == {ApiKey.API_VERSIONS, ApiKey.METADATA}
    assert advertised("CONTROLLER", "control") == {ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.LEADER_AND_ISR}


def metadata_request(correlation_id: int) -> bytes:
    return request_bytes(MetadataRequest(version=1, topics=None), 1, correlation_id)


def leader_and_isr(correlation_id: int) -> bytes:
    body = LeaderAndIsrRequest(version=2, controller_id=1, controller_epoch=1, broker_epoch=1, topic_states=[],
                               live_leaders=[])
    return request_bytes(body, 2, correlation_id)


def test_without_a_control_plane_the_data_plane_serves_controller_apis():
    stack = Stack({"listeners": "PLAINTEXT://127.0.0.1:9092", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
                   "control.plane.listener.name": ""},
                  handlers=[Unreachable(ApiKey.METADATA), UnreachableController(ApiKey.LEADER_AND_ISR)])
    assert stack.server.control_plane is None
    p = stack.connect()
    p.dataReceived(leader_and_isr(5))
    request = stack.take()
    assert (request.api_key, request.correlation_id, request.context.plane) == (ApiKey.LEADER_AND_ISR, 5, "data")
    assert not p.transport.disconnecting
    p2 = stack.connect()
    p2.dataReceived(api_versions(1))
    stack.serve()
    _, response = decode(18, 0, split_frames(p2.transport.value())[0])
    assert {k.api_key for k in response.api_keys} == {ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.LEADER_AND_ISR}


def test_a_valid_controller_request_on_the_data_plane_beside_a_control_plane_is_refused(log_events):
    """Refused as unserved (not as malformed): the data plane never reads the controller's APIs."""
    stack = Stack(handlers=[UnreachableController(ApiKey.LEADER_AND_ISR)])
    p = stack.connect()
    p.dataReceived(leader_and_isr(5))
    assert p.transport.aborted and stack.channel("data").queue_size == 0
    assert "unknown or unserved api_key 4" in warnings_text(log_events)
    control = stack.connect("CONTROLLER")
    control.dataReceived(leader_and_isr(6))
    assert stack.take("control").correlation_id == 6


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


def test_socket_request_max_bytes_is_the_limit(log_events):
    """A size prefix above socket.request.max.bytes closes the connection before the body arrives."""
    stack = Stack(socket_request_max_bytes="1000")
    p = stack.connect()
    p.dataReceived(struct.pack(">i", 1001))
    assert p.transport.aborted
    assert "socket.request.max.bytes (1000)" in warnings_text(log_events)


def test_tls_client_hello_on_plaintext_names_the_likely_mistake(stack, log_events):
    p = stack.connect()
    p.dataReceived(bytes.fromhex("16030100f8010000f40303") + b"\x00" * 32)
    assert p.transport.aborted
    assert "TLS" in warnings_text(log_events)


# -- backpressure (queued.max.requests) ----------------------------------------------------

def test_full_channel_pauses_processors_and_resumes_them_in_order():
    stack = Stack(queued_max_requests="2")
    processors = [stack.connect() for _ in range(4)]
    for n, p in enumerate(processors):
        p.dataReceived(api_versions(n))
    channel = stack.channel()
    assert channel.queue_size == 2 and channel.waiting_processors == 2
    stack.serve()
    assert channel.queue_size == 2 and channel.waiting_processors == 1
    stack.serve(count=3)
    assert channel.peak_queue_size == 2
    answered = [decode(18, 0, split_frames(p.transport.value())[0])[0] for p in processors]
    assert answered == [0, 1, 2, 3]


def test_a_connection_waiting_for_room_reads_ahead_up_to_the_bound_then_mutes():
    stack = Stack(queued_max_requests="1")
    first, second = stack.connect(), stack.connect()
    first.dataReceived(api_versions(1))
    second.dataReceived(api_versions(2))
    assert stack.channel().waiting_processors == 1 and not second.transport.paused
    second.dataReceived(b"".join(api_versions(3) for _ in range(READ_AHEAD_BYTES // len(api_versions(3)) + 1)))
    assert second.transport.paused, "nothing more is read: backpressure reaches the client's socket"
    assert stack.channel().queue_size == 1
    stack.serve()
    assert stack.take().correlation_id == 2


def test_closing_while_the_request_is_queued_releases_once_and_drops_the_answer(stack):
    p = stack.connect()
    p.dataReceived(api_versions(1))
    p.transport.client_closes()
    assert stack.quotas.total == 0
    stack.serve()
    assert p.transport.value() == b""
    assert stack.channel().held_bytes == 0 and stack.channel().outstanding == 0
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


# -- shutdown ----------------------------------------------------------------------------

def test_stop_processing_requests_answers_what_was_read_and_reads_nothing_more(stack):
    p = stack.connect()
    p.dataReceived(api_versions(1) + api_versions(2))
    drained = []
    stack.server.stop_processing_requests()
    stack.server.drained().addCallback(drained.append)
    assert not drained, "request 1 was read and is not answered yet"
    stack.serve()
    assert drained
    assert [decode(18, 0, f)[0] for f in split_frames(p.transport.value())] == [1]
    assert stack.channel().queue_size == 0 and p.transport.paused, "request 2 is never read"


def test_the_control_plane_may_go_on_reading_while_the_data_plane_drains(stack):
    """The broker's drain stops the data plane only: the controller's requests (its UpdateMetadata
    to this very broker, which an admin request in flight waits for) are still read and answered."""
    client, controller = stack.connect(), stack.connect("CONTROLLER")
    stack.server.stop_processing_requests(["data"])
    client.dataReceived(api_versions(1))
    controller.dataReceived(api_versions(2))
    assert stack.channel().queue_size == 0 and stack.channel("control").queue_size == 1
    stack.serve("control")
    assert [decode(18, 0, f)[0] for f in split_frames(controller.transport.value())] == [2]
    assert not stack.plane("data").open and stack.plane("control").open


# -- failed authentication (connection.failed.authentication.delay.ms) ---------------------

def test_failed_authentication_mutes_then_closes_after_the_delay():
    stack = Stack(connection_failed_authentication_delay_ms="250")
    p = stack.connect()
    p.dataReceived(api_versions(1))
    stack.serve()
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
    assert len(stack.clock.getDelayedCalls()) == 1
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
    stack.server.bind()                        # listeners are bound already: only starts the reaper
    p = stack.connect()
    stack.clock.advance(0.1)
    assert not p.closing
    for _ in range(10):
        stack.clock.advance(0.02)
    assert p.closing and p.close_reason == CloseReason.IDLE
    stack.server.stop_accepting()


# -- re-entrancy --------------------------------------------------------------------------

def _depth() -> int:
    frame, depth = sys._getframe(1), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def test_requests_answered_synchronously_by_the_handler_pool_keep_order_and_a_flat_stack():
    """Most requests are answered before ``send_request`` returns: the answer reaches
    Processor.send, which processes the next buffered request from inside the previous one.
    That nested pass must neither reorder nor duplicate requests, nor grow the stack per
    pipelined request (more than the recursion limit arrive here in one read)."""
    depths = []

    class DepthRecordingApiVersions(ApiVersionsHandler):
        async def handle(self, request):
            depths.append(_depth())
            return await super().handle(request)

    stack = Stack(handlers=[DepthRecordingApiVersions(lambda context: [ApiKey.API_VERSIONS])])
    pool = KafkaRequestHandlerPool(channel=stack.channel(), apis=stack.apis, num_handlers=1, reactor=stack.clock,
                                   metrics=stack.metrics)
    pool.startService()
    p = stack.connect()
    count = sys.getrecursionlimit() * 2
    p.dataReceived(b"".join(api_versions(cid) for cid in range(count)))
    assert [decode(18, 0, f)[0] for f in split_frames(p.transport.value())] == list(range(count))
    assert max(depths) - min(depths) < 50, f"stack grew from {min(depths)} to {max(depths)} frames"
    assert not p.transport.paused and stack.channel().outstanding == 0
    pool.stopService()


def test_a_consumer_answering_from_inside_send_request_does_not_recurse_per_request(stack):
    """The worst case for the Processor itself: a consumer that is already waiting for the
    next request when it answers the current one, so every answer re-enters the Processor
    while it is still handing out the previous request.  Order and a flat stack must hold
    without help from the handler pool's loop."""
    channel = stack.channel()
    depths = []

    def serve(request):
        depths.append(_depth())
        channel.receive_request().addCallback(serve)        # ready for the next before answering
        channel.send_response(SendResponse(request, api_versions_answer(request.correlation_id)))

    channel.receive_request().addCallback(serve)
    p = stack.connect()
    count = sys.getrecursionlimit() * 2
    p.dataReceived(b"".join(api_versions(cid) for cid in range(count)))
    assert [decode(18, 0, f)[0] for f in split_frames(p.transport.value())] == list(range(count))
    assert max(depths) - min(depths) < 50, f"stack grew from {min(depths)} to {max(depths)} frames"
    assert not p.transport.paused


def test_idle_reaper_does_not_close_a_connection_whose_request_waits_for_channel_room():
    """A connection whose whole request is buffered, waiting for room in a full channel
    (queued.max.requests), is waiting on the broker, not idle: closing it would drop a
    request the client already sent and is waiting to have answered."""
    stack = Stack(queued_max_requests="1", connections_max_idle_ms="1000")
    first, second = stack.connect(), stack.connect()
    first.dataReceived(api_versions(1))
    second.dataReceived(api_versions(2))
    assert stack.channel().waiting_processors == 1
    stack.clock.advance(1.5)
    assert stack.server.close_idle_connections() == 0
    assert not second.closing
    stack.serve(count=2)
    assert decode(18, 0, split_frames(second.transport.value())[0])[0] == 2
    stack.clock.advance(1.01)
    assert stack.server.close_idle_connections() == 2, "answered: both are idle from then on"

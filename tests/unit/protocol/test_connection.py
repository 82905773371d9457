"""ServerConnection on bytes alone: framing, ordering, backpressure, protocol violations,
KIP-511, client software and SASL's pre-authentication states -- no sockets, no Twisted.

Everything the broker decides about a connection before a handler sees a request is
decided here, so each behaviour is driven by feeding bytes and reading events.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twisted_kafka.protocol.codec import encode_request
from twisted_kafka.protocol.connection import (
    CLOSED,
    NEED_DATA,
    PAUSED,
    AuthState,
    NoRoom,
    ProtocolViolation,
    RequestReceived,
    SaslTokenReceived,
    ServerConnection,
)
from twisted_kafka.protocol.framing import FrameBuffer, InvalidFrameSize, likely_mistake
from twisted_kafka.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    ProduceRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from twisted_kafka.protocol.registry import REGISTRY, ApiKey

from .counting import (
    CHUNK,
    CountingFrameBuffer,
    RebuildingFrameBuffer,
    Work,
    chunks_of,
    frame_buffer_work,
    framed,
)

#: What the connections under test serve (Produce is in the registry but deliberately not served).
SERVED = frozenset({ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE})
LIMIT = 100 * 1024 * 1024


def serves(api_key: int):
    return REGISTRY.get(api_key) if api_key in SERVED else None


def connection(*, max_request_size: int = LIMIT, sasl: bool = False,
               max_authentication_size: int = 524288) -> ServerConnection:
    return ServerConnection(max_request_size=max_request_size, serves=serves, authentication_required=sasl,
                            max_authentication_size=max_authentication_size)


def wire(body, version: int, correlation_id: int = 1, client_id: str | None = "unit") -> bytes:
    return b"".join(encode_request(body, version, correlation_id, client_id))


def api_versions(correlation_id: int = 1, version: int = 3, name: str | None = "unit-client",
                 software_version: str | None = "1.0") -> bytes:
    if version >= 3:
        body = ApiVersionsRequest(version=version, client_software_name=name, client_software_version=software_version)
    else:
        body = ApiVersionsRequest(version=version)
    return wire(body, version, correlation_id)


def metadata(correlation_id: int = 1, version: int = 1) -> bytes:
    return wire(MetadataRequest(version=version, topics=None), version, correlation_id)


def sasl_handshake(correlation_id: int = 1, version: int = 1) -> bytes:
    return wire(SaslHandshakeRequest(version=version, mechanism="PLAIN"), version, correlation_id)


def sasl_authenticate(correlation_id: int = 1, token: bytes = b"\x00alice\x00secret") -> bytes:
    return wire(SaslAuthenticateRequest(version=1, auth_bytes=token), 1, correlation_id)


def raw(api_key: int, version: int, correlation_id: int = 7, body: bytes = b"") -> bytes:
    """A frame with a v1 header (null client id) and whatever body."""
    return framed(struct.pack(">hhih", api_key, version, correlation_id, -1) + body)


def drain(conn: ServerConnection) -> list:
    """Every event the buffered bytes yield, answering each request as soon as it is handed out."""
    events = []
    while True:
        event = conn.next_event()
        if event is NEED_DATA or event is CLOSED:
            return events
        assert event is not PAUSED, "drain answers every request"
        events.append(event)
        if isinstance(event, ProtocolViolation):
            return events
        conn.response_complete()


def assert_closed(conn: ServerConnection) -> None:
    """After a violation nothing more is handed out, whatever arrives."""
    assert conn.closed and conn.next_event() is CLOSED
    conn.receive_data(api_versions(99))
    assert conn.buffered_bytes == 0 and conn.next_event() is CLOSED
    conn.response_complete()
    assert conn.next_event() is CLOSED


# -- framing --------------------------------------------------------------------------

def test_a_frame_delivered_byte_by_byte_is_handed_out_once_whole():
    data = api_versions(correlation_id=42)
    conn = connection()
    for i, byte in enumerate(data[:-1]):
        conn.receive_data(bytes([byte]))
        assert conn.next_event() is NEED_DATA, f"handed out after {i + 1} of {len(data)} bytes"
    conn.receive_data(data[-1:])
    event = conn.next_event()
    assert isinstance(event, RequestReceived)
    assert (event.header.api_key, event.header.api_version, event.header.correlation_id) == (18, 3, 42)
    assert event.header.client_id == "unit" and event.spec.name == "ApiVersions"
    assert event.size == len(data), "size counts the 4-byte prefix"
    assert event.body.client_software_name == "unit-client"
    assert conn.buffered_bytes == 0 and conn.requests_received == 1


def test_several_frames_in_one_chunk_are_handed_out_one_per_response_in_order():
    conn = connection()
    conn.receive_data(api_versions(1) + metadata(2) + sasl_handshake(3))
    seen = []
    for _ in range(3):
        event = conn.next_event()
        assert isinstance(event, RequestReceived)
        seen.append((event.header.api_key, event.header.correlation_id))
        assert conn.next_event() is PAUSED and conn.next_event() is PAUSED
        conn.response_complete()
    assert seen == [(ApiKey.API_VERSIONS, 1), (ApiKey.METADATA, 2), (ApiKey.SASL_HANDSHAKE, 3)]
    assert conn.next_event() is NEED_DATA and conn.buffered_bytes == 0


def test_pipelined_requests_stay_buffered_while_one_is_in_flight():
    """Kafka's mute: a client pipelining requests gets them answered in order and cannot make
    the broker hold more than one of its requests at a time."""
    conn = connection()
    conn.receive_data(metadata(1))
    first = conn.next_event()
    assert isinstance(first, RequestReceived) and conn.in_flight == first.header
    more = metadata(2) + metadata(3)
    conn.receive_data(more)
    assert conn.next_event() is PAUSED
    assert conn.buffered_bytes == len(more) and conn.requests_received == 1
    conn.response_complete()
    assert [e.header.correlation_id for e in drain(conn)] == [2, 3]


def test_a_frame_split_inside_its_size_prefix_is_reassembled():
    data = metadata(5) + metadata(6)
    conn = connection()
    conn.receive_data(data[:2])
    assert conn.next_event() is NEED_DATA
    conn.receive_data(data[2:len(data) // 2 + 2])
    assert [e.header.correlation_id for e in drain(conn)] == [5]
    conn.receive_data(data[len(data) // 2 + 2:])
    assert [e.header.correlation_id for e in drain(conn)] == [6]


REQUESTS = [
    lambda cid: api_versions(cid, version=0),
    lambda cid: api_versions(cid, version=3),
    lambda cid: metadata(cid, version=1),
    lambda cid: metadata(cid, version=12),
    lambda cid: sasl_handshake(cid, version=0),
    lambda cid: sasl_authenticate(cid, token=bytes(range(256)) * 3),
]


@settings(max_examples=200, deadline=None)
@given(kinds=st.lists(st.integers(0, len(REQUESTS) - 1), min_size=1, max_size=8),
       cuts=st.lists(st.integers(0, 10_000), max_size=20))
def test_any_chunking_of_a_stream_of_requests_yields_the_same_requests_in_order(kinds, cuts):
    frames = [REQUESTS[kind](cid) for cid, kind in enumerate(kinds, start=1)]
    stream = b"".join(frames)
    positions = sorted({cut % (len(stream) + 1) for cut in cuts} | {0, len(stream)})

    whole = connection()
    whole.receive_data(stream)
    expected = drain(whole)
    assert [e.header.correlation_id for e in expected] == list(range(1, len(kinds) + 1))

    conn = connection()
    events = []
    for start, end in zip(positions, positions[1:], strict=False):
        conn.receive_data(stream[start:end])
        events.extend(drain(conn))
    assert events == expected
    assert [e.size for e in events] == [len(f) for f in frames]
    assert conn.buffered_bytes == 0 and not conn.closed


# -- size limits (socket.request.max.bytes) ---------------------------------------------

@pytest.mark.parametrize("size", [-1, -2147483648])
def test_a_negative_size_is_a_violation(size):
    conn = connection()
    conn.receive_data(struct.pack(">i", size) + b"\x00" * 8)
    event = conn.next_event()
    assert isinstance(event, ProtocolViolation)
    assert f"invalid request size {size}: negative" in event.message
    assert_closed(conn)


def test_an_oversized_frame_is_refused_before_its_body_arrives():
    conn = connection(max_request_size=1000)
    conn.receive_data(struct.pack(">i", 1001))
    event = conn.next_event()
    assert isinstance(event, ProtocolViolation)
    assert "invalid request size 1001: larger than socket.request.max.bytes (1000)" in event.message
    assert_closed(conn)


def test_a_frame_exactly_at_the_limit_is_accepted_and_one_byte_more_is_not():
    """The limit bounds the frame after its 4-byte size, as Kafka's NetworkReceive does."""
    data = metadata(3)
    at_limit = connection(max_request_size=len(data) - 4)
    at_limit.receive_data(data)
    assert isinstance(at_limit.next_event(), RequestReceived)
    below = connection(max_request_size=len(data) - 5)
    below.receive_data(data)
    assert isinstance(below.next_event(), ProtocolViolation)


@pytest.mark.parametrize("first_bytes, hint", [
    (bytes.fromhex("16030100f8010000f40303"), "TLS"),
    (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP"),
])
def test_absurd_sizes_name_the_likely_mistake(first_bytes, hint):
    conn = connection()
    conn.receive_data(first_bytes)
    event = conn.next_event()
    assert isinstance(event, ProtocolViolation) and hint in event.message


@pytest.mark.parametrize("prefix, expected", [
    (bytes.fromhex("16030100a5010000"), "TLS"),          # ClientHello record
    (bytes.fromhex("1603030200000000"), "TLS"),
    (b"GET / HT", "HTTP"),
    (b"POST /x ", "HTTP"),
    (b"\x00\x00\x00\x10\x00\x12\x00\x00", None),
])
def test_likely_mistake_names_tls_and_http(prefix, expected):
    hint = likely_mistake(prefix)
    if expected is None:
        assert hint is None
    else:
        assert expected in hint


# -- linear buffering -------------------------------------------------------------------

def test_a_multi_megabyte_frame_in_64k_reads_is_assembled_with_linear_work():
    """Each byte is appended once and the frame copied out once: about twice its size, however
    many reads it takes (a buffer rebuilt per read would copy ~size^2 / 128 KiB bytes)."""
    for size in (1 << 20, 8 << 20):
        copied, received = frame_buffer_work(CountingFrameBuffer, size)
        assert copied <= 2 * received + CHUNK, (size, copied)


def test_the_work_measure_detects_a_quadratic_buffer():
    """Control for the test above: a buffer rebuilt on every read fails the same bound."""
    copied, received = frame_buffer_work(RebuildingFrameBuffer, 8 << 20)
    assert copied > 20 * received


def test_the_server_connection_assembles_a_large_request_with_linear_work():
    """ServerConnection adds no copy of its own on top of its FrameBuffer's."""
    token = bytes(range(256)) * (6 << 12)      # a 6 MiB SASL token
    data = sasl_authenticate(9, token=token)
    conn = connection()
    work = Work()
    conn._frames = CountingFrameBuffer(conn.max_request_size, work=work, kind="request",
                                       limit_name="socket.request.max.bytes")
    events = []
    for chunk in chunks_of(data):
        conn.receive_data(chunk)
        events.extend(drain(conn))
    [event] = events
    assert event.body.auth_bytes == token and event.size == len(data)
    assert work.bytes_copied <= 2 * len(data) + CHUNK


def test_frame_buffer_keeps_the_bytes_after_a_frame():
    frames = FrameBuffer(100)
    frames.feed(framed(b"one") + framed(b"two")[:5])
    assert frames.complete() and frames.pop() == b"one"
    assert not frames.complete() and len(frames) == 5
    frames.feed(framed(b"two")[5:])
    assert frames.pop() == b"two" and len(frames) == 0


def test_frame_buffer_reports_an_invalid_size_once_and_drops_the_bytes():
    frames = FrameBuffer(10)
    frames.feed(struct.pack(">i", 11) + b"abcd")
    with pytest.raises(InvalidFrameSize) as info:
        frames.complete()
    assert (info.value.size, info.value.limit, info.value.prefix) == (11, 10, struct.pack(">i", 11) + b"abcd")
    assert len(frames) == 0 and not frames.complete()


# -- backpressure ---------------------------------------------------------------------------

def test_no_room_keeps_the_whole_request_buffered_until_there_is_room():
    data = metadata(4)
    conn = connection()
    asked = []

    def no_room(size):
        asked.append(size)
        return False

    conn.receive_data(data[:-1])
    assert conn.next_event(no_room) is NEED_DATA and asked == [], "room is asked for whole requests only"
    conn.receive_data(data[-1:])
    assert conn.next_event(no_room) == NoRoom(len(data))
    assert conn.next_event(no_room) == NoRoom(len(data)), "nothing was consumed"
    assert asked == [len(data), len(data)] and conn.buffered_bytes == len(data) and not conn.closed
    event = conn.next_event(lambda size: True)
    assert isinstance(event, RequestReceived) and event.header.correlation_id == 4


def test_room_is_not_asked_for_while_a_request_is_in_flight():
    conn = connection()
    conn.receive_data(metadata(1) + metadata(2))
    assert isinstance(conn.next_event(lambda size: True), RequestReceived)

    def must_not_be_asked(size):
        raise AssertionError("asked for room while muted")

    assert conn.next_event(must_not_be_asked) is PAUSED


# -- protocol violations ------------------------------------------------------------------

@pytest.mark.parametrize("data, reason", [
    (raw(999, 0), "unknown or unserved api_key 999 (correlation_id=7)"),
    (wire(ProduceRequest(version=3, transactional_id=None, acks=1, timeout_ms=10, topic_data=[]), 3, 7),
     "unknown or unserved api_key 0"),
    (raw(ApiKey.METADATA, 99, body=b"\x00"), "unsupported version 99 of Metadata (supported 0-13"),
    (raw(ApiKey.METADATA, -1, body=b"\x00"), "unsupported version -1 of Metadata"),
    (raw(ApiKey.METADATA, 1, body=b"\x00\x00"), "malformed Metadata request"),
    (api_versions(7, version=3)[:-4], "malformed ApiVersions request"),
    (framed(b"\x00\x12\x00"), "unreadable request header"),
    (framed(b""), "unreadable request header"),
    (framed(struct.pack(">hhih", ApiKey.METADATA, 1, 7, 50) + b"short"), "unreadable request header"),
])
def test_each_protocol_violation_is_reported_once_then_the_connection_is_closed(data, reason):
    conn = connection()
    conn.receive_data(data + metadata(8))
    event = conn.next_event()
    assert isinstance(event, ProtocolViolation), event
    assert reason in event.message
    assert conn.requests_received == 0 and conn.in_flight is None
    assert_closed(conn)


def test_a_violation_after_good_requests_stops_at_the_bad_one():
    conn = connection()
    conn.receive_data(metadata(1) + raw(999, 0) + metadata(3))
    events = drain(conn)
    assert [type(e) for e in events] == [RequestReceived, ProtocolViolation]
    assert_closed(conn)


def test_close_drops_what_is_buffered():
    conn = connection()
    conn.receive_data(metadata(1) + metadata(2))
    assert isinstance(conn.next_event(), RequestReceived)
    conn.close()
    assert_closed(conn)


def test_kip511_api_versions_at_an_unsupported_version_is_handed_out_without_a_body():
    """KIP-511: the broker answers (in v0 format) rather than closing, so the client can retry."""
    frame = struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 42, 4) + b"unit" + b"\x00" + b"future body"
    conn = connection()
    conn.receive_data(framed(frame) + metadata(43))
    event = conn.next_event()
    assert isinstance(event, RequestReceived) and event.body is None
    assert (event.header.api_version, event.header.correlation_id, event.header.client_id) == (99, 42, "unit")
    assert conn.next_event() is PAUSED and conn.client_software_name is None
    conn.response_complete()
    assert [e.header.correlation_id for e in drain(conn)] == [43]
    assert not conn.closed


# -- what the connection remembers ----------------------------------------------------------

def test_client_software_is_recorded_from_api_versions_v3_and_later():
    conn = connection()
    conn.receive_data(api_versions(1, version=3, name="librdkafka", software_version="2.3.0"))
    drain(conn)
    assert (conn.client_software_name, conn.client_software_version) == ("librdkafka", "2.3.0")
    conn.receive_data(api_versions(2, version=4, name="apache-kafka-java", software_version="3.7.0"))
    drain(conn)
    assert (conn.client_software_name, conn.client_software_version) == ("apache-kafka-java", "3.7.0")


@pytest.mark.parametrize("version, name, software_version", [
    (2, None, None),                  # v2 has no such fields
    (3, "bad name", "1.0"),           # KIP-511: alphanumerics with inner '.' and '-' only
    (3, "ok", "-1.0"),
    (3, "", "1.0"),
])
def test_client_software_is_not_recorded_when_absent_or_invalid(version, name, software_version):
    conn = connection()
    conn.receive_data(api_versions(1, version=version, name=name, software_version=software_version))
    [event] = drain(conn)
    assert isinstance(event, RequestReceived), "an invalid name is the handler's to answer (INVALID_REQUEST)"
    assert conn.client_software_name is None and conn.client_software_version is None


def test_the_client_id_is_the_last_one_given():
    conn = connection()
    conn.receive_data(wire(MetadataRequest(version=1, topics=None), 1, 1, "first")
                      + wire(MetadataRequest(version=1, topics=None), 1, 2, None)
                      + wire(MetadataRequest(version=1, topics=None), 1, 3, "second"))
    ids = []
    while (event := conn.next_event()) is not NEED_DATA:
        assert isinstance(event, RequestReceived)
        ids.append(conn.client_id)
        conn.response_complete()
    assert ids == ["first", "first", "second"] and conn.requests_received == 3


# -- SASL pre-authentication (KIP-43, KIP-152) ------------------------------------------------

def test_a_plaintext_connection_needs_no_authentication():
    conn = connection()
    assert conn.auth_state is AuthState.NOT_REQUIRED and conn.authenticated
    conn.receive_data(metadata(1))
    assert isinstance(conn.next_event(), RequestReceived)


@pytest.mark.parametrize("data, name", [
    (metadata(1), "Metadata"),
    (sasl_authenticate(1), "SaslAuthenticate"),
])
def test_before_a_handshake_only_api_versions_and_sasl_handshake_are_accepted(data, name):
    conn = connection(sasl=True)
    conn.receive_data(api_versions(1) + sasl_handshake(2))
    assert [e.header.api_key for e in drain(conn)] == [ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE]
    assert conn.auth_state is AuthState.HANDSHAKE and not conn.authenticated
    conn.receive_data(data)
    [event] = drain(conn)
    assert isinstance(event, ProtocolViolation)
    assert f"{name} request before authentication completed (SASL state: handshake" in event.message
    assert_closed(conn)


def test_after_a_framed_handshake_only_sasl_authenticate_is_accepted():
    conn = connection(sasl=True)
    conn.receive_data(sasl_handshake(1, version=1))
    assert isinstance(conn.next_event(), RequestReceived)
    conn.sasl_handshake_complete(raw_tokens=False)
    conn.response_complete()
    assert conn.auth_state is AuthState.AUTHENTICATE
    conn.receive_data(sasl_authenticate(2) + sasl_authenticate(3) + api_versions(4))
    events = drain(conn)
    assert [type(e) for e in events] == [RequestReceived, RequestReceived, ProtocolViolation]
    assert "ApiVersions request before authentication completed (SASL state: authenticate" in events[2].message


def test_after_a_framed_handshake_and_authentication_everything_served_is_accepted():
    conn = connection(sasl=True)
    conn.receive_data(sasl_handshake(1))
    conn.next_event()
    conn.sasl_handshake_complete(raw_tokens=False)
    conn.response_complete()
    conn.receive_data(sasl_authenticate(2) + metadata(3) + api_versions(4))
    event = conn.next_event()
    assert event.header.api_key == ApiKey.SASL_AUTHENTICATE
    conn.authentication_complete()        # the handler's outcome, applied before the next request
    conn.response_complete()
    assert conn.auth_state is AuthState.AUTHENTICATED and conn.authenticated
    assert [e.header.correlation_id for e in drain(conn)] == [3, 4]


def test_after_a_v0_handshake_frames_are_raw_tokens_until_authenticated():
    conn = connection(sasl=True)
    conn.receive_data(sasl_handshake(1, version=0))
    assert isinstance(conn.next_event(), RequestReceived)
    conn.sasl_handshake_complete(raw_tokens=True)
    conn.response_complete()
    assert conn.auth_state is AuthState.RAW_TOKENS
    # A raw token is not a request: even bytes that would parse as one are a token.
    conn.receive_data(framed(b"\x00alice\x00secret") + metadata(2))
    token = conn.next_event()
    assert token == SaslTokenReceived(b"\x00alice\x00secret", 4 + 13)
    assert conn.next_event() is PAUSED, "one token at a time, like a request"
    conn.response_complete()
    second = conn.next_event()
    assert isinstance(second, SaslTokenReceived) and second.token == metadata(2)[4:]
    conn.authentication_complete()
    conn.response_complete()
    conn.receive_data(metadata(3))
    [event] = drain(conn)
    assert isinstance(event, RequestReceived) and event.header.correlation_id == 3
    assert conn.requests_received == 2, "tokens are not counted as requests"


def test_raw_tokens_obey_the_pre_authentication_size_limit():
    conn = connection(sasl=True, max_authentication_size=64)
    conn.receive_data(sasl_handshake(1, version=0))
    conn.next_event()
    conn.sasl_handshake_complete(raw_tokens=True)
    conn.response_complete()
    conn.receive_data(framed(b"x" * 65))
    event = conn.next_event()
    assert isinstance(event, ProtocolViolation) and "sasl.server.max.receive.size" in event.message
    assert_closed(conn)


def test_sasl_server_max_receive_size_holds_until_authentication_then_socket_request_max_bytes():
    """Kafka's authenticator reads with sasl.server.max.receive.size; afterwards requests may be larger."""
    big = metadata(5)
    conn = connection(sasl=True, max_authentication_size=len(big) - 5, max_request_size=LIMIT)
    conn.receive_data(big)
    assert isinstance(conn.next_event(), ProtocolViolation), "a pre-authentication frame over the SASL limit"
    authenticated = connection(sasl=True, max_authentication_size=len(big) - 5, max_request_size=LIMIT)
    authenticated.authentication_complete()
    authenticated.receive_data(big)
    assert isinstance(authenticated.next_event(), RequestReceived)
    assert authenticated.max_request_size == LIMIT


def test_handshake_outcomes_only_apply_in_their_state():
    conn = connection()
    conn.sasl_handshake_complete(raw_tokens=True)
    conn.authentication_complete()
    assert conn.auth_state is AuthState.NOT_REQUIRED, "a PLAINTEXT connection never enters SASL states"
    sasl = connection(sasl=True)
    sasl.authentication_complete()
    sasl.sasl_handshake_complete(raw_tokens=True)
    assert sasl.auth_state is AuthState.AUTHENTICATED, "a late handshake outcome does not undo authentication"


# -- robustness -------------------------------------------------------------------------

@settings(max_examples=300, deadline=None)
@given(api_key=st.sampled_from(sorted(SERVED) + [ApiKey.PRODUCE, 999]), version=st.integers(-2, 20),
       body=st.binary(max_size=200))
def test_arbitrary_bytes_after_a_valid_size_never_raise(api_key, version, body):
    """The contract: errors become one ProtocolViolation, never an exception into the caller."""
    frame = struct.pack(">hhi", api_key, version, 1) + body
    conn = connection()
    conn.receive_data(framed(frame))
    event = conn.next_event()
    assert isinstance(event, (RequestReceived, ProtocolViolation))
    if isinstance(event, ProtocolViolation):
        assert conn.next_event() is CLOSED

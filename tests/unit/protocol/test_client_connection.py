"""ClientConnection on bytes alone, and against the server side in memory.

The client twin frames requests, pipelines them and matches each response to
the oldest outstanding request; Kafka brokers answer a connection's requests
in order, so any other correlation id means the stream is out of step.  The
in-memory tests pass bytes between a ``ClientConnection`` and a
``ServerConnection`` answered by ``KafkaApis`` with the real ApiVersions
handler -- the same path a request takes through the broker, minus sockets.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from twisted_kafka.network.request import NoOpResponse, Request, RequestContext, SendResponse
from twisted_kafka.protocol.client_connection import ClientConnection, ResponseReceived
from twisted_kafka.protocol.codec import encode_api_versions_error, encode_response
from twisted_kafka.protocol.connection import CLOSED, NEED_DATA, ProtocolViolation, RequestReceived, ServerConnection
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.header import RequestHeader, parse_request_header
from twisted_kafka.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.server.api_handler import NO_RESPONSE, ApiHandler
from twisted_kafka.server.authorization import ALLOW_ALL
from twisted_kafka.server.handlers.api_versions import ApiVersionsHandler
from twisted_kafka.server.kafka_apis import KafkaApis

from .counting import CHUNK, CountingFrameBuffer, Work, chunks_of, framed

# -- a broker in memory ----------------------------------------------------------------------


class MetadataHandler(ApiHandler):
    api_key = ApiKey.METADATA

    async def handle(self, request):
        return MetadataResponse(version=request.api_version, brokers=[], controller_id=7, topics=[])

    def error_response(self, request, error, message=None):
        raise AssertionError("not expected")


class SaslHandshakeHandler(ApiHandler):
    api_key = ApiKey.SASL_HANDSHAKE

    async def handle(self, request):
        return SaslHandshakeResponse(version=request.api_version, error_code=0, mechanisms=[request.body.mechanism])

    def error_response(self, request, error, message=None):
        raise AssertionError("not expected")


class ProduceAcksZeroHandler(ApiHandler):
    """Produce with acks=0 is answered by silence (KafkaApis turns this into a NoOpResponse)."""

    api_key = ApiKey.PRODUCE

    async def handle(self, request):
        assert request.body.acks == 0
        return NO_RESPONSE

    def error_response(self, request, error, message=None):
        raise AssertionError("not expected")


SERVED_KEYS = [ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.SASL_HANDSHAKE]
CONTEXT = RequestContext(connection_id="memory", listener_name="PLAINTEXT", security_protocol="PLAINTEXT",
                         plane="data", client_host="127.0.0.1", client_port=40000)


def run(coroutine):
    """Run a coroutine that never waits (every handler here answers at once) to its result."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError("the handler waited")


class Broker:
    """A ServerConnection whose requests are answered through KafkaApis, one at a time, in order."""

    def __init__(self):
        self.apis = KafkaApis([ApiVersionsHandler(lambda context: SERVED_KEYS), MetadataHandler(),
                               SaslHandshakeHandler(), ProduceAcksZeroHandler()], authorization=ALLOW_ALL)
        self.connection = ServerConnection(max_request_size=1 << 20, serves=self.apis.served_spec)
        self.received: list[RequestReceived] = []

    def receive(self, data: bytes) -> bytes:
        """Feed bytes from the client; the bytes the broker writes back."""
        self.connection.receive_data(data)
        out = []
        while True:
            event = self.connection.next_event()
            if event is NEED_DATA:
                return b"".join(bytes(chunk) for chunk in out)
            assert isinstance(event, RequestReceived), event
            self.received.append(event)
            request = Request(context=CONTEXT, header=event.header, body=event.body, spec=event.spec,
                              size=event.size)
            response = run(self.apis.handle(request))
            if isinstance(response, SendResponse):
                out.extend(response.chunks)
            else:
                assert isinstance(response, NoOpResponse)
            self.connection.response_complete()


def client(**kwargs) -> ClientConnection:
    return ClientConnection(client_id="twin", **kwargs)


def send(conn: ClientConnection, body, version: int, **kwargs) -> tuple[int, bytes]:
    correlation_id, chunks = conn.send_request(body, version, **kwargs)
    return correlation_id, b"".join(chunks)


def responses(conn: ClientConnection) -> list:
    events = []
    while (event := conn.next_event()) is not NEED_DATA and event is not CLOSED:
        events.append(event)
    return events


def pipeline(conn: ClientConnection) -> tuple[list[int], bytes]:
    """Five requests of four APIs, one of them acks=0: the ids to be answered and the bytes to send."""
    sent = [
        send(conn, ApiVersionsRequest(version=3, client_software_name="twin", client_software_version="1"), 3),
        send(conn, MetadataRequest(version=1, topics=None), 1),
        send(conn, ProduceRequest(version=3, transactional_id=None, acks=0, timeout_ms=100, topic_data=[]), 3,
             expect_response=False),
        send(conn, SaslHandshakeRequest(version=1, mechanism="PLAIN"), 1),
        send(conn, ApiVersionsRequest(version=0), 0),
    ]
    answered = [cid for i, (cid, _) in enumerate(sent) if i != 2]
    return answered, b"".join(data for _, data in sent)


def check_pipeline_responses(events, answered) -> None:
    assert all(isinstance(e, ResponseReceived) for e in events), events
    assert [e.correlation_id for e in events] == answered
    assert [(e.api_key, e.api_version) for e in events] == [(18, 3), (3, 1), (17, 1), (18, 0)]
    versions3, metadata, handshake, versions0 = (e.body for e in events)
    assert versions3.error_code == 0 and {k.api_key for k in versions3.api_keys} == set(SERVED_KEYS)
    assert metadata.controller_id == 7
    assert handshake.mechanisms == ["PLAIN"]
    assert {k.api_key for k in versions0.api_keys} == set(SERVED_KEYS)


# -- against the server side in memory ---------------------------------------------------------

def test_pipelined_requests_of_several_apis_are_answered_and_matched_in_order():
    conn, broker = client(), Broker()
    answered, data = pipeline(conn)
    assert conn.outstanding == 4, "the acks=0 Produce is not waited for"
    reply = broker.receive(data)
    assert [e.header.api_key for e in broker.received] == [18, 3, 0, 17, 18]
    assert broker.connection.client_software_name == "twin"
    conn.receive_data(reply)
    check_pipeline_responses(responses(conn), answered)
    assert conn.outstanding == 0 and conn.next_event() is NEED_DATA


def test_responses_delivered_byte_by_byte_are_matched_once_whole():
    conn, broker = client(), Broker()
    answered, data = pipeline(conn)
    reply = broker.receive(data)
    events = []
    for byte in reply:
        conn.receive_data(bytes([byte]))
        events.extend(responses(conn))
    check_pipeline_responses(events, answered)


@settings(max_examples=100, deadline=None)
@given(cuts_up=st.lists(st.integers(0, 10_000), max_size=12), cuts_down=st.lists(st.integers(0, 10_000), max_size=12))
def test_any_chunking_in_either_direction_gives_the_same_responses(cuts_up, cuts_down):
    def split(data, cuts):
        positions = sorted({cut % (len(data) + 1) for cut in cuts} | {0, len(data)})
        return [data[a:b] for a, b in zip(positions, positions[1:], strict=False)]

    conn, broker = client(), Broker()
    answered, data = pipeline(conn)
    reply = b"".join(broker.receive(chunk) for chunk in split(data, cuts_up))
    events = []
    for chunk in split(reply, cuts_down):
        conn.receive_data(chunk)
        events.extend(responses(conn))
    check_pipeline_responses(events, answered)


def test_an_unsupported_api_versions_request_gets_unsupported_version_in_v0_format():
    """KIP-511: a newer client's ApiVersions is answered in v0 format, which the client can
    read whatever version it asked for, so it can retry with a version both sides share."""
    broker = Broker()
    frame = struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 5, 4) + b"twin" + b"\x00"
    reply = broker.receive(framed(frame))
    conn = client(first_correlation_id=5)
    conn.send_request(ApiVersionsRequest(version=0), 0)   # the client reads the answer as v0
    conn.receive_data(reply)
    [event] = responses(conn)
    assert event.correlation_id == 5 and event.body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in event.body.api_keys] == [(18, 0, 4)]


# -- correlation ----------------------------------------------------------------------------

def answer(data: bytes, body) -> bytes:
    """The framed response to the request in ``data`` (a client's bytes), encoded as a broker would."""
    header = parse_request_header(data[4:])
    return b"".join(encode_response(header, body))


def test_a_response_with_the_wrong_correlation_id_is_a_violation():
    conn = client()
    first = send(conn, MetadataRequest(version=1, topics=None), 1)
    second = send(conn, MetadataRequest(version=1, topics=None), 1)
    conn.receive_data(answer(second[1], MetadataResponse(version=1, brokers=[], controller_id=1, topics=[])))
    event = conn.next_event()
    assert isinstance(event, ProtocolViolation)
    assert f"response correlation id {second[0]} does not match the oldest outstanding request ({first[0]})" \
        in event.message
    assert conn.next_event() is CLOSED
    with pytest.raises(ConnectionError):
        conn.send_request(MetadataRequest(version=1, topics=None), 1)
    assert conn.fail_outstanding() == [first[0], second[0]]


def test_a_response_with_nothing_outstanding_is_a_violation():
    conn = client()
    cid, data = send(conn, ProduceRequest(version=3, transactional_id=None, acks=0, timeout_ms=1, topic_data=[]), 3,
                     expect_response=False)
    assert conn.outstanding == 0 and conn.next_event() is NEED_DATA
    conn.receive_data(framed(struct.pack(">i", cid)))
    event = conn.next_event()
    assert isinstance(event, ProtocolViolation) and "no request outstanding" in event.message
    assert conn.next_event() is CLOSED


def test_acks_zero_requests_take_a_correlation_id_but_are_never_waited_for():
    conn, broker = client(), Broker()
    produce = ProduceRequest(version=3, transactional_id=None, acks=0, timeout_ms=1, topic_data=[])
    sent = [send(conn, produce, 3, expect_response=False) for _ in range(3)]
    assert conn.outstanding == 0 and conn.next_event() is NEED_DATA
    versions_id, data = send(conn, ApiVersionsRequest(version=0), 0)
    assert [cid for cid, _ in sent] + [versions_id] == [1, 2, 3, 4]
    reply = broker.receive(b"".join(produce_bytes for _, produce_bytes in sent) + data)
    assert [e.header.correlation_id for e in broker.received] == [1, 2, 3, 4]
    conn.receive_data(reply)
    [event] = responses(conn)
    assert event.correlation_id == versions_id and conn.outstanding == 0


def test_correlation_ids_stay_non_negative_when_they_wrap():
    conn = client(first_correlation_id=2**31 - 1)
    ids = [conn.send_request(ApiVersionsRequest(version=0), 0)[0] for _ in range(3)]
    assert ids == [2**31 - 1, 0, 1]


def test_fail_outstanding_names_every_unanswered_request_in_order_and_closes():
    conn = client()
    ids = [conn.send_request(MetadataRequest(version=1, topics=None), 1)[0] for _ in range(3)]
    assert conn.fail_outstanding() == ids
    assert conn.outstanding == 0 and conn.next_event() is CLOSED
    conn.receive_data(b"\x00\x00\x00\x04\x00\x00\x00\x01")
    assert conn.next_event() is CLOSED


# -- size limits and malformed responses --------------------------------------------------------

def test_a_response_over_the_clients_limit_is_a_violation_before_its_body_arrives():
    conn = client(max_response_size=100)
    conn.send_request(MetadataRequest(version=1, topics=None), 1)
    conn.receive_data(struct.pack(">i", 101))
    event = conn.next_event()
    assert isinstance(event, ProtocolViolation)
    assert "invalid response size 101: larger than the client's limit (100)" in event.message
    assert conn.next_event() is CLOSED


def test_a_negative_response_size_is_a_violation():
    conn = client()
    conn.send_request(MetadataRequest(version=1, topics=None), 1)
    conn.receive_data(struct.pack(">i", -5))
    event = conn.next_event()
    assert isinstance(event, ProtocolViolation) and "negative" in event.message


def test_a_truncated_response_body_is_a_violation():
    conn = client()
    cid, data = send(conn, MetadataRequest(version=1, topics=None), 1)
    good = answer(data, MetadataResponse(version=1, brokers=[], controller_id=1, topics=[]))
    conn.receive_data(framed(good[4:-3]))
    event = conn.next_event()
    assert isinstance(event, ProtocolViolation)
    assert f"malformed response to correlation id {cid}" in event.message


def test_a_large_response_in_64k_reads_is_assembled_with_linear_work():
    """Followers and consumers read multi-megabyte responses: assembling one must cost about
    twice its size in copies, not a copy of the buffer per read."""
    conn = client()
    work = Work()
    conn._frames = CountingFrameBuffer(2**31 - 1, work=work, kind="response")
    cid, data = send(conn, SaslAuthenticateRequest(version=1, auth_bytes=b""), 1)
    token = bytes(range(256)) * (6 << 12)      # 6 MiB
    reply = b"".join(encode_response(RequestHeader(ApiKey.SASL_AUTHENTICATE, 1, cid),
                                     SaslAuthenticateResponse(version=1, error_code=0, error_message=None,
                                                              auth_bytes=token, session_lifetime_ms=0)))
    events = []
    for chunk in chunks_of(reply):
        conn.receive_data(chunk)
        events.extend(responses(conn))
    [event] = events
    assert event.correlation_id == cid and event.body.auth_bytes == token
    assert work.bytes_copied <= 2 * len(reply) + CHUNK


@pytest.mark.parametrize("version", [1, 3, 4])
def test_an_older_brokers_v0_unsupported_version_answer_to_api_versions_is_read(version):
    """KIP-511 from the client's side: a broker that does not know the ApiVersions version asked
    answers in v0 format; the client reads it (as Kafka's ApiVersionsResponse.parse falls back
    to v0) and learns which versions to retry with, rather than dropping the connection."""
    conn = client()
    body = (ApiVersionsRequest(version=version, client_software_name="twin", client_software_version="1")
            if version >= 3 else ApiVersionsRequest(version=version))
    cid, data = send(conn, body, version)
    conn.receive_data(b"".join(encode_api_versions_error(parse_request_header(data[4:]))))
    [event] = responses(conn)
    assert event.correlation_id == cid and event.body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert [(k.api_key, k.min_version, k.max_version) for k in event.body.api_keys] == [(18, 0, 4)]
    assert not conn.closed

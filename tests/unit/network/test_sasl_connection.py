"""A SASL_PLAINTEXT listener's connections on bytes: handshake, exchange, failure delay, size limit.

The real Processor, ServerConnection and authenticator, on a fake reactor
(``task.Clock`` semantics): the failed-authentication delay is proven by
advancing the clock, not by waiting.
"""

from __future__ import annotations

import struct

from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.network.connection_events import ConnectionEventKind
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.sasl.authenticator import SaslServerConfig
from twisted_kafka.sasl.credential_store import InMemoryScramCredentialStore
from twisted_kafka.sasl.scram_credentials import SCRAM_SHA_256, credential_from_password
from twisted_kafka.server.api_handler import ApiHandler
from twisted_kafka.server.handlers.sasl import SaslAuthenticateHandler, SaslHandshakeHandler

from .helpers import Stack, decode, request_bytes, split_frames

SASL_PROPS = {
    "listeners": "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9095",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "control.plane.listener.name": "",
    "connection.failed.authentication.delay.ms": "250",
    "sasl.server.max.receive.size": "1024",
}


class MetadataStub(ApiHandler):
    """Counts Metadata requests: none may be served before authentication."""

    api_key = ApiKey.METADATA

    def __init__(self):
        self.principals: list[str] = []

    async def handle(self, request):
        self.principals.append(request.principal)
        return self.error_response(request, ErrorCode.NONE)

    def error_response(self, request, error, message=None):
        return m.MetadataResponse(version=request.api_version, throttle_time_ms=0, brokers=[], cluster_id=None,
                                  controller_id=-1, topics=[])

    def response_version(self, request):
        return request.api_version


def sasl_stack(**overrides):
    store = InMemoryScramCredentialStore({"bob": {"SCRAM-SHA-256": credential_from_password(SCRAM_SHA_256,
                                                                                           "bob-secret")}})
    config = SaslServerConfig("SASL_PLAINTEXT", ("PLAIN", "SCRAM-SHA-256"), {"alice": "alice-secret"}, store)
    metadata = MetadataStub()
    stack = Stack(SASL_PROPS, handlers=[metadata, SaslHandshakeHandler(), SaslAuthenticateHandler()],
                  sasl={"SASL_PLAINTEXT": config}, **overrides)
    events = []
    stack.server.connection_events.subscribe(events.append)
    return stack, metadata, events


def handshake(version=1, mechanism="PLAIN", cid=1):
    return request_bytes(SaslHandshakeRequest(version=version, mechanism=mechanism), correlation_id=cid)


def authenticate(token, version=2, cid=2):
    return request_bytes(SaslAuthenticateRequest(version=version, auth_bytes=token), correlation_id=cid)


def metadata(cid=3):
    return request_bytes(MetadataRequest(version=1, topics=None), correlation_id=cid)


def responses(transport, *keys_versions):
    frames = split_frames(transport.value())
    assert len(frames) == len(keys_versions), frames
    return [decode(key, version, frame)[1] for (key, version), frame in zip(keys_versions, frames, strict=True)]


def test_plain_handshake_v1_then_authenticate_sets_the_principal():
    stack, served, _ = sasl_stack()
    p = stack.connect("SASL_PLAINTEXT")
    p.dataReceived(handshake() + authenticate(b"\0alice\0alice-secret") + metadata())
    stack.serve()
    hs, auth, _ = responses(p.transport, (ApiKey.SASL_HANDSHAKE, 1), (ApiKey.SASL_AUTHENTICATE, 2),
                            (ApiKey.METADATA, 1))
    assert hs.error_code == 0 and hs.mechanisms == ["PLAIN", "SCRAM-SHA-256"]
    assert auth.error_code == 0 and auth.session_lifetime_ms == 0
    assert served.principals == ["User:alice"]


def test_api_versions_is_served_before_authentication():
    stack, _, _ = sasl_stack()
    p = stack.connect("SASL_PLAINTEXT")
    p.dataReceived(request_bytes(ApiVersionsRequest(version=0), correlation_id=7))
    stack.serve()
    [response] = responses(p.transport, (ApiKey.API_VERSIONS, 0))
    keys = {entry[0] for entry in response.api_keys}
    assert {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} <= keys


def test_wrong_password_answers_the_error_then_closes_after_the_delay_serving_nothing_else():
    stack, served, events = sasl_stack()
    p = stack.connect("SASL_PLAINTEXT")
    p.dataReceived(handshake() + authenticate(b"\0alice\0wrong") + metadata())
    _, auth = responses(p.transport, (ApiKey.SASL_HANDSHAKE, 1), (ApiKey.SASL_AUTHENTICATE, 2))
    assert auth.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert auth.error_message == "Authentication failed: Invalid username or password"
    assert p.transport.paused, "nothing more is read from a connection that failed to authenticate"
    stack.clock.advance(0.249)
    assert not p.transport.disconnecting, "closed before connection.failed.authentication.delay.ms"
    stack.clock.advance(0.001)
    assert p.transport.disconnecting and not p.transport.aborted, "a graceful close: the error response leaves"
    stack.flush()
    assert served.principals == [], "no other API was served"
    kinds = [(e.kind, e.reason) for e in events]
    assert (ConnectionEventKind.AUTHENTICATION_FAILED, "Authentication failed for user 'alice': wrong password") \
        in kinds
    assert kinds[-1] == (ConnectionEventKind.CLOSED, CloseReason.AUTHENTICATION)


def test_unsupported_mechanism_is_answered_with_the_enabled_ones_and_fails():
    stack, _, events = sasl_stack()
    p = stack.connect("SASL_PLAINTEXT")
    p.dataReceived(handshake(mechanism="GSSAPI"))
    [hs] = responses(p.transport, (ApiKey.SASL_HANDSHAKE, 1))
    assert hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM and hs.mechanisms == ["PLAIN", "SCRAM-SHA-256"]
    stack.clock.advance(0.25)
    assert p.transport.disconnecting
    assert any(e.kind is ConnectionEventKind.AUTHENTICATION_FAILED for e in events)


def test_another_api_before_authentication_fails_it_without_an_answer():
    stack, served, events = sasl_stack()
    p = stack.connect("SASL_PLAINTEXT")
    p.dataReceived(metadata())
    assert p.transport.value() == b""
    stack.clock.advance(0.25)
    assert p.transport.disconnecting
    stack.flush()
    assert served.principals == []
    assert events[-1].reason == CloseReason.AUTHENTICATION


def test_a_frame_over_sasl_server_max_receive_size_before_authentication_is_refused():
    stack, _, events = sasl_stack()
    p = stack.connect("SASL_PLAINTEXT")
    p.dataReceived(struct.pack(">i", 1025) + b"x" * 16)
    assert p.transport.value() == b""
    failed = [e for e in events if e.kind is ConnectionEventKind.AUTHENTICATION_FAILED]
    assert failed and "sasl.server.max.receive.size" in failed[0].reason
    stack.clock.advance(0.25)
    assert p.transport.disconnecting


def test_after_authentication_the_request_limit_is_socket_request_max_bytes():
    stack, served, _ = sasl_stack()
    p = stack.connect("SASL_PLAINTEXT")
    p.dataReceived(handshake() + authenticate(b"\0alice\0alice-secret"))
    big = request_bytes(MetadataRequest(version=1, topics=[("t" * 300,)] * 5), correlation_id=9)
    assert len(big) > 1024
    p.dataReceived(big)
    stack.serve()
    assert served.principals == ["User:alice"]


def test_handshake_v0_then_raw_plain_token():
    stack, served, _ = sasl_stack()
    p = stack.connect("SASL_PLAINTEXT")
    token = b"\0alice\0alice-secret"
    p.dataReceived(handshake(version=0) + struct.pack(">i", len(token)) + token + metadata())
    stack.serve()
    data = p.transport.value()
    frames = split_frames(data)
    assert decode(ApiKey.SASL_HANDSHAKE, 0, frames[0])[1].error_code == 0
    assert frames[1] == b"", "PLAIN's empty challenge, in a size-prefixed frame"
    assert served.principals == ["User:alice"]


def test_raw_token_failure_closes_without_an_answer_after_the_delay():
    stack, _, _ = sasl_stack()
    p = stack.connect("SASL_PLAINTEXT")
    token = b"\0alice\0nope"
    p.dataReceived(handshake(version=0) + struct.pack(">i", len(token)) + token)
    assert len(split_frames(p.transport.value())) == 1
    stack.clock.advance(0.2)
    assert not p.transport.disconnecting
    stack.clock.advance(0.05)
    assert p.transport.disconnecting


def test_scram_sha_256_exchange_with_kafka_pythons_client():
    from kafka.net.sasl.scram import ScramClient

    stack, served, _ = sasl_stack()
    p = stack.connect("SASL_PLAINTEXT")
    client = ScramClient("bob", "bob-secret", "SCRAM-SHA-256")
    p.dataReceived(handshake(mechanism="SCRAM-SHA-256") + authenticate(client.first_message(), cid=2))
    _, first = responses(p.transport, (ApiKey.SASL_HANDSHAKE, 1), (ApiKey.SASL_AUTHENTICATE, 2))
    assert first.error_code == 0
    client.process_server_first_message(first.auth_bytes)
    p.transport.clear()
    p.dataReceived(authenticate(client.final_message(), cid=3))
    [final] = responses(p.transport, (ApiKey.SASL_AUTHENTICATE, 2))
    assert final.error_code == 0
    client.process_server_final_message(final.auth_bytes)   # verifies the server's signature
    p.transport.clear()
    p.dataReceived(metadata(cid=4))
    stack.serve()
    assert served.principals == ["User:bob"]


def test_sasl_requests_after_authentication_are_illegal_sasl_state():
    stack, _, _ = sasl_stack()
    p = stack.connect("SASL_PLAINTEXT")
    p.dataReceived(handshake() + authenticate(b"\0alice\0alice-secret"))
    p.transport.clear()
    p.dataReceived(handshake(cid=5))
    stack.serve()
    [hs] = responses(p.transport, (ApiKey.SASL_HANDSHAKE, 1))
    assert hs.error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_plaintext_listener_answers_sasl_handshake_with_illegal_sasl_state():
    stack, _, _ = sasl_stack()
    p = stack.connect("PLAINTEXT")
    p.dataReceived(handshake())
    stack.serve()
    [hs] = responses(p.transport, (ApiKey.SASL_HANDSHAKE, 1))
    assert hs.error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_scram_over_raw_tokens_after_a_v0_handshake():
    from kafka.net.sasl.scram import ScramClient

    stack, served, _ = sasl_stack()
    p = stack.connect("SASL_PLAINTEXT")
    client = ScramClient("bob", "bob-secret", "SCRAM-SHA-256")
    first = client.first_message()
    p.dataReceived(handshake(version=0, mechanism="SCRAM-SHA-256") + struct.pack(">i", len(first)) + first)
    frames = split_frames(p.transport.value())
    assert decode(ApiKey.SASL_HANDSHAKE, 0, frames[0])[1].error_code == 0
    client.process_server_first_message(frames[1])
    p.transport.clear()
    final = client.final_message()
    p.dataReceived(struct.pack(">i", len(final)) + final + metadata(cid=4))
    client.process_server_final_message(split_frames(p.transport.value())[0])
    stack.serve()
    assert served.principals == ["User:bob"]

"""Failed authentication over a real socket: the error, the delay, the close, and nothing else served.

The broker (conftest) closes a connection whose authentication failed after
``connection.failed.authentication.delay.ms`` = 300 ms.  The raw client sees
exactly what the broker does: the error response, then EOF no sooner than
the delay, and no answer to the request it pipelined behind the failed one.
"""

from __future__ import annotations

import json
import struct
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from support.raw_client import RawClient
from support.wait import wait_until
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.messages import MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest
from twisted_kafka.protocol.registry import ApiKey

DELAY = 0.3


def sasl_client(broker) -> RawClient:
    return RawClient(broker.port("SASL_PLAINTEXT")).connect()


def test_wrong_password_is_an_error_then_a_close_after_the_delay_and_nothing_else_is_served(sasl_broker):
    with sasl_client(sasl_broker) as client:
        assert client.api_versions(version=3).error_code == 0, "ApiVersions is served before authentication"
        handshake = client.request(SaslHandshakeRequest(version=1, mechanism="PLAIN"), 1)
        assert handshake.error_code == 0 and "PLAIN" in handshake.mechanisms
        started = time.monotonic()
        client.send_request(SaslAuthenticateRequest(version=2, auth_bytes=b"\0alice\0not-her-password"), 2,
                            correlation_id=10)
        client.send_request(MetadataRequest(version=1, topics=None), 1, correlation_id=11)
        correlation_id, response = client.read_response(ApiKey.SASL_AUTHENTICATE, 2)
        assert correlation_id == 10
        assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert response.error_message == "Authentication failed: Invalid username or password"
        assert client.wait_closed(timeout=10), "the Metadata request behind it was answered, or no close"
        elapsed = time.monotonic() - started
    assert elapsed >= DELAY, f"closed {elapsed:.3f} s after the failure, before the 300 ms delay"
    wait_until(lambda: "Authentication failed for user 'alice': wrong password" in sasl_broker.log_text(),
               what="the failure in the broker's log")


def test_an_api_other_than_api_versions_before_authentication_is_not_served(sasl_broker):
    with sasl_client(sasl_broker) as client:
        started = time.monotonic()
        client.send_request(MetadataRequest(version=1, topics=None), 1)
        assert client.wait_closed(timeout=10)
        assert time.monotonic() - started >= DELAY


def test_a_pre_authentication_frame_over_sasl_server_max_receive_size_is_closed(sasl_broker):
    with sasl_client(sasl_broker) as client:
        client.send_raw(struct.pack(">i", 524288 + 1) + b"\0" * 64)
        assert client.wait_closed(timeout=10)
    wait_until(lambda: "sasl.server.max.receive.size" in sasl_broker.log_text(), what="the reason in the log")


def test_unsupported_mechanism_is_answered_with_the_enabled_list_then_closed(sasl_broker):
    with sasl_client(sasl_broker) as client:
        handshake = client.request(SaslHandshakeRequest(version=1, mechanism="GSSAPI"), 1)
        assert handshake.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert handshake.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert client.wait_closed(timeout=10)


def test_handshake_v0_with_raw_tokens(sasl_broker):
    """KIP-43's first form: after SaslHandshake v0 the tokens travel in bare size-prefixed frames."""
    with sasl_client(sasl_broker) as client:
        assert client.request(SaslHandshakeRequest(version=0, mechanism="PLAIN"), 0).error_code == 0
        client.send_frame(b"\0alice\0alice-secret")
        assert client.read_frame() == b"", "PLAIN's empty challenge"
        assert client.metadata().brokers, "served once authenticated"


def test_librdkafka_reports_the_authentication_error(sasl_broker):
    errors = []
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{sasl_broker.port('SASL_PLAINTEXT')}",
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                         "sasl.username": "nobody", "sasl.password": "guess", "error_cb": errors.append})
    wait_until(lambda: producer.poll(0.1) is not None and any(e.code() == KafkaError._AUTHENTICATION for e in errors),
               what="an authentication error from librdkafka")
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in str(errors[0])


def connection_events(broker) -> list[dict]:
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{broker.port('PLAINTEXT')}", "group.id": "sasl-events",
                         "enable.auto.commit": False})
    partition = TopicPartition("__connection_events", 0, OFFSET_BEGINNING)
    events: list[dict] = []
    try:
        _, high = consumer.get_watermark_offsets(partition, timeout=10)
        consumer.assign([partition])
        offset = -1
        while offset < high - 1:
            message = consumer.poll(10)
            assert message is not None, f"__connection_events stops at {offset}, below its high watermark {high}"
            if message.error() is None:
                events.append(json.loads(message.value()))
                offset = message.offset()
        return events
    finally:
        consumer.close()


def test_failures_and_principals_are_in_the_connection_events(sasl_broker):
    with sasl_client(sasl_broker) as client:
        client.request(SaslHandshakeRequest(version=1, mechanism="PLAIN"), 1)
        client.request(SaslAuthenticateRequest(version=2, auth_bytes=b"\0mallory\0guess"), 2)
        assert client.wait_closed(timeout=10)
    with sasl_client(sasl_broker) as client:
        client.request(SaslHandshakeRequest(version=1, mechanism="PLAIN"), 1)
        assert client.request(SaslAuthenticateRequest(version=2, auth_bytes=b"\0alice\0alice-secret"), 2) \
            .error_code == 0

    def recorded():
        events = [e for e in connection_events(sasl_broker) if e["listener"] == "SASL_PLAINTEXT"]
        failed = [e for e in events if e["kind"] == "authentication_failed"
                  and e["reason"] == "Authentication failed for user 'mallory': unknown user"]
        if not failed:
            return None
        closes = [e for e in events if e["kind"] == "closed" and e["connection_id"] == failed[0]["connection_id"]]
        alice = [e for e in events if e["kind"] == "closed" and e["principal"] == "User:alice"]
        return (closes, alice) if closes and alice else None

    closes, _ = wait_until(recorded, timeout=30, what="the failure, its close and alice's close in __connection_events")
    assert closes[0]["reason"] == "authentication"

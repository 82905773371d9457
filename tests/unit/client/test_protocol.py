"""KafkaClientProtocol against a StringTransport: framing, pipelining, matching, violations, loss."""

from __future__ import annotations

import pytest
from twisted.internet.address import IPv4Address
from twisted.internet.error import ConnectionLost as TwistedConnectionLost
from twisted.internet.testing import StringTransport
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.python.failure import Failure

from twisted_kafka.client import ConnectionLost, KafkaClientProtocol, ProtocolViolationError
from twisted_kafka.protocol import messages as m

from .helpers import requests_written, response_bytes, update_metadata

PEER = "broker 2 at 127.0.0.1:9093"


def connected(peer: str | None = PEER) -> tuple[KafkaClientProtocol, StringTransport]:
    protocol = KafkaClientProtocol(client_id="controller-1", peer=peer)
    transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 9093))
    protocol.makeConnection(transport)
    return protocol, transport


def answer(header, epoch: int) -> bytes:
    return response_bytes(header, m.UpdateMetadataResponse(version=header.api_version, error_code=epoch))


def result_of(d):
    """The Deferred's result so far (None if it has not fired), leaving it in place."""
    results: list = []

    def keep(result):
        results.append(result)
        return result

    d.addBoth(keep)
    return results[0] if results else None


def failure_of(d) -> Failure:
    """The Deferred's failure, consumed (so it is not reported as unhandled)."""
    results: list = []
    d.addBoth(results.append)
    assert results and isinstance(results[0], Failure), f"expected a failure, got {results!r}"
    return results[0]


@pytest.fixture
def warnings():
    events: list = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


def warning_text(events) -> str:
    return "\n".join(formatEvent(e) for e in events if e.get("log_level") >= LogLevel.warn)


def test_a_request_is_framed_with_the_client_id_and_fires_with_the_decoded_response():
    protocol, transport = connected()
    d = protocol.request(update_metadata(7), 8)
    [(header, body)] = requests_written(transport)
    assert (header.api_key, header.api_version, header.client_id) == (6, 8, "controller-1")
    assert body.controller_epoch == 7
    assert result_of(d) is None and protocol.outstanding == 1
    protocol.dataReceived(answer(header, 7))
    response = result_of(d)
    assert isinstance(response, m.UpdateMetadataResponse) and response.error_code == 7
    assert protocol.outstanding == 0


def test_pipelined_requests_are_matched_in_order_even_when_responses_arrive_byte_by_byte():
    protocol, transport = connected()
    ds = [protocol.request(update_metadata(epoch), 8) for epoch in (1, 2, 3)]
    written = requests_written(transport)
    assert len({header.correlation_id for header, _ in written}) == 3, "fresh correlation ids"
    stream = b"".join(answer(header, body.controller_epoch) for header, body in written)
    first_end = len(answer(written[0][0], 1))
    for i in range(len(stream)):
        protocol.dataReceived(stream[i:i + 1])
        if i == first_end - 2:
            assert result_of(ds[0]) is None, "not before its last byte"
    assert [result_of(d).error_code for d in ds] == [1, 2, 3]


def test_a_request_without_a_response_fires_at_once_and_the_next_response_matches_the_next_request():
    protocol, transport = connected()
    quiet = protocol.request(update_metadata(1), 8, expect_response=False)
    assert result_of(quiet) is None and quiet.called
    answered = protocol.request(update_metadata(2), 8)
    (_, _), (header, _) = requests_written(transport)
    assert protocol.outstanding == 1
    protocol.dataReceived(answer(header, 2))
    assert result_of(answered).error_code == 2


def test_an_out_of_order_correlation_id_is_logged_and_aborts_the_connection(warnings):
    protocol, transport = connected()
    first, second = protocol.request(update_metadata(1), 8), protocol.request(update_metadata(2), 8)
    _, (header, _) = requests_written(transport)
    protocol.dataReceived(answer(header, 2))         # the second request's response, first
    assert transport.disconnected, "aborted, not closed gracefully"
    assert "broker 2 at 127.0.0.1:9093" in warning_text(warnings)
    assert "does not match" in warning_text(warnings)
    assert not protocol.is_open
    assert isinstance(failure_of(protocol.request(update_metadata(3), 8)).value, ProtocolViolationError)
    assert transport.value() == b"", "nothing more is written to a stream out of step"
    assert not first.called, "failed when the connection is actually gone"
    protocol.connectionLost(Failure(TwistedConnectionLost()))
    for d in (first, second):
        error = failure_of(d).value
        assert isinstance(error, ProtocolViolationError) and isinstance(error, ConnectionError)
        assert PEER in str(error) and "does not match" in str(error)
    assert isinstance(failure_of(protocol.request(update_metadata(3), 8)).value, ConnectionLost)


@pytest.mark.parametrize("data, why", [
    (b"\xff\xff\xff\xfe", "negative"),
    (b"\x00\x00\x00\x02\x00\x00", "malformed response"),
])
def test_a_bad_frame_or_body_is_a_protocol_violation(data, why):
    protocol, transport = connected()
    d = protocol.request(update_metadata(1), 8)
    protocol.dataReceived(data)
    assert transport.disconnected
    protocol.connectionLost(Failure(TwistedConnectionLost()))
    error = failure_of(d).value
    assert isinstance(error, ProtocolViolationError) and why in str(error)


def test_a_response_with_nothing_outstanding_is_a_protocol_violation(warnings):
    protocol, transport = connected()
    protocol.dataReceived(b"\x00\x00\x00\x06\x00\x00\x00\x01\x00\x00")
    assert transport.disconnected
    assert "no request outstanding" in warning_text(warnings)


def test_losing_the_connection_fails_every_outstanding_request_naming_the_peer_and_the_request():
    protocol, transport = connected()
    ds = [protocol.request(update_metadata(epoch), 8) for epoch in (1, 2)]
    closed = protocol.when_closed()
    [(first, _), _] = requests_written(transport)
    protocol.connectionLost(Failure(TwistedConnectionLost("reset by peer")))
    errors = [failure_of(d).value for d in ds]
    assert all(type(e) is ConnectionLost for e in errors)
    assert PEER in str(errors[0]) and "reset by peer" in str(errors[0])
    assert f"UpdateMetadata v8 (correlation id {first.correlation_id})" in str(errors[0])
    assert errors[0].peer == PEER
    reason = result_of(closed)
    assert isinstance(reason, ConnectionLost), "when_closed fires (never fails) with the reason"
    assert isinstance(result_of(protocol.when_closed()), ConnectionLost), "also once it is closed"
    later = failure_of(protocol.request(update_metadata(3), 8)).value
    assert isinstance(later, ConnectionLost) and "is closed" in str(later)
    assert transport.value() == b"", "nothing written after the loss"


def test_close_fails_outstanding_requests_as_closed_by_this_client():
    protocol, transport = connected()
    d = protocol.request(update_metadata(1), 8)
    protocol.close()
    assert transport.disconnecting
    assert isinstance(failure_of(protocol.request(update_metadata(2), 8)).value, ConnectionLost)
    protocol.connectionLost(Failure(TwistedConnectionLost()))
    assert "closed by this client" in str(failure_of(d).value)


def test_without_a_peer_name_errors_name_the_transport_peer_address():
    protocol, _ = connected(peer=None)
    d = protocol.request(update_metadata(1), 8)
    protocol.connectionLost(Failure(TwistedConnectionLost()))
    assert "127.0.0.1:9093" in str(failure_of(d).value)


def test_a_body_that_cannot_be_encoded_fails_its_deferred_and_leaves_the_connection_usable():
    protocol, transport = connected()
    bad = m.UpdateMetadataRequest(version=8, controller_id="not a number", is_k_raft_controller=False,
                                  controller_epoch=1, broker_epoch=5, topic_states=[], live_brokers=[])
    failure_of(protocol.request(bad, 8))
    assert transport.value() == b"" and protocol.is_open
    d = protocol.request(update_metadata(4), 8)
    [(header, _)] = requests_written(transport)
    protocol.dataReceived(answer(header, 4))
    assert result_of(d).error_code == 4

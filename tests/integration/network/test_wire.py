"""Raw bytes against a real broker: framing errors, protocol errors, KIP-511, pipelining.

Every bad connection must be closed (the client reads EOF) without an answer,
the broker log must name the peer and the reason (and the likely mistake for
TLS or HTTP), and an unrelated connection opened before must keep getting
answers.
"""

from __future__ import annotations

import re
import ssl
import struct

import pytest

from support.broker_process import BrokerProcess
from support.raw_client import RawClient, api_versions_frame
from twisted_kafka.protocol.codec import decode_response, encode_request
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.messages import ApiVersionsRequest, MetadataRequest

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def wire_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("wire")).start()
    yield broker
    assert broker.stop() == 0


@pytest.fixture(scope="module")
def witness(wire_broker):
    """A connection opened before any bad one, which must never notice them."""
    with RawClient(wire_broker.data_port) as client:
        client.api_versions(0)
        yield client


def tls_client_hello() -> bytes:
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="broker.invalid")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    hello = outgoing.read()
    assert hello[0] == 0x16  # a TLS handshake record
    return hello


CASES = {
    "oversize": (struct.pack(">i", 104857601) + b"\x00" * 16, r"invalid request size 104857601: larger than "
                                                                r"socket.request.max.bytes \(104857600\)"),
    "negative": (struct.pack(">i", -5) + b"\x00" * 16, r"invalid request size -5: negative"),
    "http": (b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n", r"invalid request size \d+.*look like HTTP: "
                                                            r"is an HTTP client pointed at a Kafka listener"),
    "tls": (None, r"invalid request size \d+.*look like a TLS record.*SSL against a PLAINTEXT listener"),
    "unknown_api_key": (struct.pack(">ihhih", 10, 4242, 0, 9, -1), r"unknown or unserved api_key 4242"),
    "unsupported_version": (struct.pack(">ihhihb", 11, 3, 99, 9, -1, 0),
                            r"unsupported version 99 of Metadata \(supported 0-\d+"),
    # Metadata v1 announcing 3 topic names and carrying none: the body is cut short.
    "truncated_body": (struct.pack(">ihhihi", 14, 3, 1, 9, -1, 3), r"malformed Metadata request"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_bytes_close_only_that_connection_and_are_logged(wire_broker, witness, case):
    data, pattern = CASES[case]
    if data is None:
        data = tls_client_hello()
    mark = wire_broker.log_mark()
    with RawClient(wire_broker.data_port) as bad:
        peer = "{}:{}".format(*bad.local_address)
        bad.send_raw(data)
        assert bad.wait_closed(timeout=5), f"{case}: the broker kept the connection open"
    line = wire_broker.wait_for_log(pattern, after=mark)
    assert f"from {peer} " in line, line
    assert witness.api_versions(0).error_code == 0


def test_truncated_frame_then_close_is_just_a_client_close(wire_broker, witness):
    """A client that dies mid-frame: the broker drops the partial frame, nothing else."""
    mark = wire_broker.log_mark()
    with RawClient(wire_broker.data_port) as client:
        client.send_raw(api_versions_frame()[:7])
    assert witness.api_versions(0).error_code == 0
    assert "Closing connection" not in wire_broker.log_text()[mark:]


def test_api_versions_v99_is_answered_in_v0_format(wire_broker):
    """KIP-511: ApiVersions of any version gets an answer; an unknown one, v0 with UNSUPPORTED_VERSION."""
    with RawClient(wire_broker.data_port) as client:
        # ApiVersions v3+ uses request header v2; a future version keeps it.
        header = struct.pack(">hhih", 18, 99, 77, 6) + b"future" + b"\x00"
        client.send_frame(header + b"\x0bfuture-cli\x041.0\x00")
        frame = client.read_frame()
        correlation_id, response = decode_response(18, 0, frame)
        assert correlation_id == 77
        assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 4)]
        # The client retries with a version both share, on the same connection.
        retried = client.api_versions(3)
        assert retried.error_code == 0 and {k.api_key for k in retried.api_keys} >= {3, 18}


def test_five_pipelined_requests_get_five_responses_in_order(wire_broker):
    with RawClient(wire_broker.data_port) as client:
        requests = [
            (ApiVersionsRequest(version=0), 0),
            (MetadataRequest(version=1, topics=None), 1),
            (ApiVersionsRequest(version=3, client_software_name="pipeline", client_software_version="1"), 3),
            (MetadataRequest(version=4, topics=[], allow_auto_topic_creation=False), 4),
            (ApiVersionsRequest(version=1), 1),
        ]
        data = b""
        ids = []
        for n, (body, version) in enumerate(requests):
            ids.append(1000 + n)
            data += b"".join(encode_request(body, version, 1000 + n, "pipeline"))
        client.send_raw(data)  # all five in one write: the broker reads them one at a time
        answered = []
        for body, version in requests:
            correlation_id, response = client.read_response(type(body).API_KEY, version)
            answered.append(correlation_id)
            assert getattr(response, "error_code", 0) == 0
        assert answered == ids


def test_log_lines_name_listener_and_plane(wire_broker):
    with RawClient(wire_broker.control_port) as bad:
        mark = wire_broker.log_mark()
        bad.send_raw(struct.pack(">i", -1))
        assert bad.wait_closed()
    line = wire_broker.wait_for_log(r"Closing connection .* on listener CONTROLLER \(control plane\)", after=mark)
    assert re.search(r"ControlPlaneProcessor", line)

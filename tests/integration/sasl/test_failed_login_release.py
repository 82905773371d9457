"""A failed login gives back everything it held: after connection.failed.authentication.delay.ms the broker
closes the connection, its descriptor and its connection-quota slot are free, and the close is counted as
``authentication``.

Every way a login fails -- a wrong PLAIN password, a wrong SCRAM proof, a mechanism the listener does not
offer, a request other than ApiVersions before authentication -- on SASL_PLAINTEXT and SASL_SSL.  The
attacker's sockets stay open (a client that fails on purpose does not close), so what is measured is the
broker's own close: the descriptors of the broker process (``/proc/<pid>/fd``), the listener's open
connections and its closes by reason (the admin REST endpoint), and the EOF each client reads.
"""

from __future__ import annotations

import json
import socket
import ssl
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from kafka.net.sasl.scram import ScramClient

from support import tls as tls_support
from support.broker_process import BrokerProcess
from support.nofile import open_fds
from support.raw_client import RawClient
from support.sasl_listeners import sasl_listener_overrides
from support.wait import wait_until
from twisted_kafka.protocol.codec import encode_request
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.messages import (
    ApiVersionsRequest,
    MetadataRequest,
    SaslAuthenticateRequest,
    SaslHandshakeRequest,
)
from twisted_kafka.protocol.registry import ApiKey

DELAY_MS = 200
#: Failed logins per case, all held open by their clients at once.
N = 8
TINY_BUFFER = 4096


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    pki = tls_support.Pki(tmp_path_factory.mktemp("failed-login-pki"))
    overrides = {
        **sasl_listener_overrides(pki),
        "connection.failed.authentication.delay.ms": str(DELAY_MS),
        # Small socket buffers: a client that does not read leaves the broker's answers in the broker.
        "socket.send.buffer.bytes": str(TINY_BUFFER),
        "num.partitions": "1",
    }
    broker = BrokerProcess(tmp_path_factory.mktemp("failed-login-broker"), overrides, control_plane=False).start()
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port('PLAINTEXT')}"})
    upsert = UserScramCredentialUpsertion("bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                          b"bob-secret")
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)
    tls = ssl.create_default_context(cafile=pki.ca_file)
    yield broker, tls
    if broker.running:
        assert broker.stop() == 0, broker.log_text()[-4000:]


def listener_stats(broker, listener: str) -> dict:
    with urllib.request.urlopen(f"{broker.admin_url}/v1/connections?listener={listener}", timeout=10) as reply:
        return json.load(reply)["listeners"][0]


# -- the four ways to fail (each leaves the client's socket open, its error read) ----------------------

def wrong_plain_password(client: RawClient) -> None:
    assert client.request(SaslHandshakeRequest(version=1, mechanism="PLAIN"), 1).error_code == 0
    response = client.request(SaslAuthenticateRequest(version=2, auth_bytes=b"\0alice\0guess"), 2)
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def wrong_scram_proof(client: RawClient) -> None:
    assert client.request(SaslHandshakeRequest(version=1, mechanism="SCRAM-SHA-256"), 1).error_code == 0
    scram = ScramClient("bob", "not-bobs-secret", "SCRAM-SHA-256")
    first = client.request(SaslAuthenticateRequest(version=2, auth_bytes=scram.first_message()), 2)
    assert first.error_code == 0, "bob exists: the server's first message comes back"
    scram.process_server_first_message(first.auth_bytes)
    final = client.request(SaslAuthenticateRequest(version=2, auth_bytes=scram.final_message()), 2)
    assert final.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED


def unsupported_mechanism(client: RawClient) -> None:
    assert client.request(SaslHandshakeRequest(version=1, mechanism="GSSAPI"), 1).error_code \
        == ErrorCode.UNSUPPORTED_SASL_MECHANISM


def request_before_authentication(client: RawClient) -> None:
    client.send_request(MetadataRequest(version=1, topics=None), 1)


FAILURES = [wrong_plain_password, wrong_scram_proof, unsupported_mechanism, request_before_authentication]


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("fail", FAILURES, ids=[f.__name__ for f in FAILURES])
def test_a_failed_login_is_closed_after_the_delay_and_frees_its_descriptor_and_slot(broker, listener, fail):
    broker, tls = broker
    port = broker.port(listener)
    fds_before = open_fds(broker.pid)
    stats_before = listener_stats(broker, listener)
    clients = [RawClient(port, tls=tls if listener == "SASL_SSL" else None) for _ in range(N)]
    try:
        for client in clients:
            fail(client)
            # Pipelined behind the failure: never answered.
            client.send_request(MetadataRequest(version=1, topics=None), 1, correlation_id=99)
        for client in clients:
            assert client.wait_closed(timeout=10), "no EOF from the broker"

        def released():
            stats = listener_stats(broker, listener)
            fds = open_fds(broker.pid)
            return (stats, fds) if stats["open"] <= stats_before["open"] and fds <= fds_before else None

        stats, _ = wait_until(released, timeout=10,
                              what=f"{N} failed logins on {listener} to give back their descriptors and slots "
                                   "while their clients keep the sockets open")
    finally:
        for client in clients:
            client.close()
    closed = stats["closed"]["authentication"] - stats_before["closed"]["authentication"]
    assert closed == N, f"{closed} closes counted as authentication, expected {N}"
    assert stats["closed"]["client"] == stats_before["closed"]["client"], "the broker closed them, not the clients"
    assert stats["rejected"]["authentication"] - stats_before["rejected"]["authentication"] == N


def test_a_real_login_on_the_same_listener_is_unaffected(broker):
    """The listener still authenticates after all those failures (SCRAM over TLS, the costliest path)."""
    broker, tls = broker
    with RawClient(broker.port("SASL_SSL"), tls=tls) as client:
        assert client.request(SaslHandshakeRequest(version=1, mechanism="SCRAM-SHA-256"), 1).error_code == 0
        scram = ScramClient("bob", "bob-secret", "SCRAM-SHA-256")
        first = client.request(SaslAuthenticateRequest(version=2, auth_bytes=scram.first_message()), 2)
        scram.process_server_first_message(first.auth_bytes)
        final = client.request(SaslAuthenticateRequest(version=2, auth_bytes=scram.final_message()), 2)
        assert final.error_code == 0
        scram.process_server_final_message(final.auth_bytes)
        correlation_id = client.send_request(MetadataRequest(version=1, topics=None), 1)
        assert client.read_response(ApiKey.METADATA, 1)[0] == correlation_id


def test_a_failed_login_that_does_not_read_its_answers_is_closed_all_the_same(broker):
    """The client pipelines ApiVersions requests (about 47 KB of answers: more than the sockets' buffers
    hold, less than the broker's own send limit, so the broker goes on reading), then fails, and never
    reads: the broker's graceful close cannot send what it holds, and is forced shortly after the delay."""
    broker, _ = broker
    fds_before = open_fds(broker.pid)
    stats_before = listener_stats(broker, "SASL_PLAINTEXT")
    versions = ApiVersionsRequest(version=3, client_software_name="non-reader", client_software_version="1")
    data = b"".join(b"".join(encode_request(versions, 3, i, "non-reader")) for i in range(150))
    data += b"".join(encode_request(SaslHandshakeRequest(version=1, mechanism="GSSAPI"), 1, 1000, "non-reader"))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, TINY_BUFFER)
        sock.connect(("127.0.0.1", broker.port("SASL_PLAINTEXT")))
        sock.sendall(data)

        def released():
            stats = listener_stats(broker, "SASL_PLAINTEXT")
            failed = stats["rejected"]["authentication"] > stats_before["rejected"]["authentication"]
            closed = stats["closed"]["authentication"] > stats_before["closed"]["authentication"]
            return stats if failed and closed and open_fds(broker.pid) <= fds_before else None

        wait_until(released, timeout=10, what="the failed, unread connection to be closed and its descriptor freed")
    finally:
        sock.close()
    assert "does not read its responses; aborting it after its failed authentication" in broker.log_text()

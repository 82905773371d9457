"""``AdminChannel`` on its own: a ``StringTransport`` for the socket and ``task.Clock`` for time.

The integration tests (tests/integration/admin_rest/test_request_limits.py)
show the same rules against a broker process; here the timing is exact: the
request deadline runs from the connection's start or the previous response,
received bytes do not restart it, and it stops while a request is handled.
"""

from __future__ import annotations

import json
from io import BytesIO

from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from twisted_kafka.admin.channel import AdminChannel, AdminSite
from twisted_kafka.admin.hosts import HostRule, host_name
from twisted_kafka.admin.web import AdminBackend, AdminResource
from twisted_kafka.config import KafkaConfig
from twisted_kafka.metrics import MetricsRegistry

TIMEOUT = 2.0
LIMIT = 1000


class SocketServer:
    def listener_planes(self):
        return {"PLAINTEXT": "data"}


class DynamicConfig:
    current = KafkaConfig.from_props({})


class SlowAdminManager:
    """An AdminManager whose config change completes when the test fires it."""

    def __init__(self):
        self.pending: list[Deferred] = []

    def alter_broker_configs(self, broker, update, *, validate_only):
        if validate_only:
            return _done()
        d: Deferred = Deferred()
        self.pending.append(d)
        return d


async def _done():
    return None


def connect(token: str | None = "secret", admin_manager=None):
    clock = Clock()
    backend = AdminBackend(socket_server=SocketServer(), admin_manager=admin_manager,
                           dynamic_config=DynamicConfig(), metrics=MetricsRegistry(), broker_id=0,
                           readiness=lambda: {"ready": True})
    site = AdminSite(AdminResource(backend, token, HostRule("127.0.0.1")), max_request_bytes=LIMIT,
                     request_timeout=TIMEOUT, reactor=clock)
    channel = site.buildProtocol(IPv4Address("TCP", "127.0.0.1", 50000))
    assert isinstance(channel, AdminChannel)
    transport = StringTransport(hostAddress=IPv4Address("TCP", "127.0.0.1", 9644),
                                peerAddress=IPv4Address("TCP", "127.0.0.1", 50000))
    channel.makeConnection(transport)
    return clock, channel, transport


def head(method: str, path: str, *headers: str, host: str = "127.0.0.1:9644") -> bytes:
    return ("\r\n".join([f"{method} {path} HTTP/1.1", f"Host: {host}", *headers]) + "\r\n\r\n").encode()


def status_of(transport: StringTransport) -> int:
    return int(transport.value().split(b" ", 2)[1])


def body_of(transport: StringTransport) -> dict:
    return json.loads(transport.value().split(b"\r\n\r\n", 1)[1])


# -- the deadline ---------------------------------------------------------------------------------


def test_received_bytes_do_not_restart_the_deadline_and_a_partial_request_gets_408():
    clock, channel, transport = connect()
    channel.dataReceived(b"GET /v1/health/live HTTP/1.1\r\n")
    for _ in range(19):                 # a header line every 0.1 s: 1.9 s of trickle
        clock.advance(0.1)
        channel.dataReceived(b"X-Slow: 1\r\n")
    assert not transport.disconnecting
    clock.advance(0.1)                  # 2.0 s after the connection opened
    assert transport.disconnecting
    assert status_of(transport) == 408 and body_of(transport)["error_code"] == "REQUEST_TIMEOUT"
    assert b"admin.rest.request.timeout.ms" in transport.value()
    channel.dataReceived(b"\r\n")       # the rest of the request, too late: not parsed, not answered
    assert transport.value().count(b"HTTP/1.1") == 1
    clock.advance(channel.abortTimeout)  # a peer that does not read is aborted
    assert transport.disconnected     # StringTransport's mark of abortConnection()


def test_an_idle_connection_is_closed_without_an_answer():
    clock, channel, transport = connect()
    clock.advance(TIMEOUT - 0.01)
    assert not transport.disconnecting
    clock.advance(0.01)
    assert transport.disconnecting and transport.value() == b""


def test_the_deadline_restarts_after_each_response_and_stops_while_a_request_is_handled():
    manager = SlowAdminManager()
    clock, channel, transport = connect(admin_manager=manager)
    clock.advance(1.5)
    channel.dataReceived(head("GET", "/v1/health/live"))
    assert status_of(transport) == 200
    transport.clear()
    clock.advance(1.5)                  # 3 s since the connection opened, 1.5 s since the response
    assert not transport.disconnecting
    body = json.dumps({"max.connections": 10}).encode()
    channel.dataReceived(head("PUT", "/v1/quotas", "Authorization: Bearer secret",
                              f"Content-Length: {len(body)}") + body)
    assert len(manager.pending) == 1 and transport.value() == b""
    clock.advance(10 * TIMEOUT)         # the controller takes its time: the deadline does not run
    assert not transport.disconnecting
    manager.pending[0].callback(None)
    assert status_of(transport) == 200
    clock.advance(TIMEOUT - 0.01)
    assert not transport.disconnecting
    clock.advance(0.01)
    assert transport.disconnecting


# -- decided on the headers -----------------------------------------------------------------------


def test_a_body_without_the_token_is_refused_before_it_is_read():
    clock, channel, transport = connect()
    channel.dataReceived(head("PUT", "/v1/quotas", "Content-Length: 10737418240", "Expect: 100-continue"))
    assert status_of(transport) == 401 and b"100 Continue" not in transport.value()
    assert b"WWW-Authenticate: Bearer" in transport.value() and b"Connection: close" in transport.value()
    assert transport.disconnecting
    assert channel.requests[-1].content is None          # no room was made for a body
    channel.dataReceived(b"x" * 100_000)                  # what follows is dropped, not parsed
    assert transport.value().count(b"HTTP/1.1") == 1
    clock.advance(channel.abortTimeout)
    assert transport.disconnected     # StringTransport's mark of abortConnection()


def test_a_length_over_the_limit_is_413_on_the_headers_and_one_at_the_limit_is_read():
    _, channel, transport = connect()
    channel.dataReceived(head("PUT", "/v1/quotas", "Authorization: Bearer secret", f"Content-Length: {LIMIT + 1}",
                              "Expect: 100-continue"))
    assert status_of(transport) == 413 and body_of(transport)["error_code"] == "PAYLOAD_TOO_LARGE"
    assert b"100 Continue" not in transport.value() and transport.disconnecting

    _, channel, transport = connect()
    channel.dataReceived(head("PUT", "/v1/quotas", "Authorization: Bearer secret", f"Content-Length: {LIMIT}",
                              "Expect: 100-continue"))
    assert transport.value() == b"HTTP/1.1 100 Continue\r\n\r\n"
    assert isinstance(channel.requests[-1].content, BytesIO)
    channel.dataReceived(b" " * LIMIT)                  # not JSON: the resource answers, the channel let it in
    assert b"HTTP/1.1 400" in transport.value() and not transport.disconnecting


def test_a_chunked_body_is_in_memory_and_stopped_at_the_limit():
    _, channel, transport = connect()
    channel.dataReceived(head("PUT", "/v1/quotas", "Authorization: Bearer secret", "Transfer-Encoding: chunked"))
    content = channel.requests[-1].content
    assert isinstance(content, BytesIO)
    channel.dataReceived(b"%x\r\n%s\r\n" % (LIMIT, b" " * LIMIT))
    assert transport.value() == b"" and content.tell() == LIMIT
    channel.dataReceived(b"1\r\n \r\n0\r\n\r\n")
    assert status_of(transport) == 413 and transport.disconnecting
    assert content.tell() == LIMIT


def test_a_head_request_refused_gets_no_body():
    _, channel, transport = connect()
    channel.dataReceived(head("HEAD", "/v1/quotas"))
    response = transport.value()
    assert status_of(transport) == 401 and response.endswith(b"\r\n\r\n")
    assert b"Content-Length: " in response


def test_without_a_token_a_foreign_host_is_421_on_the_headers():
    _, channel, transport = connect(token=None)
    channel.dataReceived(head("GET", "/v1/connections/live", host="attacker.example:9644"))
    assert status_of(transport) == 421 and body_of(transport)["error_code"] == "MISDIRECTED_REQUEST"
    assert transport.disconnecting
    _, channel, transport = connect(token=None)
    channel.dataReceived(head("GET", "/v1/health/live", host="localhost:9644"))
    assert status_of(transport) == 200 and not transport.disconnecting


# -- Host names -----------------------------------------------------------------------------------


def test_host_names():
    assert host_name("Example.COM:9644") == "example.com"
    assert host_name("[::1]:9644") == "::1" and host_name("[::1]") == "::1"
    assert host_name("localhost.") == "localhost"
    assert host_name("127.0.0.1:x") == "127.0.0.1:x"


def test_the_host_rule():
    rule = HostRule("127.0.0.1", ["broker-0.internal", " ", "Admin.Example:443"])
    for host in ("127.0.0.1:9644", "localhost", "LOCALHOST:1", "broker-0.internal", "admin.example:9644",
                 "[::ffff:127.0.0.1]:9644"):
        assert rule.allows(host, "127.0.0.1"), host
    for host in ("attacker.example", "127.0.0.2", "0.0.0.0:9644", "[::1]:9644", "127.0.0.1.attacker.example", ""):
        assert not rule.allows(host, "127.0.0.1"), host
    wildcard = HostRule("0.0.0.0")
    assert wildcard.allows("10.1.2.3:9644", "10.1.2.3") and not wildcard.allows("10.1.2.4", "10.1.2.3")
    assert not wildcard.allows("0.0.0.0:9644", "10.1.2.3")
    named = HostRule("admin.internal")
    assert named.allows("admin.internal:9644", "10.1.2.3") and named.allows("10.1.2.3", "10.1.2.3")
    v6 = HostRule("::1")
    assert v6.allows("[::1]:9644", "::1") and v6.allows("[0:0::1]", "::1")

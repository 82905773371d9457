"""The admin endpoint decides on a request's headers, keeps bodies in memory, and times out slow requests.

One broker for the module, with a token, a two-second request timeout, and
``TMPDIR`` set to a fresh directory for its process: no request may leave a
file there or hold one open (an unlinked temporary file only shows in
``/proc/<pid>/fd``).  The requests are written by hand (``raw_http``), so a
test sends exactly the bytes it means -- headers without the body they
announce, a chunked body, a request cut in the middle -- and sees when the
answer comes and that the broker closes the connection.
"""

from __future__ import annotations

import json
import os
from unittest import mock

import pytest

from support.broker_process import BrokerProcess

from .raw_http import RawHttp, files_open_under
from .support import TOKEN

pytestmark = pytest.mark.integration

LIMIT = 64 * 1024            # admin.rest.request.max.bytes' default
TIMEOUT_MS = 2000            # admin.rest.request.timeout.ms of the module's broker
BEARER = {"Authorization": f"Bearer {TOKEN}"}
JSON = {"Content-Type": "application/json"}


class Limited:
    def __init__(self, broker: BrokerProcess, tmpdir):
        self.broker = broker
        self.tmpdir = tmpdir

    @property
    def url(self) -> str:
        return self.broker.admin_url

    def disk_untouched(self) -> bool:
        return not os.listdir(self.tmpdir) and not files_open_under(self.broker.pid, self.tmpdir)


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    base = tmp_path_factory.mktemp("admin-limits")
    tmpdir = base / "tmp"
    tmpdir.mkdir()
    with mock.patch.dict(os.environ, {"TMPDIR": str(tmpdir)}):
        broker = BrokerProcess(base, {"admin.rest.auth.token": TOKEN,
                                      "admin.rest.request.timeout.ms": str(TIMEOUT_MS)}).start()
    yield Limited(broker, tmpdir)
    assert broker.stop() == 0


@pytest.fixture
def endpoint(limited):
    assert limited.disk_untouched()
    yield limited
    assert limited.disk_untouched(), (os.listdir(limited.tmpdir), files_open_under(limited.broker.pid,
                                                                                   limited.tmpdir))


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def error_of(answer) -> str:
    assert answer.headers["content-type"] == "application/json", answer
    return json.loads(answer.body)["error_code"]


@pytest.mark.parametrize("announced", [{"Content-Length": str(64 * 1024 * 1024)},
                                       {"Content-Length": str(10 * 1024 ** 3)},
                                       {"Transfer-Encoding": "chunked"}],
                         ids=["64MiB", "10GiB", "chunked"])
def test_a_body_without_the_token_is_refused_on_the_headers(endpoint, announced):
    for token in (None, "wrong-token"):
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        with RawHttp(endpoint.url) as http:
            http.send(http.head("PUT", "/v1/quotas", {**auth, **JSON, **announced}))   # no byte of the body
            answer = http.answer()
            assert answer.status == 401 and error_of(answer) == "UNAUTHORIZED", answer
            assert answer.headers["www-authenticate"].startswith("Bearer")
            assert answer.headers["connection"] == "close"
            assert http.closed_by_server(), "the broker keeps the connection of a refused request"


def test_an_announced_body_over_the_limit_is_refused_on_the_headers(endpoint):
    for length, expect in ((LIMIT + 1, {}), (10 * 1024 ** 3, {}), (LIMIT + 1, {"Expect": "100-continue"})):
        with RawHttp(endpoint.url) as http:
            http.send(http.head("PUT", "/v1/quotas", {**BEARER, **JSON, "Content-Length": str(length), **expect}))
            answer = http.answer()                # 413 at once: never 100 Continue, never a wait for the body
            assert answer.status == 413 and error_of(answer) == "PAYLOAD_TOO_LARGE", (length, answer)
            assert str(LIMIT) in json.loads(answer.body)["message"]
            assert answer.headers["connection"] == "close"
            assert http.closed_by_server()


def test_a_chunked_body_is_held_in_memory_and_over_the_limit_is_413_and_a_close(endpoint):
    with RawHttp(endpoint.url) as http:
        http.send(http.head("PUT", "/v1/quotas", {**BEARER, **JSON, "Transfer-Encoding": "chunked",
                                                  "Expect": "100-continue"}))
        # 100 Continue: the broker has taken the headers and made room for a body of unknown length.
        assert http.answer().status == 100
        assert files_open_under(endpoint.broker.pid, endpoint.tmpdir) == []
        http.send(b"".join(chunk(b" " * 16384) for _ in range(4)))      # exactly the limit: still read
        http.send(chunk(b" "))                                          # one byte over it
        answer = http.answer()
        assert answer.status == 413 and error_of(answer) == "PAYLOAD_TOO_LARGE", answer
        assert answer.headers["connection"] == "close"
        assert http.closed_by_server()


def test_half_sent_requests_are_closed_after_the_request_timeout(endpoint):
    cut = [b"PUT /v1/quo",                                                            # in the request line
           b"GET /v1/quotas HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthoriz",                 # in the headers
           b"PUT /v1/quotas HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + TOKEN.encode()
           + b"\r\nContent-Length: 100\r\n\r\n{\"max.conn"]                            # in the body
    connections: list[RawHttp] = []
    try:
        for index in range(60):             # each sends its part at once: its deadline runs from its start
            connections.append(RawHttp(endpoint.url))
            connections[-1].send(cut[index % len(cut)])
        # A request trickled one header line at a time does not keep its connection either: the timeout
        # counts from the request's start, not from the last byte.
        slow = RawHttp(endpoint.url)
        connections.append(slow)
        slow.send(b"GET /v1/quotas HTTP/1.1\r\n")
        for _ in range(100):                                 # up to 10 s, one line every 0.1 s
            if slow.readable_within(0.1):                    # the broker answered or closed
                break
            slow.send(b"X-Slow: 1\r\n")
        assert slow.closed_by_server(), "a trickled request kept its connection"
        for http in connections[:-1]:
            answer = http.answer()
            assert answer.status == 408 and error_of(answer) == "REQUEST_TIMEOUT", answer
            assert http.closed_by_server()
    finally:
        for http in connections:
            http.close()


def test_an_idle_connection_is_closed_after_the_timeout_without_an_answer(endpoint):
    with RawHttp(endpoint.url) as http:
        assert http.closed_by_server()
        assert http.buffer == b""


def test_an_authorized_request_with_a_normal_body_works(endpoint):
    change = json.dumps({"max.connections.per.ip": 77}).encode()
    undo = json.dumps({"max.connections.per.ip": None}).encode()
    with RawHttp(endpoint.url) as http:          # one keep-alive connection for every request
        http.send(http.head("GET", "/v1/quotas", BEARER))
        answer = http.answer()
        assert answer.status == 200, answer
        before = json.loads(answer.body)["max.connections.per.ip"]
        http.send(http.head("PUT", "/v1/quotas", {**BEARER, **JSON, "Content-Length": str(len(change))}) + change)
        answer = http.answer()
        assert answer.status == 200 and json.loads(answer.body)["max.connections.per.ip"] == 77, answer
        http.send(http.head("PUT", "/v1/quotas", {**BEARER, **JSON, "Transfer-Encoding": "chunked",
                                                  "Expect": "100-continue"}))
        assert http.answer().status == 100
        http.send(chunk(undo[:5]) + chunk(undo[5:]) + b"0\r\n\r\n")
        answer = http.answer()
        assert answer.status == 200 and json.loads(answer.body)["max.connections.per.ip"] == before, answer

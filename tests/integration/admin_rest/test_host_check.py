"""Without a token, the admin endpoint serves only requests addressed to it by one of its own names.

A web page can make a browser read a loopback endpoint through DNS
rebinding: its own name (``attacker.example``) is made to resolve to
127.0.0.1, so its script's requests are same-origin for the browser but
reach the broker -- with ``Host: attacker.example``.  The endpoint refuses
such a ``Host`` with 421 before any work, and serves its own address,
``localhost`` and the names of ``admin.rest.allowed.hosts``.  Headless
Chromium checks both sides in a real browser: the dashboard works on the
broker's address, and a page of ``attacker.example`` (mapped to 127.0.0.1 by
``--host-resolver-rules``) gets no data.
"""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from support.broker_process import BrokerProcess

from .raw_http import RawHttp

pytestmark = pytest.mark.integration

ALLOWED = "broker-0.admin.internal"
READS = ("/v1/connections/live", "/v1/connections", "/v1/quotas", "/metrics", "/v1/health/ready", "/")


@pytest.fixture(scope="module")
def open_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("admin-host"), {"admin.rest.allowed.hosts": ALLOWED}).start()
    yield broker
    assert broker.stop() == 0


def port_of(broker) -> int:
    return int(broker.admin_url.rsplit(":", 1)[1])


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:{port}", "127.0.0.1.attacker.example",
                                  "localhost.attacker.example:{port}", "0.0.0.0:{port}"])
def test_a_foreign_host_is_refused_before_any_work(open_broker, host):
    host = host.format(port=port_of(open_broker))
    for path in READS:
        with RawHttp(open_broker.admin_url) as http:
            http.send(http.head("GET", path, host=host))
            answer = http.answer()
            assert answer.status == 421, (host, path, answer)
            error = json.loads(answer.body)
            assert error["error_code"] == "MISDIRECTED_REQUEST" and host in error["message"]
            assert b"client_host" not in answer.body and b"127.0.0.1:" not in answer.body
            assert http.closed_by_server()
    # A change is refused for its Host too, before its body is read.
    with RawHttp(open_broker.admin_url) as http:
        http.send(http.head("PUT", "/v1/quotas", {"Content-Length": str(1 << 30)}, host=host))
        assert http.answer().status == 421
        assert http.closed_by_server()


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "127.0.0.1", "localhost:{port}", "LocalHost",
                                  ALLOWED + ":{port}", ALLOWED.upper()])
def test_the_endpoints_own_names_are_served(open_broker, host):
    host = host.format(port=port_of(open_broker))
    with RawHttp(open_broker.admin_url) as http:
        for path in READS:
            http.send(http.head("GET", path, host=host))
            answer = http.answer()
            assert answer.status == 200, (host, path, answer)
        http.send(http.head("GET", "/v1/connections/live", host=host))
        live = json.loads(http.answer().body)
        assert any(conn["client_host"] == "127.0.0.1" for conn in live["connections"])   # the controller's


chromium_missing = pytest.mark.skipif(shutil.which("chromium") is None,
                                      reason="needs Debian's chromium (bin/install-system-deps)")


def dashboard_dom(tmp_path, url: str, *resolver_rules: str) -> str:
    command = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--virtual-time-budget=3000", f"--user-data-dir={tmp_path / 'profile'}",
               *resolver_rules, "--dump-dom", url]
    return subprocess.run(command, capture_output=True, text=True, timeout=90, check=True).stdout


@chromium_missing
def test_the_dashboard_works_in_a_browser_and_a_rebound_name_reads_nothing(open_broker, tmp_path):
    port = port_of(open_broker)
    dom = dashboard_dom(tmp_path, f"http://localhost:{port}/")      # (test_dashboard.py opens 127.0.0.1)
    assert 'data-refreshed="' in dom, dom[-2000:]                       # its script read the JSON API
    assert 'id="open-total">0<' not in dom
    rebound = dashboard_dom(tmp_path, f"http://attacker.example:{port}/",
                            "--host-resolver-rules=MAP attacker.example 127.0.0.1")
    assert "MISDIRECTED_REQUEST" in rebound and "data-refreshed" not in rebound, rebound[-2000:]

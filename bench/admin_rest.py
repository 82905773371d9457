"""The admin REST endpoint's cost: milliseconds per call of each read endpoint against a broker
holding ``CONNECTIONS`` open client connections.

Run with ``.venv/bin/python bench/admin_rest.py``.  A broker process is started on loopback
port 0 (``support/broker_process.py``), ``CONNECTIONS`` raw client connections are opened
(each sends one ApiVersions v3 request), then each endpoint is called ``CALLS`` times over one
keep-alive HTTP connection; the table gives median and 99th-percentile wall time per call and the
body size.  The broker answers these calls on its reactor, between Kafka requests, so the figures
are also the time a call holds the reactor (at most: they include the client's own work).
"""

from __future__ import annotations

import http.client
import statistics
import tempfile
import time

from support.broker_process import BrokerProcess
from support.raw_client import RawClient

CONNECTIONS = 200
CALLS = 200
ENDPOINTS = ("/v1/connections", "/v1/connections/ips", "/v1/connections/live", "/v1/quotas", "/v1/planes",
             "/metrics", "/v1/health/ready")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(tmp, {"max.connections.per.ip": str(CONNECTIONS + 10)}).start()
        clients = []
        try:
            for _ in range(CONNECTIONS):
                client = RawClient(broker.data_port)
                client.api_versions(version=3)
                clients.append(client)
            host, port = broker.admin_url.removeprefix("http://").rsplit(":", 1)
            http_conn = http.client.HTTPConnection(host, int(port), timeout=10)
            print(f"{CONNECTIONS} open client connections, {CALLS} calls per endpoint (one keep-alive connection)")
            print(f"{'endpoint':24} {'p50 ms':>8} {'p99 ms':>8} {'bytes':>8}")
            for path in ENDPOINTS:
                times = []
                size = 0
                for _ in range(CALLS):
                    start = time.perf_counter()
                    http_conn.request("GET", path)
                    response = http_conn.getresponse()
                    body = response.read()
                    times.append((time.perf_counter() - start) * 1000)
                    size = len(body)
                times.sort()
                p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
                print(f"{path:24} {statistics.median(times):8.2f} {p99:8.2f} {size:8d}")
        finally:
            for client in clients:
                client.close()
            broker.stop()


if __name__ == "__main__":
    main()

"""The dashboard (``GET /``) rendered by headless Chromium against a running broker.

Chromium loads the page, its script fetches the JSON API with the token (from
the address's ``#token=``) and fills the page; ``--virtual-time-budget`` lets
the script run its first refreshes (virtual time waits for the fetches), then
the DOM is dumped and checked for the counts the test caused, and a
screenshot is written under the test's temporary directory.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from support.raw_client import RawClient

from .support import TOKEN

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium "
                                                                          "(bin/install-system-deps)")]

CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--hide-scrollbars", "--virtual-time-budget=5000", "--window-size=1280,1000"]


def chromium(tmp_path, *args: str) -> str:
    profile = tmp_path / "chromium-profile"
    done = subprocess.run([*CHROMIUM, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=90, check=True)
    return done.stdout


def cell_numbers(dom: str, table: str) -> list[list[str]]:
    body = dom.split(f'id="{table}"', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [re.findall(r"<td[^>]*>([^<]*)</td>", row) for row in body.split("<tr>")[1:]]


def test_the_dashboard_shows_the_connections_the_test_opened(broker_factory, tmp_path):
    broker = broker_factory({"max.connections.per.ip": "2", "admin.rest.auth.token": TOKEN})
    clients = [RawClient(broker.data_port) for _ in range(2)]
    try:
        for client in clients:
            client.api_versions(version=3)
        refused = RawClient(broker.data_port)
        assert refused.wait_closed()
        refused.close()
        url = f"{broker.admin_url}/#token={TOKEN}"

        dom = chromium(tmp_path, "--dump-dom", url)
        assert 'data-refreshed="' in dom, dom[-2000:]
        total = re.search(r'id="open-total"[^>]*>(\d+)<', dom)
        assert total is not None and int(total[1]) >= 3      # 2 clients and the controller's connection
        listeners = {row[0]: row for row in cell_numbers(dom, "listeners")}
        assert listeners["PLAINTEXT"][1:] == ["data", "2", "2", "1", "0"]   # open, accepted, rejected, closed
        ips = {row[0]: row for row in cell_numbers(dom, "ips")}
        assert ips["127.0.0.1"][1:] == ["2", "2", "1"]
        assert re.search(r'data-reason="per_ip" data-count="1"', dom)
        assert "<polyline" in dom

        screenshot = tmp_path / "dashboard.png"
        chromium(tmp_path, f"--screenshot={screenshot}", url)
        assert screenshot.stat().st_size > 10_000
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        for client in clients:
            client.close()

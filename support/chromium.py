"""Headless Debian chromium driven over the DevTools protocol, for the dashboard's tests.

``--dump-dom`` with a virtual time budget shows what a page's script did, but
in virtual time: a page that computes rates from ``Date.now()`` between two
refreshes sees seconds pass in milliseconds.  This drives chromium in real
time instead, over ``--remote-debugging-pipe`` (DevTools messages as
NUL-terminated JSON on file descriptors 3 and 4 -- no port, no WebSocket
library): load a page, wait for a condition the page's own state shows,
evaluate expressions, take a screenshot.

    with Chromium(tmp_path, width=1400, height=1000) as browser:
        browser.open(url)
        browser.wait_for("Number(document.body.dataset.refreshed || 0) >= 5")
        rows = browser.evaluate("[...document.querySelectorAll('tr')].length")
        browser.screenshot(tmp_path / "page.png")
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from support.wait import wait_until

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
         "--remote-debugging-pipe"]


class DevToolsError(AssertionError):
    pass


def _pipe() -> tuple[int, int]:
    """A pipe whose ends are numbered 10 or above: the shell's ``3<&N 4>&M`` must not overwrite one of them."""
    ends = []
    for fd in os.pipe():
        ends.append(fcntl.fcntl(fd, fcntl.F_DUPFD, 10))
        os.close(fd)
    return ends[0], ends[1]


class Chromium:
    def __init__(self, tmp_path: Path, *, width: int = 1400, height: int = 1000, timeout: float = 30):
        self.profile = Path(tmp_path) / "chromium-profile"
        self.width, self.height = width, height
        self.timeout = timeout
        self._next_id = 0
        self._buffer = b""
        self.session: str | None = None
        self.console: list[str] = []
        to_child_read, self._to_child = _pipe()
        self._from_child, from_child_write = _pipe()
        command = [CHROMIUM, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
                   "about:blank"]
        # chromium reads commands on fd 3 and writes answers on fd 4: bash puts the pipes there (dash's
        # redirections take single-digit descriptors only)
        self.process = subprocess.Popen(
            ["bash", "-c", f'exec "$@" 3<&{to_child_read} 4>&{from_child_write}', "chromium", *command],
            pass_fds=(to_child_read, from_child_write), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, start_new_session=True)
        os.close(to_child_read)
        os.close(from_child_write)

    def __enter__(self) -> Chromium:
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.send("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height, deviceScaleFactor=1,
                  mobile=False)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the protocol ---------------------------------------------------------------------------

    def send(self, method: str, **params: Any) -> dict:
        """One DevTools command (on the page's session once attached); its result."""
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params}
        if self.session is not None and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            answer = self._read(deadline)
            if answer.get("method") == "Runtime.consoleAPICalled":
                self.console.append(" ".join(str(a.get("value", a.get("description", "")))
                                             for a in answer["params"]["args"]))
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise DevToolsError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            if time.monotonic() > deadline:
                raise DevToolsError("chromium did not answer in time")
            chunk = os.read(self._from_child, 1 << 16)
            if not chunk:
                raise DevToolsError(f"chromium closed its DevTools pipe (exit status {self.process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    # -- what a test does ------------------------------------------------------------------------

    def open(self, url: str, timeout: float = 30) -> None:
        """Navigate to ``url`` and wait until it has loaded."""
        self.send("Page.navigate", url=url)
        self.wait_for(f"location.href === {json.dumps(url)} && document.readyState === 'complete'",
                      timeout=timeout, what=f"{url} to load")

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise DevToolsError(f"{expression!r} failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30, what: str | None = None) -> Any:
        """Evaluate ``expression`` until it is true (checked every 20 ms); its value."""
        return wait_until(lambda: self.evaluate(expression), timeout=timeout, what=what or expression)

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def close(self) -> None:
        if self.process.poll() is None:
            self.session = None
            with contextlib.suppress(DevToolsError, OSError):
                self.send("Browser.close")
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait(timeout=10)
        for fd in (self._to_child, self._from_child):
            with contextlib.suppress(OSError):
                os.close(fd)

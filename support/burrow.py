"""LinkedIn's Burrow (Debian's ``burrow`` package, 1.2) in a child process, watching a broker.

Burrow reads consumer groups' commits by consuming ``__consumer_offsets``
itself (Sarama; its own parser of Kafka's offset-commit and group-metadata
records) and polls every partition's latest offset with ListOffsets, then
serves lag on HTTP.  Burrow 1.2 needs a ZooKeeper of its own (for its
notifier's locks), so it is given the test module's.

    with zookeeper.client() as client:      # serving sessions
        client.get_children("/")
    with zookeeper.client():                 # serving sessions
        pass
    burrow = Burrow(tmp_path, zookeeper.hosts, broker.bootstrap).start()
    lag = burrow.wait_for_lag("my-group", lambda status: status["totallag"] == 10)
    burrow.stop()

The configuration is written by the test; the HTTP server binds
``127.0.0.1:0`` and the port is read back from Burrow's "started listener"
log line, so nothing is guessed.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

from support.wait import wait_until

BURROW = shutil.which("Burrow") or "/usr/bin/Burrow"

CONFIG = """\
[general]
pidfile="{dir}/burrow.pid"
access-control-allow-origin="*"

[logging]
level="info"

[zookeeper]
servers=["{zookeeper}"]
timeout=6
root-path="/burrow"

[client-profile.test]
client-id="burrow-test"
kafka-version="{kafka_version}"

[cluster.{cluster}]
class-name="kafka"
servers=["{bootstrap}"]
client-profile="test"
topic-refresh=2
offset-refresh=1

[consumer.{cluster}]
class-name="kafka"
cluster="{cluster}"
servers=["{bootstrap}"]
client-profile="test"
offsets-topic="__consumer_offsets"
start-latest=false

[httpserver.default]
address="127.0.0.1:0"

[storage.default]
class-name="inmemory"
workers=4
intervals=10
expire-group=604800
min-distance=1

[evaluator.default]
class-name="caching"
expire-cache=1
"""


class Burrow:
    def __init__(self, tmp_path: Path, zookeeper: str, bootstrap: str, *, cluster: str = "local",
                 kafka_version: str = "2.0.0"):
        self.dir = Path(tmp_path) / "burrow"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cluster = cluster
        self.log_path = self.dir / "burrow.log"
        (self.dir / "burrow.toml").write_text(CONFIG.format(dir=self.dir, zookeeper=zookeeper, bootstrap=bootstrap,
                                                            cluster=cluster, kafka_version=kafka_version))
        self.process: subprocess.Popen | None = None
        self.url: str | None = None

    def start(self, timeout: float = 30) -> Burrow:
        """Start Burrow and wait for its HTTP listener.  Burrow gives up at once if its first ZooKeeper session
        fails: start it once ZooKeeper serves sessions (a ZooKeeper that has just started listening may still
        drop a handshake: "ZooKeeperServer not running")."""
        log = self.log_path.open("wb")
        self.process = subprocess.Popen([BURROW, "--config-dir", str(self.dir)], stdout=log, stderr=subprocess.STDOUT,
                                        cwd=self.dir, start_new_session=True)
        log.close()
        self.url = "http://" + wait_until(self._listening, timeout=timeout, what="Burrow's HTTP listener")
        return self

    def _listening(self) -> str | None:
        assert self.process is not None
        if self.process.poll() is not None:
            raise AssertionError(f"Burrow exited with {self.process.returncode}:\n{self.log_text()[-3000:]}")
        for line in self.log_text().splitlines():
            if '"started listener"' in line:
                return json.loads(line)["listener"]
        return None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def get(self, path: str) -> dict:
        """A call to Burrow's HTTP API (its error answers are JSON too)."""
        assert self.url is not None
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            return json.loads(exc.read() or b"{}")

    def lag(self, group: str) -> dict | None:
        """``/v3/kafka/<cluster>/consumer/<group>/lag``'s status, None while Burrow does not know the group."""
        answer = self.get(f"/v3/kafka/{self.cluster}/consumer/{group}/lag")
        if answer.get("error") or "status" not in answer:
            return None
        return answer["status"]

    def wait_for_lag(self, group: str, ready, timeout: float = 60) -> dict:
        """The group's lag status once ``ready(status)`` holds."""
        def check():
            status = self.lag(group)
            return status if status is not None and ready(status) else None
        try:
            return wait_until(check, timeout=timeout, what=f"Burrow's lag of group {group}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\nlast answer: {self.get(f'/v3/kafka/{self.cluster}/consumer/{group}/lag')}"
                                 f"\nBurrow's log:\n{self.log_text()[-4000:]}") from None

    def stop(self) -> int | None:
        """Kill Burrow: it keeps nothing but memory, and a SIGTERM takes it over ten seconds (it stops its
        consumers of ``__consumer_offsets`` one after another)."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        return process.wait(timeout=15)

"""The shipped ``etc/server.properties``: overriding only ``listeners`` is enough, and a broker
only ever manages its own control plane.

``advertised.listeners`` is not set in the shipped file, so it follows
``listeners`` (as in Kafka): a broker started the README way with only
``--override listeners=...`` advertises -- and its controller connects to --
the ports it bound, never the file's 9092/9093 where another broker on the
same machine may listen.  And should a broker still advertise another
broker's control plane, that broker refuses its controller (another cluster
id) and the misconfigured one stops with a message saying why.
"""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest

from support.broker_process import BASE_CONFIG, START_SCRIPT, BrokerExited, answers_api_versions
from support.wait import wait_until
from twisted_kafka.protocol.errors import ErrorCode

from .test_controller_apis import assert_controller_still_works, create_topic, leader, metadata

pytestmark = pytest.mark.integration


class ShippedConfigBroker:
    """``bin/twisted-kafka-server-start etc/server.properties`` with only ``overrides`` on the command line."""

    def __init__(self, directory: Path, overrides: dict[str, str]):
        directory.mkdir(parents=True, exist_ok=True)
        self.log_path = directory / "broker.log"
        command = [str(START_SCRIPT), str(BASE_CONFIG)]
        overrides = {"admin.rest.listener": "http://127.0.0.1:0", **overrides}   # the default 9644 is shared
        for key, value in overrides.items():
            command += ["--override", f"{key}={value}"]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            cwd=str(directory), start_new_session=True)

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def _alive(self) -> None:
        if self.process.poll() is not None or "Broker startup failed" in self.log_text():
            raise BrokerExited("broker did not start", self.process.poll(), self.log_text())

    def wait_started(self, timeout: float = 30) -> dict[str, int]:
        """Wait for the "started" line; the port each listener bound, by name."""
        def started():
            self._alive()
            return re.search(r"Broker \d+ of cluster \S+ started in [\d.]+s; listeners: (.*)", self.log_text())
        match = wait_until(started, timeout, "the broker's started line")
        return {name: int(port) for name, port in re.findall(r"(\w+)=[\d.]+:(\d+)\(", match[1])}

    def wait_ready(self, port: int, timeout: float = 30) -> None:
        def ready():
            self._alive()
            return answers_api_versions(port)
        wait_until(ready, timeout, f"ApiVersions answered on port {port}")

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        return self.process.wait()


def test_shipped_config_with_only_listeners_overridden_advertises_and_uses_them(tmp_path):
    """Only ``listeners`` overridden (on port 0): the broker advertises the ports it bound, and
    its controller connects to the control-plane port it registered -- not the shipped 9093."""
    broker = ShippedConfigBroker(tmp_path / "port0", {
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "log.dirs": str(tmp_path / "port0" / "logs")})
    try:
        ports = broker.wait_started()
        data_port = ports["PLAINTEXT"]
        assert ports["CONTROLLER"] not in (0, 9093, data_port)
        broker.wait_ready(data_port)
        assert [(b.node_id, b.host, b.port) for b in metadata(data_port).brokers] == [(0, "127.0.0.1", data_port)]
        assert create_topic(data_port, "port0") == ErrorCode.NONE
        assert leader(data_port, "port0") == (ErrorCode.NONE, 0)
    finally:
        status = broker.stop()
    assert status == 0, broker.log_text()[-4000:]


def test_a_broker_advertising_another_brokers_control_plane_cannot_take_it_over(broker_factory):
    """Two brokers on one machine, both broker.id=0: the second advertises the first one's
    control plane (as the old shipped config made every broker do).  The first refuses its
    controller -- another cluster id -- and the second stops with a message saying why."""
    first = broker_factory()
    second = broker_factory({
        "listeners": "PLAINTEXT://127.0.0.1:{port:PLAINTEXT},CONTROLLER://127.0.0.1:{port:CONTROLLER}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{{port:PLAINTEXT}},CONTROLLER://127.0.0.1:{first.control_port}"},
        start=False)
    with pytest.raises(BrokerExited) as exited:
        second.start()
    assert exited.value.returncode == 1
    assert "INCONSISTENT_CLUSTER_ID" in second.log_text() and f"127.0.0.1:{first.control_port}" in second.log_text()
    assert_controller_still_works(first, "not-taken-over")

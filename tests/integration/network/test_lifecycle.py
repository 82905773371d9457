"""Startup failures and SIGTERM, with the broker started the README way.

* A configuration Kafka would refuse stops startup: exit status 1 and a
  message naming the key, before anything is bound.
* Every startup failure (a bad value, a port in use, an unusable log
  directory) is one line -- ``Broker startup failed: ...`` naming the key,
  the value and the reason -- and exit status 1; the traceback only with
  ``TWISTED_KAFKA_DEBUG=1``.  ``--version`` prints the version.
* SIGTERM: the broker stops accepting, answers what it has read, closes its
  connections cleanly (FIN after the last response, never half a frame) and
  exits 0.  The network layer's part of the drain (a request in flight when
  shutdown starts is answered before its connection closes) is checked
  in-process, where a request can be held in flight on purpose.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread
from twisted.trial import unittest

import twisted_kafka
from support import load
from support.broker_process import START_SCRIPT, BrokerExited, BrokerProcess
from support.raw_client import Closed, RawClient
from twisted_kafka.protocol.messages import MetadataRequest

from .inprocess import GatedHandler, InProcessBroker


@pytest.mark.integration
@pytest.mark.parametrize("overrides, key", [
    ({"control.plane.listener.name": "NOPE"}, "control.plane.listener.name"),
    ({"control.plane.listener.name": "PLAINTEXT"}, "control.plane.listener.name"),     # = inter-broker
    ({"num.io.threads": "many"}, "num.io.threads"),
    ({"max.connections.per.ip": "-3"}, "max.connections.per.ip"),
    ({"queued.max.requests": "0"}, "queued.max.requests"),
    ({"listeners": "PLAINTEXT://127.0.0.1:{port:PLAINTEXT},PLAINTEXT://127.0.0.1:{port:OTHER}"}, "listeners"),
    ({"max.connections.per.ip.overrides": "127.0.0.1:x"}, "max.connections.per.ip.overrides"),
])
def test_bad_configuration_fails_startup_naming_the_key(tmp_path, overrides, key):
    broker = BrokerProcess(tmp_path, overrides)
    with pytest.raises(BrokerExited) as failed:
        broker.start(timeout=30)
    assert failed.value.returncode == 1
    assert key in failure_line(broker)
    assert "Listening on" not in broker.log_text(), "nothing may be bound before the configuration is checked"


def failure_line(broker) -> str:
    """The one line saying why startup failed; no traceback, no usage text anywhere in the output."""
    text = broker.log_text()
    lines = [line for line in text.splitlines() if "Broker startup failed" in line]
    assert len(lines) == 1, text
    assert "Traceback" not in text and "Usage:" not in text and "``" not in text, text
    return lines[0]


@pytest.mark.integration
def test_a_bad_value_is_one_line_naming_key_value_and_reason(tmp_path):
    broker = BrokerProcess(tmp_path, {"num.io.threads": "many"})
    with pytest.raises(BrokerExited) as failed:
        broker.start(timeout=30)
    assert failed.value.returncode == 1
    # Nothing else is printed: logging has not started when the configuration is read.
    assert broker.log_text().strip() == ("Broker startup failed: Invalid value 'many' for configuration "
                                         "num.io.threads: not a number of type INT")


@pytest.mark.integration
def test_an_unusable_log_dir_is_one_line_naming_log_dirs(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    broker = BrokerProcess(tmp_path, {"log.dirs": str(blocker / "kafka-logs")})
    with pytest.raises(BrokerExited) as failed:
        broker.start(timeout=30)
    assert failed.value.returncode == 1
    line = failure_line(broker)
    assert "log.dirs" in line and str(blocker / "kafka-logs") in line and "Not a directory" in line, line


@pytest.mark.integration
def test_a_log_dir_that_cannot_be_loaded_is_one_line_naming_log_dirs(tmp_path):
    broker = BrokerProcess(tmp_path).start()
    assert broker.stop() == 0
    log_dir = Path(broker.log_dirs[0])
    (log_dir / "t-0" / "00000000000000000000.log").mkdir(parents=True)   # a directory where a segment must be
    with pytest.raises(BrokerExited) as failed:
        broker.start(timeout=30)
    assert failed.value.returncode == 1, "the broker must exit by itself (-9: it hung and was killed)"
    line = failure_line(broker)
    assert "log.dirs" in line and str(log_dir) in line, line


@pytest.mark.integration
def test_with_twisted_kafka_debug_the_traceback_is_logged_too(tmp_path, monkeypatch):
    monkeypatch.setenv("TWISTED_KAFKA_DEBUG", "1")
    broker = BrokerProcess(tmp_path, {"num.io.threads": "many"})
    with pytest.raises(BrokerExited) as failed:
        broker.start(timeout=30)
    assert failed.value.returncode == 1
    assert "Traceback" in broker.log_text() and "num.io.threads" in broker.log_text()


def twistd_command(*args: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from twisted.scripts.twistd import run; sys.argv[0] = 'twistd'; run()",
            *args]


@pytest.mark.integration
@pytest.mark.parametrize("command", [[str(START_SCRIPT), "--version"], twistd_command("kafka", "--version")],
                         ids=["start-script", "twistd-kafka"])
def test_version_prints_the_version_and_exits_zero(command):
    env = {**os.environ, "PYTHONPATH": str(START_SCRIPT.parents[1])}
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env,
                          cwd=str(START_SCRIPT.parents[1]))
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, f"twisted_kafka {twisted_kafka.__version__}",
                                                                   "")


@pytest.mark.integration
def test_a_busy_port_fails_startup_with_status_one(tmp_path):
    with socket.socket() as squatter:              # holds a port the kernel gave it, for the whole test
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        busy = squatter.getsockname()[1]
        broker = BrokerProcess(tmp_path, ports={"PLAINTEXT": busy})
        with pytest.raises(BrokerExited) as failed:
            broker.start(timeout=30)
    assert failed.value.returncode == 1, "the broker must exit by itself (-9: it hung and was killed)"
    line = failure_line(broker)
    assert "listeners" in line and f"127.0.0.1:{busy}" in line and "Address already in use" in line, line


@pytest.mark.integration
def test_broker_id_not_matching_meta_properties_fails_startup_with_status_one(tmp_path):
    broker = BrokerProcess(tmp_path).start()
    assert broker.stop() == 0
    broker.overrides["broker.id"] = "5"
    with pytest.raises(BrokerExited) as failed:
        broker.start(timeout=30)
    assert "broker.id" in broker.log_text(since_start=True)
    assert failed.value.returncode == 1, "the broker must exit by itself (-9: it hung and was killed)"


@pytest.mark.integration
def test_sigterm_stops_accepting_closes_cleanly_and_exits_zero(tmp_path):
    broker = BrokerProcess(tmp_path).start()
    flood = load.spawn("pipeline", port=broker.data_port, connections=10, depth=5, duration=60, api="metadata")
    idle = RawClient(broker.data_port)
    assert idle.api_versions(0).error_code == 0
    load.wait_answering(flood)          # every flood connection has had answers: SIGTERM comes mid-flood
    mark = broker.log_mark()
    status = broker.stop(timeout=30)
    assert status == 0, broker.log_text()[mark:]
    result = load.collect(flood, timeout=60)
    # Every flood connection was closed by the broker; what it answered came whole and in order.
    assert result["closed_by_broker"] == 10 and result["out_of_order"] == 0, result
    assert result["partial_frame_at_close"] == 0, result
    assert result["received"] > 0
    with pytest.raises(Closed):
        idle.read_frame(timeout=5)
    log = broker.log_text()[mark:]
    order = [log.find(line) for line in ("Received SIGTERM", "Broker shutting down", "Broker shut down")]
    assert -1 not in order and order == sorted(order), log


class DrainTest(unittest.TestCase):
    timeout = 30

    async def test_a_request_in_flight_at_shutdown_is_answered_before_its_connection_closes(self):
        handler = GatedHandler()
        handler.gate = Deferred()
        broker = InProcessBroker({"num.io.threads": "2"}, handlers=[handler])
        await broker.start()
        port = broker.port("PLAINTEXT")

        def send_and_wait():
            client = RawClient(port)
            client.send_request(MetadataRequest(version=1, topics=None), correlation_id=5)
            client.send_request(MetadataRequest(version=1, topics=None), correlation_id=6)  # never read
            return client

        client = await deferToThread(send_and_wait)
        await broker.wait_until(lambda: broker.socket_server.inflight_count() == 1, what="a request in flight")
        self.assertTrue(all(acceptor.port.connected for acceptor in broker.socket_server.acceptors.values()))
        stopping = Deferred.fromCoroutine(broker.stop())
        await broker.wait_until(lambda: not any(plane.open for plane in broker.socket_server.planes),
                                what="shutdown to stop accepting and reading requests")
        # The gate is closed, so the request cannot have been answered: shutdown must be waiting for it.
        self.assertFalse(stopping.called, "shutdown waits for the request in flight")
        # ... but no longer accepts: every listening socket is closed.  (Not checked by connecting:
        # the kernel may give the freed port to another process at once.)
        self.assertEqual([name for name, acceptor in broker.socket_server.acceptors.items()
                          if acceptor.port.connected], [])
        handler.gate.callback(None)
        await stopping

        def read_all():
            correlation_id, _ = client.read_response(3, 1, timeout=5)
            try:
                client.read_frame(timeout=5)
            except Closed:
                return correlation_id, "closed"
            return correlation_id, "another response"

        self.assertEqual(await deferToThread(read_all), (5, "closed"))
        client.close()
        self.assertTrue(broker.all_zero(), broker.counts())

"""A flooded data plane does not hold up the control plane (KIP-291: its own listener, request
queue and handler).

Flooding clients run in their own processes (``support.load``), each
connection pipelining 5 Metadata requests, so the broker's reactor is the
only thing the test process runs.

* In-process, with a Metadata handler that holds its handler slot until a
  gate opens, one data handler and ``queued.max.requests=8``: the data plane
  is stalled outright, its queue fills to its cap and stays there, a
  data-plane ApiVersions waits its turn -- and the control plane answers
  every request all the while.  Once the gate opens, every flood request is
  answered, in order, and the queue never went past its cap.
* In-process, with a data-plane Metadata handler that holds the reactor
  (CPU work) for longer than a turn's budget of data-plane handling: a
  control-plane request is handled after at most one data-plane request
  that had not started when it was sent, however many are read and waiting
  -- control-plane requests are handled when read, data-plane requests in
  slices between which the reactor polls its sockets.
* The real broker, started the README way, under a flood that runs from
  before the first control-plane request until after the last: every
  control-plane request answered, every flood request answered in order,
  and the data queue's peak (from the broker's shutdown summary) within its
  cap.

Nothing here is timed: how long control-plane requests take under a flood
is a figure, measured by ``bench/planes.py``.
"""

from __future__ import annotations

import re
import time

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread
from twisted.trial import unittest

from support import load
from support.broker_process import BrokerProcess
from support.raw_client import RawClient, api_versions_frame
from twisted_kafka.metrics import MetricName
from twisted_kafka.protocol.messages import MetadataRequest

from .inprocess import GatedHandler, InProcessBroker

FLOOD_PROCESSES = 2
FLOOD_CONNECTIONS = 20       # per process
FLOOD_SECONDS = 300          # an upper bound: floods run until they are stopped
CONTROL_REQUESTS = 50        # sent one after another on the control plane while the flood runs
QUEUE_CAP = 8


def spawn_floods(port: int) -> list:
    return [load.spawn("pipeline", port=port, connections=FLOOD_CONNECTIONS, depth=5, duration=FLOOD_SECONDS,
                       api="metadata") for _ in range(FLOOD_PROCESSES)]


def check_flood(results: list[dict]) -> int:
    """Every flood request answered, in order, on connections the broker kept open; how many."""
    total = 0
    for result in results:
        assert result["out_of_order"] == 0, result
        assert result["closed_by_broker"] == 0, result
        assert result["unanswered"] == 0 and result["received"] == result["sent"], result
        total += result["received"]
    return total


def control_plane_answers(port: int, count: int = CONTROL_REQUESTS) -> list[int]:
    """The error codes of ``count`` ApiVersions requests sent one after another on ``port``."""
    with RawClient(port) as client:
        return [client.api_versions(0).error_code for _ in range(count)]


class CpuBoundMetadata(GatedHandler):
    """Metadata answered with an empty cluster; on the data plane, only after ``cpu_seconds`` of work
    that holds the reactor, as a handler doing heavy local work does.  A control-plane request
    records how many data-plane requests had started when it was handled."""

    def __init__(self, cpu_seconds: float):
        super().__init__()
        self.cpu_seconds = cpu_seconds
        self.data_started = 0
        self.seen_by_control: list[int] = []

    async def handle(self, request):
        if request.context.plane == "control":
            self.seen_by_control.append(self.data_started)
        else:
            self.data_started += 1
            end = time.perf_counter() + self.cpu_seconds
            while time.perf_counter() < end:
                pass
        return self.error_response(request, 0)


class InProcessPlanesTest(unittest.TestCase):
    timeout = 120

    async def test_a_control_plane_request_waits_for_at_most_one_data_plane_request(self):
        """Each data-plane request holds the reactor longer than a turn's data-plane budget, so a
        turn handles one; the control-plane request is read by the next poll and handled at once.
        Before, a turn handled every data-plane request read in it (up to one per flood
        connection), and a control-plane request read in the same poll waited for them all."""
        handler = CpuBoundMetadata(cpu_seconds=0.003)
        broker = InProcessBroker({"num.io.threads": "1", "queued.max.requests": str(QUEUE_CAP)}, handlers=[handler])
        await broker.start()
        data_port, control_port = broker.port("PLAINTEXT"), broker.port("CONTROLLER")
        floods: list = []
        try:
            floods = spawn_floods(data_port)
            for process in floods:
                await deferToThread(load.wait_answering, process, 60)

            def control_plane_probe():
                started_before = []
                with RawClient(control_port, timeout=60) as client:
                    for _ in range(20):
                        correlation_id = client.send_request(MetadataRequest(version=1, topics=None), 1)
                        started_before.append(handler.data_started)     # read once the request is sent
                        answer_id, _ = client.read_response(3, 1)
                        assert answer_id == correlation_id
                return started_before

            started_before = await deferToThread(control_plane_probe)
            for process in floods:
                load.stop(process)
            await broker.wait_until(lambda: all(p.poll() is not None for p in floods), timeout=60,
                                    what="the floods to drain and exit")
            flood = [load.collect(p, timeout=5) for p in floods]
        finally:
            for process in floods:
                if process.poll() is None:
                    process.kill()
            await broker.stop()
        check_flood(flood)
        waited_for = [seen - before for before, seen in zip(started_before, handler.seen_by_control, strict=True)]
        # One data-plane request at most (the slice running when the request arrived, or the one
        # before the next poll); the slack covers loopback delivery deferred on a loaded machine.
        self.assertLessEqual(max(waited_for), 3,
                             f"data-plane requests started between sending and handling each control-plane "
                             f"request: {waited_for}")

    async def test_control_plane_answers_while_the_data_plane_is_stalled_with_its_queue_full(self):
        handler = GatedHandler()
        handler.gate = Deferred()          # every Metadata request holds its handler slot until this fires
        broker = InProcessBroker({"num.io.threads": "1", "queued.max.requests": str(QUEUE_CAP)},
                                 handlers=[handler])
        await broker.start()
        data_port, control_port = broker.port("PLAINTEXT"), broker.port("CONTROLLER")
        channel = broker.data_channel
        gauge = broker.metrics.get(MetricName("kafka.network", "RequestChannel", "RequestQueueSize"))
        floods: list = []
        data_probe = None
        try:
            floods = spawn_floods(data_port)
            for process in floods:
                await deferToThread(load.wait_connected, process)
            await broker.wait_until(lambda: channel.queue_size == QUEUE_CAP, timeout=30,
                                    what="the data queue to fill up to its cap")

            def probe_both_planes():
                data = RawClient(data_port)
                data.send_raw(api_versions_frame(correlation_id=99))
                return data, control_plane_answers(control_port)

            data_probe, answers = await deferToThread(probe_both_planes)
            self.assertEqual(answers, [0] * CONTROL_REQUESTS, "the control plane answers every request")
            # The gate is still closed: nothing on the data plane can have been answered meanwhile.
            self.assertEqual(handler.handled, 0)
            self.assertEqual((channel.queue_size, gauge.value), (QUEUE_CAP, QUEUE_CAP),
                             "the data queue stays at its cap")
            self.assertTrue(data_probe.no_response_within(0), "a data-plane request waits behind the flood")

            handler.gate.callback(None)
            for process in floods:
                load.stop(process)
            await broker.wait_until(lambda: all(p.poll() is not None for p in floods), timeout=60,
                                    what="the floods to drain and exit")
            flood = [load.collect(p, timeout=5) for p in floods]
            correlation_id, response = await deferToThread(data_probe.read_response, 18, 0, 10)
            self.assertEqual((correlation_id, response.error_code), (99, 0), "answered once the flood drains")
        finally:
            if not handler.gate.called:
                handler.gate.callback(None)
            for process in floods:
                if process.poll() is None:
                    process.kill()
            if data_probe is not None:
                data_probe.close()
            await broker.stop()
        answered = check_flood(flood)
        self.assertEqual(handler.handled, answered)
        self.assertEqual(channel.peak_queue_size, QUEUE_CAP, "the queue reached its cap and never went past it")


@pytest.mark.integration
def test_real_broker_control_plane_answers_under_data_plane_flood(tmp_path):
    broker = BrokerProcess(tmp_path, {"num.io.threads": "1", "queued.max.requests": str(QUEUE_CAP)}).start()
    floods = spawn_floods(broker.data_port)
    try:
        for process in floods:
            load.wait_answering(process)       # every flood connection is being answered
        answers = control_plane_answers(broker.control_port)
        assert all(process.poll() is None for process in floods), "the flood ran through every control request"
    finally:
        for process in floods:
            load.stop(process)
        results = [load.collect(process) for process in floods]
        status = broker.stop()
    assert status == 0
    assert answers == [0] * CONTROL_REQUESTS, "the control plane answers every request"
    check_flood(results)
    summary = broker.wait_for_log(rf"RequestChannel \(data plane\): \d+ request\(s\) queued in all, "
                                  rf"peak queue size \d+ of {QUEUE_CAP}")
    peak = int(re.search(rf"peak queue size (\d+) of {QUEUE_CAP}", summary).group(1))
    assert peak <= QUEUE_CAP
    # The controller's own connection to the control plane may still be open; no data-plane one is.
    assert re.search(r"Connections at shutdown: \d+ open \(per listener \{[^}]*'PLAINTEXT': 0",
                     broker.log_text()), "every flood connection released"

"""A flooded data plane does not hold up the control plane (KIP-291: its own listener, request
queue and handler).

Flooding clients run in their own processes (``tests.support.load``), each
connection pipelining 5 Metadata requests, so the broker's reactor is the
only thing the test process runs.

* In-process, with a Metadata handler that holds its handler slot until a
  gate opens, one data handler and ``queued.max.requests=8``: the data plane
  is stalled outright, its queue fills to its cap and stays there, a
  data-plane ApiVersions waits its turn -- and the control plane answers
  every request all the while.  Once the gate opens, every flood request is
  answered, in order, and the queue never went past its cap.
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

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread
from twisted.trial import unittest

from tests.support import load
from tests.support.broker_process import BrokerProcess
from tests.support.raw_client import RawClient, api_versions_frame
from twisted_kafka.metrics import MetricName

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


class InProcessPlanesTest(unittest.TestCase):
    timeout = 120

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

"""A flooded data plane does not delay the control plane (KIP-291: its own listener, request
queue and handler).

Flooding clients run in their own processes (``tests.support.load``), each
connection pipelining 5 Metadata requests; latency probes on the control and
the data plane are separate processes too, so the broker's reactor is the
only thing the test process runs.

* In-process, with a Metadata handler that keeps its handler slot for 2 ms
  (local work), one data handler and ``queued.max.requests=8``: the data queue
  is held at its cap the whole time (sampled RequestQueueSize), never above
  it, every flood request is answered in order, and control-plane requests
  are answered promptly while data-plane ones wait their turn.
* The real broker, started the README way, under the same flood: every
  request answered in order, control plane prompt, and the data queue's
  peak (from the broker's shutdown summary) within its cap.

p50/p99 latencies are printed (``pytest -s``) for the record.
"""

from __future__ import annotations

import re
import sys

import pytest
from twisted.internet import reactor
from twisted.internet.task import LoopingCall, deferLater
from twisted.trial import unittest

from tests.support import load
from tests.support.broker_process import BrokerProcess
from twisted_kafka.metrics import MetricName

from .inprocess import GatedHandler, InProcessBroker

FLOOD_PROCESSES = 2
FLOOD_CONNECTIONS = 20       # per process
FLOOD_SECONDS = 3.0
PROBE_DELAY = 0.5            # let the flood build up first
PROBE_SECONDS = 2.0


def report(title: str, results: dict[str, dict]) -> None:
    for plane, result in results.items():
        print(f"\n[{title}] {plane} plane latency under data-plane flood: p50 {result['p50_ms']:.2f} ms, "
              f"p99 {result['p99_ms']:.2f} ms, max {result['max_ms']:.2f} ms ({result['count']} requests)",
              file=sys.stderr)


def check_flood(results: list[dict]) -> int:
    total = 0
    for result in results:
        assert result["out_of_order"] == 0, result
        assert result["closed_by_broker"] == 0, result
        assert result["unanswered"] == 0 and result["received"] == result["sent"], result
        total += result["received"]
    return total


class InProcessPlanesTest(unittest.TestCase):
    timeout = 60

    async def wait_for(self, process, timeout: float = 40.0) -> dict:
        waited = 0.0
        while process.poll() is None and waited < timeout:
            await deferLater(reactor, 0.05, lambda: None)
            waited += 0.05
        return load.collect(process, timeout=5)

    async def test_control_plane_is_prompt_while_the_data_queue_is_held_full(self):
        handler = GatedHandler()
        handler.gate = 0.002     # 2 ms of local work per Metadata request, holding the handler slot
        broker = InProcessBroker({"num.io.threads": "1", "queued.max.requests": "8"}, handlers=[handler])
        await broker.start()
        data_port, control_port = broker.port("PLAINTEXT"), broker.port("CONTROLLER")
        gauge = broker.metrics.get(MetricName("kafka.network", "RequestChannel", "RequestQueueSize"))
        samples: list[int] = []
        sampler = LoopingCall(lambda: samples.append(gauge.value))
        try:
            floods = [load.spawn("pipeline", port=data_port, connections=FLOOD_CONNECTIONS, depth=5,
                                 duration=FLOOD_SECONDS, api="metadata") for _ in range(FLOOD_PROCESSES)]
            probes = {plane: load.spawn("latency", port=port, duration=PROBE_SECONDS, interval=0.01,
                                        api="api_versions", delay=PROBE_DELAY)
                      for plane, port in (("control", control_port), ("data", data_port))}
            await deferLater(reactor, PROBE_DELAY, lambda: None)
            sampler.start(0.01)
            latencies = {plane: await self.wait_for(p) for plane, p in probes.items()}
            sampler.stop()
            flood = [await self.wait_for(p) for p in floods]
        finally:
            if sampler.running:
                sampler.stop()
            await broker.stop()
        report("in-process, 2 ms handler", latencies)
        answered = check_flood(flood)
        channel = broker.data_channel
        self.assertEqual(channel.peak_queue_size, 8)
        self.assertLessEqual(max(samples), 8)
        held_full = sum(1 for s in samples if s >= 7) / len(samples)
        self.assertGreater(held_full, 0.9, f"the data queue was not held full: {held_full:.0%} of samples")
        self.assertEqual(handler.handled, answered)
        control, data = latencies["control"], latencies["data"]
        self.assertLess(control["p50_ms"], 20)
        self.assertLess(control["p99_ms"], 100)
        self.assertGreater(data["p50_ms"], 5 * control["p50_ms"],
                           "a data-plane request waits behind the flood; a control-plane one must not")


@pytest.mark.integration
def test_real_broker_control_plane_under_data_plane_flood(tmp_path):
    broker = BrokerProcess(tmp_path, {"num.io.threads": "1", "queued.max.requests": "8"}).start()
    try:
        floods = [load.spawn("pipeline", port=broker.data_port, connections=FLOOD_CONNECTIONS, depth=5,
                             duration=FLOOD_SECONDS, api="metadata") for _ in range(FLOOD_PROCESSES)]
        probes = {plane: load.spawn("latency", port=port, duration=PROBE_SECONDS, interval=0.01,
                                    api="api_versions", delay=PROBE_DELAY)
                  for plane, port in (("control", broker.control_port), ("data", broker.data_port))}
        latencies = {plane: load.collect(p) for plane, p in probes.items()}
        answered = check_flood([load.collect(p) for p in floods])
    finally:
        status = broker.stop()
    assert status == 0
    report("broker process", latencies)
    assert answered > 1000
    assert latencies["control"]["p99_ms"] < 250
    summary = broker.wait_for_log(r"RequestChannel \(data plane\): \d+ request\(s\) queued in all, "
                                  r"peak queue size \d+ of 8")
    peak = int(re.search(r"peak queue size (\d+) of 8", summary).group(1))
    assert peak <= 8
    # The controller's own connection to the control plane may still be open; no data-plane one is.
    assert re.search(r"Connections at shutdown: \d+ open \(per listener \{[^}]*'PLAINTEXT': 0",
                     broker.log_text()), "every flood connection released"

"""StopDeadline, the last-resort bound on the broker's stop, on a ``task.Clock``; and KafkaServer's use
of it: armed when the stop begins, re-armed when the drain begins, disarmed when the stop has
finished, and -- when a service's stop never finishes -- one critical line naming it, then exit 1.

The exit is a recording stand-in (the real one is ``os._exit``), and the
watching thread is not started: its loop is driven by hand with a fake
clock and wait.
"""

from __future__ import annotations

import pytest
from twisted.application.service import Service
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.logger import globalLogPublisher

from twisted_kafka.server.broker_lifecycle import DRAIN_TIMEOUT_SECONDS, STOP_GRACE_SECONDS
from twisted_kafka.server.stop_deadline import EXIT_STATUS, THREAD_MARGIN_SECONDS, StopDeadline


@pytest.fixture
def logged():
    events = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


def critical_lines(events) -> list[dict]:
    return [e for e in events if e.get("log_format", "").startswith("The broker did not stop within")]


def deadline(clock, exits, describe=lambda: "the log manager still stopping") -> StopDeadline:
    return StopDeadline(clock, describe=describe, exit=exits.append, start_thread=False)


def test_past_its_deadline_the_process_exits_with_one_line_saying_what_was_still_stopping(logged):
    clock, exits = Clock(), []
    bound = deadline(clock, exits)
    bound.arm(40, "draining requests")
    clock.advance(39.999)
    assert exits == [] and bound.armed
    clock.advance(0.001)
    assert exits == [EXIT_STATUS] and bound.expired
    [line] = critical_lines(logged)
    assert (line["seconds"], line["phase"], line["what"]) == (40, "draining requests",
                                                              "the log manager still stopping")


def test_arming_again_moves_the_deadline_either_way():
    clock, exits = Clock(), []
    bound = deadline(clock, exits)
    bound.arm(145, "controlled shutdown")
    clock.advance(5)
    bound.arm(40, "draining requests")                # earlier than the first deadline
    assert len(clock.getDelayedCalls()) == 1
    clock.advance(39.999)
    assert exits == []
    clock.advance(0.001)
    assert exits == [EXIT_STATUS]

    clock, exits = Clock(), []
    bound = deadline(clock, exits)
    bound.arm(10, "a")
    clock.advance(9)
    bound.arm(10, "b")                                # later
    clock.advance(9)
    assert exits == []
    clock.advance(1)
    assert exits == [EXIT_STATUS]


def test_a_stop_that_finished_in_time_disarms_it(logged):
    clock, exits = Clock(), []
    bound = deadline(clock, exits)
    bound.arm(40, "draining requests")
    clock.advance(20)
    bound.disarm()
    clock.advance(100)
    assert exits == [] and clock.getDelayedCalls() == [] and critical_lines(logged) == []


class FakeTime:
    """A monotonic clock for the watching thread, advanced by its waits."""

    def __init__(self):
        self.now = 1000.0
        self.waits: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def wait(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds


class ReactorState(Clock):
    running = True


@pytest.mark.parametrize("finished, reactor_running, exits_expected", [
    (False, True, True),       # the stop never finished (the reactor's thread is blocked)
    (True, False, True),       # the reactor stopped, yet the process is still there (a thread holds it)
    (True, True, False),       # stopped in time inside a process that goes on (a test's reactor)
])
def test_the_watching_thread_ends_the_process_past_the_deadline_and_its_margin(capfd, finished, reactor_running,
                                                                                exits_expected):
    clock, exits, time = ReactorState(), [], FakeTime()
    clock.running = reactor_running
    bound = StopDeadline(clock, exit=exits.append, monotonic=time.monotonic, start_thread=False)
    bound.arm(40, "draining requests")
    if finished:
        bound.disarm()
    bound.watch(wait=time.wait)
    assert time.now == pytest.approx(1000 + 40 + THREAD_MARGIN_SECONDS)
    assert exits == ([EXIT_STATUS] if exits_expected else [])
    written = capfd.readouterr().err
    assert ("did not stop within 40s (draining requests)" in written) == exits_expected


class Hanging(Service):
    name = "hanging-service"

    def stopService(self):
        super().stopService()
        return Deferred()                             # never fires


def kafka_server(tmp_path):
    from twisted.internet.testing import MemoryReactorClock

    from tests.unit.network.helpers import make_config
    from twisted_kafka.server.kafka_server import KafkaServer

    server = KafkaServer(make_config(log_dirs=str(tmp_path / "logs")), reactor=MemoryReactorClock())
    exits: list[int] = []
    server.stop_deadline._exit = exits.append
    server.stop_deadline._start_thread = False
    return server, exits


def test_the_broker_s_stop_is_bounded_even_when_a_service_never_finishes_stopping(tmp_path, logged):
    server, exits = kafka_server(tmp_path)
    Hanging().setServiceParent(server)
    for child in server:
        child.running = isinstance(child, Hanging)    # only it runs: the others were never started
    server.running = True
    stopped = server.stopService()
    bound = server.lifecycle.controlled_shutdown_bound() + DRAIN_TIMEOUT_SECONDS + STOP_GRACE_SECONDS
    server.reactor.advance(bound - 0.001)
    assert exits == [] and not stopped.called
    server.reactor.advance(0.001)
    assert exits == [EXIT_STATUS]
    [line] = critical_lines(logged)
    assert line["phase"] == "controlled shutdown" and line["what"].startswith("hanging-service still stopping")
    server.log_dir_locks.release()


def test_the_broker_s_stop_disarms_its_deadline_once_finished(tmp_path):
    server, exits = kafka_server(tmp_path)
    for child in server:
        child.running = False
    server.running = True
    stopped = server.stopService()
    assert stopped.called and not server.stop_deadline.armed
    server.reactor.advance(1000)
    assert exits == []

"""KafkaRequestHandlerPool (slots freed when a request starts waiting remotely) and IdleRatio
(Kafka's RequestHandlerAvgIdlePercent)."""

from __future__ import annotations

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from twisted_kafka.metrics import MetricName, MetricsRegistry
from twisted_kafka.metrics.idle import IdleRatio
from twisted_kafka.network.request_channel import RequestChannel
from twisted_kafka.server.request_handler import KafkaRequestHandlerPool


class FakeRequest:
    def __init__(self, n, *, remote: Deferred | None = None, local: Deferred | None = None):
        self.n = n
        self.size = 10
        self.released = False
        self.dequeue_ns = 0
        self.on_local_complete = None
        self.local_complete_ns = 0
        self.remote = remote    # the request waits on this after its local work
        self.local = local      # the request's *local* work waits on this (holds its slot)

    def mark_local_complete(self):
        self.local_complete_ns = 1
        if self.on_local_complete is not None:
            release, self.on_local_complete = self.on_local_complete, None
            release()


class Apis:
    def __init__(self):
        self.started: list[int] = []
        self.finished: list[int] = []

    async def handle(self, request):
        self.started.append(request.n)
        if request.local is not None:
            await request.local
        if request.remote is not None:
            request.mark_local_complete()   # e.g. a long-poll fetch parks itself
            await request.remote
        self.finished.append(request.n)


def pool(num_handlers=1):
    clock = Clock()
    channel = RequestChannel(plane="data", max_queued_requests=100)
    apis = Apis()
    metrics = MetricsRegistry(clock=clock.seconds)
    p = KafkaRequestHandlerPool(channel=channel, apis=apis, num_handlers=num_handlers, reactor=clock,
                                metrics=metrics)
    p.startService()
    return p, channel, apis, clock, metrics


def test_a_busy_handler_holds_its_slot():
    p, channel, apis, clock, _ = pool(1)
    local = Deferred()
    channel.send_request(FakeRequest(1, local=local))
    channel.send_request(FakeRequest(2))
    assert apis.started == [1] and p.handling == 1
    assert channel.queue_size == 1
    local.callback(None)
    assert apis.started == [1, 2] and apis.finished == [1, 2] and p.handling == 0


def test_a_request_waiting_remotely_frees_its_slot_for_the_next():
    p, channel, apis, clock, _ = pool(1)
    remote = Deferred()
    channel.send_request(FakeRequest(1, remote=remote))
    channel.send_request(FakeRequest(2))
    channel.send_request(FakeRequest(3))
    assert apis.started == [1, 2, 3] and apis.finished == [2, 3]
    assert p.handling == 0 and len(p._waiting) == 1
    remote.callback(None)
    assert apis.finished == [2, 3, 1] and not p._waiting


def test_num_handlers_bounds_requests_worked_on_at_once():
    p, channel, apis, clock, _ = pool(3)
    locals_ = [Deferred() for _ in range(5)]
    for n, d in enumerate(locals_):
        channel.send_request(FakeRequest(n, local=d))
    assert apis.started == [0, 1, 2] and p.handling == 3 and channel.queue_size == 2
    locals_[1].callback(None)
    assert apis.started == [0, 1, 2, 3]


def test_stop_waits_for_running_and_waiting_requests():
    p, channel, apis, clock, _ = pool(2)
    remote = Deferred()
    channel.send_request(FakeRequest(1, remote=remote))
    stopped = []
    p.stopService().addCallback(stopped.append)
    assert not stopped
    remote.callback(None)
    assert stopped and apis.finished == [1]


def test_idle_gauge_reports_the_pool_idle_fraction():
    p, channel, apis, clock, metrics = pool(2)
    gauge = metrics.get(MetricName("kafka.server", "KafkaRequestHandlerPool", "RequestHandlerAvgIdlePercent"))
    assert gauge.value == 1.0
    local = Deferred()
    channel.send_request(FakeRequest(1, local=local))   # one of two handlers busy
    clock.advance(1.0)                                  # the pool samples once a second
    assert gauge.value == pytest.approx(0.5)
    local.callback(None)
    clock.advance(1.0)
    assert gauge.value == pytest.approx(0.75)           # mean of 0.5 and 1.0
    p.stopService()


def test_idle_ratio_accounts_intervals_across_samples():
    clock = Clock()
    ratio = IdleRatio(2, clock.seconds)
    ratio.begin(0)
    ratio.begin(1)
    assert ratio.value == 1.0
    clock.advance(0.25)
    ratio.end(0)          # worker 0 busy from 0.25
    clock.advance(0.75)
    ratio.sample()        # [0, 1]: worker 0 idle 0.25, worker 1 idle 1.0 -> 1.25 / 2
    assert ratio.value == pytest.approx(0.625)
    clock.advance(0.5)
    ratio.begin(0)        # idle again from 1.5
    clock.advance(0.5)
    ratio.end(1)          # worker 1 busy from 2.0
    ratio.sample()        # [1, 2]: worker 0 idle 0.5, worker 1 idle 1.0 -> 0.75
    assert ratio.value == pytest.approx((0.625 + 0.75) / 2)
    clock.advance(1.0)
    ratio.sample()        # [2, 3]: worker 0 idle all second, worker 1 busy -> 0.5
    assert ratio.value == pytest.approx((0.625 + 0.75 + 0.5) / 3)


def test_idle_ratio_window_forgets_old_samples():
    clock = Clock()
    ratio = IdleRatio(1, clock.seconds, window_samples=3)
    for _ in range(3):
        clock.advance(1)
        ratio.sample()    # busy (never began idling)
    assert ratio.value == 0.0
    ratio.begin(0)
    for _ in range(3):
        clock.advance(1)
        ratio.sample()
    assert ratio.value == 1.0


def test_idle_ratio_without_samples_reflects_the_current_state():
    clock = Clock()
    ratio = IdleRatio(2, clock.seconds)
    assert ratio.value == 0.0
    ratio.begin(0)
    assert ratio.value == 0.0
    ratio.begin(1)
    assert ratio.value == 1.0


def test_a_crashing_handler_is_logged_and_its_slot_reused():
    from twisted.logger import globalLogPublisher

    events = []
    globalLogPublisher.addObserver(events.append)
    try:
        p, channel, apis, clock, _ = pool(1)

        async def boom(request):
            if request.n == 1:
                raise RuntimeError("handler bug")
            apis.finished.append(request.n)

        apis.handle = boom
        channel.send_request(FakeRequest(1))
        channel.send_request(FakeRequest(2))
        assert apis.finished == [2] and p.handling == 0
        assert any("handler bug" in str(e.get("log_failure", "")) for e in events)
    finally:
        globalLogPublisher.removeObserver(events.append)


def test_a_request_marked_local_complete_and_finished_synchronously_frees_the_slot_once():
    p, channel, apis, clock, _ = pool(1)

    async def quick(request):
        request.mark_local_complete()
        apis.finished.append(request.n)

    apis.handle = quick
    for n in range(3):
        channel.send_request(FakeRequest(n))
    assert apis.finished == [0, 1, 2] and p.handling == 0 and not p._waiting


def test_a_request_waiting_after_its_synchronous_part_releases_later():
    p, channel, apis, clock, _ = pool(1)
    local, remote = Deferred(), Deferred()
    channel.send_request(FakeRequest(1, local=local, remote=remote))
    channel.send_request(FakeRequest(2))
    assert apis.started == [1] and p.handling == 1
    local.callback(None)          # local work done; now it waits remotely: the slot moves on
    assert apis.started == [1, 2] and p.handling == 0 and len(p._waiting) == 1
    remote.callback(None)
    assert apis.finished == [2, 1] and not p._waiting


def test_stopping_cancels_idle_handlers_quietly():
    p, channel, apis, clock, _ = pool(3)
    stopped = []
    p.stopService().addCallback(stopped.append)
    assert stopped and not p._takers
    channel.send_request(FakeRequest(1))
    assert apis.started == [] and channel.queue_size == 1

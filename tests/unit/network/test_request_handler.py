"""KafkaRequestHandlerPool (slots freed when a request starts waiting remotely, answers handed to
its own plane's channel, crashes answered by closing, requests in flight expired with an error and
named in the log, a bounded stop) and IdleRatio (Kafka's RequestHandlerAvgIdlePercent)."""

from __future__ import annotations

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.logger import globalLogPublisher

from twisted_kafka.metrics import MetricName, MetricsRegistry
from twisted_kafka.metrics.idle import IdleRatio
from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.network.request import CloseConnectionResponse, NoOpResponse, Request, RequestContext, SendResponse
from twisted_kafka.network.request_channel import RequestChannel
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.header import RequestHeader
from twisted_kafka.protocol.registry import REGISTRY, ApiKey
from twisted_kafka.server.request_handler import STOP_TIMEOUT_SECONDS, KafkaRequestHandlerPool


class Connection:
    """Stands in for a Processor on the channel: records the answers that reach it."""

    def __init__(self, connection_id: str = "conn-1"):
        self.connection_id = connection_id
        self.answers: list = []

    def send(self, response) -> None:
        self.answers.append(response)

    @property
    def answered(self) -> list[int]:
        return [response.request.correlation_id for response in self.answers]


CONTEXT = RequestContext(connection_id="conn-1", listener_name="PLAINTEXT", security_protocol="PLAINTEXT",
                         plane="data", client_host="127.0.0.1", client_port=40000)


def make_request(n: int) -> Request:
    """A real Request (correlation id ``n``) from the channel's one Connection."""
    return Request(context=CONTEXT, header=RequestHeader(ApiKey.METADATA, 1, n, "unit"), body=None,
                   spec=REGISTRY[ApiKey.METADATA], size=10)


class Apis:
    """KafkaApis' contract: ``handle`` is a coroutine returning the Response for the channel.

    ``local[n]`` holds request n's own work (its slot stays busy); ``remote[n]``
    is what it waits on after calling ``mark_local_complete`` (a parked fetch).
    """

    def __init__(self):
        self.started: list[int] = []
        self.finished: list[int] = []
        self.local: dict[int, Deferred] = {}
        self.remote: dict[int, Deferred] = {}

    async def handle(self, request):
        n = request.correlation_id
        self.started.append(n)
        if n in self.local:
            await self.local[n]
        if n in self.remote:
            request.mark_local_complete()   # e.g. a long-poll fetch parks itself
            await self.remote[n]
        self.finished.append(n)
        return NoOpResponse(request)

    def error_answer(self, request, code, message=None):
        """KafkaApis' whole-request error answer (what an expired request gets)."""
        return SendResponse(request, [f"{code.name}: {message}".encode()])


def send(channel, n: int, *, local: Deferred | None = None, remote: Deferred | None = None, apis=None) -> Request:
    if local is not None:
        apis.local[n] = local
    if remote is not None:
        apis.remote[n] = remote
    request = make_request(n)
    channel.send_request(request)
    return request


def pool(num_handlers=1):
    clock = Clock()
    channel = RequestChannel(plane="data", max_queued_requests=100)
    connection = Connection()
    channel.register_connection(connection)
    apis = Apis()
    metrics = MetricsRegistry(clock=clock.seconds)
    p = KafkaRequestHandlerPool(channel=channel, apis=apis, num_handlers=num_handlers, reactor=clock,
                                metrics=metrics)
    p.startService()
    return p, channel, apis, clock, metrics, connection


def test_a_busy_handler_holds_its_slot():
    p, channel, apis, clock, _, conn = pool(1)
    local = Deferred()
    send(channel, 1, local=local, apis=apis)
    send(channel, 2)
    assert apis.started == [1] and p.handling == 1
    assert channel.queue_size == 1 and conn.answered == []
    local.callback(None)
    assert apis.started == [1, 2] and apis.finished == [1, 2] and p.handling == 0
    assert conn.answered == [1, 2], "each answer reaches the connection through the pool's channel"
    assert channel.outstanding == 0 and channel.held_bytes == 0


def test_a_request_waiting_remotely_frees_its_slot_for_the_next():
    p, channel, apis, clock, _, conn = pool(1)
    remote = Deferred()
    send(channel, 1, remote=remote, apis=apis)
    send(channel, 2)
    send(channel, 3)
    assert apis.started == [1, 2, 3] and apis.finished == [2, 3]
    assert p.handling == 0 and len(p._waiting) == 1
    assert conn.answered == [2, 3] and channel.outstanding == 1
    remote.callback(None)
    assert apis.finished == [2, 3, 1] and not p._waiting
    assert conn.answered == [2, 3, 1] and channel.outstanding == 0


def test_num_handlers_bounds_requests_worked_on_at_once():
    p, channel, apis, clock, _, conn = pool(3)
    locals_ = [Deferred() for _ in range(5)]
    for n, d in enumerate(locals_):
        send(channel, n, local=d, apis=apis)
    assert apis.started == [0, 1, 2] and p.handling == 3 and channel.queue_size == 2
    locals_[1].callback(None)
    assert apis.started == [0, 1, 2, 3] and conn.answered == [1]


def test_stop_waits_for_running_and_waiting_requests():
    p, channel, apis, clock, _, conn = pool(2)
    remote = Deferred()
    send(channel, 1, remote=remote, apis=apis)
    stopped = []
    p.stopService().addCallback(stopped.append)
    assert not stopped
    remote.callback(None)
    assert stopped and apis.finished == [1] and conn.answered == [1]


def test_answers_go_to_the_pools_own_plane():
    """Two planes, two pools: each answers on its own channel (a connection registers with
    its plane's channel only, so an answer sent on the other channel would be lost)."""
    p, data, apis, clock, metrics, conn = pool(1)
    control = RequestChannel(plane="control", max_queued_requests=20)
    controller_conn = Connection("conn-1")   # same id, other plane: must not be confused
    control.register_connection(controller_conn)
    control_pool = KafkaRequestHandlerPool(channel=control, apis=apis, num_handlers=1, reactor=clock,
                                           metrics=metrics, metric_prefix="ControlPlane")
    control_pool.startService()
    control.send_request(make_request(7))
    data.send_request(make_request(8))
    assert controller_conn.answered == [7] and conn.answered == [8]


def test_idle_gauge_reports_the_pool_idle_fraction():
    p, channel, apis, clock, metrics, _ = pool(2)
    gauge = metrics.get(MetricName("kafka.server", "KafkaRequestHandlerPool", "RequestHandlerAvgIdlePercent"))
    assert gauge.value == 1.0
    local = Deferred()
    send(channel, 1, local=local, apis=apis)            # one of two handlers busy
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


@pytest.fixture
def log_events():
    from twisted.logger import globalLogPublisher

    events = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


def test_a_crashing_handler_is_logged_its_connection_closed_and_its_slot_reused(log_events):
    """KafkaApis answers every failure itself; if a handler still escapes, its connection gets a
    CloseConnectionResponse (it would otherwise wait forever) and the slot serves the next request."""
    p, channel, apis, clock, _, conn = pool(1)

    async def boom(request):
        if request.correlation_id == 1:
            raise RuntimeError("handler bug")
        apis.finished.append(request.correlation_id)
        return NoOpResponse(request)

    apis.handle = boom
    send(channel, 1)
    send(channel, 2)
    assert apis.finished == [2] and p.handling == 0
    assert any("handler bug" in str(e.get("log_failure", "")) for e in log_events)
    assert conn.answered == [1, 2]
    crashed = conn.answers[0]
    assert isinstance(crashed, CloseConnectionResponse)
    assert crashed.reason == CloseReason.PROTOCOL_ERROR and not crashed.graceful
    assert channel.outstanding == 0 and channel.held_bytes == 0


def test_a_handler_crashing_after_it_waited_is_answered_too(log_events):
    p, channel, apis, clock, _, conn = pool(1)
    remote = Deferred()

    async def boom_later(request):
        request.mark_local_complete()
        await remote
        raise RuntimeError("late handler bug")

    apis.handle = boom_later
    send(channel, 1)
    assert conn.answered == [] and p.handling == 0
    remote.callback(None)
    assert conn.answered == [1] and isinstance(conn.answers[0], CloseConnectionResponse)
    assert any("late handler bug" in str(e.get("log_failure", "")) for e in log_events)
    assert not p._unfinished and not p._waiting


def test_a_request_marked_local_complete_and_finished_synchronously_frees_the_slot_once():
    p, channel, apis, clock, _, conn = pool(1)

    async def quick(request):
        request.mark_local_complete()
        apis.finished.append(request.correlation_id)
        return NoOpResponse(request)

    apis.handle = quick
    for n in range(3):
        send(channel, n)
    assert apis.finished == [0, 1, 2] and p.handling == 0 and not p._waiting
    assert conn.answered == [0, 1, 2]


def test_a_request_waiting_after_its_synchronous_part_releases_later():
    p, channel, apis, clock, _, conn = pool(1)
    local, remote = Deferred(), Deferred()
    send(channel, 1, local=local, remote=remote, apis=apis)
    send(channel, 2)
    assert apis.started == [1] and p.handling == 1
    local.callback(None)          # local work done; now it waits remotely: the slot moves on
    assert apis.started == [1, 2] and p.handling == 0 and len(p._waiting) == 1
    remote.callback(None)
    assert apis.finished == [2, 1] and not p._waiting
    assert conn.answered == [2, 1]


@pytest.fixture
def logged():
    events = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


def pending_lines(events) -> list[dict]:
    return [e for e in events if "still pending" in e.get("log_format", "")]


def test_expiring_answers_every_request_in_flight_with_the_error_once_and_names_each(logged):
    p, channel, apis, clock, _, conn = pool(2)
    never, busy = Deferred(), Deferred()
    send(channel, 1, remote=never, apis=apis)            # parked: its slot is free again
    send(channel, 2, local=busy, apis=apis)              # its handler still works on it
    send(channel, 3)                                     # answered at once
    assert [r.correlation_id for r in p.in_flight()] == [1, 2] and channel.outstanding == 2

    expired = p.expire_in_flight(ErrorCode.REQUEST_TIMED_OUT, "after the drain")
    assert [r.correlation_id for r in expired] == [1, 2] and p.in_flight() == [] and p.expired == 2
    assert conn.answered == [3, 1, 2] and channel.outstanding == 0 and channel.held_bytes == 0
    assert [bytes(a.chunks[0]) for a in conn.answers[1:]] == [b"REQUEST_TIMED_OUT: after the drain"] * 2
    lines = pending_lines(logged)
    assert [(e["api"], e["version"], e["correlation_id"], e["client_id"], e["peer"], e["listener"], e["error"])
            for e in lines] == [("Metadata", 1, n, "unit", "127.0.0.1:40000", "PLAINTEXT", "REQUEST_TIMED_OUT")
                                for n in (1, 2)]
    assert all(e["age"] >= 0 for e in lines)
    # the handlers finish late (or never): their answers go nowhere, and nothing is answered twice
    busy.callback(None)
    never.callback(None)
    assert apis.finished == [3, 2, 1] and conn.answered == [3, 1, 2] and channel.outstanding == 0
    stopped = []
    p.stopService().addCallback(stopped.append)
    assert stopped, "nothing is left to wait for"


def test_stop_waits_at_most_its_timeout_then_expires_what_still_runs(logged):
    p, channel, apis, clock, _, conn = pool(1)
    finishing, never = Deferred(), Deferred()
    send(channel, 1, remote=finishing, apis=apis)
    send(channel, 2, remote=never, apis=apis)
    stopped = []
    p.stopService().addCallback(stopped.append)
    finishing.callback(None)
    clock.advance(STOP_TIMEOUT_SECONDS - 0.001)
    assert not stopped and conn.answered == [1]
    clock.advance(0.001)
    assert stopped and conn.answered == [1, 2] and channel.outstanding == 0
    [line] = pending_lines(logged)
    assert line["correlation_id"] == 2 and line["error"] == "REQUEST_TIMED_OUT"


def test_stopping_cancels_idle_handlers_quietly():
    p, channel, apis, clock, _, conn = pool(3)
    stopped = []
    p.stopService().addCallback(stopped.append)
    assert stopped and not p._takers
    send(channel, 1)
    assert apis.started == [] and channel.queue_size == 1

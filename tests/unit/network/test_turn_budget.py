"""The data plane's handler pool works in budgeted slices (``TurnBudget``), the control plane's at once.

``reactor_turn`` runs what is due on the fake reactor without what that
schedules for the same instant, as a real reactor polls in between.

Queueing a data-plane request only schedules a slice on the reactor; a slice
handles queued requests until its budget (requests, or seconds of work) is
spent and hands the reactor back, so the sockets -- the control plane's
among them -- are polled between two slices.
"""

from __future__ import annotations

import socket
import sys

import pytest
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock

from twisted_kafka.metrics import MetricName, MetricsRegistry
from twisted_kafka.network.request import NoOpResponse
from twisted_kafka.network.request_channel import RequestChannel
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.server.handlers.api_versions import ApiVersionsHandler
from twisted_kafka.server.request_handler import DATA_PLANE_TURN_BUDGET, KafkaRequestHandlerPool, TurnBudget

from .helpers import FakeTransport, Stack, decode, reactor_turn, split_frames
from .test_processor import api_versions
from .test_request_handler import Apis, Connection, make_request, send

GENEROUS = TurnBudget(seconds=3600.0, requests=1_000_000)


class FakeTimer:
    """The slices' clock, advanced by the handlers the test runs."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def budgeted_pool(num_handlers=1, budget=GENEROUS, timer=None):
    clock = Clock()
    channel = RequestChannel(plane="data", max_queued_requests=1000)
    connection = Connection()
    channel.register_connection(connection)
    apis = Apis()
    metrics = MetricsRegistry(clock=clock.seconds)
    kwargs = {"timer": timer} if timer is not None else {}
    p = KafkaRequestHandlerPool(channel=channel, apis=apis, num_handlers=num_handlers, reactor=clock,
                                metrics=metrics, turn_budget=budget, **kwargs)
    p.startService()
    return p, channel, apis, clock, metrics, connection


def test_the_data_planes_budget_is_short():
    assert DATA_PLANE_TURN_BUDGET.seconds <= 0.002 and DATA_PLANE_TURN_BUDGET.requests >= 1


def test_a_queued_request_is_handled_in_the_next_slice_not_when_queued():
    p, channel, apis, clock, _, conn = budgeted_pool()
    for n in range(3):
        send(channel, n)
    assert apis.started == [] and channel.queue_size == 3
    assert len(clock.getDelayedCalls()) == 2, "one slice scheduled (beside the idle sampler)"
    reactor_turn(clock)
    assert apis.started == [0, 1, 2] and conn.answered == [0, 1, 2] and p.slices == 1
    assert channel.outstanding == 0


def test_a_slice_stops_after_its_requests_and_schedules_the_next():
    p, channel, apis, clock, _, conn = budgeted_pool(budget=TurnBudget(seconds=3600.0, requests=2))
    for n in range(5):
        send(channel, n)
    reactor_turn(clock)
    assert apis.started == [0, 1]
    reactor_turn(clock)
    assert apis.started == [0, 1, 2, 3]
    reactor_turn(clock)
    assert apis.started == [0, 1, 2, 3, 4] and p.slices == 3
    reactor_turn(clock)
    assert p.slices == 3, "nothing queued: no slice scheduled"


def test_a_slice_stops_once_its_time_is_spent():
    timer = FakeTimer()
    p, channel, apis, clock, _, conn = budgeted_pool(budget=TurnBudget(seconds=0.001, requests=100), timer=timer)
    handle = apis.handle

    async def takes_600_microseconds(request):
        timer.now += 0.0006
        return await handle(request)

    apis.handle = takes_600_microseconds
    for n in range(5):
        send(channel, n)
    reactor_turn(clock)
    assert apis.started == [0, 1], "the second request took the slice past its millisecond"
    reactor_turn(clock)
    assert apis.started == [0, 1, 2, 3]


def test_one_slow_request_is_a_whole_slice():
    timer = FakeTimer()
    p, channel, apis, clock, _, conn = budgeted_pool(budget=TurnBudget(seconds=0.001, requests=100), timer=timer)
    handle = apis.handle

    async def slow(request):
        timer.now += 0.005
        return await handle(request)

    apis.handle = slow
    for n in range(3):
        send(channel, n)
    for expected in ([0], [0, 1], [0, 1, 2]):
        reactor_turn(clock)
        assert apis.started == expected


def test_the_control_plane_is_handled_at_once_between_data_plane_slices():
    p, data, apis, clock, metrics, conn = budgeted_pool(budget=TurnBudget(seconds=3600.0, requests=1))
    control = RequestChannel(plane="control", max_queued_requests=20)
    controller = Connection("conn-1")   # the same id on the other plane
    control.register_connection(controller)
    KafkaRequestHandlerPool(channel=control, apis=apis, num_handlers=1, reactor=clock, metrics=metrics,
                            metric_prefix="ControlPlane").startService()
    for n in range(3):
        send(data, n)
    reactor_turn(clock)
    assert apis.started == [0]
    request = make_request(100)
    control.send_request(request)
    assert apis.started == [0, 100] and len(controller.answers) == 1, "handled the moment it was read"
    reactor_turn(clock)
    reactor_turn(clock)
    assert apis.started == [0, 100, 1, 2]


def test_a_handler_freed_by_a_remote_completion_serves_in_the_next_slice():
    p, channel, apis, clock, _, conn = budgeted_pool(1)
    local = Deferred()
    send(channel, 1, local=local, apis=apis)
    send(channel, 2)
    reactor_turn(clock)
    assert apis.started == [1] and p.handling == 1 and channel.queue_size == 1
    local.callback(None)
    assert conn.answered == [1] and apis.started == [1], "not from inside the completion's callback"
    reactor_turn(clock)
    assert apis.started == [1, 2] and conn.answered == [1, 2]


def test_a_request_waiting_remotely_frees_its_handler_within_the_slice():
    p, channel, apis, clock, _, conn = budgeted_pool(1)
    remote = Deferred()
    send(channel, 1, remote=remote, apis=apis)
    send(channel, 2)
    send(channel, 3)
    reactor_turn(clock)
    assert apis.started == [1, 2, 3] and conn.answered == [2, 3] and p.slices == 1
    remote.callback(None)
    assert conn.answered == [2, 3, 1] and channel.outstanding == 0


def test_num_handlers_bounds_requests_worked_on_at_once():
    p, channel, apis, clock, _, conn = budgeted_pool(3)
    locals_ = [Deferred() for _ in range(5)]
    for n, d in enumerate(locals_):
        send(channel, n, local=d, apis=apis)
    reactor_turn(clock)
    assert apis.started == [0, 1, 2] and p.handling == 3 and channel.queue_size == 2
    reactor_turn(clock)
    assert apis.started == [0, 1, 2], "no handler free: no slice runs"
    locals_[1].callback(None)
    reactor_turn(clock)
    assert apis.started == [0, 1, 2, 3] and conn.answered == [1]


def test_stopping_cancels_the_pending_slice():
    p, channel, apis, clock, _, conn = budgeted_pool(2)
    send(channel, 1)
    stopped = []
    p.stopService().addCallback(stopped.append)
    assert stopped and not clock.getDelayedCalls()
    send(channel, 2)
    reactor_turn(clock)
    assert apis.started == [] and channel.queue_size == 2


def test_the_idle_gauge_counts_free_handlers_as_idle():
    p, channel, apis, clock, metrics, _ = budgeted_pool(2)
    gauge = metrics.get(MetricName("kafka.server", "KafkaRequestHandlerPool", "RequestHandlerAvgIdlePercent"))
    assert gauge.value == 1.0
    local = Deferred()
    send(channel, 1, local=local, apis=apis)
    reactor_turn(clock)
    clock.advance(1.0)                      # one of two handlers busy for the whole second
    assert gauge.value == pytest.approx(0.5)
    local.callback(None)
    clock.advance(1.0)
    assert gauge.value == pytest.approx(0.75)


def test_a_crash_is_answered_and_the_next_request_served():
    p, channel, apis, clock, _, conn = budgeted_pool(1)

    async def boom(request):
        if request.correlation_id == 1:
            raise RuntimeError("handler bug")
        return NoOpResponse(request)

    apis.handle = boom
    send(channel, 1)
    send(channel, 2)
    reactor_turn(clock)
    assert conn.answered == [1, 2] and p.handling == 0


def test_pipelined_requests_of_a_connection_keep_order_across_slices_with_a_flat_stack():
    """The Processor reads ahead, the slice answers a request and the connection queues its next one,
    which the same slice takes: more than the recursion limit of requests, in order, and the stack
    does not grow with them."""
    depths = []

    def depth() -> int:
        frame, n = sys._getframe(1), 0
        while frame is not None:
            frame, n = frame.f_back, n + 1
        return n

    class DepthRecordingApiVersions(ApiVersionsHandler):
        async def handle(self, request):
            depths.append(depth())
            return await super().handle(request)

    stack = Stack(handlers=[DepthRecordingApiVersions(lambda context: [ApiKey.API_VERSIONS])])
    pool = KafkaRequestHandlerPool(channel=stack.channel(), apis=stack.apis, num_handlers=1, reactor=stack.clock,
                                   metrics=stack.metrics, turn_budget=TurnBudget(seconds=3600.0, requests=100))
    pool.startService()
    p = stack.connect()
    count = sys.getrecursionlimit() * 2
    p.dataReceived(b"".join(api_versions(cid) for cid in range(count)))
    assert p.transport.value() == b"", "nothing is handled while the connection is being read"
    turns = 0
    while stack.channel().outstanding:
        reactor_turn(stack.clock)
        turns += 1
    assert turns == pool.slices == -(-count // 100)
    assert [decode(18, 0, f)[0] for f in split_frames(p.transport.value())] == list(range(count))
    assert max(depths) - min(depths) < 50, f"stack grew from {min(depths)} to {max(depths)} frames"
    pool.stopService()


# -- another plane first (yield_to) ----------------------------------------------------------

def pool_yielding_to(waiting, budget=GENEROUS, timer=None):
    clock = Clock()
    channel = RequestChannel(plane="data", max_queued_requests=100)
    conn = Connection()
    channel.register_connection(conn)
    apis = Apis()
    kwargs = {"timer": timer} if timer is not None else {}
    pool = KafkaRequestHandlerPool(channel=channel, apis=apis, num_handlers=1, reactor=clock,
                                   metrics=MetricsRegistry(clock=clock.seconds), turn_budget=budget,
                                   yield_to=waiting, **kwargs)
    pool.startService()
    return pool, channel, apis, clock


def test_a_slice_waits_one_turn_when_another_plane_waits_for_the_reactor():
    asks = []

    def control_plane_waiting() -> bool:
        asks.append(True)
        return len(asks) <= 2           # waiting twice, then not

    pool, channel, apis, clock = pool_yielding_to(control_plane_waiting)
    send(channel, 1)
    reactor_turn(clock)
    assert apis.started == [] and pool.slices == 0, "this turn is the other plane's"
    reactor_turn(clock)
    assert apis.started == [1], "never two turns in a row"
    send(channel, 2)
    reactor_turn(clock)
    assert apis.started == [1]
    reactor_turn(clock)
    assert apis.started == [1, 2]
    send(channel, 3)
    reactor_turn(clock)
    assert apis.started == [1, 2, 3], "nothing waits: no turn given away"


def test_a_slice_ends_early_when_another_plane_starts_waiting():
    timer = FakeTimer()
    waiting = []
    pool, channel, apis, clock = pool_yielding_to(lambda: bool(waiting), timer=timer,
                                                  budget=TurnBudget(seconds=0.001, requests=100))
    handle = apis.handle

    async def takes_100_microseconds(request):
        timer.now += 0.0001
        if request.correlation_id == 3:
            waiting.append(True)        # a control-plane request arrives while request 3 is handled
        return await handle(request)

    apis.handle = takes_100_microseconds
    for n in range(1, 9):
        send(channel, n)
    reactor_turn(clock)
    assert apis.started == [1, 2, 3, 4], "asked every 200 microseconds: after request 4"
    waiting.clear()
    reactor_turn(clock)
    assert apis.started == [1, 2, 3, 4, 5, 6, 7, 8]


def test_the_control_plane_waits_with_a_written_answer_once():
    stack = Stack()
    assert not stack.server.control_plane_waiting()
    p = stack.connect("CONTROLLER")
    p.dataReceived(api_versions(1))
    stack.serve("control")
    assert stack.server.control_plane_waiting()
    assert not stack.server.control_plane_waiting(), "until the next answer"
    d = stack.connect()
    d.dataReceived(api_versions(2))
    stack.serve()
    assert not stack.server.control_plane_waiting(), "data-plane answers do not count"


def test_without_a_control_plane_nothing_waits():
    stack = Stack({"listeners": "PLAINTEXT://127.0.0.1:9092", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
                   "control.plane.listener.name": ""})
    p = stack.connect()
    p.dataReceived(api_versions(1))
    stack.serve()
    assert not stack.server.control_plane_waiting()


class SocketTransport(FakeTransport):
    """A FakeTransport over one end of a real socket pair: it has a descriptor to poll."""

    def __init__(self, protocol, clock, peer):
        super().__init__(protocol, clock, peer)
        self.sock, self.peer_sock = socket.socketpair()

    def fileno(self) -> int:
        return self.sock.fileno()


def test_the_control_plane_waits_while_one_of_its_connections_has_bytes_to_read():
    stack = Stack()
    p = stack.connect("CONTROLLER", transport=SocketTransport)
    data = stack.connect(transport=SocketTransport)
    try:
        assert not stack.server.control_plane_waiting()
        data.transport.peer_sock.send(api_versions(1))
        assert not stack.server.control_plane_waiting(), "the data plane's sockets are not watched"
        p.transport.peer_sock.send(api_versions(1))
        assert stack.server.control_plane_waiting()
        p.transport.sock.recv(100)      # what the reactor does on its next poll
        assert not stack.server.control_plane_waiting()
        p.transport.peer_sock.send(api_versions(2))
        p._mute()
        assert not stack.server.control_plane_waiting(), "a muted connection's bytes wait for it, not the reactor"
        p._unmute()
        assert stack.server.control_plane_waiting()
        p.transport.client_closes()
        assert not stack.server.control_plane_waiting() and not len(stack.plane("control").readiness)
    finally:
        for transport in (p.transport, data.transport):
            transport.sock.close()
            transport.peer_sock.close()


# -- follow-ups: a connection's next request right after its answer --------------------------

def stack_with_budgeted_pool(budget=GENEROUS, **overrides):
    stack = Stack(**overrides)
    pool = KafkaRequestHandlerPool(channel=stack.channel(), apis=stack.apis, num_handlers=1, reactor=stack.clock,
                                   metrics=stack.metrics, turn_budget=budget)
    pool.startService()
    return stack, pool


def answered(p) -> list[int]:
    return [decode(18, 0, f)[0] for f in split_frames(p.transport.value())]


def test_a_pipelining_connection_has_its_requests_answered_together_in_one_slice():
    """Three requests of A are read, then one of B: A's second and third follow its first
    (their answers leave together on the next poll), then B's."""
    stack, pool = stack_with_budgeted_pool()
    a, b = stack.connect(), stack.connect()
    a.dataReceived(api_versions(1) + api_versions(2) + api_versions(3))
    b.dataReceived(api_versions(10))
    order = []
    handle = stack.apis.handle

    async def recording(request):
        order.append(request.correlation_id)
        return await handle(request)

    stack.apis.handle = recording
    reactor_turn(stack.clock)
    assert order == [1, 2, 3, 10] and pool.slices == 1
    assert answered(a) == [1, 2, 3] and answered(b) == [10]


def test_a_follow_up_is_taken_beyond_a_full_queue_without_growing_it():
    stack, pool = stack_with_budgeted_pool(queued_max_requests="1")
    a, b = stack.connect(), stack.connect()
    a.dataReceived(api_versions(1) + api_versions(2))
    b.dataReceived(api_versions(10))
    channel = stack.channel()
    assert channel.queue_size == 1 and channel.waiting_processors == 1
    reactor_turn(stack.clock)
    assert answered(a) == [1, 2] and answered(b) == [10]
    assert channel.peak_queue_size == 1, "the follow-up never sat in the queue"


def test_the_budget_ends_a_connections_run_and_its_next_request_queues_behind_the_others():
    stack, pool = stack_with_budgeted_pool(budget=TurnBudget(seconds=3600.0, requests=2))
    a, b = stack.connect(), stack.connect()
    a.dataReceived(b"".join(api_versions(cid) for cid in range(1, 6)))
    b.dataReceived(api_versions(10))
    reactor_turn(stack.clock)
    assert answered(a) == [1, 2] and answered(b) == []
    order = []
    handle = stack.apis.handle

    async def recording(request):
        order.append(request.correlation_id)
        return await handle(request)

    stack.apis.handle = recording
    reactor_turn(stack.clock)
    assert order == [10, 3], "A's third request queued behind B's"
    reactor_turn(stack.clock)
    assert order == [10, 3, 4, 5]
    assert answered(a) == [1, 2, 3, 4, 5] and answered(b) == [10]


def test_no_follow_up_outside_a_slice():
    """The control plane (handled at once) and requests answered later (a remote wait) queue
    their connection's next request as usual."""
    channel = RequestChannel(plane="data", max_queued_requests=1)
    channel.serve_follow_ups(lambda: True)
    channel.send_request(make_request(1))
    assert not channel.has_room(10, "conn-1"), "nobody is being served"
    channel.serving = "conn-1"
    assert channel.has_room(10, "conn-1") and not channel.has_room(10, "conn-2")
    channel.send_request(make_request(2))
    assert channel.queue_size == 1 and not channel.has_room(10, "conn-1"), "one follow-up at a time"
    assert channel.take_follow_up().correlation_id == 2 and channel.take_follow_up() is None
    channel.serve_follow_ups(lambda: False)
    assert not channel.has_room(10, "conn-1"), "the consumer's budget is spent"


def test_a_follow_up_left_over_goes_to_the_back_of_the_queue():
    channel = RequestChannel(plane="data", max_queued_requests=5)
    channel.serve_follow_ups(lambda: True)
    channel.send_request(make_request(1))
    channel.serving = "conn-1"
    channel.send_request(make_request(2))
    channel.serving = None
    channel.requeue_follow_up()
    assert [channel.poll_request().correlation_id for _ in range(2)] == [1, 2]

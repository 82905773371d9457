"""RequestChannel: bounds, backpressure, FIFO resume, handler takers
(queued.max.requests; KIP-72's queued.max.request.bytes)."""

from __future__ import annotations

import sys

import pytest
from twisted.internet.defer import CancelledError

from twisted_kafka.network.request_channel import RequestChannel


class FakeRequest:
    def __init__(self, n: int, size: int = 100):
        self.n = n
        self.size = size
        self.released = False
        self.dequeue_ns = 0


def taken(channel) -> list:
    out = []
    channel.receive_request().addCallback(out.append)
    return out


def test_queue_is_fifo_and_bounded_by_count():
    channel = RequestChannel(plane="data", max_queued_requests=3)
    for n in range(3):
        assert channel.has_room(100)
        channel.send_request(FakeRequest(n))
    assert not channel.has_room(100)
    assert channel.queue_size == 3 and channel.peak_queue_size == 3
    assert [taken(channel)[0].n for _ in range(3)] == [0, 1, 2]
    assert channel.queue_size == 0 and channel.total_requests == 3


def test_a_waiting_handler_gets_the_next_request_directly():
    channel = RequestChannel(plane="data", max_queued_requests=1)
    got = taken(channel)
    assert got == []
    channel.send_request(FakeRequest(7))
    assert [r.n for r in got] == [7]
    assert channel.queue_size == 0 and channel.peak_queue_size == 0
    assert got[0].dequeue_ns > 0


def test_cancelled_takers_are_skipped_and_shutdown_cancels_the_rest():
    channel = RequestChannel(plane="data", max_queued_requests=5)
    first = channel.receive_request()
    first.addErrback(lambda f: f.trap(CancelledError))
    first.cancel()
    second = []
    channel.receive_request().addCallback(second.append)
    channel.send_request(FakeRequest(1))
    assert [r.n for r in second] == [1]
    failures = []
    channel.receive_request().addErrback(failures.append)
    channel.cancel_takers()
    assert failures and failures[0].check(CancelledError)


def test_full_queue_resumes_waiters_in_fifo_order_one_per_free_slot():
    channel = RequestChannel(plane="data", max_queued_requests=2)
    channel.send_request(FakeRequest(0))
    channel.send_request(FakeRequest(1))
    resumed = []

    def waiter(name):
        def resume():
            resumed.append(name)
            channel.send_request(FakeRequest(name))  # a resumed processor queues its request at once
        return resume

    for name in ("a", "b", "c"):
        channel.wait_for_room(waiter(name), 100)
    assert channel.waiting_processors == 3
    taken(channel)
    assert resumed == ["a"]
    taken(channel)
    assert resumed == ["a", "b"]
    assert channel.queue_size == 2  # never above the bound
    taken(channel)
    assert resumed == ["a", "b", "c"] and channel.waiting_processors == 0


def test_forgotten_waiters_are_not_resumed():
    channel = RequestChannel(plane="data", max_queued_requests=1)
    channel.send_request(FakeRequest(0))
    resumed = []
    a, b = (lambda: resumed.append("a")), (lambda: resumed.append("b"))
    channel.wait_for_room(a, 10)
    channel.wait_for_room(b, 10)
    channel.forget_waiter(a)
    taken(channel)
    assert resumed == ["b"]


def test_bytes_bound_counts_requests_until_released():
    channel = RequestChannel(plane="data", max_queued_requests=100, max_queued_bytes=250)
    first, second = FakeRequest(0, 100), FakeRequest(1, 100)
    channel.send_request(first)
    channel.send_request(second)
    assert channel.has_room(50) and not channel.has_room(51)
    taken(channel)
    assert not channel.has_room(51), "bytes count while a handler works on the request (KIP-72)"
    channel.release(first)
    channel.release(first)  # idempotent
    assert channel.held_bytes == 100 and channel.has_room(150)


def test_a_request_larger_than_the_byte_budget_is_admitted_when_nothing_is_held():
    channel = RequestChannel(plane="data", max_queued_requests=10, max_queued_bytes=100)
    assert channel.has_room(10_000)
    channel.send_request(FakeRequest(0, 10_000))
    assert not channel.has_room(1)


def test_bytes_bound_waiter_that_does_not_fit_yet_is_not_spun():
    """A waiter whose request still does not fit must not be resumed (it used to be
    resumed, re-register and be resumed again forever)."""
    channel = RequestChannel(plane="data", max_queued_requests=100, max_queued_bytes=300)
    held = [FakeRequest(n, 100) for n in range(3)]
    for request in held:
        channel.send_request(request)
    resumed = []

    def big():
        resumed.append("big")
        if not channel.has_room(250):
            channel.wait_for_room(big, 250)
        else:
            channel.send_request(FakeRequest(9, 250))

    def small():
        resumed.append("small")
        channel.send_request(FakeRequest(10, 10))

    channel.wait_for_room(big, 250)
    channel.wait_for_room(small, 10)
    taken(channel)
    channel.release(held[0])      # 200 held: 250 does not fit, and 'small' waits behind 'big' (FIFO)
    assert resumed == []
    channel.release(held[1])      # 100 held: still no room for 250
    assert resumed == []
    channel.release(held[2])      # nothing held: big fits, then small
    assert resumed == ["big", "small"]
    assert channel.held_bytes == 260


def test_waking_many_waiters_whose_requests_complete_synchronously_keeps_the_stack_flat():
    """A resumed request can reach a waiting handler that answers it at once and
    releases it, which wakes the next waiter: that must not recurse per waiter."""
    channel = RequestChannel(plane="data", max_queued_requests=1000, max_queued_bytes=100)
    blocker = FakeRequest(-1, 100)
    channel.send_request(blocker)
    taken(channel)
    depth = []
    served = []

    def handler_loop():
        def serve(request):
            served.append(request.n)
            depth.append(len(_stack()))
            channel.release(request)   # handled synchronously
            handler_loop()
        channel.receive_request().addCallback(serve)

    def waiter(n):
        return lambda: channel.send_request(FakeRequest(n, 100))

    handler_loop()
    count = sys.getrecursionlimit() * 2
    for n in range(count):
        channel.wait_for_room(waiter(n), 100)
    channel.release(blocker)
    assert served == list(range(count))
    assert max(depth) - min(depth) < 50


def _stack():
    frame, frames = sys._getframe(), []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def test_max_queued_requests_must_be_positive():
    with pytest.raises(ValueError):
        RequestChannel(plane="data", max_queued_requests=0)

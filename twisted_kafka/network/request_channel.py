"""RequestChannel: the bounded queue between a plane's processors and its handlers.

As in Kafka, each plane has its own channel, so a data plane drowning in
Produce requests cannot delay a LeaderAndIsr waiting on the control plane.
The bound is what turns overload into backpressure rather than memory growth:
when the queue holds ``queued.max.requests`` requests (or the requests held
reach ``queued.max.request.bytes``), processors of this plane stop reading
their sockets and wait here until a handler takes a request.  Nothing is ever
dropped; a waiting processor resumes in the order it started waiting.

Byte accounting follows KIP-72's memory pool: a request's bytes count from
the moment it is queued until its handler has finished with it (not just
while it sits in the queue), because that is how long its buffer is alive.
A request larger than the whole byte budget is still admitted when nothing
else is held, or it could never be served.

Answers come back through ``send_response`` (Kafka's
``RequestChannel.sendResponse``): it releases the request's byte budget and
hands the response to the connection the request came from, found by its
connection id -- a response to a connection that has closed meanwhile is
dropped.  Nothing outside the network layer ever holds a connection.
"""

from __future__ import annotations

from collections import deque
from time import perf_counter_ns
from collections.abc import Callable
from typing import TYPE_CHECKING

from twisted.internet.defer import CancelledError, Deferred, succeed

from .request import Request, Response

if TYPE_CHECKING:
    from .processor import Processor
import contextlib


class RequestChannel:
    """Bounded FIFO of requests, with Deferred-based takers and FIFO-resumed producers."""

    def __init__(self, *, plane: str, max_queued_requests: int, max_queued_bytes: int = -1):
        if max_queued_requests < 1:
            raise ValueError("max_queued_requests must be at least 1")
        self.plane = plane
        self.max_queued_requests = max_queued_requests
        self.max_queued_bytes = max_queued_bytes
        self._queue: deque[Request] = deque()
        self._takers: deque[Deferred] = deque()
        self._room_waiters: deque[tuple[Callable[[], None], int]] = deque()
        self._waking = False
        self._wake_again = False
        self.held_bytes = 0
        self.peak_queue_size = 0
        self.total_requests = 0
        self._connections: dict[str, Processor] = {}   # connection id -> Processor
        self.outstanding = 0                          # requests queued or being handled, not yet answered
        self._idle_waiters: list[Deferred] = []

    # -- connections --------------------------------------------------------------------

    def register_connection(self, processor: Processor) -> None:
        """An admitted connection of this plane: responses to its requests reach it from now on."""
        self._connections[processor.connection_id] = processor

    def unregister_connection(self, processor: Processor) -> None:
        self._connections.pop(processor.connection_id, None)

    def send_response(self, response: Response) -> None:
        """Release the request's budget and hand ``response`` to its connection (if still open)."""
        request = response.request
        self.release(request)
        processor = self._connections.get(request.context.connection_id)
        if processor is not None:
            processor.send(response)
        if not self.outstanding and self._idle_waiters:
            waiters, self._idle_waiters = self._idle_waiters, []
            for waiter in waiters:
                waiter.callback(None)

    def when_idle(self) -> Deferred:
        """Fires once every request handed to this channel has been answered (shutdown's drain)."""
        if not self.outstanding:
            return succeed(None)
        waiter: Deferred = Deferred()
        self._idle_waiters.append(waiter)
        return waiter

    # -- producer side (processors) -------------------------------------------------

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    @property
    def waiting_processors(self) -> int:
        """Processors of this plane paused until the channel has room."""
        return len(self._room_waiters)

    def has_room(self, size: int) -> bool:
        """Whether a request of ``size`` bytes may be queued now without exceeding a bound."""
        if len(self._queue) >= self.max_queued_requests:
            return False
        return not (self.max_queued_bytes >= 0 and self.held_bytes and self.held_bytes + size > self.max_queued_bytes)

    def wait_for_room(self, resume: Callable[[], None], size: int = 0) -> None:
        """Register a processor that found no room for a request of ``size`` bytes.

        ``resume`` is called once there is room for that request.  Waiters
        resume in the order they started waiting: one whose request does not
        fit yet (``queued.max.request.bytes``) holds back those behind it.
        """
        self._room_waiters.append((resume, size))

    def forget_waiter(self, resume: Callable[[], None]) -> None:
        for entry in self._room_waiters:
            if entry[0] == resume:
                self._room_waiters.remove(entry)
                return

    def send_request(self, request: Request) -> None:
        """Queue a request (the caller checked ``has_room``) or hand it to a waiting handler."""
        self.held_bytes += request.size
        self.total_requests += 1
        self.outstanding += 1
        while self._takers:
            taker = self._takers.popleft()
            if not taker.called:
                request.dequeue_ns = perf_counter_ns()
                taker.callback(request)
                return
        self._queue.append(request)
        if len(self._queue) > self.peak_queue_size:
            self.peak_queue_size = len(self._queue)

    # -- consumer side (handlers) --------------------------------------------------

    def poll_request(self) -> Request | None:
        """The next queued request, or None when the queue is empty (never waits)."""
        if not self._queue:
            return None
        request = self._queue.popleft()
        request.dequeue_ns = perf_counter_ns()
        self._wake_waiters()
        return request

    def receive_request(self) -> Deferred:
        """A Deferred firing with the next request; handlers wait on it without blocking."""
        if self._queue:
            return succeed(self.poll_request())
        taker: Deferred = Deferred(lambda d: self._cancel_taker(d))
        self._takers.append(taker)
        return taker

    def _cancel_taker(self, taker: Deferred) -> None:
        with contextlib.suppress(ValueError):
            self._takers.remove(taker)

    def release(self, request: Request) -> None:
        """The handler is done with ``request``: its bytes no longer count against the budget."""
        if not request.released:
            request.released = True
            self.held_bytes -= request.size
            self.outstanding -= 1
            self._wake_waiters()

    def _wake_waiters(self) -> None:
        # Resume processors one at a time while the first waiter's request
        # fits: each resumed processor may queue its request synchronously and
        # use the room up.  A resumed request can reach a waiting handler and
        # complete synchronously, calling back here: the nested call only asks
        # the running loop for another look, so the stack stays flat however
        # many processors wait.
        if self._waking:
            self._wake_again = True
            return
        self._waking = True
        try:
            self._wake_again = True
            while self._wake_again:
                self._wake_again = False
                while self._room_waiters and self.has_room(self._room_waiters[0][1]):
                    resume, _ = self._room_waiters.popleft()
                    resume()
        finally:
            self._waking = False

    def cancel_takers(self) -> None:
        """Shutdown: handlers waiting for a request stop waiting."""
        takers, self._takers = self._takers, deque()
        for taker in takers:
            if not taker.called:
                taker.errback(CancelledError("request channel shut down"))

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

Handlers take requests in one of two ways: waiting on ``receive_request``'s
Deferred, which a request fires the moment it is queued (the control plane:
handled as soon as it is read), or polling the queue when told that a request
was queued (``notify_when_queued``: the data plane, handled in budgeted
slices between which the reactor polls its sockets).

A polling consumer may also take a connection's next request straight after
answering the previous one (``serve_follow_ups``): while it serves a request
(``serving``), the next request of that connection -- read already, and
handed out by the connection as soon as the answer is written -- is kept
aside as the *follow-up* rather than queued behind the others, as long as
the consumer's budget allows.  A pipelining client then has its requests
answered together and its answers leave in one write, as when every request
was handled the moment it was read; each connection still has one request in
flight at a time, and the budget bounds how long one connection is served
before the others.

Answers come back through ``send_response`` (Kafka's
``RequestChannel.sendResponse``): it releases the request's byte budget and
hands the response to the connection the request came from, found by its
connection id -- a response to a connection that has closed meanwhile is
dropped.  Nothing outside the network layer ever holds a connection.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from time import perf_counter_ns
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
        self._queued_listener: Callable[[], None] | None = None
        self.serving: str | None = None                 # connection id whose request a consumer is serving
        self._follow_up: Request | None = None
        self._may_follow: Callable[[], bool] | None = None

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

    def has_room(self, size: int, connection_id: str | None = None) -> bool:
        """Whether a request of ``size`` bytes may be queued now without exceeding a bound
        (or, from ``connection_id``, be taken at once as the follow-up of the one being served)."""
        if self.max_queued_bytes >= 0 and self.held_bytes and self.held_bytes + size > self.max_queued_bytes:
            return False
        if len(self._queue) < self.max_queued_requests:
            return True
        return connection_id is not None and self._takes_follow_up(connection_id)

    def _takes_follow_up(self, connection_id: str) -> bool:
        return (connection_id == self.serving and self._follow_up is None and self._may_follow is not None
                and self._may_follow())

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

    def notify_when_queued(self, listener: Callable[[], None] | None) -> None:
        """Call ``listener`` whenever a request is queued (rather than handed to a waiting taker).

        For a consumer that polls (``poll_request``) instead of waiting on
        ``receive_request``: the data plane's handler pool, which handles
        requests in slices scheduled on the reactor.
        """
        self._queued_listener = listener

    def serve_follow_ups(self, may_follow: Callable[[], bool] | None) -> None:
        """Keep the next request of the connection named by ``serving`` aside as its follow-up
        whenever ``may_follow()`` says the consumer will take it next (see the module docstring);
        None: never."""
        self._may_follow = may_follow

    def take_follow_up(self) -> Request | None:
        """The follow-up kept aside while serving the last request, if any."""
        request = self._follow_up
        if request is not None:
            self._follow_up = None
            request.dequeue_ns = perf_counter_ns()
        return request

    def requeue_follow_up(self) -> None:
        """A follow-up the consumer did not take after all goes to the back of the queue."""
        request, self._follow_up = self._follow_up, None
        if request is not None:
            self._queue.append(request)
            if len(self._queue) > self.peak_queue_size:
                self.peak_queue_size = len(self._queue)

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
        if (self.serving is not None and request.context.connection_id == self.serving and self._follow_up is None
                and (len(self._queue) >= self.max_queued_requests or self._takes_follow_up(self.serving))):
            # A full queue means has_room() let this request in as the follow-up: no second look.
            self._follow_up = request
            return
        self._queue.append(request)
        if len(self._queue) > self.peak_queue_size:
            self.peak_queue_size = len(self._queue)
        if self._queued_listener is not None:
            self._queued_listener()

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

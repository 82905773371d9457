"""KafkaRequestHandlerPool: the handlers that take requests off a plane's channel.

Kafka runs ``num.io.threads`` OS threads per broker (one for the control
plane), each looping ``receiveRequest`` → ``KafkaApis.handle``.  Here each
handler is a slot on the reactor: it takes a request from the channel (or
waits for one on the channel's Deferred), then runs the API handler until
that handler either finishes or starts waiting remotely
(``Request.mark_local_complete``: a long-poll fetch, an fsync in the thread
pool, a rebalance).  At that point the slot is free for the next request
while the waiting one completes on its own — Kafka's purgatory — so
``num.io.threads`` bounds the requests being *worked on* at once, exactly its
meaning in Kafka, and waiting never blocks the reactor.

The answer ``KafkaApis`` returns goes to this pool's own plane's
``RequestChannel.send_response``, so the control plane's pool never answers
through the data plane's channel or the other way round.

Most requests (ApiVersions, Metadata, a Produce whose append is buffered)
complete without ever waiting.  The slot loop is therefore written with
plain callbacks rather than a coroutine per handler: a request that
completes synchronously costs one Deferred (the handler's own), and the slot
goes straight on to the next queued request.

A pool takes requests in one of two ways (KIP-291's point is the second):

* **at once** (the control plane): a free handler waits on the channel's
  Deferred, so a request is handled the moment its connection reads it,
  inside that reactor turn's I/O;
* **in budgeted slices** (the data plane, ``turn_budget``): queueing a
  request only schedules a slice (``reactor.callLater(0, ...)``); a slice
  handles queued requests until its ``TurnBudget`` -- at most ``requests``
  of them, or ``seconds`` of work -- is spent, then schedules the next and
  returns to the reactor.  Between two slices the reactor polls its sockets,
  so a control-plane request waits for at most one slice of data-plane work
  however flooded the data plane is; reading data-plane sockets costs little
  (it buffers bytes and queues at most one request per connection).  Within
  a slice, a connection whose request was just answered has its next
  request, if already read, taken next (the channel's follow-up), so a
  pipelining client's requests are answered together and its answers leave
  in one write rather than one per reactor turn.  ``yield_to`` lets another
  plane go first (the control plane: ``SocketServer.control_plane_waiting``):
  asked before a slice, a yes makes the slice wait one turn (never two in a
  row), so the reactor's next poll reads the control plane's request or
  writes its answer out first; asked every ``YIELD_CHECK_SECONDS`` of a
  slice, a yes ends the slice there.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from contextvars import copy_context
from dataclasses import dataclass
from time import perf_counter, perf_counter_ns

from twisted.application.service import Service
from twisted.internet.defer import CancelledError, Deferred, DeferredList, succeed
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.metrics import MetricName, MetricsRegistry
from twisted_kafka.metrics.idle import IdleRatio
from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.network.request import CloseConnectionResponse, Request
from twisted_kafka.network.request_channel import RequestChannel
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.waiting import fired_within


@dataclass(frozen=True)
class TurnBudget:
    """How much data-plane handling one slice -- one reactor turn -- may do."""

    seconds: float          # stop once this much time has gone into the slice (checked after each request)
    requests: int           # ... or after this many requests


#: The data plane's budget.  Measured with ``bench/planes.py`` (docs/architecture.md, "Planes").
DATA_PLANE_TURN_BUDGET = TurnBudget(seconds=0.001, requests=256)
#: How often a slice asks ``yield_to`` whether another plane waits (one poll system call).
YIELD_CHECK_SECONDS = 0.0002
#: How long ``stopService`` waits for requests still running before it expires them.  The broker's
#: drain has waited (and expired what was left) before the pools stop, so this only bounds a pool
#: stopped on its own.
STOP_TIMEOUT_SECONDS = 5.0


class _Slot:
    """One request's hold on a handler slot; released once, when the handler
    finishes or starts waiting remotely, whichever comes first."""

    __slots__ = ("pool", "handler_id", "released", "handled")

    def __init__(self, pool: KafkaRequestHandlerPool, handler_id: int):
        self.pool = pool
        self.handler_id = handler_id
        self.released = False
        self.handled: Deferred | None = None    # set once the synchronous part has returned

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        pool = self.pool
        pool.handling -= 1
        handled = self.handled
        if handled is not None:
            # Freed after _serve returned: the handler goes on with the next request.
            if not handled.called and handled in pool._unfinished:
                pool._waiting.add(handled)
            pool._next(self.handler_id)


class KafkaRequestHandlerPool(Service):
    log = Logger(namespace="twisted_kafka.server.KafkaRequestHandlerPool")

    def __init__(self, *, channel: RequestChannel, apis, num_handlers: int, reactor,
                 metrics: MetricsRegistry, metric_prefix: str = "", turn_budget: TurnBudget | None = None,
                 yield_to: Callable[[], bool] | None = None, timer=perf_counter):
        self.channel = channel
        self.turn_budget = turn_budget
        self._yield_to = yield_to
        self._yielded = False
        self._next_check = 0.0
        self._timer = timer             # the slices' clock (seconds)
        self._free: deque[int] = deque()   # budgeted: handlers free for the next slice
        self._slice_call = None
        self._in_slice = False
        self._deadline = 0.0            # the running slice's budget
        self._remaining = 0
        self.slices = 0                 # budgeted: slices run so far
        self.apis = apis
        self.num_handlers = num_handlers
        self.reactor = reactor
        self.metric_prefix = metric_prefix
        self.idle = IdleRatio(num_handlers, reactor.seconds)
        self.handling = 0               # requests holding a handler slot
        self._takers: dict[int, Deferred] = {}
        self._unfinished: dict[Deferred, Request] = {}   # handlers that have not completed yet
        self._waiting: set[Deferred] = set()      # ... of which: handed off to remote waits
        self.expired = 0                          # requests answered by expire_in_flight
        self._sampler = LoopingCall(self.idle.sample)
        self._sampler.clock = reactor
        metrics.gauge(MetricName("kafka.server", "KafkaRequestHandlerPool",
                                 f"{metric_prefix}RequestHandlerAvgIdlePercent"), lambda: self.idle.value)

    def startService(self) -> None:
        super().startService()
        self._sampler.start(1.0, now=False)
        if self.turn_budget is not None:
            self.channel.notify_when_queued(self._schedule)
            self.channel.serve_follow_ups(self._within_budget)
        for handler_id in range(self.num_handlers):
            self._next(handler_id)

    # -- the handler loop -----------------------------------------------------------

    def _next(self, handler_id: int) -> None:
        """Handler ``handler_id`` is free: serve queued requests until one keeps it busy,
        then (queue empty) wait for the next request.  Budgeted: it joins the free handlers
        of the next slice."""
        if self.turn_budget is not None:
            if self.running:
                self._free.append(handler_id)
                self.idle.begin(handler_id)
                self._schedule()
            return
        while self.running:
            request = self.channel.poll_request()
            if request is None:
                self.idle.begin(handler_id)
                taker = self.channel.receive_request()
                self._takers[handler_id] = taker
                taker.addCallbacks(self._arrived, self._stopped_waiting,
                                   callbackArgs=(handler_id,), errbackArgs=(handler_id,))
                return
            if not self._serve(handler_id, request):
                return

    # -- budgeted slices (the data plane) -----------------------------------------------

    def _schedule(self) -> None:
        """A request was queued or a handler freed: make sure a slice will run."""
        if (self._slice_call is None and not self._in_slice and self._free and self.running
                and self.channel.queue_size):
            self._slice_call = self.reactor.callLater(0, self._slice)

    def _slice(self) -> None:
        """Handle queued requests until the turn's budget is spent, then give the reactor back."""
        self._slice_call = None
        if self._yield_to is not None and not self._yielded and self._yield_to():
            self._yielded = True
            self._slice_call = self.reactor.callLater(0, self._slice)
            return
        self._yielded = False
        budget = self.turn_budget
        assert budget is not None
        channel, free, timer = self.channel, self._free, self._timer
        now = timer()
        self._deadline = now + budget.seconds
        self._next_check = now + YIELD_CHECK_SECONDS
        self._remaining = budget.requests
        handler_id: int | None = None
        self._in_slice = True
        self.slices += 1
        try:
            while self.running:
                if handler_id is None:
                    if not free:
                        break
                    handler_id = free.popleft()
                    self.idle.end(handler_id)
                # The follow-up was allowed by the budget when the connection read it.
                request = channel.take_follow_up()
                if request is None:
                    if not self._within_budget():
                        break
                    request = channel.poll_request()
                    if request is None:
                        break
                self._remaining -= 1
                channel.serving = request.context.connection_id
                if not self._serve(handler_id, request):
                    handler_id = None       # busy: its slot comes back through _next
                channel.serving = None
        finally:
            self._in_slice = False
            channel.serving = None
            channel.requeue_follow_up()
            if handler_id is not None:
                free.appendleft(handler_id)
                self.idle.begin(handler_id)
        self._schedule()

    def _within_budget(self) -> bool:
        """Whether the running slice may take one more request (from the queue or a follow-up)."""
        if not self._in_slice or self._remaining <= 0:
            return False
        now = self._timer()
        if now >= self._deadline:
            return False
        if self._yield_to is not None and now >= self._next_check:
            self._next_check = now + YIELD_CHECK_SECONDS
            if self._yield_to():
                self._deadline = now        # another plane waits: the slice ends here
                return False
        return True

    # -- at once (the control plane) ------------------------------------------------------

    def _arrived(self, request, handler_id: int) -> None:
        self._takers.pop(handler_id, None)
        self.idle.end(handler_id)
        if self._serve(handler_id, request):
            self._next(handler_id)

    def _stopped_waiting(self, failure: Failure, handler_id: int) -> None:
        self._takers.pop(handler_id, None)
        self.idle.end(handler_id)
        failure.trap(CancelledError)

    def _serve(self, handler_id: int, request) -> bool:
        """Run one request; True when the handler slot is free again on return."""
        self.handling += 1
        slot = _Slot(self, handler_id)
        request.on_local_complete = slot.release
        # Run the handler's synchronous part directly; only a handler that
        # actually waits gets the Deferred machinery (the coroutine is then
        # suspended inside ``await some_deferred``, and Deferred.fromCoroutine
        # resumes it there).  Like ensureDeferred, it runs in a copy of the
        # current contextvars context.
        coroutine = self.apis.handle(request)
        context = copy_context()
        try:
            context.run(coroutine.send, None)
        except StopIteration as done:
            self.channel.send_response(done.value)   # finished without waiting: the common case
            slot.release()
            return True
        except BaseException:
            self._crashed(Failure(), request)
            slot.release()
            return True
        handled = Deferred.fromCoroutine(coroutine)
        handled.addCallback(self._respond)
        if handled.called:
            if isinstance(handled.result, Failure):
                handled.addErrback(self._crashed, request)
            slot.release()
            return True
        self._unfinished[handled] = request
        handled.addBoth(self._finished, handled, slot, request)
        if slot.released:           # it started waiting remotely before returning
            self._waiting.add(handled)
            return True
        slot.handled = handled
        return False

    def _respond(self, response) -> None:
        if response.request.released:
            return      # answered already: it was expired, and this late answer has no one to go to
        self.channel.send_response(response)

    def _finished(self, result, handled: Deferred, slot: _Slot, request):
        self._unfinished.pop(handled, None)
        self._waiting.discard(handled)
        if isinstance(result, Failure):
            self._crashed(result, request)
        slot.release()
        return None

    def _crashed(self, failure, request) -> None:
        # KafkaApis answers every failure itself; this is the last line of defence:
        # the connection would otherwise wait for this answer forever.
        self.log.failure("Handler crashed on {request}", failure, request=request)
        if not request.released:
            self.channel.send_response(CloseConnectionResponse(request, CloseReason.PROTOCOL_ERROR,
                                                               "internal error while handling the request",
                                                               graceful=False))

    # -- requests that must not outlive the broker ------------------------------------------

    def in_flight(self) -> list[Request]:
        """Requests whose handlers have started and not finished (working or waiting), oldest first."""
        return sorted(self._unfinished.values(), key=lambda request: request.start_ns)

    def expire_in_flight(self, error: ErrorCode, why: str) -> list[Request]:
        """Answer every request in flight with ``error`` now, one log line each; the requests expired.

        A handler expired here is forgotten: it may still finish (its answer is
        then dropped) or wait forever on something that will never fire, and
        nothing in the broker waits for it any more.
        """
        expired = self.in_flight()
        self._unfinished.clear()
        self._waiting.clear()
        now_ns = perf_counter_ns()
        for request in expired:
            context = request.context
            self.log.warn("{plane} plane request still pending {why}: {api} v{version} correlation id "
                          "{correlation_id} from client id {client_id!r} at {peer} on {listener}, "
                          "{age:.1f}s old; answered {error}", plane=context.plane, why=why, api=request.spec.name,
                          version=request.api_version, correlation_id=request.correlation_id,
                          client_id=request.client_id, peer=context.client_address, listener=context.listener_name,
                          age=(now_ns - request.start_ns) / 1e9, error=error.name)
            if not request.released:
                self.channel.send_response(self.apis.error_answer(request, error, why))
            self.expired += 1
        return expired

    def stopService(self):
        """Stop taking requests; the Deferred fires when every started request has finished, or once
        ``STOP_TIMEOUT_SECONDS`` have passed and those still running have been expired."""
        super().stopService()
        if self._sampler.running:
            self._sampler.stop()
        if self.turn_budget is not None:
            self.channel.notify_when_queued(None)
            self.channel.serve_follow_ups(None)
            if self._slice_call is not None and self._slice_call.active():
                self._slice_call.cancel()
            self._slice_call = None
        self.channel.cancel_takers()
        if not self._unfinished:
            return succeed(None)
        finished = fired_within(self.reactor, DeferredList(list(self._unfinished)), STOP_TIMEOUT_SECONDS)
        finished.addCallback(self._expire_at_stop)
        return finished

    def _expire_at_stop(self, all_finished: bool) -> None:
        if self._unfinished:
            self.expire_in_flight(ErrorCode.REQUEST_TIMED_OUT,
                                  f"when its handlers stopped ({STOP_TIMEOUT_SECONDS:g}s later)")

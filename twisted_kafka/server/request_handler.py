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
"""

from __future__ import annotations

from contextvars import copy_context

from twisted.application.service import Service
from twisted.internet.defer import CancelledError, Deferred, DeferredList
from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.metrics import MetricName, MetricsRegistry
from twisted_kafka.metrics.idle import IdleRatio
from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.network.request import CloseConnectionResponse
from twisted_kafka.network.request_channel import RequestChannel


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
            if not handled.called:
                pool._waiting.add(handled)
            pool._next(self.handler_id)


class KafkaRequestHandlerPool(Service):
    log = Logger(namespace="twisted_kafka.server.KafkaRequestHandlerPool")

    def __init__(self, *, channel: RequestChannel, apis, num_handlers: int, reactor,
                 metrics: MetricsRegistry, metric_prefix: str = ""):
        self.channel = channel
        self.apis = apis
        self.num_handlers = num_handlers
        self.reactor = reactor
        self.metric_prefix = metric_prefix
        self.idle = IdleRatio(num_handlers, reactor.seconds)
        self.handling = 0               # requests holding a handler slot
        self._takers: dict[int, Deferred] = {}
        self._unfinished: set[Deferred] = set()   # handlers that have not completed yet
        self._waiting: set[Deferred] = set()      # ... of which: handed off to remote waits
        self._sampler = LoopingCall(self.idle.sample)
        self._sampler.clock = reactor
        metrics.gauge(MetricName("kafka.server", "KafkaRequestHandlerPool",
                                 f"{metric_prefix}RequestHandlerAvgIdlePercent"), lambda: self.idle.value)

    def startService(self) -> None:
        super().startService()
        self._sampler.start(1.0, now=False)
        for handler_id in range(self.num_handlers):
            self._next(handler_id)

    # -- the handler loop -----------------------------------------------------------

    def _next(self, handler_id: int) -> None:
        """Handler ``handler_id`` is free: serve queued requests until one keeps it busy,
        then (queue empty) wait for the next request."""
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
        handled.addCallback(self.channel.send_response)
        if handled.called:
            if isinstance(handled.result, Failure):
                handled.addErrback(self._crashed, request)
            slot.release()
            return True
        self._unfinished.add(handled)
        handled.addBoth(self._finished, handled, slot, request)
        if slot.released:           # it started waiting remotely before returning
            self._waiting.add(handled)
            return True
        slot.handled = handled
        return False

    def _finished(self, result, handled: Deferred, slot: _Slot, request):
        self._unfinished.discard(handled)
        self._waiting.discard(handled)
        if isinstance(result, Failure):
            self._crashed(result, request)
        slot.release()
        return None

    def _crashed(self, failure, request) -> None:
        # KafkaApis answers every failure itself; this is the last line of defence:
        # the connection would otherwise wait for this answer forever.
        self.log.failure("Handler crashed on {request}", failure, request=request)
        self.channel.send_response(CloseConnectionResponse(request, CloseReason.PROTOCOL_ERROR,
                                                           "internal error while handling the request",
                                                           graceful=False))

    def stopService(self):
        """Stop taking requests; the Deferred fires when every started request has finished."""
        super().stopService()
        if self._sampler.running:
            self._sampler.stop()
        self.channel.cancel_takers()
        return DeferredList(list(self._unfinished))

"""KafkaRequestHandlerPool: the handlers that take requests off a plane's channel.

Kafka runs ``num.io.threads`` OS threads per broker (one for the control
plane), each looping ``receiveRequest`` → ``KafkaApis.handle``.  Here each
handler is a coroutine on the reactor: it waits on the channel's Deferred,
then runs the API handler until that handler either finishes or starts
waiting remotely (``Request.mark_local_complete``: a long-poll fetch, an
fsync in the thread pool, a rebalance).  At that point the slot is free for
the next request while the waiting one completes on its own — Kafka's
purgatory — so ``num.io.threads`` bounds the requests being *worked on* at
once, exactly its meaning in Kafka, and waiting never blocks the reactor.
"""

from __future__ import annotations

from twisted.application.service import Service
from twisted.internet.defer import CancelledError, Deferred, DeferredList, ensureDeferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger

from twisted_kafka.metrics import MetricName, MetricsRegistry
from twisted_kafka.metrics.idle import IdleRatio
from twisted_kafka.network.request_channel import RequestChannel


def _releaser(slot_free: Deferred):
    def release() -> None:
        if not slot_free.called:
            slot_free.callback(None)
    return release


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
        self.handling = 0
        self._loops: list = []
        self._waiting: set = set()   # requests handed off to remote waits, still to complete
        self._sampler = LoopingCall(self.idle.sample)
        self._sampler.clock = reactor
        metrics.gauge(MetricName("kafka.server", "KafkaRequestHandlerPool",
                                 f"{metric_prefix}RequestHandlerAvgIdlePercent"), lambda: self.idle.value)

    def startService(self) -> None:
        super().startService()
        self._sampler.start(1.0, now=False)
        self._loops = [ensureDeferred(self._run(i)) for i in range(self.num_handlers)]

    async def _run(self, handler_id: int) -> None:
        while self.running:
            self.idle.begin(handler_id)
            try:
                request = await self.channel.receive_request()
            except CancelledError:
                self.idle.end(handler_id)
                return
            self.idle.end(handler_id)
            self.handling += 1
            slot_free: Deferred = Deferred()
            release = _releaser(slot_free)
            request.on_local_complete = release
            handled = ensureDeferred(self.apis.handle(request))
            handled.addErrback(self._crashed, request)
            handled.addBoth(lambda result, release=release: release())
            self._waiting.add(handled)
            handled.addBoth(self._done_waiting, handled)
            await slot_free
            self.handling -= 1

    def _crashed(self, failure, request) -> None:
        # KafkaApis answers every failure itself; this is the last line of defence.
        self.log.failure("Handler crashed on {request}", failure, request=request)

    def _done_waiting(self, result, handled):
        self._waiting.discard(handled)
        return result

    def stopService(self):
        """Stop taking requests; the Deferred fires when every running handler has finished."""
        super().stopService()
        if self._sampler.running:
            self._sampler.stop()
        self.channel.cancel_takers()
        return DeferredList(self._loops + list(self._waiting))

"""ControllerEventManager: the controller handles one event at a time (Kafka's ``ControllerEventManager``).

Kafka's controller runs every event -- an admin request, a broker change, a
ZooKeeper watch firing, a leader's AlterPartition -- on one thread, so two
never interleave.  Here that thread is a ``DeferredLock``: an event holds it
from its first read of the ``ControllerContext`` to its last store write and
the requests that announce it.  An event that waits for brokers to confirm
a change does so after releasing it, so a slow broker holds up nobody else.

Events only run while this broker is the active controller: an event that
finds it is not fails with NOT_CONTROLLER, which a client retries against
the new controller.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred, DeferredLock, ensureDeferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .context import LOG_NAMESPACE


class ControllerEventManager:
    log = Logger(namespace=LOG_NAMESPACE)

    def __init__(self) -> None:
        #: Whether this broker is the active controller (set by ``KafkaController`` on failover and resignation).
        self.active = False
        #: Held by the event being processed.
        self.lock = DeferredLock()

    def require_active(self) -> None:
        if not self.active:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "This broker is not the active controller")

    async def locked(self, fn, *args):
        """``fn(*args)`` as one event; NOT_CONTROLLER when this broker is not (or no longer, once its turn
        comes) the active controller."""
        self.require_active()
        async with self.lock:
            self.require_active()
            return await fn(*args)

    def run(self, fn, *args) -> Deferred:
        """Queue ``fn(*args)`` as an event nobody waits for, if this controller is still active; its
        failures are logged."""
        async def event():
            if self.active:
                await self.locked(fn, *args)

        d = ensureDeferred(event())
        d.addErrback(self._event_failed, getattr(fn, "__name__", "event"))
        return d

    def _event_failed(self, failure: Failure, name: str) -> None:
        if isinstance(failure.value, KafkaError) and failure.value.code == ErrorCode.NOT_CONTROLLER:
            return
        self.log.failure("Controller event {name} failed", failure, name=name)


__all__ = ["ControllerEventManager"]

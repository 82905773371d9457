"""Waiting for a Deferred without owning it: "did it fire in time?".

Kafka often waits for something it must not cancel -- brokers applying a
controller change (CreateTopics' ``timeout_ms``), in-flight requests draining
at shutdown -- and only stops *waiting* when a deadline passes.  Twisted's
``Deferred.addTimeout`` would cancel the Deferred, so this watches it instead.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure


def fired_within(clock: IReactorTime, d: Deferred, seconds: float | None) -> Deferred[bool]:
    """A Deferred firing True once ``d`` succeeded, False if it failed or ``seconds`` passed first.

    ``seconds`` None (or <= 0) means no deadline.  ``d`` is never cancelled,
    and a failure of ``d`` is consumed here (the caller learns it as False).
    """
    waiter: Deferred[bool] = Deferred()
    timer = None

    def finished(result: object) -> None:
        if not waiter.called:
            if timer is not None and timer.active():
                timer.cancel()
            waiter.callback(not isinstance(result, Failure))

    def expired() -> None:
        if not waiter.called:
            waiter.callback(False)

    d.addBoth(finished)
    if not waiter.called and seconds is not None and seconds > 0:
        timer = clock.callLater(seconds, expired)
    return waiter


__all__ = ["fired_within"]

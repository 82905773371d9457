"""``LogScheduler``: when a ``LogManager``'s background work runs.

The manager's scheduling part, on the reactor's clock (so tests drive it
with ``task.Clock``):

* periodic tasks (retention, the flush check, the checkpoints, full-dir
  checks, producer expiry), each a ``LoopingCall``: a task that fails is
  logged -- a full disk in one line, as it is reported where it is found --
  and keeps its schedule;
* delayed file deletion (``file.delete.delay.ms``): the removal runs in the
  thread pool when its delay is up, or at once when the manager stops
  (shutdown leaves no timer behind).

What the tasks do is the manager's; this only decides when.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import task
from twisted.internet.defer import Deferred, FirstError, gatherResults
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.log.disk_space import is_out_of_space

log = Logger(namespace="twisted_kafka.log.log_manager")


def unwrap(failure: Failure) -> Failure:
    """The first failure inside ``gatherResults``' ``FirstError``s."""
    while failure.check(FirstError):
        error = failure.value
        assert isinstance(error, FirstError)
        failure = error.subFailure
    return failure


class LogScheduler:
    """Periodic tasks and delayed deletions of one log manager (see the module docstring)."""

    def __init__(self, reactor, blocking: Callable[..., Deferred]):
        """``blocking(f)`` runs ``f`` in the I/O thread pool."""
        self._reactor = reactor
        self._blocking = blocking
        self._loops: list[task.LoopingCall] = []
        self._pending_deletes: dict[object, tuple[Any, Callable[[], Deferred]]] = {}
        self._running_deletes: set[Deferred] = set()

    # -- periodic tasks ------------------------------------------------------

    def start(self, tasks: list[tuple[Callable[[], Any], float]]) -> None:
        """Run each ``(f, interval_ms)`` every ``interval_ms`` (not now); 0 or less: never."""
        for f, interval_ms in tasks:
            if not interval_ms or interval_ms <= 0:
                continue
            loop = task.LoopingCall(self._periodic, f)
            loop.clock = self._reactor
            loop.start(interval_ms / 1000.0, now=False).addErrback(self._task_died, f.__name__)
            self._loops.append(loop)

    def stop(self) -> None:
        """Stop the periodic tasks (delayed deletions stay: ``finish_deletes`` does them)."""
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops = []

    @staticmethod
    def _task_died(failure: Failure, name: str) -> None:
        log.failure("periodic task {name} died", failure=failure, name=name)

    @staticmethod
    def _periodic(f: Callable[[], Any]) -> Any:
        """Run a periodic task; a failure is logged and the task keeps its schedule."""
        try:
            result = f()
        except Exception:
            log.failure("periodic task {name} failed", name=f.__name__)
            return None
        if isinstance(result, Deferred):
            result.addErrback(LogScheduler._periodic_failed, f.__name__)
        return result

    @staticmethod
    def _periodic_failed(failure: Failure, name: str) -> None:
        failure = unwrap(failure)
        if is_out_of_space(failure.value):
            # A full disk is reported where it is found (``disk_space``): one line here.
            log.warn("periodic task {name} failed: {e}", name=name, e=failure.value)
        else:
            log.failure("periodic task {name} failed", failure=failure, name=name)

    # -- delayed deletion ----------------------------------------------------

    def delete_later(self, delay_ms: int, remove: Callable[[], None], done: Deferred, result: Any) -> None:
        """Run ``remove`` in the thread pool after ``delay_ms``; then fire ``done`` with ``result``
        (or its failure)."""
        token = object()

        def run() -> Deferred:
            self._pending_deletes.pop(token, None)
            d = self._blocking(remove)
            self._running_deletes.add(d)

            def finished(outcome):
                self._running_deletes.discard(d)
                if isinstance(outcome, Failure):
                    done.errback(outcome)
                else:
                    done.callback(result)
                return None

            d.addBoth(finished)
            return d

        call = self._reactor.callLater(delay_ms / 1000.0, run)
        self._pending_deletes[token] = (call, run)

    def finish_deletes(self) -> Deferred:
        """Do every delayed deletion now (shutdown must not leave timers behind)."""
        for call, run in list(self._pending_deletes.values()):
            if call.active():
                call.cancel()
            run()
        return gatherResults(list(self._running_deletes), consumeErrors=True)

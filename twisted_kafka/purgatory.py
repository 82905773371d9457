"""Delayed operations and their purgatory, on the reactor's clock (Kafka's ``DelayedOperation`` and
``DelayedOperationPurgatory``).

A request that cannot be answered yet waits as a ``DelayedOperation``: a
long-poll Fetch for enough bytes (``server/delayed_fetch.py``), an acks=all
Produce for the in-sync replicas (``server/delayed_produce.py``), a group
for its members to rejoin, a member's session (``coordinator/group/delayed.py``).
One ``Purgatory`` per kind keeps the waiting operations by the keys they
watch -- a partition, a group, a member -- so that whoever changes what a
key stands for calls ``check_and_complete(key)`` and only the operations
watching it look again.

An operation ends exactly once, in one of three ways:

* **completed** -- ``try_complete`` finds its condition holds and calls
  ``force_complete``; ``on_complete`` runs (it gives the answer);
* **expired** -- its timeout (``timeout_ms`` on the purgatory's clock, a
  ``callLater``) passes first: ``on_complete`` runs, then ``on_expiration``;
* **shut down** -- the purgatory shuts down while it waits: its
  ``on_shutdown`` decides, by default completing it now (``on_complete``
  answers with what there is); an operation whose answer was given
  elsewhere ``drop``\\ s instead (no callback at all).

``force_complete`` is the one gate: the first call wins and every later one
(a ``try_complete`` from another key, the timer, the shutdown, a call from
inside ``on_complete`` itself) returns False and does nothing, so the answer
is given once whatever the order of events.  Completing cancels the timer
and removes the operation from every key it watched.

Everything runs on the reactor thread, so there are no locks: Kafka's
``tryCompleteElseWatch`` checks again after watching because another thread
may have changed the state in between; here nothing can, and one check
before watching is enough.  Timers are ``IReactorTime.callLater`` calls, so
tests drive them with ``twisted.internet.task.Clock``.

``shutdown`` ends every waiting operation (those watching no key included:
a timer-only operation is still found) and closes the purgatory: an
operation given to it afterwards ends at once the same way, since nothing
is left to wake it.  The broker shuts its purgatories when it starts
draining requests, so every request read before the drain is answered.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable
from typing import Any

from twisted.internet.interfaces import IReactorTime


class DelayedOperation(ABC):
    """An operation completed by its condition, its timeout or its purgatory's shutdown -- once."""

    def __init__(self, timeout_ms: int):
        self.timeout_ms = max(0, timeout_ms)
        self._completed = False
        self._timer: Any = None                     # IDelayedCall
        self._purgatory: Purgatory | None = None
        self._keys: tuple[Hashable, ...] = ()

    @property
    def completed(self) -> bool:
        """Whether the operation has ended (completed, expired, or dropped)."""
        return self._completed

    @abstractmethod
    def try_complete(self) -> bool:
        """Check the condition; when it holds, return ``self.force_complete()``, else False."""

    def on_complete(self) -> None:
        """The operation ended (its condition, its timeout or the shutdown): give the answer."""
        return None

    def on_expiration(self) -> None:
        """The timeout passed first (runs after ``on_complete``)."""
        return None

    def on_shutdown(self) -> None:
        """The purgatory shuts down while this waits: by default, complete now."""
        self.force_complete()

    def force_complete(self) -> bool:
        """End now and run ``on_complete``; False (and nothing done) if it had already ended."""
        if self._completed:
            return False
        self._completed = True
        self._release()
        self.on_complete()
        return True

    def drop(self) -> bool:
        """End without any callback (its answer was given elsewhere); False if it had already ended."""
        if self._completed:
            return False
        self._completed = True
        self._release()
        return True

    def _release(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None and timer.active():
            timer.cancel()
        if self._purgatory is not None:
            self._purgatory._unwatch(self)


class Purgatory:
    """Delayed operations of one kind, by the keys they watch, timed on ``clock``."""

    def __init__(self, clock: IReactorTime, name: str):
        self.clock = clock
        self.name = name
        # Dicts as ordered sets: operations are checked in the order they started waiting, and one
        # that completes leaves each of its keys in constant time.
        self._watchers: dict[Hashable, dict[DelayedOperation, None]] = {}
        self._waiting: dict[DelayedOperation, None] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f"<Purgatory {self.name}: {len(self._waiting)} waiting>"

    @property
    def closed(self) -> bool:
        return self._closed

    def try_complete_else_watch(self, operation: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now if it can; else watch ``keys`` for it and start its timer.

        True if it has ended by the time this returns (a closed purgatory ends it at once, by its
        ``on_shutdown``); False if it waits.
        """
        if operation._purgatory is not None or operation.completed:
            raise ValueError(f"{operation!r} was given to a purgatory before")
        if operation.try_complete():
            return True
        if operation.completed:             # try_complete ended it and said otherwise
            return True
        if self._closed:
            self._shut(operation)
            return True
        operation._purgatory = self
        operation._keys = tuple(dict.fromkeys(keys))
        self._waiting[operation] = None
        for key in operation._keys:
            self._watchers.setdefault(key, {})[operation] = None
        operation._timer = self.clock.callLater(operation.timeout_ms / 1000.0, self._expire, operation)
        return False

    def check_and_complete(self, key: Hashable) -> int:
        """Ask every operation watching ``key`` to complete; how many did."""
        watching = self._watchers.get(key)
        if not watching:
            return 0
        completed = 0
        for operation in list(watching):
            if not operation.completed and operation.try_complete():
                completed += 1
        return completed

    def watched(self, key: Hashable) -> int:
        """How many operations watch ``key``."""
        return len(self._watchers.get(key, ()))

    @property
    def size(self) -> int:
        """How many operations wait (each counted once, whatever it watches)."""
        return len(self._waiting)

    def __len__(self) -> int:
        return len(self._waiting)

    def shutdown(self) -> int:
        """End every waiting operation by its ``on_shutdown`` and close; how many were waiting.  Idempotent."""
        self._closed = True
        waiting = list(self._waiting)
        for operation in waiting:
            self._shut(operation)
        return len(waiting)

    # -- internals -------------------------------------------------------------------------

    @staticmethod
    def _shut(operation: DelayedOperation) -> None:
        if not operation.completed:
            operation.on_shutdown()
        operation.drop()                     # an on_shutdown that ended nothing still ends it

    def _expire(self, operation: DelayedOperation) -> None:
        operation._timer = None              # firing: nothing to cancel
        if operation.force_complete():
            operation.on_expiration()

    def _unwatch(self, operation: DelayedOperation) -> None:
        self._waiting.pop(operation, None)
        for key in operation._keys:
            watching = self._watchers.get(key)
            if watching is None:
                continue
            watching.pop(operation, None)
            if not watching:
                del self._watchers[key]


__all__ = ["DelayedOperation", "Purgatory"]

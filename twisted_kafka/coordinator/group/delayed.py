"""Delayed operations on the reactor's clock: Kafka's purgatory, for the group coordinator.

A ``DelayedOperation`` completes either when its condition holds
(``try_complete``, asked whenever something it watches changes) or when its
timeout passes; ``on_complete`` runs exactly once either way, and on a
timeout ``on_expiration`` runs after it.  A ``Purgatory`` keeps the
operations by the keys they watch (a group for a rebalance, a member for a
heartbeat), so ``check_and_complete(key)`` re-evaluates just those.

Timers are ``IReactorTime.callLater`` calls, so tests drive them with
``twisted.internet.task.Clock``.  Everything runs on the reactor thread:
there are no locks, and an operation never runs concurrently with the
coordinator code that changes the state it checks.

The coordinator's operations:

* ``DelayedJoin`` -- the PreparingRebalance phase: completes when every
  member has rejoined, or after the rebalance timeout (the largest any
  member asked for), whichever comes first;
* ``InitialDelayedJoin`` -- the first rebalance of an empty group waits
  ``group.initial.rebalance.delay.ms``, again each time a new member joins
  meanwhile, up to the rebalance timeout, so a group starting many members
  rebalances once rather than once per member;
* ``DelayedHeartbeat`` -- a member's session: completes when the member
  shows it is alive, expires (and the member is removed) after its session
  timeout;
* ``DelayedSync`` -- after a rebalance, members that have not sent SyncGroup
  within the rebalance timeout are removed and the group rebalances again.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator
    from .group import GroupMetadata


class DelayedOperation(ABC):
    """An operation completed by its condition or by its timeout, exactly once."""

    def __init__(self, timeout_ms: int):
        self.timeout_ms = max(0, timeout_ms)
        self.completed = False
        self._timer: Any = None
        self._purgatory: Purgatory | None = None
        self._keys: tuple[Hashable, ...] = ()

    @abstractmethod
    def try_complete(self) -> bool:
        """Check the condition; when it holds, ``force_complete()`` and return its result."""

    def on_complete(self) -> None:
        """The operation is done (condition met or timed out); nothing by default."""
        return None

    def on_expiration(self) -> None:
        """The timeout passed first (runs after ``on_complete``); nothing by default."""
        return None

    def force_complete(self) -> bool:
        """Complete now; False if it had already completed."""
        if self.completed:
            return False
        self.completed = True
        if self._timer is not None:
            if self._timer.active():
                self._timer.cancel()
            self._timer = None
        if self._purgatory is not None:
            self._purgatory._unwatch(self)
        self.on_complete()
        return True

    def _expire(self) -> None:
        self._timer = None
        if self.force_complete():
            self.on_expiration()


class Purgatory:
    """Delayed operations by the keys they watch, timed on ``clock``."""

    def __init__(self, clock, name: str = ""):
        self.clock = clock
        self.name = name
        self._watchers: dict[Hashable, list[DelayedOperation]] = {}

    def try_complete_else_watch(self, operation: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete ``operation`` now if it can, else watch ``keys`` for it and start its timer."""
        if operation.try_complete():
            return True
        operation._purgatory = self
        operation._keys = tuple(keys)
        for key in operation._keys:
            self._watchers.setdefault(key, []).append(operation)
        operation._timer = self.clock.callLater(operation.timeout_ms / 1000.0, operation._expire)
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
        return len(self._watchers.get(key, ()))

    def __len__(self) -> int:
        return sum(len(ops) for ops in self._watchers.values())

    def _unwatch(self, operation: DelayedOperation) -> None:
        for key in operation._keys:
            watching = self._watchers.get(key)
            if watching is None:
                continue
            if operation in watching:
                watching.remove(operation)
            if not watching:
                del self._watchers[key]

    def shutdown(self) -> None:
        """Cancel every timer; nothing completes afterwards."""
        for watching in list(self._watchers.values()):
            for operation in watching:
                operation.completed = True
                if operation._timer is not None and operation._timer.active():
                    operation._timer.cancel()
                operation._timer = None
        self._watchers.clear()


# -- the group coordinator's operations ---------------------------------------------------------


def join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


def member_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("member", group_id, member_id)


class DelayedJoin(DelayedOperation):
    def __init__(self, coordinator: GroupCoordinator, group: GroupMetadata, rebalance_timeout_ms: int):
        super().__init__(rebalance_timeout_ms)
        self.coordinator = coordinator
        self.group = group

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_join(self.group, self.force_complete)

    def on_complete(self) -> None:
        self.coordinator.on_complete_join(self.group)


class InitialDelayedJoin(DelayedJoin):
    def __init__(self, coordinator: GroupCoordinator, purgatory: Purgatory, group: GroupMetadata,
                 configured_delay_ms: int, delay_ms: int, remaining_ms: int):
        super().__init__(coordinator, group, delay_ms)
        self.purgatory = purgatory
        self.configured_delay_ms = configured_delay_ms
        self.delay_ms = delay_ms
        self.remaining_ms = remaining_ms

    def try_complete(self) -> bool:
        return False            # only the timer ends the initial delay

    def on_complete(self) -> None:
        group = self.group
        if group.new_member_added and self.remaining_ms != 0:
            group.new_member_added = False
            delay = min(self.configured_delay_ms, self.remaining_ms)
            remaining = max(self.remaining_ms - self.delay_ms, 0)
            self.purgatory.try_complete_else_watch(
                InitialDelayedJoin(self.coordinator, self.purgatory, group, self.configured_delay_ms, delay,
                                   remaining),
                [join_key(group.group_id)])
        else:
            super().on_complete()


class DelayedHeartbeat(DelayedOperation):
    def __init__(self, coordinator: GroupCoordinator, group: GroupMetadata, member_id: str, is_pending: bool,
                 timeout_ms: int):
        super().__init__(timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.member_id = member_id
        self.is_pending = is_pending

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_heartbeat(self.group, self.member_id, self.is_pending,
                                                       self.force_complete)

    def on_expiration(self) -> None:
        self.coordinator.on_expire_heartbeat(self.group, self.member_id, self.is_pending)


class DelayedSync(DelayedOperation):
    def __init__(self, coordinator: GroupCoordinator, group: GroupMetadata, generation_id: int,
                 rebalance_timeout_ms: int):
        super().__init__(rebalance_timeout_ms)
        self.coordinator = coordinator
        self.group = group
        self.generation_id = generation_id

    def try_complete(self) -> bool:
        return self.coordinator.try_complete_pending_sync(self.group, self.generation_id, self.force_complete)

    def on_expiration(self) -> None:
        self.coordinator.on_expire_pending_sync(self.group, self.generation_id)

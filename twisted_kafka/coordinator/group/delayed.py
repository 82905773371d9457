"""The group coordinator's delayed operations, in the broker's one purgatory (``twisted_kafka.purgatory``).

Each is a ``DelayedOperation`` in one of the coordinator's two purgatories
(Kafka's "Heartbeat" and "Rebalance"), keyed by what it watches: a group for
a rebalance, a member for a heartbeat.  Timers run on the reactor's clock,
so tests drive them with ``twisted.internet.task.Clock``.

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

At shutdown they are dropped, not completed: the coordinator has unloaded
every group first, answering each member waiting in JoinGroup or SyncGroup
NOT_COORDINATOR (Kafka's ``onGroupUnloaded``), and nothing is left for a
rebalance or a session to do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted_kafka.purgatory import DelayedOperation, Purgatory

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator
    from .group import GroupMetadata


class GroupOperation(DelayedOperation):
    """A group coordinator's operation: dropped when its purgatory shuts down (see the module docstring)."""

    def on_shutdown(self) -> None:
        self.drop()


# -- the group coordinator's operations ---------------------------------------------------------


def join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


def member_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("member", group_id, member_id)


class DelayedJoin(GroupOperation):
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


class DelayedHeartbeat(GroupOperation):
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


class DelayedSync(GroupOperation):
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

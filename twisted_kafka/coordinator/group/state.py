"""The states of a classic group and the transitions between them (Kafka's ``GroupState``).

::

    Empty --join--> PreparingRebalance --all joined / timeout--> CompletingRebalance
      ^                 ^      |                                        |
      |                 |      +--every member gone--> Empty            | leader's SyncGroup
      |                 +----member joins, leaves, fails----------------+ (assignment stored)
      |                 +----member joins, leaves, fails---- Stable <---+
    Dead: the group is gone (deleted, expired, or moved to another coordinator).

Every state may become Dead; a Dead group stays Dead.
"""

from __future__ import annotations

from enum import Enum


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    @property
    def valid_previous_states(self) -> frozenset[GroupState]:
        return _VALID_PREVIOUS[self]

    def __str__(self) -> str:
        return self.value


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.PREPARING_REBALANCE: frozenset({GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                               GroupState.EMPTY}),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
}

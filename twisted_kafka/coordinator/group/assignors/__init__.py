"""Server-side assignors of the consumer rebalance protocol (KIP-848): ``uniform`` and ``range``.

An assignor gets the members (what each subscribes to, its rack, what it has
now) and the subscribed topics (id, partition count, the racks of each
partition's replicas) and returns each member's target assignment.  It is
pure: the same input gives the same output, whatever the order of the maps.
``group.consumer.assignors`` lists the ones a group may ask for (the
``ServerAssignor`` of a heartbeat); the first is the default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
import uuid

from ..consumer_member import Assignment


@dataclass(frozen=True, slots=True)
class MemberSpec:
    subscribed: frozenset[uuid.UUID]
    rack: str | None = None
    current: Assignment = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str
    num_partitions: int
    #: partition -> the racks of its replicas (empty when unknown)
    racks: Mapping[int, frozenset[str]] = field(default_factory=dict)


Assignor = Callable[[Mapping[str, MemberSpec], Mapping[uuid.UUID, TopicSpec]], dict[str, Assignment]]


def assignors() -> dict[str, Assignor]:
    from .range import assign as range_assign
    from .uniform import assign as uniform_assign
    return {"uniform": uniform_assign, "range": range_assign}


ASSIGNOR_NAMES = ("uniform", "range")

__all__ = ["MemberSpec", "TopicSpec", "Assignor", "assignors", "ASSIGNOR_NAMES"]

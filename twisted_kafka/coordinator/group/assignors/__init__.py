"""Server-side assignors of the consumer rebalance protocol (KIP-848): ``uniform`` and ``range``.

An assignor gets the members (what each subscribes to, its rack, what it has
now) and the subscribed topics (id, partition count, the racks of each
partition's replicas) and returns each member's target assignment.  It is
pure: the same input gives the same output, whatever the order of the maps.
``group.consumer.assignors`` lists the ones a group may ask for (the
``ServerAssignor`` of a heartbeat); the first is the default.
"""

from __future__ import annotations

from .range import assign as range_assign
from .spec import Assignor, MemberSpec, TopicSpec
from .uniform import assign as uniform_assign


def assignors() -> dict[str, Assignor]:
    return {"uniform": uniform_assign, "range": range_assign}


ASSIGNOR_NAMES = ("uniform", "range")

__all__ = ["MemberSpec", "TopicSpec", "Assignor", "assignors", "ASSIGNOR_NAMES"]

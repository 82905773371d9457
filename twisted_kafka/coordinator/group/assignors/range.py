"""The ``range`` assignor: each topic's partitions in contiguous ranges over its subscribers.

For each topic, its subscribers sorted by member id get consecutive ranges
of partitions; the first ``partitions % subscribers`` get one more.  Topics
with the same partition count and subscribers are split identically, so
partition *n* of co-partitioned topics lands on the same member (the
point of choosing ``range``).  It does not look at racks, and is sticky only
as far as ranges over unchanged members are.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping

from ..consumer_member import Assignment, normalized
from .spec import MemberSpec, TopicSpec


def assign(members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, TopicSpec]) -> dict[str, Assignment]:
    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for topic_id, topic in topics.items():
        subscribers = sorted(m for m, spec in members.items() if topic_id in spec.subscribed)
        if not subscribers:
            continue
        per_member, extra = divmod(topic.num_partitions, len(subscribers))
        start = 0
        for index, m in enumerate(subscribers):
            size = per_member + (1 if index < extra else 0)
            if size:
                result[m][topic_id] = set(range(start, start + size))
            start += size
    return {m: normalized(parts) for m, parts in result.items()}

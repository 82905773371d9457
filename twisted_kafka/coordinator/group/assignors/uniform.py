"""The ``uniform`` assignor (Kafka's default server assignor): balanced, sticky, rack-aware.

Every member ends within one partition of every other member that could
take the same partitions (exactly so when all subscribe to the same
topics), and a partition stays with its owner unless the owner has more
than its share -- so a member joining takes partitions only from those over
their share, and the others keep theirs without a pause.  Where members set
``client.rack`` and partitions have replicas with racks, a partition goes to
a member in one of its replicas' racks when the balance allows.

Steps: keep each member's current partitions that are still subscribed, up
to its share; give each unowned partition to the least loaded eligible
member (a rack match counts as one partition less); then move partitions
from a member to an eligible one with two or more fewer, until none can
move.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping

from ..consumer_member import Assignment, normalized
from .spec import MemberSpec, TopicSpec


def _rack_match(member: MemberSpec, topic: TopicSpec, partition: int) -> bool:
    racks = topic.racks.get(partition)
    return bool(member.rack and racks and member.rack in racks)


def assign(members: Mapping[str, MemberSpec], topics: Mapping[uuid.UUID, TopicSpec]) -> dict[str, Assignment]:
    names = sorted(members)
    eligible: dict[tuple[uuid.UUID, int], list[str]] = {}
    for topic_id in sorted(topics, key=lambda t: (topics[t].name, t.bytes)):
        subscribers = [m for m in names if topic_id in members[m].subscribed]
        if subscribers:
            for partition in range(topics[topic_id].num_partitions):
                eligible[(topic_id, partition)] = subscribers
    counts = dict.fromkeys(names, 0)
    owner: dict[tuple[uuid.UUID, int], str] = {}
    share = {m: 0 for m in names}
    for subscribers in eligible.values():
        for m in subscribers:
            share[m] += 1
    # Each member's share: its eligible partitions divided among those who may take them.
    total = len(eligible)
    if names:
        fair = math.ceil(total / len(names)) if total else 0
        share = {m: min(share[m], fair) for m in names}
    # 1. sticky: keep current partitions, up to the share.
    for m in names:
        for topic_id in sorted(members[m].current, key=lambda t: t.bytes):
            for partition in sorted(members[m].current[topic_id]):
                tp = (topic_id, partition)
                if tp in eligible and tp not in owner and m in eligible[tp] and counts[m] < max(share[m], 1):
                    owner[tp] = m
                    counts[m] += 1
    # 2. the unowned partitions to the least loaded eligible member.
    for tp, subscribers in eligible.items():
        if tp in owner:
            continue
        topic = topics[tp[0]]
        best = min(subscribers, key=lambda m: (counts[m] - _rack_match(members[m], topic, tp[1]), m))
        owner[tp] = best
        counts[best] += 1
    # 3. balance: move from a member to an eligible one with two or more fewer partitions.
    moved = True
    while moved:
        moved = False
        for tp, subscribers in eligible.items():
            current = owner[tp]
            topic = topics[tp[0]]
            best = min(subscribers, key=lambda m: (counts[m], not _rack_match(members[m], topic, tp[1]), m))
            if counts[current] > counts[best] + 1:
                owner[tp] = best
                counts[current] -= 1
                counts[best] += 1
                moved = True
    result: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in names}
    for (topic_id, partition), m in owner.items():
        result[m].setdefault(topic_id, set()).add(partition)
    return {m: normalized(parts) for m, parts in result.items()}

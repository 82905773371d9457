"""What an assignor is given and returns (KIP-848's server-side assignors): the members' and the topics' specs."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

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

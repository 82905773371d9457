"""One member of a classic group, as the coordinator knows it (Kafka's ``MemberMetadata``).

A member is waiting for its JoinGroup answer while ``awaiting_join`` is set
and for its SyncGroup answer while ``awaiting_sync`` is set; the callbacks
deliver the answer (the handler's request completes then).  A member with a
``group_instance_id`` is static (KIP-345): its instance id outlives member
ids, so a restarted consumer takes its old place without a rebalance.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    supported_protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    awaiting_join: Callable[[Any], None] | None = field(default=None, repr=False)
    awaiting_sync: Callable[[Any], None] | None = field(default=None, repr=False)
    is_new: bool = False
    heartbeat_satisfied: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    @property
    def protocol_names(self) -> set[str]:
        return {name for name, _ in self.supported_protocols}

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol}")

    def has_satisfied_heartbeat(self) -> bool:
        """A member waiting for a JoinGroup or SyncGroup answer cannot heartbeat: it counts as
        alive then, except a new member, whose only proof of life is its first JoinGroup."""
        if self.is_new:
            return self.heartbeat_satisfied
        if self.is_awaiting_join or self.is_awaiting_sync:
            return True
        return self.heartbeat_satisfied

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """The same protocols, in the same order, with the same metadata."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.supported_protocols]

    def vote(self, candidates: set[str]) -> str:
        """This member's preferred protocol among ``candidates`` (its first one in its own order)."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(candidates)}")

"""What the consumer-protocol calls answer (the handlers put them in the wire layout)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from twisted_kafka.protocol.errors import ErrorCode

from .consumer_member import Assignment, ConsumerMember


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescription:
    group_id: str
    error: ErrorCode
    message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: list[ConsumerMember] = field(default_factory=list)
    targets: dict[str, Assignment] = field(default_factory=dict)
    topic_names: dict[uuid.UUID, str] = field(default_factory=dict)

"""What the coordinator answers: the outcomes its callers turn into responses."""

from __future__ import annotations

from dataclasses import dataclass, field

from twisted_kafka.protocol.errors import ErrorCode

NO_GENERATION = -1
NO_MEMBER_ID = ""


@dataclass(frozen=True, slots=True)
class JoinedMember:
    """One member as the leader sees it in its JoinGroup answer."""

    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    member_id: str
    error: ErrorCode
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: list[JoinedMember] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveMemberResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    error: ErrorCode
    members: list[LeaveMemberResult] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """DescribeGroups: the state, and for a Stable group the protocol and each member's metadata."""

    state: str
    protocol_type: str
    protocol: str
    members: list[MemberSummary] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class GroupOverview:
    """ListGroups: one group."""

    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    """One partition's committed offset (-1 and "" when there is none)."""

    offset: int = -1
    leader_epoch: int = -1
    metadata: str = ""
    error: ErrorCode = ErrorCode.NONE

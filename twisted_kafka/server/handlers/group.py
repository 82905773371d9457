"""Group membership: JoinGroup (11), SyncGroup (14), Heartbeat (12), LeaveGroup (13).

Each is handed to the ``GroupCoordinator`` and its outcome put in the
version's layout.  JoinGroup and SyncGroup may wait -- for the rest of the
group to rejoin, for the leader's assignment to be written -- so they give
their handler slot back first (``mark_local_complete``), as Kafka parks them
in its purgatory.

Per version, as in Kafka:

* JoinGroup v0 has no rebalance timeout: the session timeout serves as both;
  v4+ asks a member without an id to rejoin with one (MEMBER_ID_REQUIRED,
  KIP-394), unless it is static; v5+ carries ``group.instance.id``
  (KIP-345); before v7 the protocol name is not nullable ("" instead);
* SyncGroup v5+ must name the protocol type and name (INCONSISTENT_GROUP_PROTOCOL
  otherwise) and gets them back;
* LeaveGroup v0-v2 name one member; v3+ a batch of members, each answered
  alone; before v3 the first member's error is the request's.
"""

from __future__ import annotations

from twisted_kafka.coordinator.group.coordinator import GroupCoordinator
from twisted_kafka.coordinator.group.results import JoinGroupResult
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation

from ..api_handler import ApiHandler


def client_host(request) -> str:
    """The member's host as Kafka shows it (``InetAddress.toString``: "/" and the address)."""
    return f"/{request.context.client_host}"


class JoinGroupHandler(ApiHandler):
    api_key = ApiKey.JOIN_GROUP
    group_operation = AclOperation.READ

    def __init__(self, coordinator: GroupCoordinator):
        self.coordinator = coordinator

    async def handle(self, request):
        body = request.body
        version = request.api_version
        instance_id = body.group_instance_id if version >= 5 else None
        rebalance_timeout = body.rebalance_timeout_ms if version >= 1 else body.session_timeout_ms
        d = self.coordinator.join_group(
            body.group_id, body.member_id, instance_id,
            require_known_member_id=version >= 4 and instance_id is None, support_skip_assignment=version >= 9,
            client_id=request.client_id or "", client_host=client_host(request),
            rebalance_timeout_ms=rebalance_timeout, session_timeout_ms=body.session_timeout_ms,
            protocol_type=body.protocol_type, protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
            reason=getattr(body, "reason", None) if version >= 8 else None)
        if not d.called:
            request.mark_local_complete()
        result: JoinGroupResult = await d
        return self._response(version, result)

    @staticmethod
    def _response(version: int, result: JoinGroupResult):
        R = m.JoinGroupResponse
        protocol_name = result.protocol_name
        if protocol_name is None and version < 7:
            protocol_name = ""          # not nullable before v7
        return R(throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
                 protocol_type=result.protocol_type, protocol_name=protocol_name, leader=result.leader_id,
                 skip_assignment=result.skip_assignment, member_id=result.member_id,
                 members=[R.JoinGroupResponseMember(member_id=j.member_id, group_instance_id=j.group_instance_id,
                                                    metadata=j.metadata) for j in result.members])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return self._response(request.api_version, JoinGroupResult("", error))


class SyncGroupHandler(ApiHandler):
    api_key = ApiKey.SYNC_GROUP
    group_operation = AclOperation.READ

    def __init__(self, coordinator: GroupCoordinator):
        self.coordinator = coordinator

    async def handle(self, request):
        body = request.body
        version = request.api_version
        protocol_type = body.protocol_type if version >= 5 else None
        protocol_name = body.protocol_name if version >= 5 else None
        if version >= 5 and (protocol_type is None or protocol_name is None):
            return self.error_response(request, ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        d = self.coordinator.sync_group(
            body.group_id, body.generation_id, body.member_id, protocol_type, protocol_name,
            body.group_instance_id if version >= 3 else None,
            {a.member_id: bytes(a.assignment) for a in body.assignments})
        if not d.called:
            request.mark_local_complete()
        result = await d
        return m.SyncGroupResponse(throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                                   protocol_name=result.protocol_name, assignment=result.assignment)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.SyncGroupResponse(throttle_time_ms=0, error_code=error, protocol_type=None, protocol_name=None,
                                   assignment=b"")


class HeartbeatHandler(ApiHandler):
    api_key = ApiKey.HEARTBEAT
    group_operation = AclOperation.READ

    def __init__(self, coordinator: GroupCoordinator):
        self.coordinator = coordinator

    async def handle(self, request):
        body = request.body
        error = self.coordinator.heartbeat(body.group_id, body.member_id,
                                           body.group_instance_id if request.api_version >= 3 else None,
                                           body.generation_id)
        return m.HeartbeatResponse(throttle_time_ms=0, error_code=error)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.HeartbeatResponse(throttle_time_ms=0, error_code=error)


class LeaveGroupHandler(ApiHandler):
    api_key = ApiKey.LEAVE_GROUP
    group_operation = AclOperation.READ

    def __init__(self, coordinator: GroupCoordinator):
        self.coordinator = coordinator

    async def handle(self, request):
        body = request.body
        version = request.api_version
        if version < 3:
            members = [(body.member_id, None, None)]
        else:
            members = [(member.member_id, member.group_instance_id,
                        member.reason if version >= 5 else None) for member in body.members]
        result = self.coordinator.leave_group(body.group_id, members)
        R = m.LeaveGroupResponse
        if version < 3:
            error = result.error
            if error is ErrorCode.NONE and result.members:
                error = result.members[0].error
            return R(throttle_time_ms=0, error_code=error)
        return R(throttle_time_ms=0, error_code=result.error, members=[
            R.MemberResponse(member_id=r.member_id, group_instance_id=r.group_instance_id, error_code=r.error)
            for r in result.members])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.LeaveGroupResponse(throttle_time_ms=0, error_code=error, members=[])

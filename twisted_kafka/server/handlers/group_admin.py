"""Group administration: DescribeGroups (15), ListGroups (16), DeleteGroups (42).

* DescribeGroups: per group its state, protocol type and -- for a Stable
  group -- the chosen protocol and every member's metadata and assignment
  (other states list the members without them).  A consumer-protocol group
  (KIP-848) shows protocol type "consumer", its assignor as the protocol and
  every member's subscription and assignment in the consumer formats.  A group that does not
  exist is described as Dead before v6 and answered GROUP_ID_NOT_FOUND from
  v6 (KIP-1043).  v3+ may ask for the authorized operations: without an
  authorizer, every group operation (READ, DESCRIBE, DELETE).
* ListGroups: every group this broker coordinates, with its state from v4
  (filtered by ``states_filter``, case-insensitively) and its type from v5
  (KIP-1043: "classic", or "consumer" for a group of the consumer rebalance
  protocol, KIP-848; ``types_filter`` picks them).  While
  an offsets partition loads the answer carries COORDINATOR_LOAD_IN_PROGRESS.
* DeleteGroups: an Empty group is removed with its offsets (tombstones in
  ``__consumer_offsets``, answered once written); NON_EMPTY_GROUP while it
  has members, GROUP_ID_NOT_FOUND if there is no such group.
"""

from __future__ import annotations

from twisted_kafka.coordinator.group.coordinator import GroupCoordinator
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation

from ..api_handler import ApiHandler
from ..authorization import CLUSTER, GROUP, Authorization
from ..metadata_cache import DELETE, DESCRIBE, READ

#: Kafka's AclOperation codes a group supports.
GROUP_OPERATIONS = frozenset({READ, DESCRIBE, DELETE})


class DescribeGroupsHandler(ApiHandler):
    api_key = ApiKey.DESCRIBE_GROUPS

    def __init__(self, coordinator: GroupCoordinator, *, authorization: Authorization):
        self.authorization = authorization
        self.coordinator = coordinator

    async def handle(self, request):
        version = request.api_version
        body = request.body
        with_operations = version >= 3 and body.include_authorized_operations
        D = m.DescribeGroupsResponse.DescribedGroup
        M = D.DescribedGroupMember
        groups = []
        auth = self.authorization
        for group_id in body.groups:
            if auth.enabled and not auth.allowed(request.context, AclOperation.DESCRIBE, GROUP, group_id):
                groups.append(D(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None,
                                group_id=group_id, group_state="", protocol_type="", protocol_data="", members=[],
                                authorized_operations=None))
                continue
            error, summary = self.coordinator.describe_group(group_id)
            message = None
            if error is ErrorCode.NONE and summary.state == "Dead" and version >= 6:
                error, message = ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} not found."
            groups.append(D(
                error_code=error, error_message=message, group_id=group_id, group_state=summary.state,
                protocol_type=summary.protocol_type, protocol_data=summary.protocol,
                members=[M(member_id=s.member_id, group_instance_id=s.group_instance_id, client_id=s.client_id,
                           client_host=s.client_host, member_metadata=s.metadata, member_assignment=s.assignment)
                         for s in summary.members],
                authorized_operations=(auth.authorized_operations(request.context, GROUP, GROUP_OPERATIONS, group_id)
                                       if with_operations and not error else None)))
        return m.DescribeGroupsResponse(throttle_time_ms=0, groups=groups)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        D = m.DescribeGroupsResponse.DescribedGroup
        return m.DescribeGroupsResponse(throttle_time_ms=0, groups=[
            D(error_code=error, error_message=message, group_id=group_id, group_state="", protocol_type="",
              protocol_data="", members=[], authorized_operations=None) for group_id in request.body.groups])


class ListGroupsHandler(ApiHandler):
    api_key = ApiKey.LIST_GROUPS

    def __init__(self, coordinator: GroupCoordinator, *, authorization: Authorization):
        self.authorization = authorization
        self.coordinator = coordinator

    async def handle(self, request):
        version = request.api_version
        body = request.body
        states = (body.states_filter or []) if version >= 4 else []
        types = (body.types_filter or []) if version >= 5 else []
        error, groups = self.coordinator.list_groups(states, types)
        auth = self.authorization
        if auth.enabled and not auth.allowed(request.context, AclOperation.DESCRIBE, CLUSTER, log_denied=False):
            # Kafka: DESCRIBE on the cluster lists every group, else only those the principal may describe.
            groups = [g for g in groups
                      if auth.allowed(request.context, AclOperation.DESCRIBE, GROUP, g.group_id, log_denied=False)]
        L = m.ListGroupsResponse.ListedGroup
        return m.ListGroupsResponse(throttle_time_ms=0, error_code=error, groups=[
            L(group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state, group_type=g.group_type)
            for g in groups])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.ListGroupsResponse(throttle_time_ms=0, error_code=error, groups=[])


class DeleteGroupsHandler(ApiHandler):
    api_key = ApiKey.DELETE_GROUPS

    def __init__(self, coordinator: GroupCoordinator, *, authorization: Authorization):
        self.authorization = authorization
        self.coordinator = coordinator

    async def handle(self, request):
        names = list(dict.fromkeys(request.body.groups_names))
        auth = self.authorization
        allowed = auth.allowed_names(request.context, AclOperation.DELETE, GROUP, names) if auth.enabled else names
        d = self.coordinator.delete_groups([n for n in names if n in allowed])
        if not d.called:
            request.mark_local_complete()
        errors = {n: ErrorCode.GROUP_AUTHORIZATION_FAILED for n in names if n not in allowed}
        errors.update(await d)
        R = m.DeleteGroupsResponse
        return R(throttle_time_ms=0, results=[R.DeletableGroupResult(group_id=name, error_code=errors[name])
                                              for name in names])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        R = m.DeleteGroupsResponse
        return R(throttle_time_ms=0, results=[R.DeletableGroupResult(group_id=name, error_code=error)
                                              for name in dict.fromkeys(request.body.groups_names)])

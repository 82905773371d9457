"""The consumer rebalance protocol (KIP-848): ConsumerGroupHeartbeat (68), ConsumerGroupDescribe (69).

ConsumerGroupHeartbeat is handed to the ``GroupCoordinator`` (its
``ConsumerGroupCoordinator`` does the work) and answered once the records
it wrote are durable; the handler slot is given back while it waits.
Partitions travel as topic ids both ways.  A top-level error carries
Kafka's message too (``ErrorMessage``).

ConsumerGroupDescribe answers per group: its state, group epoch,
assignment epoch, assignor and every member with its current and target
assignment (topic ids and names); GROUP_ID_NOT_FOUND for a group that does
not exist or is a classic group with members.  It needs DESCRIBE on each
group (GROUP_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

from twisted_kafka.coordinator.group.consumer_coordinator import HeartbeatRequest
from twisted_kafka.coordinator.group.consumer_member import Assignment
from twisted_kafka.coordinator.group.coordinator import GroupCoordinator
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation

from ..api_handler import ApiHandler
from ..authorization import GROUP, Authorization
from .group import client_host
from .group_admin import GROUP_OPERATIONS


def _owned(topic_partitions) -> Assignment | None:
    if topic_partitions is None:
        return None
    owned: dict = {}
    for tp in topic_partitions:
        owned.setdefault(tp.topic_id, set()).update(tp.partitions)
    return {topic: frozenset(parts) for topic, parts in owned.items() if parts}


def _parts(assignment: Assignment, names: dict, cls) -> list:
    return [cls(topic_id=topic, topic_name=names.get(topic, ""), partitions=sorted(p))
            for topic, p in sorted(assignment.items(), key=lambda item: names.get(item[0], ""))]


class ConsumerGroupHeartbeatHandler(ApiHandler):
    api_key = ApiKey.CONSUMER_GROUP_HEARTBEAT
    group_operation = AclOperation.READ

    def __init__(self, coordinator: GroupCoordinator):
        self.coordinator = coordinator

    async def handle(self, request):
        body = request.body
        regex = body.subscribed_topic_regex if request.api_version >= 1 else None
        d = self.coordinator.consumer_group_heartbeat(HeartbeatRequest(
            group_id=body.group_id, member_id=body.member_id, member_epoch=body.member_epoch,
            instance_id=body.instance_id, rack_id=body.rack_id, rebalance_timeout_ms=body.rebalance_timeout_ms,
            subscribed_topic_names=body.subscribed_topic_names, subscribed_topic_regex=regex,
            server_assignor=body.server_assignor, owned=_owned(body.topic_partitions),
            client_id=request.client_id or "", client_host=client_host(request)))
        if not d.called:
            request.mark_local_complete()
        result = await d
        R = m.ConsumerGroupHeartbeatResponse
        assignment = None
        if result.assignment is not None:
            assignment = R.Assignment(topic_partitions=[
                R.Assignment.TopicPartitions(topic_id=topic, partitions=sorted(parts))
                for topic, parts in sorted(result.assignment.items(), key=lambda item: item[0].bytes)])
        return R(throttle_time_ms=0, error_code=result.error, error_message=result.message,
                 member_id=result.member_id, member_epoch=result.member_epoch,
                 heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=error, error_message=message,
                                                member_id=None, member_epoch=-1, heartbeat_interval_ms=0,
                                                assignment=None)


class ConsumerGroupDescribeHandler(ApiHandler):
    api_key = ApiKey.CONSUMER_GROUP_DESCRIBE

    def __init__(self, coordinator: GroupCoordinator, *, authorization: Authorization):
        self.coordinator = coordinator
        self.authorization = authorization

    async def handle(self, request):
        body = request.body
        R = m.ConsumerGroupDescribeResponse
        G = R.DescribedGroup
        auth = self.authorization
        groups = []
        for group_id in body.group_ids:
            if auth.enabled and not auth.allowed(request.context, AclOperation.DESCRIBE, GROUP, group_id):
                groups.append(self._error(group_id, ErrorCode.GROUP_AUTHORIZATION_FAILED, None))
                continue
            d = self.coordinator.consumer_group_describe(group_id)
            if d.error is not ErrorCode.NONE:
                groups.append(self._error(group_id, d.error, d.message))
                continue
            names = d.topic_names
            members = [G.Member(
                member_id=mem.member_id, instance_id=mem.instance_id, rack_id=mem.rack_id,
                member_epoch=mem.member_epoch, client_id=mem.client_id, client_host=mem.client_host,
                subscribed_topic_names=list(mem.subscribed_topic_names),
                subscribed_topic_regex=mem.subscribed_topic_regex,
                assignment=G.Member.Assignment(topic_partitions=_parts(mem.assigned, names,
                                                                       G.Member.Assignment.TopicPartitions)),
                target_assignment=G.Member.TargetAssignment(topic_partitions=_parts(
                    d.targets.get(mem.member_id, {}), names, G.Member.TargetAssignment.TargetTopicPartitions)))
                for mem in d.members]
            operations = (auth.authorized_operations(request.context, GROUP, GROUP_OPERATIONS, group_id)
                          if body.include_authorized_operations else None)
            groups.append(G(error_code=ErrorCode.NONE, error_message=None, group_id=group_id, group_state=d.state,
                            group_epoch=d.group_epoch, assignment_epoch=d.assignment_epoch,
                            assignor_name=d.assignor, members=members, authorized_operations=operations))
        return R(throttle_time_ms=0, groups=groups)

    @staticmethod
    def _error(group_id: str, error: ErrorCode, message: str | None):
        G = m.ConsumerGroupDescribeResponse.DescribedGroup
        return G(error_code=error, error_message=message, group_id=group_id, group_state="", group_epoch=-1,
                 assignment_epoch=-1, assignor_name="", members=[], authorized_operations=None)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=[
            self._error(group_id, error, message) for group_id in request.body.group_ids])

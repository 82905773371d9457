"""AlterPartitionReassignments (45) and ListPartitionReassignments (46), KIP-455.

Both are the controller's, as in Kafka: a broker that is not the controller
forwards them to the controller's control plane (Kafka's clients send them
to the controller; here any broker answers), and without a reachable
controller the whole request is NOT_CONTROLLER.

AlterPartitionReassignments starts a reassignment per partition (replicas,
or null to cancel an ongoing one) and answers per partition:
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, duplicates,
negative or dead brokers), NO_REASSIGNMENT_IN_PROGRESS (cancelling nothing),
and from v1 INVALID_REPLICATION_FACTOR when
``allow_replication_factor_change`` is false and the count of replicas
changes (KIP-860).  ListPartitionReassignments lists the ongoing ones
(all, or among the partitions named): replicas, adding and removing.
"""

from __future__ import annotations

from twisted_kafka.controller.client import forwarded
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation

from ..admin_manager import AdminManager
from ..api_handler import ApiHandler

AR = m.AlterPartitionReassignmentsResponse
LR = m.ListPartitionReassignmentsResponse


class AlterPartitionReassignmentsHandler(ApiHandler):
    api_key = ApiKey.ALTER_PARTITION_REASSIGNMENTS
    cluster_operation = AclOperation.ALTER

    def __init__(self, admin_manager: AdminManager):
        self.admin = admin_manager

    async def handle(self, request):
        body = request.body
        allow = bool(body.allow_replication_factor_change) if request.api_version >= 1 else True
        targets = {(t.name, p.partition_index): (None if p.replicas is None else list(p.replicas))
                   for t in body.topics for p in t.partitions}
        request.mark_local_complete()
        results = await self.admin.alter_partition_reassignments(
            targets, allow_replication_factor_change=allow, timeout_ms=body.timeout_ms,
            forward=not forwarded(request.header.client_id))
        by_topic: dict[str, list] = {}
        for (topic, index), (code, message) in results.items():
            by_topic.setdefault(topic, []).append(
                AR.ReassignableTopicResponse.ReassignablePartitionResponse(
                    partition_index=index, error_code=code, error_message=message))
        return AR(throttle_time_ms=0, allow_replication_factor_change=allow, error_code=ErrorCode.NONE,
                  error_message=None,
                  responses=[AR.ReassignableTopicResponse(name=t, partitions=p) for t, p in by_topic.items()])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        allow = bool(request.body.allow_replication_factor_change) if request.api_version >= 1 else True
        return AR(throttle_time_ms=0, allow_replication_factor_change=allow, error_code=error,
                  error_message=message, responses=[])


class ListPartitionReassignmentsHandler(ApiHandler):
    api_key = ApiKey.LIST_PARTITION_REASSIGNMENTS
    cluster_operation = AclOperation.DESCRIBE

    def __init__(self, admin_manager: AdminManager):
        self.admin = admin_manager

    async def handle(self, request):
        body = request.body
        partitions = None
        if body.topics is not None:
            partitions = [(t.name, i) for t in body.topics for i in t.partition_indexes]
        request.mark_local_complete()
        ongoing = await self.admin.list_partition_reassignments(partitions, timeout_ms=body.timeout_ms,
                                                                forward=not forwarded(request.header.client_id))
        by_topic: dict[str, list] = {}
        for (topic, index), state in sorted(ongoing.items()):
            by_topic.setdefault(topic, []).append(LR.OngoingTopicReassignment.OngoingPartitionReassignment(
                partition_index=index, replicas=list(state.replicas), adding_replicas=list(state.adding_replicas),
                removing_replicas=list(state.removing_replicas)))
        return LR(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
                  topics=[LR.OngoingTopicReassignment(name=t, partitions=p) for t, p in by_topic.items()])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return LR(throttle_time_ms=0, error_code=error, error_message=message, topics=[])

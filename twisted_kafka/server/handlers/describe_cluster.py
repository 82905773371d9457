"""DescribeCluster (60): brokers, cluster id and controller (kafka-python's describe_cluster).

Brokers are listed with their endpoint on the listener the request came in
on, as Metadata does.  ``endpoint_type`` (v1+) must be BROKERS (1): this is
a broker endpoint, so CONTROLLERS (2) is MISMATCHED_ENDPOINT_TYPE and any
other value UNSUPPORTED_ENDPOINT_TYPE (INVALID_REQUEST in v0), as Kafka
answers.  No broker is ever fenced here (``include_fenced_brokers``, v2).
Without an authorizer every cluster operation is allowed, so the authorized
operations are all of them when asked for, else Kafka's "not requested"
marker (INT32 min).
"""

from __future__ import annotations

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation, ResourceType

from ..api_handler import ApiHandler
from ..authorization import Authorization
from ..metadata_cache import CLUSTER_AUTHORIZED_OPERATIONS, MetadataCache

R = m.DescribeClusterResponse
_Broker = R.DescribeClusterBroker

BROKERS, CONTROLLERS = 1, 2


class DescribeClusterHandler(ApiHandler):
    api_key = ApiKey.DESCRIBE_CLUSTER
    cluster_operation = AclOperation.DESCRIBE

    def __init__(self, metadata_cache: MetadataCache, *, authorization: Authorization):
        self.authorization = authorization
        self.cache = metadata_cache

    async def handle(self, request):
        body = request.body
        version = request.api_version
        endpoint_type = body.endpoint_type if version >= 1 else BROKERS
        if endpoint_type != BROKERS:
            if endpoint_type == CONTROLLERS:
                error = ErrorCode.MISMATCHED_ENDPOINT_TYPE if version >= 1 else ErrorCode.INVALID_REQUEST
                message = ("The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
                           "CONTROLLER")
            else:
                error = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE if version >= 1 else ErrorCode.INVALID_REQUEST
                message = f"Unsupported endpoint type {endpoint_type}"
            return self.error_response(request, error, message)
        cache = self.cache
        brokers = [_Broker(broker_id=node_id, host=host, port=port, rack=rack, is_fenced=False)
                   for node_id, host, port, rack in cache.alive_brokers(request.listener_name)]
        # kafka-python's class names the field ``authorized_operations``: a set of AclOperation
        # codes, encoded as Kafka's bit field; None is the "not requested" marker (INT32 min).
        operations = None
        if body.include_cluster_authorized_operations:
            operations = self.authorization.authorized_operations(request.context, ResourceType.CLUSTER,
                                                                  CLUSTER_AUTHORIZED_OPERATIONS)
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, endpoint_type=BROKERS,
                 cluster_id=cache.cluster_id or "", controller_id=cache.controller_id, brokers=brokers,
                 authorized_operations=operations)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return R(throttle_time_ms=0, error_code=error, error_message=message, endpoint_type=BROKERS,
                 cluster_id="", controller_id=-1, brokers=[], authorized_operations=None)

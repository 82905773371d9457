"""FindCoordinator (10): which broker coordinates a group or a transactional id.

A group's coordinator is the leader of its ``__consumer_offsets`` partition
(``abs(hashCode(group)) % offsets.topic.num.partitions``), a transactional
id's the leader of its ``__transaction_state`` partition (``%
transaction.state.log.num.partitions``), answered with that broker's
endpoint on the listener the request came in on.  Each internal topic is
created by the first FindCoordinator that needs it; the answer waits for it
(on a single node the controller takes milliseconds), so the client's first
lookup already finds the coordinator.  While no leader is known the answer
is COORDINATOR_NOT_AVAILABLE, which clients retry.

* v0-v3: one key (v1+ with a key type); an error is answered with no node
  (-1, "", -1) and, from v1, the error's message.
* v4+ (KIP-699): a batch of keys, one result each.
* key type 0 is a group (DESCRIBE on it, GROUP_AUTHORIZATION_FAILED), key
  type 1 a transactional id (DESCRIBE on it,
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED); type 2 (share groups) and anything
  else are INVALID_REQUEST.
"""

from __future__ import annotations

from twisted_kafka.coordinator.group.topic import OFFSETS_TOPIC
from twisted_kafka.coordinator.transaction.service import TRANSACTION_STATE_TOPIC
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation, ResourceType

from ..api_handler import ApiHandler
from ..authorization import Authorization
from ..metadata_cache import MetadataCache

R = m.FindCoordinatorResponse

GROUP, TRANSACTION = 0, 1
_NO_NODE = (-1, "", -1)
_MESSAGES = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.INVALID_REQUEST: "This most likely occurs because of a request being malformed by the client "
                               "library or the message was sent to an incompatible broker.",
}


class FindCoordinatorHandler(ApiHandler):
    api_key = ApiKey.FIND_COORDINATOR

    def __init__(self, offsets_topic, transactions, metadata_cache: MetadataCache, *, authorization: Authorization):
        """``offsets_topic``: the ``GroupCoordinatorService`` (partition_for, offsets_topic_exists,
        ensure_offsets_topic); ``transactions``: the ``TransactionCoordinatorService`` (partition_for,
        topic_exists, ensure_topic)."""
        self.authorization = authorization
        self.groups = offsets_topic
        self.transactions = transactions
        self.cache = metadata_cache

    async def _find(self, request, key_type: int, key: str) -> tuple[ErrorCode, str | None, tuple[int, str, int]]:
        """``(error, message, node)``: the message None stands for the error's usual one."""
        # Kafka: DESCRIBE on the group, or on the transactional id.
        if key_type in (GROUP, TRANSACTION) and not self.authorization.allowed(
                request.context, AclOperation.DESCRIBE,
                ResourceType.GROUP if key_type == GROUP else ResourceType.TRANSACTIONAL_ID, key):
            return (ErrorCode.GROUP_AUTHORIZATION_FAILED if key_type == GROUP
                    else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED), None, _NO_NODE
        if key_type == GROUP:
            if not self.groups.offsets_topic_exists():
                request.mark_local_complete()
                error = await self.groups.ensure_offsets_topic()
                if error is not ErrorCode.NONE:
                    return error, None, _NO_NODE
            state = self.cache.partition(OFFSETS_TOPIC, self.groups.partition_for(key))
        elif key_type == TRANSACTION:
            if not key:
                return ErrorCode.INVALID_REQUEST, None, _NO_NODE
            if not self.transactions.topic_exists():
                request.mark_local_complete()
                error = await self.transactions.ensure_topic()
                if error is not ErrorCode.NONE:
                    return error, None, _NO_NODE
            state = self.cache.partition(TRANSACTION_STATE_TOPIC, self.transactions.partition_for(key))
        else:
            return ErrorCode.INVALID_REQUEST, None, _NO_NODE
        if state is None or state.leader < 0:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, _NO_NODE
        for node_id, host, port, _ in self.cache.alive_brokers(request.listener_name):
            if node_id == state.leader:
                return ErrorCode.NONE, None, (node_id, host, port)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, None, _NO_NODE

    async def handle(self, request):
        body = request.body
        if request.api_version >= 4:
            coordinators = []
            for key in body.coordinator_keys:
                error, message, (node_id, host, port) = await self._find(request, body.key_type, key)
                coordinators.append(R.Coordinator(key=key, node_id=node_id, host=host, port=port, error_code=error,
                                                  error_message=(message or _MESSAGES.get(error)) if error else None))
            return R(throttle_time_ms=0, coordinators=coordinators)
        key_type = body.key_type if request.api_version >= 1 else GROUP
        error, message, (node_id, host, port) = await self._find(request, key_type, body.key)
        if error is not ErrorCode.NONE:
            return self.error_response(request, error, message)
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, node_id=node_id, host=host,
                 port=port)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        message = message or _MESSAGES.get(error)
        if request.api_version >= 4:
            return R(throttle_time_ms=0, coordinators=[
                R.Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error, error_message=message)
                for key in request.body.coordinator_keys])
        return R(throttle_time_ms=0, error_code=error, error_message=message, node_id=-1, host="", port=-1)

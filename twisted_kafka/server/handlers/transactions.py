"""The transactional producer's APIs at its transaction coordinator (KIP-98).

* AddPartitionsToTxn (24), v0-v3: the partitions join the producer's
  transaction.  Each topic needs WRITE (TOPIC_AUTHORIZATION_FAILED); an
  unknown partition is UNKNOWN_TOPIC_OR_PARTITION; when any partition fails
  these checks the others answer OPERATION_NOT_ATTEMPTED, as in Kafka.  v4's
  batched form (KIP-890, broker-to-coordinator verification) is not served.
* AddOffsetsToTxn (25), v0-v3: the group's ``__consumer_offsets`` partition
  joins the transaction (the producer then sends TxnOffsetCommit to the
  group coordinator).
* EndTxn (26), v0-v3: commit or abort.
* TxnOffsetCommit (28), v0-v3: the group's offsets committed in the
  transaction (``coordinator/group/txn_offsets.py``); v3 carries the
  consumer's generation, member id and instance id (KIP-447).

Each needs WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
AddOffsetsToTxn and TxnOffsetCommit also READ on the group (checked by
``KafkaApis``), TxnOffsetCommit READ on each topic.  PRODUCER_FENCED (90) is
answered INVALID_PRODUCER_EPOCH to versions before it existed (v0-v1 of
AddPartitionsToTxn, AddOffsetsToTxn and EndTxn; TxnOffsetCommit before v3,
v2 there), as Kafka does.
"""

from __future__ import annotations

from twisted.internet.defer import ensureDeferred

from twisted_kafka.coordinator.group.coordinator import GroupCoordinator
from twisted_kafka.coordinator.group.topic import OFFSETS_TOPIC
from twisted_kafka.coordinator.transaction.coordinator import TransactionCoordinator
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation, ResourceType

from ..api_handler import ApiHandler
from ..authorization import TOPIC, Authorization
from ..metadata_cache import MetadataCache
from .offsets import _known, offsets_to_commit


def fenced_for(error: ErrorCode, version: int, first_version: int = 2) -> ErrorCode:
    """PRODUCER_FENCED for versions that know it, INVALID_PRODUCER_EPOCH before."""
    if error is ErrorCode.PRODUCER_FENCED and version < first_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return error


def _may_write(handler: ApiHandler, request, transactional_id: str) -> bool:
    return handler.authorization.allowed(request.context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                         transactional_id)


class AddPartitionsToTxnHandler(ApiHandler):
    api_key = ApiKey.ADD_PARTITIONS_TO_TXN

    def __init__(self, coordinator: TransactionCoordinator, metadata_cache: MetadataCache, *,
                 authorization: Authorization):
        self.authorization = authorization
        self.coordinator = coordinator
        self.cache = metadata_cache

    async def handle(self, request):
        body = request.body
        tid = body.v3_and_below_transactional_id
        if not _may_write(self, request, tid):
            return self.error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        partitions = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
        auth = self.authorization
        names = {topic for topic, _ in partitions}
        denied = names - auth.allowed_names(request.context, AclOperation.WRITE, TOPIC, names) if auth.enabled \
            else set()
        errors: dict[tuple[str, int], ErrorCode] = {}
        for tp in partitions:
            if tp[0] in denied:
                errors[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not _known(self.cache, *tp):
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if errors:
            return self._response(request, lambda tp: errors.get(tp, ErrorCode.OPERATION_NOT_ATTEMPTED))
        d = ensureDeferred(self.coordinator.add_partitions(tid, body.v3_and_below_producer_id,
                                                           body.v3_and_below_producer_epoch, partitions))
        if not d.called:
            request.mark_local_complete()
        error = fenced_for(await d, request.api_version)
        return self._response(request, lambda tp: error)

    @staticmethod
    def _response(request, error_of):
        R = m.AddPartitionsToTxnResponse
        T = R.AddPartitionsToTxnTopicResult
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=[
            T(name=topic.name, results_by_partition=[
                T.AddPartitionsToTxnPartitionResult(partition_index=p,
                                                    partition_error_code=error_of((topic.name, p)))
                for p in topic.partitions])
            for topic in request.body.v3_and_below_topics])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return self._response(request, lambda tp: error)


class AddOffsetsToTxnHandler(ApiHandler):
    api_key = ApiKey.ADD_OFFSETS_TO_TXN
    group_operation = AclOperation.READ

    def __init__(self, coordinator: TransactionCoordinator, groups: GroupCoordinator, *,
                 authorization: Authorization):
        self.authorization = authorization
        self.coordinator = coordinator
        self.groups = groups

    async def handle(self, request):
        body = request.body
        if not _may_write(self, request, body.transactional_id):
            return self.error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        partition = (OFFSETS_TOPIC, self.groups.partition_for(body.group_id))
        d = ensureDeferred(self.coordinator.add_partitions(body.transactional_id, body.producer_id,
                                                           body.producer_epoch, [partition]))
        if not d.called:
            request.mark_local_complete()
        return self.error_response(request, fenced_for(await d, request.api_version))

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=error)


class EndTxnHandler(ApiHandler):
    api_key = ApiKey.END_TXN

    def __init__(self, coordinator: TransactionCoordinator, *, authorization: Authorization):
        self.authorization = authorization
        self.coordinator = coordinator

    async def handle(self, request):
        body = request.body
        if not _may_write(self, request, body.transactional_id):
            return self.error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        d = ensureDeferred(self.coordinator.end_transaction(body.transactional_id, body.producer_id,
                                                            body.producer_epoch, body.committed))
        if not d.called:
            request.mark_local_complete()
        return self.error_response(request, fenced_for(await d, request.api_version))

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.EndTxnResponse(throttle_time_ms=0, error_code=error)


class TxnOffsetCommitHandler(ApiHandler):
    api_key = ApiKey.TXN_OFFSET_COMMIT
    group_operation = AclOperation.READ

    def __init__(self, groups: GroupCoordinator, metadata_cache: MetadataCache, clock, *,
                 authorization: Authorization):
        self.authorization = authorization
        self.groups = groups
        self.cache = metadata_cache
        self.clock = clock

    async def handle(self, request):
        body = request.body
        version = request.api_version
        if not _may_write(self, request, body.transactional_id):
            return self.error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        now = int(self.clock.seconds() * 1000)
        errors, offsets = offsets_to_commit(self, self.cache, request, now, with_leader_epoch=version >= 2)
        if offsets:
            v3 = version >= 3
            d = self.groups.transactional_offsets.commit(
                body.group_id, body.producer_id, body.producer_epoch, body.member_id if v3 else "",
                body.group_instance_id if v3 else None, body.generation_id if v3 else -1, offsets)
            if not d.called:
                request.mark_local_complete()
            errors.update(await d)
        return self._response(request, lambda tp: fenced_for(errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR),
                                                             version, 3))

    @staticmethod
    def _response(request, error_of):
        R = m.TxnOffsetCommitResponse
        T = R.TxnOffsetCommitResponseTopic
        return R(throttle_time_ms=0, topics=[
            T(name=topic.name, partitions=[
                T.TxnOffsetCommitResponsePartition(partition_index=p.partition_index,
                                                   error_code=error_of((topic.name, p.partition_index)))
                for p in topic.partitions])
            for topic in request.body.topics])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return self._response(request, lambda tp: error)


__all__ = ["AddOffsetsToTxnHandler", "AddPartitionsToTxnHandler", "EndTxnHandler", "TxnOffsetCommitHandler",
           "fenced_for"]

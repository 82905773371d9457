"""DescribeProducers (61), v0 (KIP-664): the producers a partition's leader knows.

For each partition this broker leads: every producer id in its producer
state with its epoch, last sequence, last timestamp, the coordinator epoch
of its last marker and the first offset of its open transaction (-1 when
none) -- how an operator finds a hanging transaction.  A topic needs READ
(TOPIC_AUTHORIZATION_FAILED, checked first as in Kafka); a partition this
broker hosts but does not lead is NOT_LEADER_OR_FOLLOWER, one it does not
host UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation

from ..api_handler import ApiHandler
from ..authorization import TOPIC, Authorization
from ..replica_manager import ReplicaManager

R = m.DescribeProducersResponse
_Topic = R.TopicResponse
_Partition = _Topic.PartitionResponse
_Producer = _Partition.ProducerState


class DescribeProducersHandler(ApiHandler):
    api_key = ApiKey.DESCRIBE_PRODUCERS

    def __init__(self, replica_manager: ReplicaManager, *, authorization: Authorization):
        self.authorization = authorization
        self.replicas = replica_manager

    async def handle(self, request):
        topics = request.body.topics
        auth = self.authorization
        names = {t.name for t in topics}
        denied = names - auth.allowed_names(request.context, AclOperation.READ, TOPIC, names) if auth.enabled else set()
        return R(throttle_time_ms=0, topics=[
            _Topic(name=t.name, partitions=[self._partition(t.name, index, t.name in denied)
                                            for index in t.partition_indexes])
            for t in topics])

    def _partition(self, topic: str, index: int, denied: bool):
        if denied:
            return _Partition(partition_index=index, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                              error_message=None, active_producers=[])
        try:
            partition = self.replicas.leader_partition(topic, index)
        except KafkaError as exc:
            return _Partition(partition_index=index, error_code=exc.code, error_message=exc.message,
                              active_producers=[])
        return _Partition(partition_index=index, error_code=ErrorCode.NONE, error_message=None, active_producers=[
            _Producer(producer_id=entry.producer_id, producer_epoch=entry.producer_epoch, last_sequence=entry.last_seq,
                      last_timestamp=entry.last_timestamp, coordinator_epoch=entry.coordinator_epoch,
                      current_txn_start_offset=entry.current_txn_first_offset)
            for entry in partition.log.active_producers()])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return R(throttle_time_ms=0, topics=[
            _Topic(name=t.name, partitions=[_Partition(partition_index=index, error_code=error, error_message=message,
                                                       active_producers=[]) for index in t.partition_indexes])
            for t in request.body.topics])


__all__ = ["DescribeProducersHandler"]

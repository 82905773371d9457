"""OffsetForLeaderEpoch (23): where a leader epoch ended in this partition's log.

Consumers use it (KIP-320) to detect log truncation after a leadership
change: given the epoch of the last record they consumed, the leader answers
with the largest epoch not above it and the offset where that epoch ended.
"""

from __future__ import annotations

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation, ResourceType

from ..api_handler import ApiHandler
from ..authorization import Authorization
from ..replica_manager import ReplicaManager

R = m.OffsetForLeaderEpochResponse
_Topic = R.OffsetForLeaderTopicResult
_Partition = R.OffsetForLeaderTopicResult.EpochEndOffset


class OffsetForLeaderEpochHandler(ApiHandler):
    api_key = ApiKey.OFFSET_FOR_LEADER_EPOCH

    def __init__(self, replica_manager: ReplicaManager, *, authorization: Authorization):
        self.authorization = authorization
        self.replicas = replica_manager

    async def handle(self, request):
        replicas = self.replicas
        # Kafka (KIP-320): CLUSTER_ACTION on the cluster (followers), or else DESCRIBE on each topic (consumers).
        auth = self.authorization
        any_topic = not auth.enabled or auth.allowed(request.context, AclOperation.CLUSTER_ACTION,
                                                     ResourceType.CLUSTER, log_denied=False)
        topics = []
        for topic in request.body.topics:
            entries = []
            for wanted in topic.partitions:
                try:
                    if not any_topic:
                        auth.require(request.context, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.topic)
                    partition = replicas.leader_partition(topic.topic, wanted.partition)
                    partition.check_leader_epoch(wanted.current_leader_epoch)
                    epoch, end_offset = partition.log.end_offset_for_epoch(wanted.leader_epoch)
                    entries.append(_Partition(error_code=ErrorCode.NONE, partition=wanted.partition,
                                              leader_epoch=epoch, end_offset=end_offset))
                except KafkaError as exc:
                    entries.append(_Partition(error_code=exc.code, partition=wanted.partition,
                                              leader_epoch=-1, end_offset=-1))
            topics.append(_Topic(topic=topic.topic, partitions=entries))
        return R(throttle_time_ms=0, topics=topics)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return R(throttle_time_ms=0, topics=[_Topic(topic=t.topic, partitions=[
            _Partition(error_code=error, partition=p.partition, leader_epoch=-1, end_offset=-1)
            for p in t.partitions]) for t in request.body.topics])

"""DeleteRecords (21): move partitions' log start offsets forward, on their leader.

For each partition, as Kafka's ``ReplicaManager.deleteRecords``: the offset
-1 means the high watermark; an offset above the high watermark (or another
negative one) is OFFSET_OUT_OF_RANGE; a partition not hosted here is
UNKNOWN_TOPIC_OR_PARTITION, one led elsewhere NOT_LEADER_OR_FOLLOWER; a topic
whose ``cleanup.policy`` lacks ``delete`` refuses with POLICY_VIOLATION.  An
offset below the current log start changes nothing.  The answer's
``low_watermark`` is the new log start offset, which ListOffsets(earliest)
and Fetch's ``log_start_offset`` report from then on; whole segments below it
are deleted at once.  The new log start offsets are checkpointed before the
answer, so a restart does not bring deleted records back.  On one node every
replica is the leader, so there is nothing to wait for.
"""

from __future__ import annotations

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation, ResourceType

from ..api_handler import ApiHandler
from ..authorization import Authorization
from ..replica_manager import ReplicaManager

R = m.DeleteRecordsResponse
_Topic = R.DeleteRecordsTopicResult
_Partition = R.DeleteRecordsTopicResult.DeleteRecordsPartitionResult

class DeleteRecordsHandler(ApiHandler):
    api_key = ApiKey.DELETE_RECORDS

    def __init__(self, replica_manager: ReplicaManager, *, authorization: Authorization):
        self.authorization = authorization
        self.replicas = replica_manager

    def _delete(self, topic: str, index: int, offset: int) -> int:
        """The new log start offset of ``topic``-``index``; raises KafkaError."""
        replicas = self.replicas
        return replicas.delete_records(replicas.leader_partition(topic, index), offset)

    async def handle(self, request):
        topics = []
        changed = False
        for topic in request.body.topics:
            entries = []
            for wanted in topic.partitions:
                try:
                    self.authorization.require(request.context, AclOperation.DELETE, ResourceType.TOPIC, topic.name)
                    before = self.replicas.leader_partition(topic.name, wanted.partition_index).log_start_offset
                    low = self._delete(topic.name, wanted.partition_index, wanted.offset)
                    changed = changed or low != before
                    entries.append(_Partition(partition_index=wanted.partition_index, low_watermark=low,
                                              error_code=ErrorCode.NONE))
                except KafkaError as exc:
                    entries.append(_Partition(partition_index=wanted.partition_index, low_watermark=-1,
                                              error_code=exc.code))
            topics.append(_Topic(name=topic.name, partitions=entries))
        if changed:
            request.mark_local_complete()
            await self.replicas.checkpoint_log_start_offsets()
        return R(throttle_time_ms=0, topics=topics)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return R(throttle_time_ms=0, topics=[_Topic(name=t.name, partitions=[
            _Partition(partition_index=p.partition_index, low_watermark=-1, error_code=error)
            for p in t.partitions]) for t in request.body.topics])

"""ListOffsets (2): earliest, latest, max-timestamp, or the first offset at a time.

Special timestamps as in Kafka: -2 the log start offset, -1 the end — the
high watermark, or the last stable offset for read_committed — and -3 (v7+)
the record with the largest timestamp.  Any other value finds the first
record whose timestamp is at least it, through the time index, in the I/O
thread pool (it may read index files and decompress a batch); none → -1.

Version 0 (Kafka 0.8's ListOffsets, which Kafka 4.0 removed and Burrow 1.2
still sends) answers a list of offsets, at most ``max_num_offsets``: here
the one offset a v1 request gets (Kafka 0.8 listed segment base offsets
after it for a time; clients take the first).
"""

from __future__ import annotations

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation

from ..api_handler import ApiHandler
from ..authorization import TOPIC, Authorization
from ..replica_manager import ReplicaManager

R = m.ListOffsetsResponse
_Topic = R.ListOffsetsTopicResponse
_Partition = R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
READ_COMMITTED = 1


class ListOffsetsHandler(ApiHandler):
    api_key = ApiKey.LIST_OFFSETS

    def __init__(self, replica_manager: ReplicaManager, *, authorization: Authorization):
        self.authorization = authorization
        self.replicas = replica_manager

    async def _offset(self, request, topic: str, wanted) -> tuple[int, int, int]:
        """(timestamp, offset, leader_epoch) for one partition; raises KafkaError."""
        self.authorization.require(request.context, AclOperation.DESCRIBE, TOPIC, topic)
        replicas = self.replicas
        partition = replicas.leader_partition(topic, wanted.partition_index)
        if request.api_version >= 4:
            partition.check_leader_epoch(wanted.current_leader_epoch)
        log = partition.log
        timestamp = wanted.timestamp
        if timestamp == EARLIEST:
            return -1, log.log_start_offset, log.epoch_for_offset(log.log_start_offset)
        if timestamp == LATEST and request.body.replica_id >= 0:
            # A follower (Kafka's debug/replica read): the leader's log end, not the high watermark.
            return -1, log.committed_end_offset, partition.leader_epoch
        if timestamp == LATEST:
            committed = request.api_version >= 2 and request.body.isolation_level == READ_COMMITTED
            offset = partition.last_stable_offset if committed else partition.high_watermark
            return -1, offset, partition.leader_epoch
        if timestamp == MAX_TIMESTAMP and request.api_version >= 7:
            request.mark_local_complete()
            found = await replicas.fetch_offset_of_max_timestamp(partition)
        elif timestamp < 0:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unsupported special timestamp {timestamp}")
        else:
            request.mark_local_complete()
            found = await replicas.fetch_offset_for_timestamp(partition, timestamp)
        if found is None:
            return -1, -1, -1
        return found.timestamp, found.offset, found.leader_epoch

    async def handle(self, request):
        version = request.api_version
        topics = []
        for topic in request.body.topics:
            entries = []
            for wanted in topic.partitions:
                try:
                    timestamp, offset, epoch = await self._offset(request, topic.name, wanted)
                    old_style = [offset][:max(wanted.max_num_offsets, 0)] if version == 0 and offset >= 0 else []
                    entries.append(_Partition(partition_index=wanted.partition_index, error_code=ErrorCode.NONE,
                                              old_style_offsets=old_style, timestamp=timestamp, offset=offset,
                                              leader_epoch=epoch))
                except KafkaError as exc:
                    entries.append(_Partition(partition_index=wanted.partition_index, error_code=exc.code,
                                              old_style_offsets=[], timestamp=-1, offset=-1, leader_epoch=-1))
            topics.append(_Topic(name=topic.name, partitions=entries))
        return R(throttle_time_ms=0, topics=topics)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return R(throttle_time_ms=0, topics=[_Topic(name=t.name, partitions=[
            _Partition(partition_index=p.partition_index, error_code=error, old_style_offsets=[], timestamp=-1,
                       offset=-1, leader_epoch=-1) for p in t.partitions]) for t in request.body.topics])

"""DescribeLogDirs (35): each log directory of this broker, with the size and lag of its partitions.

Kafka's ``ReplicaManager.describeLogDirs``: every directory of ``log.dirs``
is listed (also one holding none of the requested partitions), each
partition with its size on disk, its offset lag -- ``max(high watermark -
log end offset, 0)``, so 0 on a leader -- and ``is_future_key`` false (no
replica is ever being moved between directories here: AlterReplicaLogDirs
(34) is not served).  ``topics`` null asks for every partition.  v4 adds the
directory's total and usable bytes, read with ``statvfs`` as Kafka reads its
``FileStore``; a directory that cannot be read is answered with
KAFKA_STORAGE_ERROR, as an offline directory is in Kafka.  The request needs
DESCRIBE on the cluster; refused, it is answered with no directory and (v3+)
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

import shutil

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation

from ..api_handler import ApiHandler
from ..replica_manager import ReplicaManager

R = m.DescribeLogDirsResponse
_Result = R.DescribeLogDirsResult
_Topic = _Result.DescribeLogDirsTopic
_Partition = _Topic.DescribeLogDirsPartition


class DescribeLogDirsHandler(ApiHandler):
    api_key = ApiKey.DESCRIBE_LOG_DIRS
    cluster_operation = AclOperation.DESCRIBE

    def __init__(self, replica_manager: ReplicaManager):
        self.replicas = replica_manager

    async def handle(self, request):
        logs = self.replicas.log_manager
        topics = request.body.topics
        wanted = None if topics is None else {(t.topic, p) for t in topics for p in t.partitions}
        by_dir: dict[str, dict[str, list]] = {d: {} for d in logs.log_dirs}
        for log in logs.all_logs():
            key = (log.topic, log.partition)
            if wanted is not None and key not in wanted:
                continue
            log_dir = logs.log_dir_of(*key)
            if log_dir is None:
                continue
            by_dir.setdefault(log_dir, {}).setdefault(log.topic, []).append(_Partition(
                partition_index=log.partition, partition_size=log.size,
                offset_lag=max(log.high_watermark - log.log_end_offset, 0), is_future_key=False))
        results = []
        for log_dir, partitions in by_dir.items():
            try:
                # statvfs: a metadata call, answered from the kernel's cache (Kafka reads it in its handler too).
                usage = shutil.disk_usage(log_dir)
                error, total, usable = ErrorCode.NONE, usage.total, usage.free
            except OSError:
                error, total, usable = ErrorCode.KAFKA_STORAGE_ERROR, -1, -1
            results.append(_Result(
                error_code=error, log_dir=log_dir, total_bytes=total, usable_bytes=usable,
                topics=[] if error else [_Topic(name=topic, partitions=sorted(ps, key=lambda p: p.partition_index))
                                         for topic, ps in sorted(partitions.items())]))
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return R(throttle_time_ms=0, error_code=error, results=[])

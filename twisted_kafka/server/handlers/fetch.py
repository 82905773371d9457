"""Fetch (1): read record batches, long-polling until ``min_bytes`` or ``max_wait_ms``.

Limits follow KIP-74: partitions are read in request order, each up to its
``partition_max_bytes`` and to what is left of the response's ``max_bytes``
(capped by the broker's ``fetch.max.bytes``); only the first partition that
returns data may exceed the limits, by whole first batch, so a consumer can
always make progress — never megabytes beyond what was asked otherwise.

Consumers read up to the high watermark; ``read_committed`` consumers up to
the last stable offset, which equals the high watermark while there are no
transactions (librdkafka reads with read_committed by default and hides
records at or beyond a smaller last stable offset).  When less
than ``min_bytes`` is available the fetch waits in the purgatory, freeing its
handler, and is read again as soon as appends bring enough bytes or the wait
expires; a fetch of no partition at all never waits (Kafka answers it at
once: no append could wake it).  A follower's fetch (``replica_id`` >= 0,
KIP-392's replica fetch) reads up to the log end instead, and each partition's fetch offset
tells the leader where the follower's log ends (``ReplicaManager.follower_fetched``):
the high watermark in its answer already counts it.  Incremental fetch sessions (KIP-227) are not offered: the answer's
``session_id`` is 0, which every client accepts as "full fetches only".

Authorization (Kafka's ``handleFetchRequest``): a consumer needs READ on each
topic (TOPIC_AUTHORIZATION_FAILED for that topic's partitions otherwise), a
follower CLUSTER_ACTION on the cluster.
"""

from __future__ import annotations

from twisted.logger import Logger

from twisted_kafka.log import FetchIsolation
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.fetch_response import FetchableTopicResponse, FetchResponseData, PartitionData
from twisted_kafka.protocol.registry import ApiKey

from twisted_kafka.security.acl import AclOperation

from ..api_handler import ApiHandler
from ..authorization import CLUSTER, TOPIC
from ..dynamic_config import DynamicBrokerConfig
from ..metadata_cache import MetadataCache
from ..replica_manager import ReplicaManager

log = Logger(namespace="twisted_kafka.server.handlers.fetch")

READ_COMMITTED = 1


class FetchHandler(ApiHandler):
    api_key = ApiKey.FETCH

    def __init__(self, replica_manager: ReplicaManager, metadata_cache: MetadataCache, config: DynamicBrokerConfig):
        self.replicas = replica_manager
        self.metadata_cache = metadata_cache
        self.config = config

    def _topic_name(self, request, topic) -> str | None:
        if request.api_version >= 13:
            return self.metadata_cache.topic_name(topic.topic_id)
        return topic.topic

    async def _read_all(self, request):
        """One pass over the requested partitions: (response topics, bytes read, any error)."""
        body = request.body
        replicas = self.replicas
        remaining = min(body.max_bytes if request.api_version >= 3 else 2**31 - 1, self.config["fetch.max.bytes"])
        read_committed = request.api_version >= 4 and body.isolation_level == READ_COMMITTED
        follower = body.replica_id if body.replica_id >= 0 else None
        isolation = FetchIsolation.of(follower=follower is not None, read_committed=read_committed)
        total = 0
        any_error = False
        topics = []
        auth = self.authorization
        for topic in body.topics:
            name = self._topic_name(request, topic)
            # A follower is authorized as a whole (CLUSTER_ACTION, in ``handle``), a consumer per topic.
            denied = follower is None and auth.enabled and name is not None and not auth.allowed(
                request.context, AclOperation.READ, TOPIC, name)
            entries = []
            for wanted in topic.partitions:
                # Records are an empty set, never null, when there is nothing to
                # return (Kafka sends MemoryRecords.EMPTY): librdkafka 2.0 (kcat)
                # rejects a null record set ("invalid MessageSetSize -1").
                entry = PartitionData(partition_index=wanted.partition, records=b"",
                                      aborted_transactions=[] if read_committed else None)
                try:
                    if denied:
                        raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
                    if name is None:
                        raise KafkaError(ErrorCode.UNKNOWN_TOPIC_ID, "Unknown topic id")
                    partition = replicas.leader_partition(name, wanted.partition)
                    if request.api_version >= 9:
                        partition.check_leader_epoch(wanted.current_leader_epoch)
                    if follower is not None:
                        replicas.follower_fetched(partition, follower, wanted.fetch_offset)
                    entry.high_watermark = partition.high_watermark
                    entry.last_stable_offset = partition.last_stable_offset
                    entry.log_start_offset = partition.log_start_offset
                    limit = min(wanted.partition_max_bytes, remaining)
                    if limit > 0 or total == 0:
                        info = await self._read(partition, wanted.fetch_offset, max(limit, 0),
                                                isolation=isolation, min_one_message=total == 0)
                        if info.size:
                            entry.records = info.records
                            total += info.size
                            remaining -= info.size
                except KafkaError as exc:
                    entry.error_code = exc.code
                    any_error = True
                entries.append(entry)
            topics.append(FetchableTopicResponse(topic=name if request.api_version < 13 else None,
                                                 topic_id=topic.topic_id if request.api_version >= 13 else None,
                                                 partitions=entries))
        return topics, total, any_error

    async def _read(self, partition, fetch_offset: int, max_bytes: int, **kwargs):
        """Read one partition; a failure other than a KafkaError (the log was deleted and
        closed while a read waited for the disk, an I/O error) fails only this partition."""
        try:
            return await self.replicas.read(partition, fetch_offset, max_bytes, **kwargs)
        except KafkaError:
            raise
        except Exception as exc:
            if partition.log.deleted:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"{partition.topic}-{partition.index} was deleted") from None
            log.failure("Reading {topic}-{partition} at offset {offset} failed",
                                    topic=partition.topic, partition=partition.index, offset=fetch_offset)
            self.replicas.topic_stats.topic(partition.topic).fetch_failed()
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"read failed: {exc}") from None

    async def handle(self, request):
        body = request.body
        version = request.api_version
        if version >= 7 and body.session_id != 0:
            return FetchResponseData(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
        if body.replica_id >= 0:
            self.authorization.require(request.context, AclOperation.CLUSTER_ACTION, CLUSTER)
        topics, total, any_error = await self._read_all(request)
        watched = [(self._topic_name(request, t), p.partition) for t in body.topics for p in t.partitions]
        # As Kafka's ReplicaManager.fetchMessages: a fetch of no partition is answered at once (no
        # append could ever wake it), as is one that does not want to wait or has enough already.
        if watched and total < body.min_bytes and body.max_wait_ms > 0 and not any_error:
            request.mark_local_complete()
            await self.replicas.purgatory.wait(watched, body.min_bytes, total, body.max_wait_ms,
                                               replica=body.replica_id >= 0)
            topics, total, any_error = await self._read_all(request)
        self.replicas.topic_stats.fetched([self._topic_name(request, t) for t in body.topics], topics,
                                          follower=body.replica_id >= 0)
        return FetchResponseData(responses=topics, throttle_time_ms=0, error_code=ErrorCode.NONE, session_id=0)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return FetchResponseData(error_code=error if request.api_version >= 7 else ErrorCode.NONE, responses=[
            FetchableTopicResponse(topic=t.topic if request.api_version < 13 else None,
                                   topic_id=t.topic_id if request.api_version >= 13 else None,
                                   partitions=[PartitionData(partition_index=p.partition, error_code=error,
                                                             records=b"") for p in t.partitions])
            for t in request.body.topics])

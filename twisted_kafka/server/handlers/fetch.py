"""Fetch (1): read record batches, long-polling until ``min_bytes`` or ``max_wait_ms``.

The handler checks what the request may read and makes one call,
``ReplicaManager.fetch_messages`` (Kafka's ``fetchMessages``), which reads
the partitions within KIP-74's limits and, when there is less than
``min_bytes``, waits in the fetch purgatory -- the handler's slot is given
back meanwhile -- and reads again when the wait ends.

Consumers read up to the high watermark; ``read_committed`` consumers up to
the last stable offset, with the transactions aborted in what they read
(the log's ``FetchDataInfo.aborted_transactions``); it equals the high
watermark while no transaction is open (librdkafka reads with
read_committed by default and hides records at or beyond it).  A follower's fetch
(``replica_id`` >= 0, KIP-392's replica fetch) reads up to the log end
instead, and each partition's fetch offset tells the leader where the
follower's log ends.  The limits are ``max_bytes`` (v3+) capped by the
broker's ``fetch.max.bytes``.  Incremental fetch sessions (KIP-227, v7+) are
served by ``FetchManager`` (``server/fetch_session.py``): the context it
makes from ``session_id``/``session_epoch`` names the partitions to read (a
session's, for an incremental fetch) and which of their answers the
response carries.

Authorization (Kafka's ``handleFetchRequest``): a consumer needs READ on each
topic (TOPIC_AUTHORIZATION_FAILED for that topic's partitions otherwise), a
follower CLUSTER_ACTION on the cluster.  A partition refused here (not
authorized, an unknown topic id) is not read, and the fetch is answered at
once, as when a read fails.
"""

from __future__ import annotations

from twisted_kafka.log import FetchIsolation
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.fetch_response import FetchableTopicResponse, FetchResponseData, PartitionData
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation

from ..api_handler import ApiHandler
from ..authorization import CLUSTER, TOPIC, Authorization
from ..dynamic_config import DynamicBrokerConfig
from ..fetch_session import CachedPartition, FetchManager, FetchSessionCache
from ..metadata_cache import MetadataCache
from ..replica_manager import FetchParams, FetchPartitionResult, FetchTarget, PartitionFetch, ReplicaManager

READ_COMMITTED = 1
#: Listeners whose records go from the segment file to the socket with sendfile (Kafka's
#: FileRecords.writeTo); on SSL and SASL_SSL listeners the bytes must pass through TLS.
PLAINTEXT_PROTOCOLS = frozenset({"PLAINTEXT", "SASL_PLAINTEXT"})


class FetchHandler(ApiHandler):
    api_key = ApiKey.FETCH

    def __init__(self, replica_manager: ReplicaManager, metadata_cache: MetadataCache, config: DynamicBrokerConfig,
                 *, authorization: Authorization, clock=None):
        """``clock``: the reactor, for the sessions' times of use (the global reactor when None)."""
        self.authorization = authorization
        self._clock = clock
        self._sessions: FetchManager | None = None
        self.replicas = replica_manager
        self.metadata_cache = metadata_cache
        self.config = config

    @property
    def sessions(self) -> FetchManager:
        """The fetch sessions, made at first use (the handler table is also built to list its API keys)."""
        if self._sessions is None:
            clock = self._clock
            if clock is None:
                from twisted.internet import reactor as clock
            self._sessions = FetchManager(FetchSessionCache(
                self.config["max.incremental.fetch.session.cache.slots"], clock))
        return self._sessions

    async def handle(self, request):
        body = request.body
        version = request.api_version
        follower = body.replica_id >= 0
        if follower:
            self.authorization.require(request.context, AclOperation.CLUSTER_ACTION, CLUSTER)
        ids = version >= 13     # topics named by id: the session is keyed by ids then
        requested = [CachedPartition(topic.topic_id if ids else topic.topic, p.partition, p.fetch_offset,
                                     p.partition_max_bytes, p.current_leader_epoch if version >= 9 else -1,
                                     p.log_start_offset if version >= 5 else -1)
                     for topic in body.topics for p in topic.partitions]
        forgotten = ([(t.topic_id if ids else t.topic, index) for t in body.forgotten_topics_data
                      for index in t.partitions]
                     if version >= 7 else ())
        context = self.sessions.new_context(version, body.session_id if version >= 7 else 0,
                                            body.session_epoch if version >= 7 else -1, requested, forgotten,
                                            privileged=follower, topic_ids=ids)
        if context.error:
            return FetchResponseData(error_code=context.error, session_id=0, responses=[], throttle_time_ms=0)
        partitions = context.partitions
        read_committed = version >= 4 and body.isolation_level == READ_COMMITTED
        auth = self.authorization
        # Every partition of the fetch, in order: what to read (the session's partition itself when it is
        # named by topic name), or the error it is refused with.
        wanted: list[FetchTarget | ErrorCode] = []
        denied: dict[str, bool] = {}
        for p in partitions:
            name = self.metadata_cache.topic_name(p.topic) if ids else p.topic
            if name is None:
                wanted.append(ErrorCode.UNKNOWN_TOPIC_ID)
                continue
            refused = denied.get(name)
            if refused is None:
                # A follower is authorized as a whole (CLUSTER_ACTION, above), a consumer per topic.
                refused = denied[name] = not follower and auth.enabled and not auth.allowed(
                    request.context, AclOperation.READ, TOPIC, name)
            if refused:
                wanted.append(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            elif ids:
                wanted.append(PartitionFetch(name, p.partition, p.fetch_offset, p.max_bytes, p.current_leader_epoch))
            else:
                wanted.append(p)
        fetches = [w for w in wanted if not isinstance(w, ErrorCode)]
        refused_any = len(fetches) < len(wanted)
        params = FetchParams(
            replica_id=body.replica_id, max_wait_ms=0 if refused_any else body.max_wait_ms, min_bytes=body.min_bytes,
            max_bytes=min(body.max_bytes if version >= 3 else 2**31 - 1, self.config["fetch.max.bytes"]),
            isolation=FetchIsolation.of(follower=follower, read_committed=read_committed),
            file_regions=request.context.security_protocol in PLAINTEXT_PROTOCOLS)
        results = await self.replicas.fetch_messages(params, fetches, on_wait=request.mark_local_complete)
        if refused_any:
            read = iter(results)
            results = [FetchPartitionResult(error=w) if isinstance(w, ErrorCode) else next(read) for w in wanted]
        session_id, carried = context.respond(results)
        # One topic entry per run of partitions of the same topic, in the order read.
        topics: list[FetchableTopicResponse] = []
        topic_names: list[str | None] = []
        last = None
        for p, result in carried:
            if not topics or last != p.topic:
                last = p.topic
                name = self.metadata_cache.topic_name(p.topic) if ids else p.topic
                topic_names.append(name)
                topics.append(FetchableTopicResponse(topic=None if ids else p.topic, topic_id=p.topic if ids else None,
                                                     partitions=[]))
            # Records are an empty set, never null, when there is nothing to return (Kafka sends
            # MemoryRecords.EMPTY): librdkafka 2.0 (kcat) rejects a null record set
            # ("invalid MessageSetSize -1").
            topics[-1].partitions.append(PartitionData(
                partition_index=p.partition, error_code=result.error, high_watermark=result.high_watermark,
                last_stable_offset=result.last_stable_offset, log_start_offset=result.log_start_offset,
                records=result.records, aborted_transactions=result.aborted_transactions if read_committed else None))
        self.replicas.topic_stats.fetched(topic_names, topics, follower=follower)
        return FetchResponseData(responses=topics, throttle_time_ms=0, error_code=ErrorCode.NONE,
                                 session_id=session_id)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return FetchResponseData(error_code=error if request.api_version >= 7 else ErrorCode.NONE, responses=[
            FetchableTopicResponse(topic=t.topic if request.api_version < 13 else None,
                                   topic_id=t.topic_id if request.api_version >= 13 else None,
                                   partitions=[PartitionData(partition_index=p.partition, error_code=error,
                                                             records=b"") for p in t.partitions])
            for t in request.body.topics])

"""Metadata (3): brokers, cluster id, controller and topics, from the MetadataCache.

Brokers are listed with their advertised endpoint for the listener the
request arrived on, so a client that bootstrapped through one listener keeps
using it.  Topic-list semantics follow the version: in v0 an empty list means
every topic; from v1, null means every topic and an empty list none.  Known
topics are answered from the cache's encoded fragments; unknown ones with
UNKNOWN_TOPIC_OR_PARTITION.
"""

from __future__ import annotations

from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.metadata_response import assemble
from twisted_kafka.protocol.registry import ApiKey

from ..metadata_cache import CLUSTER_AUTHORIZED_OPERATIONS, error_fragment


class MetadataHandler:
    api_key = ApiKey.METADATA

    def __init__(self, server):
        self.server = server
        self.cache = server.metadata_cache

    def requested_topics(self, request) -> list[str] | None:
        """Names asked for, or None for "every topic"."""
        topics = request.body.topics
        if topics is None or (request.api_version == 0 and not topics):
            return None
        return [t.name for t in topics]

    async def handle(self, request):
        version = request.api_version
        body = request.body
        with_topic_ops = bool(version >= 8 and body.include_topic_authorized_operations)
        names = self.requested_topics(request)
        fragments = []
        if names is None:
            for name in sorted(self.cache.topics):
                fragments.append(self.cache.topic_fragment(name, version, with_topic_ops))
        else:
            for name in dict.fromkeys(names):
                if name in self.cache.topics:
                    fragments.append(self.cache.topic_fragment(name, version, with_topic_ops))
                else:
                    fragments.append(error_fragment(version, name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        cluster_ops = None
        if 8 <= version <= 10 and body.include_cluster_authorized_operations:
            cluster_ops = CLUSTER_AUTHORIZED_OPERATIONS
        return assemble(request.header, version, 0,
                        self.cache.alive_brokers(request.listener_name), self.cache.cluster_id,
                        self.cache.controller_id, fragments, cluster_ops)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        version = request.api_version
        names = self.requested_topics(request) or []
        return assemble(request.header, version, 0, self.cache.alive_brokers(request.listener_name),
                        self.cache.cluster_id, self.cache.controller_id,
                        [error_fragment(version, name, error) for name in names], None,
                        error if version >= 13 else 0)

    def response_version(self, request) -> int:
        return request.api_version

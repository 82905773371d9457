"""Metadata (3): brokers, cluster id, controller and topics, from the MetadataCache.

Brokers are listed with their advertised endpoint for the listener the
request arrived on, so a client that bootstrapped through one listener keeps
using it.  Topic-list semantics follow the version: in v0 an empty list means
every topic; from v1, null means every topic and an empty list none.  Known
topics are answered from the cache's encoded fragments.

An unknown topic is created when ``auto.create.topics.enable`` is on and the
request allows it (always before v4; ``allow_auto_topic_creation`` from v4 —
librdkafka's consumers send false and its producers true, kafka-python and
aiokafka always send true), with ``num.partitions`` and
``default.replication.factor``.  Kafka
answers LEADER_NOT_AVAILABLE while the creation propagates; here the handler
waits for the controller (a few milliseconds on one node) and answers with
the new topic, saving the client a retry round.  Otherwise unknown topics get
UNKNOWN_TOPIC_OR_PARTITION, and illegal names INVALID_TOPIC_EXCEPTION.

Authorization (Kafka's ``handleTopicMetadataRequest``): a request for every
topic lists only the topics the principal may DESCRIBE; a topic asked for by
name without DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED (whether it
exists or not), and a missing one is auto-created only with CREATE on the
cluster or on that topic -- otherwise TOPIC_AUTHORIZATION_FAILED too.
"""

from __future__ import annotations

from collections import Counter

from twisted_kafka.controller.interface import validate_topic_name
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.metadata_response import assemble
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation

from ..admin_manager import AdminManager
from ..api_handler import ApiHandler, Encoded
from ..authorization import CLUSTER, TOPIC, Authorization
from ..dynamic_config import DynamicBrokerConfig
from ..metadata_cache import CLUSTER_AUTHORIZED_OPERATIONS, TOPIC_OPERATIONS, MetadataCache, error_fragment


class MetadataHandler(ApiHandler):
    api_key = ApiKey.METADATA

    def __init__(self, metadata_cache: MetadataCache, admin_manager: AdminManager, config: DynamicBrokerConfig, *,
                 authorization: Authorization):
        self.authorization = authorization
        self.cache = metadata_cache
        self.admin = admin_manager
        self.config = config

    def requested_topics(self, request) -> list[str] | None:
        """Names asked for, or None for "every topic".  From v10 a topic may be asked for by id alone
        (librdkafka does so for the topic ids of a KIP-848 assignment); a known id stands for its name."""
        topics = request.body.topics
        if topics is None or (request.api_version == 0 and not topics):
            return None
        return [t.name if t.name is not None or request.api_version < 10
                else (self.cache.topic_name(t.topic_id) or "") for t in topics]

    def unknown_topic_ids(self, request) -> list:
        """The ids asked for (v10+, without a name) that name no topic: answered UNKNOWN_TOPIC_ID."""
        topics = request.body.topics
        if request.api_version < 10 or not topics:
            return []
        return [t.topic_id for t in topics if t.name is None and self.cache.topic_name(t.topic_id) is None]

    async def handle(self, request):
        version = request.api_version
        body = request.body
        with_topic_ops = bool(version >= 8 and body.include_topic_authorized_operations)
        names = self.requested_topics(request)
        fragments = []
        errors: Counter[int] = Counter()            # the codes the answer carries (ErrorsPerSec)
        auth = self.authorization
        if names is None:
            visible = sorted(self.cache.topics)
            if auth.enabled:
                visible = sorted(auth.allowed_names(request.context, AclOperation.DESCRIBE, TOPIC, visible,
                                                    log_denied=False))
            for name in visible:
                fragments.append(self._fragment(request, name, version, with_topic_ops))
                errors.update(self.cache.fragment_errors(name))
        else:
            unknown_ids = self.unknown_topic_ids(request)
            for topic_id in unknown_ids:
                fragments.append(error_fragment(version, None, ErrorCode.UNKNOWN_TOPIC_ID, topic_id))
                errors[ErrorCode.UNKNOWN_TOPIC_ID] += 1
            names = [name for name in dict.fromkeys(names) if name or not unknown_ids]
            denied: set[str] = set()
            if auth.enabled:
                denied = set(names) - auth.allowed_names(request.context, AclOperation.DESCRIBE, TOPIC, names)
            created = await self._auto_create(request, [n for n in names
                                                        if n not in self.cache.topics and n not in denied])
            for name in names:
                if name in self.cache.topics and name not in denied:
                    fragments.append(self._fragment(request, name, version, with_topic_ops))
                    errors.update(self.cache.fragment_errors(name))
                    continue
                error = ErrorCode.TOPIC_AUTHORIZATION_FAILED if name in denied else \
                    created.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                fragments.append(error_fragment(version, name, error))
                errors[error] += 1
        cluster_ops = None
        if 8 <= version <= 10 and body.include_cluster_authorized_operations:
            cluster_ops = auth.authorized_operations(request.context, CLUSTER, CLUSTER_AUTHORIZED_OPERATIONS)
        if version >= 13:                                  # v13+ has a top-level error code too
            errors[ErrorCode.NONE] += 1
        return Encoded(assemble(request.header, version, 0,
                                self.cache.alive_brokers(request.listener_name), self.cache.cluster_id,
                                self.cache.controller_id, fragments, cluster_ops), errors)

    def _fragment(self, request, name: str, version: int, with_topic_ops: bool) -> bytes:
        """A topic's entry; its authorized operations (when asked for) are the principal's."""
        auth = self.authorization
        if with_topic_ops and auth.enabled:
            operations = frozenset(auth.authorized_operations(request.context, TOPIC, TOPIC_OPERATIONS, name))
            return self.cache.topic_fragment(name, version, True, operations)
        return self.cache.topic_fragment(name, version, with_topic_ops)

    async def _auto_create(self, request, missing: list[str]) -> dict[str, ErrorCode]:
        """Create ``missing`` topics if allowed; the error to report for those still missing."""
        if not missing:
            return {}
        allowed = request.api_version < 4 or request.body.allow_auto_topic_creation
        errors: dict[str, ErrorCode] = {}
        creatable = []
        for name in missing:
            try:
                validate_topic_name(name)
            except KafkaError as exc:
                errors[name] = exc.code
                continue
            creatable.append(name)
        if not (allowed and creatable and self.config["auto.create.topics.enable"]):
            return errors
        auth = self.authorization
        if auth.enabled and not auth.allowed(request.context, AclOperation.CREATE, CLUSTER, log_denied=False):
            permitted = auth.allowed_names(request.context, AclOperation.CREATE, TOPIC, creatable)
            errors.update({name: ErrorCode.TOPIC_AUTHORIZATION_FAILED for name in creatable if name not in permitted})
            creatable = [name for name in creatable if name in permitted]
            if not creatable:
                return errors
        request.mark_local_complete()
        errors.update(await self.admin.auto_create_topics(creatable))
        return errors

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        version = request.api_version
        names = self.requested_topics(request) or []
        errors: dict[int, int] = {error: len(names) + (version >= 13)} if names or version >= 13 else {}
        return Encoded(assemble(request.header, version, 0, self.cache.alive_brokers(request.listener_name),
                                self.cache.cluster_id, self.cache.controller_id,
                                [error_fragment(version, name, error) for name in names], None,
                                error if version >= 13 else 0), errors)

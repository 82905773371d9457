"""CreateTopics (19): new topics through the controller, answered per topic.

As in Kafka:

* only the active controller creates topics (NOT_CONTROLLER otherwise);
* a name given twice in one request is refused for that name with
  INVALID_REQUEST, and the other topics are still created;
* ``num_partitions`` / ``replication_factor`` of -1 take ``num.partitions`` /
  ``default.replication.factor``; explicit ``assignments`` (partition ->
  brokers) replace both and must not be combined with them;
* each topic fails alone, with its error code and, from v1, a message:
  TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR,
  INVALID_REPLICA_ASSIGNMENT, INVALID_CONFIG, INVALID_TOPIC_EXCEPTION;
* ``validate_only`` (v1+) checks everything and creates nothing;
* ``timeout_ms`` > 0 waits (at most that long) until the brokers know the
  new topics, so a client's next Metadata finds them, else REQUEST_TIMED_OUT;
  <= 0 answers as soon as the topics are persisted;
* from v5 a created (or validated) topic comes back with its partition
  count, replication factor and every config with its value and source;
  from v7 with its topic id.
"""

from __future__ import annotations

import uuid
from collections import Counter

from twisted_kafka.controller.interface import NewTopic
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation, ResourceType

from ..admin_manager import AdminManager
from ..api_handler import ApiHandler
from ..authorization import Authorization

R = m.CreateTopicsResponse
_Result = R.CreatableTopicResult
_Config = R.CreatableTopicResult.CreatableTopicConfigs
_ZERO_UUID = uuid.UUID(int=0)


def _error_result(name: str, error: ErrorCode, message: str | None):
    return _Result(name=name, topic_id=_ZERO_UUID, error_code=error, error_message=message,
                   num_partitions=-1, replication_factor=-1, configs=[])


class CreateTopicsHandler(ApiHandler):
    api_key = ApiKey.CREATE_TOPICS

    def __init__(self, admin_manager: AdminManager, *, authorization: Authorization):
        self.authorization = authorization
        self.admin = admin_manager

    async def handle(self, request):
        body = request.body
        counts = Counter(topic.name for topic in body.topics)
        specs = []
        denied: set[str] = set()
        auth = self.authorization
        if auth.enabled and not auth.allowed(request.context, AclOperation.CREATE, ResourceType.CLUSTER,
                                             log_denied=False):
            # Kafka: CREATE on the cluster, or else on each topic (TOPIC_AUTHORIZATION_FAILED for the others).
            names = {topic.name for topic in body.topics}
            denied = names - auth.allowed_names(request.context, AclOperation.CREATE, ResourceType.TOPIC, names)
        for topic in body.topics:
            if counts[topic.name] > 1 or topic.name in denied:
                continue
            assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments} or None
            specs.append(NewTopic(topic.name, topic.num_partitions, topic.replication_factor, assignments,
                                  {c.name: c.value for c in topic.configs}))
        validate_only = bool(getattr(body, "validate_only", False))
        request.mark_local_complete()
        results = await self.admin.create_topics(specs, validate_only=validate_only, timeout_ms=body.timeout_ms)
        by_name = {result.name: result for result in results}
        entries = []
        for name in dict.fromkeys(topic.name for topic in body.topics):
            if counts[name] > 1:
                entries.append(_error_result(name, ErrorCode.INVALID_REQUEST,
                                             f"Create topics request from client `{request.header.client_id}` "
                                             f"contains multiple entries for the following topics: {name}"))
                continue
            if name in denied:
                entries.append(_error_result(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None))
                continue
            result = by_name[name]
            if result.error not in (ErrorCode.NONE, ErrorCode.REQUEST_TIMED_OUT):
                entries.append(_error_result(name, result.error, result.message))
                continue
            entries.append(_Result(
                name=name, topic_id=result.topic_id or _ZERO_UUID, error_code=result.error,
                error_message=result.message, num_partitions=result.num_partitions,
                replication_factor=result.replication_factor,
                configs=[_Config(name=e.name, value=e.value_string, read_only=e.read_only,
                                 config_source=e.source.value, is_sensitive=e.sensitive)
                         for e in self.admin.effective_topic_config(result.configs).entries()]))
        return R(throttle_time_ms=0, topics=entries)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return R(throttle_time_ms=0, topics=[_error_result(name, error, message)
                                             for name in dict.fromkeys(t.name for t in request.body.topics)])

"""DeleteTopics (20): remove topics through the controller, answered per topic.

Up to v5 the request names topics (``topic_names``); v6 lists
``topics[{name, topic_id}]`` and a topic may be named by its id alone
(kafka-python sends v6).  As in Kafka:

* only the active controller deletes (NOT_CONTROLLER otherwise);
* ``delete.topic.enable=false`` answers every topic TOPIC_DELETION_DISABLED
  (INVALID_REQUEST before v3, which predates that error);
* an unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id
  UNKNOWN_TOPIC_ID; giving both a name and an id is INVALID_REQUEST;
* ``timeout_ms`` > 0 waits (at most that long) until every broker has
  dropped the topic and its logs, else REQUEST_TIMED_OUT.

Once deleted, produce to the topic fails with UNKNOWN_TOPIC_OR_PARTITION and
the name may be created again, with a new topic id.
"""

from __future__ import annotations

import uuid

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation, ResourceType

from ..admin_manager import AdminManager
from ..api_handler import ApiHandler
from ..authorization import Authorization
from ..dynamic_config import DynamicBrokerConfig

R = m.DeleteTopicsResponse
_Result = R.DeletableTopicResult
_ZERO_UUID = uuid.UUID(int=0)


def _requested(request) -> list[tuple[str | None, uuid.UUID]]:
    """(name or None, topic id or zero) per requested topic, in order."""
    body = request.body
    if request.api_version >= 6:
        return [(t.name, t.topic_id or _ZERO_UUID) for t in body.topics]
    return [(name, _ZERO_UUID) for name in body.topic_names]


class DeleteTopicsHandler(ApiHandler):
    api_key = ApiKey.DELETE_TOPICS

    def __init__(self, admin_manager: AdminManager, config: DynamicBrokerConfig, *, authorization: Authorization):
        self.authorization = authorization
        self.admin = admin_manager
        self.config = config

    async def handle(self, request):
        version = request.api_version
        requested = _requested(request)
        if not self.config["delete.topic.enable"]:
            error = ErrorCode.TOPIC_DELETION_DISABLED if version >= 3 else ErrorCode.INVALID_REQUEST
            return self.error_response(request, error, "Topic deletion is disabled.")
        # (name, topic id, error or None: to be deleted, message)
        answers: list[tuple[str | None, uuid.UUID, ErrorCode | None, str | None]] = []
        names: list[str] = []
        for name, topic_id in requested:
            if name is not None and topic_id != _ZERO_UUID:
                answers.append((name, topic_id, ErrorCode.INVALID_REQUEST,
                                "You may not specify both topic name and topic id."))
            elif topic_id != _ZERO_UUID:
                found = self.admin.topic_name(topic_id)
                if found is None:
                    answers.append((None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID,
                                    f"Topic id {topic_id} does not exist."))
                else:
                    answers.append((found, topic_id, None, None))
                    names.append(found)
            elif name is None:
                answers.append((None, topic_id, ErrorCode.INVALID_REQUEST,
                                "Either a topic name or a topic id must be given."))
            else:
                answers.append((name, topic_id, None, None))
                names.append(name)
        if self.authorization.enabled:     # Kafka: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED
            allowed = self.authorization.allowed_names(request.context, AclOperation.DELETE, ResourceType.TOPIC,
                                                       names)
            answers = [(n, i, ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
                       if refused is None and n not in allowed else (n, i, refused, message)
                       for n, i, refused, message in answers]
            names = [n for n in names if n in allowed]
        results = {}
        if names:
            request.mark_local_complete()
            results = await self.admin.delete_topics(names, timeout_ms=request.body.timeout_ms)
        entries = []
        seen = set()
        for name, topic_id, refused, message in answers:
            if refused is None:
                assert name is not None   # every topic to delete was resolved to a name
                if name in seen:
                    continue
                seen.add(name)
                result = results[name]
                outcome, message = result.error, result.message
                topic_id = result.topic_id or topic_id
            else:
                outcome = refused
            entries.append(_Result(name=name, topic_id=topic_id, error_code=outcome, error_message=message))
        return R(throttle_time_ms=0, responses=entries)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return R(throttle_time_ms=0, responses=[
            _Result(name=name, topic_id=topic_id, error_code=error, error_message=message)
            for name, topic_id in _requested(request)])

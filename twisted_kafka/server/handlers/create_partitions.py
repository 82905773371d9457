"""CreatePartitions (37): grow topics through the controller, answered per topic.

As in Kafka: only the active controller serves it (NOT_CONTROLLER); a topic
named twice is INVALID_REQUEST; an unknown topic UNKNOWN_TOPIC_OR_PARTITION;
a count that does not grow the topic INVALID_PARTITIONS; explicit
``assignments`` (one broker list per new partition) must match the number
of new partitions, the topic's replication factor and live brokers, else
INVALID_REPLICA_ASSIGNMENT.  ``validate_only`` checks without changing
anything; ``timeout_ms`` > 0 waits (at most that long) for the brokers to
host the new partitions, else REQUEST_TIMED_OUT.

A request adding more than ``MAX_PARTITIONS_PER_REQUEST`` partitions in all
is refused for every topic with POLICY_VIOLATION before anything is planned,
as Kafka's controller fails the whole operation (each topic is also checked
alone by the controller).
"""

from __future__ import annotations

from collections import Counter

from twisted.internet.defer import Deferred, ensureDeferred

from twisted_kafka.controller.interface import MAX_PARTITIONS_PER_REQUEST, excessive_batch_error
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation, ResourceType

from ..admin_manager import AdminManager
from ..api_handler import ApiHandler
from ..authorization import Authorization

R = m.CreatePartitionsResponse
_Result = R.CreatePartitionsTopicResult


class CreatePartitionsHandler(ApiHandler):
    api_key = ApiKey.CREATE_PARTITIONS

    def __init__(self, admin_manager: AdminManager, *, authorization: Authorization):
        self.authorization = authorization
        self.admin = admin_manager

    async def handle(self, request):
        body = request.body
        counts = Counter(topic.name for topic in body.topics)
        adding = sum(self.admin.partitions_added(topic.name, topic.count) for topic in body.topics
                     if counts[topic.name] == 1)
        if adding > MAX_PARTITIONS_PER_REQUEST:
            refused = excessive_batch_error(adding)
            return self.error_response(request, refused.code, refused.message)
        slots: dict[str, KafkaError | Deferred[None]] = {}
        for topic in body.topics:
            if topic.name in slots:
                continue
            if counts[topic.name] > 1:
                slots[topic.name] = KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate topic in request.")
                continue
            if not self.authorization.allowed(request.context, AclOperation.ALTER, ResourceType.TOPIC, topic.name):
                slots[topic.name] = KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
                continue
            assignments = None
            if topic.assignments is not None:
                assignments = [list(a.broker_ids) for a in topic.assignments]
            # Each topic is its own controller event; they wait for the brokers side by side.
            slots[topic.name] = ensureDeferred(self.admin.create_partitions(
                topic.name, topic.count, assignments, validate_only=body.validate_only,
                timeout_ms=body.timeout_ms))
        request.mark_local_complete()
        results = []
        for name, slot in slots.items():
            error: KafkaError | None
            if isinstance(slot, KafkaError):
                error = slot
            else:
                try:
                    await slot
                    error = None
                except KafkaError as exc:
                    error = exc
            if error is None:
                results.append(_Result(name=name, error_code=ErrorCode.NONE, error_message=None))
            else:
                results.append(_Result(name=name, error_code=error.code, error_message=error.message))
        return R(throttle_time_ms=0, results=results)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return R(throttle_time_ms=0, results=[
            _Result(name=name, error_code=error, error_message=message)
            for name in dict.fromkeys(t.name for t in request.body.topics)])

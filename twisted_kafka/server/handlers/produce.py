"""Produce (0): validate and append each partition's records, answer per partition.

Every partition is appended independently: a bad batch, an unknown topic or
an oversized batch fails only its own partition, with Kafka's error code and
message (v8+), while the others in the same request are written.  The
offsets are assigned on the reactor in arrival order; the response waits for
what ``acks`` and the flush policy require (``log.flush.interval.messages=1``:
fsync before the acknowledgement).  With acks=0 nothing is answered, but the
connection stays muted until the appends are done, so a producer's next
request never overtakes this one.

Produce v0–v2 carry message format v0/v1, which Kafka 4 refuses (KIP-896)
while still advertising them for old librdkafka's feature detection
(CLIENTS.md pitfall 1): they are answered with UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from twisted.internet.defer import DeferredList

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey

from ..kafka_apis import NO_RESPONSE

R = m.ProduceResponse
_TopicResponse = R.TopicProduceResponse
_PartitionResponse = R.TopicProduceResponse.PartitionProduceResponse


def _partition_response(index: int, error: ErrorCode, message: str | None = None, *, base_offset: int = -1,
                        log_append_time_ms: int = -1, log_start_offset: int = -1):
    return _PartitionResponse(index=index, error_code=error, base_offset=base_offset,
                              log_append_time_ms=log_append_time_ms, log_start_offset=log_start_offset,
                              record_errors=[], error_message=message)


class ProduceHandler:
    api_key = ApiKey.PRODUCE

    def __init__(self, server):
        self.server = server

    async def handle(self, request):
        body = request.body
        version = request.api_version
        if version < 3:
            return self.error_response(request, ErrorCode.UNSUPPORTED_VERSION,
                                       "Produce v0-v2 (message format v0/v1) is not supported")
        if body.acks not in (0, 1, -1):
            return self.error_response(request, ErrorCode.INVALID_REQUIRED_ACKS, f"Invalid acks: {body.acks}")
        if body.transactional_id is not None:
            return self.error_response(request, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
                                       "Transactions are not supported by this broker yet")
        replicas = self.server.replica_manager
        slots: list[tuple[str, int, object]] = []   # (topic, index, Deferred or error)
        for topic in body.topic_data:
            for data in topic.partition_data:
                try:
                    partition = replicas.leader_partition(topic.name, data.index)
                    if data.records is None:
                        raise KafkaError(ErrorCode.INVALID_RECORD, "Produce request without records")
                    slots.append((topic.name, data.index, replicas.append(partition, data.records, version)))
                except KafkaError as exc:
                    slots.append((topic.name, data.index, exc))
        pending = [d for *_, d in slots if not isinstance(d, KafkaError)]
        request.mark_local_complete()
        results = await DeferredList(pending, consumeErrors=True) if pending else []
        outcome = iter(results)
        responses: dict[str, list] = {}
        for topic, index, slot in slots:
            if isinstance(slot, KafkaError):
                entry = _partition_response(index, slot.code, slot.message)
            else:
                ok, value = next(outcome)
                if ok:
                    entry = _partition_response(index, ErrorCode.NONE, base_offset=value.first_offset,
                                                log_append_time_ms=value.log_append_time,
                                                log_start_offset=value.log_start_offset)
                elif value.check(KafkaError):
                    entry = _partition_response(index, value.value.code, value.value.message)
                else:
                    self.server.log.failure("Append to {topic}-{partition} failed", value, topic=topic,
                                            partition=index)
                    entry = _partition_response(index, ErrorCode.KAFKA_STORAGE_ERROR, value.getErrorMessage())
            responses.setdefault(topic, []).append(entry)
        if body.acks == 0:
            return NO_RESPONSE
        return R(responses=[_TopicResponse(name=topic, partition_responses=entries)
                            for topic, entries in responses.items()], throttle_time_ms=0)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        if request.body.acks == 0:
            return NO_RESPONSE
        return R(responses=[_TopicResponse(name=topic.name, partition_responses=[
            _partition_response(data.index, error, message) for data in topic.partition_data])
            for topic in request.body.topic_data], throttle_time_ms=0)

    def response_version(self, request) -> int:
        return request.api_version

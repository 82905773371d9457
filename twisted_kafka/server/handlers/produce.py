"""Produce (0): validate and append each partition's records, answer per partition.

Every partition is appended independently: a bad batch, an unknown topic or
an oversized batch fails only its own partition, with Kafka's error code and
message (v8+), while the others in the same request are written.  A batch
refused because of some of its records (a keyless record on a compacted
topic) also names those records: KIP-467's ``record_errors`` (v8+).  The
offsets are assigned on the reactor in arrival order; the response waits for
what ``acks`` and the flush policy require (``log.flush.interval.messages=1``:
fsync before the acknowledgement).  With acks=0 nothing is answered, but the
connection stays muted until the appends are done, so a producer's next
request never overtakes this one; and if any partition failed, the
connection is closed (gracefully: earlier responses still go out), as Kafka
does, so the producer notices, reconnects and refreshes its metadata.

Idempotent producers (a producer id in the batch): the log checks each
batch against the producer's state before giving it offsets.  A retried
batch the log already holds is answered NONE with the offsets it was stored
at (nothing is written again); a stale epoch is INVALID_PRODUCER_EPOCH, a
sequence that does not follow OUT_OF_ORDER_SEQUENCE_NUMBER -- per
partition, like every other error, with Kafka's message.  As in Kafka, a
failed partition's answer carries the log start offset of the partition when
this broker hosts it (a producer compares it with its own state).

Transactional producers (KIP-98): a request whose batches are transactional
needs a transactional id with WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED
otherwise, as Kafka's ``handleProduceRequest``).  As in Kafka before KIP-890,
the leader does not ask the coordinator whether the partition was added to
the transaction (``transaction.partition.verification.enable`` is not acted
on): clients add a partition before their first batch to it, and the log
keeps the transaction open until the coordinator's marker.

Produce v0–v2 carry message format v0/v1, which Kafka 4 refuses (KIP-896)
while still advertising them: librdkafka before 2.11.1 (kcat 1.7.1 runs
2.0.2) compresses only when Produce v0 is inside the advertised range.  They
are answered with UNSUPPORTED_VERSION.
"""

from __future__ import annotations

from collections.abc import Sequence

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.produce_response import encode_produce_success
from twisted_kafka.protocol.records.batch import InvalidRecordBatch, parse_batch_header
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation, ResourceType

from ..api_handler import NO_RESPONSE, ApiHandler, CloseConnection, Encoded
from ..authorization import TOPIC, Authorization
from ..replica_manager import ReplicaManager

log = Logger(namespace="twisted_kafka.server.handlers.produce")

R = m.ProduceResponse
_TopicResponse = R.TopicProduceResponse
_PartitionResponse = R.TopicProduceResponse.PartitionProduceResponse
_RecordError = _PartitionResponse.BatchIndexAndErrorMessage


_PENDING = object()


def _store(outcome, slot: list) -> None:
    """Record an append's outcome (LogAppendInfo or Failure) in its slot; consumes failures."""
    slot[2] = outcome


def _partition_response(index: int, error: ErrorCode, message: str | None = None, *, base_offset: int = -1,
                        log_append_time_ms: int = -1, log_start_offset: int = -1,
                        record_errors: Sequence[tuple[int, str]] = ()):
    return _PartitionResponse(index=index, error_code=error, base_offset=base_offset,
                              log_append_time_ms=log_append_time_ms, log_start_offset=log_start_offset,
                              record_errors=[_RecordError(batch_index=i, batch_index_error_message=text)
                                             for i, text in record_errors],
                              error_message=message)


def _has_transactional_records(body) -> bool:
    """Kafka's ``RequestUtils.hasTransactionalRecords``: a partition whose first batch is transactional."""
    for topic in body.topic_data:
        for data in topic.partition_data:
            try:
                if data.records and parse_batch_header(data.records, 0).is_transactional:
                    return True
            except InvalidRecordBatch:
                continue            # the log refuses it, for that partition alone
    return False


def _error_response(index: int, error: KafkaError, log_start_offset: int = -1):
    return _partition_response(index, error.code, error.message, record_errors=error.record_errors,
                               log_start_offset=log_start_offset)


def _encoded_success(request, slots: list[list]) -> Encoded:
    """Every partition appended (the common case): the response encoded at once, without message objects."""
    topics: dict[str, list] = {}
    for topic, index, info in slots:
        entries = topics.get(topic)
        if entries is None:
            entries = topics[topic] = []
        entries.append((index, info.first_offset, info.log_append_time, info.log_start_offset))
    return Encoded(encode_produce_success(request.correlation_id, request.api_version, list(topics.items())),
                   {ErrorCode.NONE: len(slots)})


class ProduceHandler(ApiHandler):
    api_key = ApiKey.PRODUCE

    def __init__(self, replica_manager: ReplicaManager, *, authorization: Authorization):
        self.authorization = authorization
        self.replicas = replica_manager

    async def handle(self, request):
        body = request.body
        version = request.api_version
        if version < 3:
            return self.error_response(request, ErrorCode.UNSUPPORTED_VERSION,
                                       "Produce v0-v2 (message format v0/v1) is not supported")
        if body.acks not in (0, 1, -1):
            return self.error_response(request, ErrorCode.INVALID_REQUIRED_ACKS, f"Invalid acks: {body.acks}")
        if _has_transactional_records(body):
            # Kafka's handleProduceRequest: transactional batches need a transactional id the client may WRITE.
            tid = body.transactional_id
            if tid is None or not self.authorization.allowed(request.context, AclOperation.WRITE,
                                                             ResourceType.TRANSACTIONAL_ID, tid):
                return self.error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                           "Transactional records need a transactional id the client may write")
        replicas = self.replicas
        # One slot per partition, in request order: [topic, index, outcome], where the
        # outcome is a KafkaError, a LogAppendInfo, or a Failure once the append is done.
        slots: list[list] = []
        unfinished: list[Deferred] = []
        auth = self.authorization
        denied = set() if not auth.enabled else {t.name for t in body.topic_data} - auth.allowed_names(
            request.context, AclOperation.WRITE, TOPIC, {t.name for t in body.topic_data})
        for topic in body.topic_data:
            for data in topic.partition_data:
                slot = [topic.name, data.index, _PENDING]
                slots.append(slot)
                if topic.name in denied:      # Kafka checks WRITE first: an unknown topic is not revealed
                    slot[2] = KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
                    continue
                try:
                    partition = replicas.leader_partition(topic.name, data.index)
                    if data.records is None:
                        raise KafkaError(ErrorCode.INVALID_RECORD, "Produce request without records")
                    d = replicas.append(partition, data.records, version, body.acks, timeout_ms=body.timeout_ms)
                except KafkaError as exc:
                    slot[2] = exc
                    continue
                # Appends written on the reactor (the common case) have fired already:
                # only the others are waited for (no DeferredList round for the rest).
                d.addBoth(_store, slot)
                if slot[2] is _PENDING:     # not d.called: a fired Deferred may wait on an fsync
                    unfinished.append(d)
        request.mark_local_complete()
        for d in unfinished:
            await d
        if body.acks != 0 and not any(isinstance(slot[2], (KafkaError, Failure)) for slot in slots):
            return _encoded_success(request, slots)
        responses: dict[str, list] = {}
        failed = []
        for topic, index, outcome in slots:
            if isinstance(outcome, KafkaError):
                entry = _error_response(index, outcome, replicas.log_start_offset(topic, index))
            elif isinstance(outcome, Failure):
                if isinstance(outcome.value, KafkaError):
                    entry = _error_response(index, outcome.value, replicas.log_start_offset(topic, index))
                else:
                    log.failure("Append to {topic}-{partition} failed", outcome, topic=topic,
                                            partition=index)
                    entry = _partition_response(index, ErrorCode.KAFKA_STORAGE_ERROR, outcome.getErrorMessage())
            else:
                entry = _partition_response(index, ErrorCode.NONE, base_offset=outcome.first_offset,
                                            log_append_time_ms=outcome.log_append_time,
                                            log_start_offset=outcome.log_start_offset)
            if entry.error_code:
                failed.append((topic, index, entry.error_code))
            responses.setdefault(topic, []).append(entry)
        if body.acks == 0:
            return self._close_for_acks_0(request, failed) if failed else NO_RESPONSE
        return R(responses=[_TopicResponse(name=topic, partition_responses=entries)
                            for topic, entries in responses.items()], throttle_time_ms=0)

    @staticmethod
    def _close_for_acks_0(request, failed) -> CloseConnection:
        """An acks=0 producer gets no answer, so, as Kafka does, an error closes the
        connection: the producer notices, reconnects and refreshes its metadata."""
        summary = ", ".join(f"{topic}-{index}: {ErrorCode(code).name}" for topic, index, code in failed[:5])
        return CloseConnection(CloseReason.PRODUCE_ERROR,
                               f"acks=0 Produce (correlation id {request.correlation_id}) failed for "
                               f"{len(failed)} partition(s) ({summary}); closing the connection")

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        if request.body.acks == 0:
            failed = [(topic.name, data.index, error) for topic in request.body.topic_data
                      for data in topic.partition_data]
            return self._close_for_acks_0(request, failed or [("-", -1, error)])
        return R(responses=[_TopicResponse(name=topic.name, partition_responses=[
            _partition_response(data.index, error, message) for data in topic.partition_data])
            for topic in request.body.topic_data], throttle_time_ms=0)

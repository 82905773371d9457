"""InitProducerId (22): a producer id and epoch for an idempotent producer (KIP-98).

Versions 0-4 are served (aiokafka sends v0, kafka-python and librdkafka v4;
v2+ are flexible), as Kafka answers them:

* ``transactional_id`` null (an idempotent producer): a new producer id,
  epoch 0, from the ``ProducerIdManager`` -- never one handed out before,
  across restarts too.  From v3 the producer may send its current id and
  epoch (KIP-360: a producer that lost track of its sequences asks to
  start over).  Kafka's transaction coordinator only looks at them for a
  transactional id; without one it answers a fresh producer id at epoch 0,
  and so does this broker (the producer starts its sequences at 0 under
  the new id; Java producers bump an idempotent epoch themselves and only
  ask when it is exhausted).  An id without an epoch, or an epoch without
  an id, is INVALID_REQUEST;
* ``transactional_id`` given: the transaction coordinator's answer
  (``coordinator/transaction/coordinator.py``): the id's producer id with
  its epoch bumped, which fences the previous producer of the id; an
  ongoing transaction is aborted first (CONCURRENT_TRANSACTIONS, the
  producer retries); KIP-360's producer id and epoch (v3+) let a producer
  bump its own epoch after an error.  A timeout above
  ``transaction.max.timeout.ms`` is INVALID_TRANSACTION_TIMEOUT;
  PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v4, as in Kafka; an
  empty transactional id is INVALID_REQUEST.

A producer id block that cannot be allocated (the block file unreadable, the
disk full) is COORDINATOR_LOAD_IN_PROGRESS, which clients retry -- Kafka's
answer while it waits for a block.  Errors carry producer id -1 and epoch
-1, as Kafka's.

Authorization, checked first as in Kafka's ``handleInitProducerIdRequest``:
a transactional id needs WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED
otherwise); an idempotent producer needs IDEMPOTENT_WRITE on the cluster or
WRITE on some topic (KIP-679; CLUSTER_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

from twisted.internet.defer import ensureDeferred

from twisted_kafka.coordinator.transaction import ProducerIdManager
from twisted_kafka.coordinator.transaction.coordinator import TransactionCoordinator
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation, ResourceType

from ..api_handler import ApiHandler
from ..authorization import Authorization

R = m.InitProducerIdResponse
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


class InitProducerIdHandler(ApiHandler):
    api_key = ApiKey.INIT_PRODUCER_ID

    def __init__(self, producer_ids: ProducerIdManager, transactions: TransactionCoordinator, *,
                 authorization: Authorization):
        self.authorization = authorization
        self.producer_ids = producer_ids
        self.transactions = transactions

    async def handle(self, request):
        body = request.body
        auth = self.authorization
        if auth.enabled:
            if body.transactional_id is not None:
                if not auth.allowed(request.context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                    body.transactional_id):
                    return self.error_response(request, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            elif not (auth.allowed(request.context, AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER,
                                   log_denied=False)
                      or auth.allowed_on_any(request.context, AclOperation.WRITE, ResourceType.TOPIC)):
                return self.error_response(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if request.api_version >= 3 and \
                (body.producer_id == NO_PRODUCER_ID) != (body.producer_epoch == NO_PRODUCER_EPOCH):
            return self.error_response(request, ErrorCode.INVALID_REQUEST)
        if body.transactional_id is not None:
            if not body.transactional_id:
                return self.error_response(request, ErrorCode.INVALID_REQUEST)
            expected = (body.producer_id, body.producer_epoch) \
                if request.api_version >= 3 and body.producer_id != NO_PRODUCER_ID else None
            d = ensureDeferred(self.transactions.init_producer_id(body.transactional_id,
                                                                  body.transaction_timeout_ms, expected))
            if not d.called:
                request.mark_local_complete()
            result = await d
            error = result.error
            if error is ErrorCode.PRODUCER_FENCED and request.api_version < 4:
                error = ErrorCode.INVALID_PRODUCER_EPOCH
            return R(throttle_time_ms=0, error_code=error, producer_id=result.producer_id,
                     producer_epoch=result.producer_epoch)
        d = self.producer_ids.generate_producer_id()
        if not d.called:
            request.mark_local_complete()    # waiting for a producer id block to be written
        try:
            producer_id = await d
        except KafkaError as e:
            return self.error_response(request, e.code)
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=producer_id, producer_epoch=0)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return R(throttle_time_ms=0, error_code=error, producer_id=NO_PRODUCER_ID, producer_epoch=NO_PRODUCER_EPOCH)

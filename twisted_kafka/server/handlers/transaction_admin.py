"""DescribeTransactions (65) and ListTransactions (66): what a transaction coordinator holds (KIP-664).

* DescribeTransactions v0: each transactional id's state as its coordinator
  has it (Kafka's state names: Empty, Ongoing, PrepareCommit, ...), its
  timeout, start time, producer id and epoch and partitions.  An id needs
  DESCRIBE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); one this broker
  does not coordinate is NOT_COORDINATOR, one it does not know
  TRANSACTIONAL_ID_NOT_FOUND.
* ListTransactions v0-v1: the transactions this broker coordinates (an
  admin client asks every broker), filtered by state names, producer ids
  and (v1) how long they have been Ongoing; only the ids the client may
  DESCRIBE are listed.  Unknown state names are returned in
  ``unknown_state_filters``.
"""

from __future__ import annotations

from twisted_kafka.coordinator.transaction.coordinator import TransactionCoordinator
from twisted_kafka.coordinator.transaction.metadata import TransactionState
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation, ResourceType

from ..api_handler import ApiHandler
from ..authorization import Authorization

_BY_NAME = {state.display: state for state in TransactionState}


class DescribeTransactionsHandler(ApiHandler):
    api_key = ApiKey.DESCRIBE_TRANSACTIONS

    def __init__(self, coordinator: TransactionCoordinator, *, authorization: Authorization):
        self.authorization = authorization
        self.coordinator = coordinator

    async def handle(self, request):
        R = m.DescribeTransactionsResponse
        S = R.TransactionState
        states = []
        for tid in request.body.transactional_ids:
            if not self.authorization.allowed(request.context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                              tid):
                error, txn = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
            else:
                error, txn = self.coordinator.describe(tid)
            if txn is None:
                states.append(S(error_code=error, transactional_id=tid, transaction_state="",
                                transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1,
                                producer_epoch=-1, topics=[]))
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, index in sorted(txn.partitions):
                by_topic.setdefault(topic, []).append(index)
            states.append(S(error_code=ErrorCode.NONE, transactional_id=tid, transaction_state=txn.state.display,
                            transaction_timeout_ms=txn.txn_timeout_ms,
                            transaction_start_time_ms=txn.txn_start_timestamp, producer_id=txn.producer_id,
                            producer_epoch=txn.producer_epoch,
                            topics=[S.TopicData(topic=topic, partitions=indexes)
                                    for topic, indexes in by_topic.items()]))
        return R(throttle_time_ms=0, transaction_states=states)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        R = m.DescribeTransactionsResponse
        return R(throttle_time_ms=0, transaction_states=[R.TransactionState(
            error_code=error, transactional_id=tid, transaction_state="", transaction_timeout_ms=0,
            transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1, topics=[])
            for tid in request.body.transactional_ids])


class ListTransactionsHandler(ApiHandler):
    api_key = ApiKey.LIST_TRANSACTIONS

    def __init__(self, coordinator: TransactionCoordinator, *, authorization: Authorization):
        self.authorization = authorization
        self.coordinator = coordinator

    async def handle(self, request):
        body = request.body
        unknown = [name for name in body.state_filters if name not in _BY_NAME]
        states = {_BY_NAME[name] for name in body.state_filters if name in _BY_NAME} if body.state_filters else None
        producer_ids = set(body.producer_id_filters) if body.producer_id_filters else None
        duration = body.duration_filter if request.api_version >= 1 else -1
        error, found = self.coordinator.list(states, producer_ids, duration)
        if states is not None and not states:
            found = []                      # only unknown states asked for: nothing matches
        allowed = self.authorization.allowed_names(request.context, AclOperation.DESCRIBE,
                                                   ResourceType.TRANSACTIONAL_ID,
                                                   [txn.transactional_id for txn in found], log_denied=False)
        R = m.ListTransactionsResponse
        return R(throttle_time_ms=0, error_code=error, unknown_state_filters=unknown, transaction_states=[
            R.TransactionState(transactional_id=txn.transactional_id, producer_id=txn.producer_id,
                               transaction_state=txn.state.display)
            for txn in found if txn.transactional_id in allowed])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.ListTransactionsResponse(throttle_time_ms=0, error_code=error, unknown_state_filters=[],
                                          transaction_states=[])


__all__ = ["DescribeTransactionsHandler", "ListTransactionsHandler"]

"""Sending a transaction's markers to the leaders of its partitions (Kafka's ``TransactionMarkerChannelManager``).

Once a transaction is PrepareCommit or PrepareAbort, its marker must reach
every partition it touched before the coordinator may write CompleteCommit
or CompleteAbort.  Each round resolves the partitions' leaders from the
metadata cache and sends each leader its partitions: the ones this broker
leads are written directly (``TxnMarkerWriter``), the others go to their
leader in a WriteTxnMarkers request (v1) through the ``InterBrokerSender``,
authenticated as this broker.  As in Kafka:

* a partition answered NONE is done; NOT_LEADER_OR_FOLLOWER,
  UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, a leader not known yet, or a
  request that could not be sent are tried again after ``RETRY_BACKOFF``
  seconds, with the leader looked up again;
* a partition of a topic that no longer exists is dropped (logged);
* any other error (CLUSTER_AUTHORIZATION_FAILED: the brokers' principal
  lacks CLUSTER_ACTION) is retried as well, logged once per transaction:
  completing the transaction without the marker would leave that
  partition's transaction open for good;
* INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED mean a newer
  coordinator or producer epoch took over: the sending stops and the
  transaction is left to it;
* the sending also stops when this broker stops coordinating the
  transaction (``still_valid``): the next coordinator sends them again;
* a leader that has not answered within ``request.timeout.ms`` (the
  ``InterBrokerSender`` keeps retrying an unreachable broker) does not hold
  the round: its partitions are tried again with their leader looked up
  again, so a partition whose leader moved away from a dead broker gets its
  marker from the new leader (its late answer is ignored);
* sooner than that, a request to a broker that no longer leads one of its
  partitions (the controller moved them away from a dead broker) is
  cancelled within ``RETRY_BACKOFF``, and its partitions go to their new
  leaders.  Both take the request out of the inter-broker channel's queue,
  so it never reaches the old broker when it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from twisted.internet.defer import CancelledError, Deferred, DeferredList, ensureDeferred
from twisted.internet.task import deferLater
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

from .marker_writer import TopicPartition, TxnMarkerWriter

log = Logger(namespace="twisted_kafka.coordinator.transaction.TxnMarkerChannel")

RETRY_BACKOFF = 0.1        # seconds between rounds for the partitions still without their marker
WRITE_TXN_MARKERS_VERSION = 1

_RETRIABLE = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNKNOWN_SERVER_ERROR,
})
_FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})
#: Kafka skips these partitions (the marker cannot be written there, ever).
_SKIPPED = frozenset({ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT, ErrorCode.UNSUPPORTED_VERSION})

_Marker = m.WriteTxnMarkersRequest.WritableTxnMarker
_MarkerTopic = _Marker.WritableTxnMarkerTopic


class TxnMarkerChannel:
    def __init__(self, *, broker_id: int, metadata_cache, local: TxnMarkerWriter, sender, clock,
                 timeout_ms: int = 30000):
        self.timeout = timeout_ms / 1000.0
        self.broker_id = broker_id
        self.metadata_cache = metadata_cache
        self.local = local
        self.sender = sender
        self.clock = clock

    def send(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
             coordinator_epoch: int, partitions: Iterable[TopicPartition],
             still_valid: Callable[[], bool]) -> Deferred:
        """Fires with True once every partition has its marker, False when the sending stopped."""
        return ensureDeferred(self._send(transactional_id, producer_id, producer_epoch, commit, coordinator_epoch,
                                         set(partitions), still_valid))

    async def _send(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                    coordinator_epoch: int, remaining: set[TopicPartition], still_valid: Callable[[], bool]) -> bool:
        warned: set[ErrorCode] = set()
        while remaining:
            if not still_valid():
                return False
            by_leader: dict[int, list[TopicPartition]] = {}
            retry: set[TopicPartition] = set()
            for tp in remaining:
                if tp[0] not in self.metadata_cache.topics:
                    log.info("Not writing the marker of {tid} to {topic}-{partition}: the topic is gone",
                             tid=transactional_id, topic=tp[0], partition=tp[1])
                    continue
                state = self.metadata_cache.partition(*tp)
                if state is None or state.leader < 0:
                    retry.add(tp)
                else:
                    by_leader.setdefault(state.leader, []).append(tp)
            rounds = [self._watch(leader, tps, still_valid,
                                  self._send_to(leader, tps, producer_id, producer_epoch, commit, coordinator_epoch))
                      for leader, tps in by_leader.items()]
            for _, answer in (await DeferredList(rounds)) if rounds else ():
                for tp, error in answer.items():
                    if error is ErrorCode.NONE:
                        continue
                    if error in _FENCED:
                        log.info("The marker of {tid} for {topic}-{partition} was refused ({error}): a newer "
                                 "epoch took over, the transaction is left to it", tid=transactional_id,
                                 topic=tp[0], partition=tp[1], error=error.name)
                        return False
                    if error in _SKIPPED:
                        log.warn("The marker of {tid} cannot be written to {topic}-{partition} ({error}); "
                                 "it is skipped", tid=transactional_id, topic=tp[0], partition=tp[1],
                                 error=error.name)
                        continue
                    retry.add(tp)
                    if error not in _RETRIABLE and error not in warned:
                        warned.add(error)
                        log.warn("The marker of {tid} was refused by the leader of {topic}-{partition} ({error}); "
                                 "retrying until it is written", tid=transactional_id, topic=tp[0],
                                 partition=tp[1], error=error.name)
            remaining = retry
            if remaining:
                await deferLater(self.clock, RETRY_BACKOFF, lambda: None)
        return True

    def _watch(self, leader: int, partitions: list[TopicPartition], still_valid: Callable[[], bool],
               sending: Deferred) -> Deferred:
        """Stop waiting for another broker once it no longer leads one of ``partitions`` (it died: the
        inter-broker channel would retry it until it returns) or the sending is no longer valid: the
        request is cancelled and its partitions are tried again at their new leaders (Kafka's channel
        manager re-enqueues a disconnected broker's markers the same way)."""
        if leader == self.broker_id:
            return sending
        check = None

        def moved() -> None:
            nonlocal check
            check = None
            if sending.called:
                return
            leaders = [self.metadata_cache.partition(*tp) for tp in partitions]
            if not still_valid() or any(state is None or state.leader != leader for state in leaders):
                log.info("Broker {broker} no longer leads {partitions}: its transaction markers go to the new "
                         "leaders", broker=leader, partitions=partitions)
                sending.cancel()
                return
            check = self.clock.callLater(RETRY_BACKOFF, moved)

        def done(result):
            if check is not None and check.active():
                check.cancel()
            return result

        check = self.clock.callLater(RETRY_BACKOFF, moved)
        return sending.addBoth(done)

    def _send_to(self, leader: int, partitions: list[TopicPartition], producer_id: int, producer_epoch: int,
                 commit: bool, coordinator_epoch: int) -> Deferred:
        """``{partition: ErrorCode}`` from one leader (every partition retriable if it could not be asked)."""
        if leader == self.broker_id:
            local = self.local.write(producer_id, producer_epoch, commit, coordinator_epoch, partitions)
            local.addErrback(self._failed, leader, partitions)
            return local
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = m.WriteTxnMarkersRequest(markers=[_Marker(
            producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
            topics=[_MarkerTopic(name=topic, partition_indexes=indexes) for topic, indexes in by_topic.items()],
            coordinator_epoch=coordinator_epoch)])
        d = self.sender.send(leader, request, WRITE_TXN_MARKERS_VERSION)

        def answered(response) -> dict[TopicPartition, ErrorCode]:
            result = dict.fromkeys(partitions, ErrorCode.UNKNOWN_SERVER_ERROR)
            for marker in response.markers:
                for topic in marker.topics:
                    for p in topic.partitions:
                        result[(topic.name, p.partition_index)] = ErrorCode(p.error_code)
            return result

        d.addCallbacks(answered, self._failed, errbackArgs=(leader, partitions))
        # Cancelling the round's Deferred (the leader moved: _watch) cancels the channel's request, which
        # then answers every partition retriable through _failed.
        result: Deferred = Deferred(lambda _: d.cancel())

        def timed_out() -> None:
            log.info("Broker {broker} did not answer WriteTxnMarkers within {timeout:g} s; looking its partitions' "
                     "leaders up again", broker=leader, timeout=self.timeout)
            result.callback(dict.fromkeys(partitions, ErrorCode.REQUEST_TIMED_OUT))
            d.cancel()          # out of the channel's queue: never sent to that broker later

        timer = self.clock.callLater(self.timeout, timed_out)

        def deliver(answer):
            if timer.active():
                timer.cancel()
            if not result.called:
                result.callback(answer)

        d.addCallback(deliver)
        return result

    @staticmethod
    def _failed(failure: Failure, leader: int, partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        if failure.check(CancelledError):
            return dict.fromkeys(partitions, ErrorCode.REQUEST_TIMED_OUT)     # _watch or the timeout said why
        log.info("Writing transaction markers at broker {broker} failed ({error}); retrying", broker=leader,
                 error=failure.getErrorMessage())
        return dict.fromkeys(partitions, ErrorCode.REQUEST_TIMED_OUT)


__all__ = ["RETRY_BACKOFF", "TxnMarkerChannel"]

"""WriteTxnMarkers (27), v1: a transaction coordinator asks this broker to end a transaction in the
partitions it leads.

Broker-to-broker only (the coordinator's ``TxnMarkerChannel`` over the
``InterBrokerSender``): the sender needs CLUSTER_ACTION on the cluster, as
in Kafka, or to be this broker's own inter-broker principal -- the rule of
the controller APIs (``ControllerRequestGuard.authorize``), since the
brokers of a cluster share that principal; CLUSTER_AUTHORIZATION_FAILED
otherwise, before anything is written.
Each marker is appended with acks=all by the ``TxnMarkerWriter`` (a
partition this broker does not lead is NOT_LEADER_OR_FOLLOWER, one it does
not host UNKNOWN_TOPIC_OR_PARTITION: the coordinator looks the leader up
again and retries); the answer comes once every marker is on the in-sync
replicas.  ``__consumer_offsets`` partitions then commit or drop the
transaction's offsets.
"""

from __future__ import annotations

from twisted_kafka.coordinator.transaction.marker_writer import TxnMarkerWriter
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey

from ..api_handler import ApiHandler
from ..authorization import Authorization
from ..controller_requests import ControllerRequestGuard

R = m.WriteTxnMarkersResponse
_Result = R.WritableTxnMarkerResult
_TopicResult = _Result.WritableTxnMarkerTopicResult
_PartitionResult = _TopicResult.WritableTxnMarkerPartitionResult


class WriteTxnMarkersHandler(ApiHandler):
    api_key = ApiKey.WRITE_TXN_MARKERS

    def __init__(self, writer: TxnMarkerWriter, guard: ControllerRequestGuard, *, authorization: Authorization):
        self.authorization = authorization
        self.writer = writer
        self.guard = guard

    async def handle(self, request):
        self.guard.authorize(request.context)          # CLUSTER_AUTHORIZATION_FAILED for the whole request
        results = []
        for marker in request.body.markers:
            partitions = [(t.name, p) for t in marker.topics for p in t.partition_indexes]
            d = self.writer.write(marker.producer_id, marker.producer_epoch, marker.transaction_result,
                                  marker.coordinator_epoch, partitions)
            if not d.called:
                request.mark_local_complete()
            errors = await d
            results.append(self._result(marker, lambda tp, errors=errors: errors.get(
                tp, ErrorCode.UNKNOWN_SERVER_ERROR)))
        return R(markers=results)

    @staticmethod
    def _result(marker, error_of):
        return _Result(producer_id=marker.producer_id, topics=[
            _TopicResult(name=t.name, partitions=[_PartitionResult(partition_index=p, error_code=error_of((t.name, p)))
                                                  for p in t.partition_indexes])
            for t in marker.topics])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return R(markers=[self._result(marker, lambda tp: error) for marker in request.body.markers])


__all__ = ["WriteTxnMarkersHandler"]

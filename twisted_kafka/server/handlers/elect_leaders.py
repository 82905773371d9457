"""ElectLeaders (43, KIP-183 and KIP-460): preferred or unclean leader elections through the controller.

As Kafka answers it:

* v0 always elects the preferred replica; from v1 ``election_type`` says
  which (0 preferred, 1 unclean) and the response has a top-level error;
* a null partition list means every partition this broker knows, and the
  answer then leaves out those that needed no election (ELECTION_NOT_NEEDED);
* per partition: NONE once this broker's metadata shows the new leader (or
  REQUEST_TIMED_OUT after ``timeout_ms``), ELECTION_NOT_NEEDED,
  PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE,
  UNKNOWN_TOPIC_OR_PARTITION, INVALID_TOPIC_EXCEPTION (being deleted);
* without a reachable controller every partition is NOT_CONTROLLER.

Any broker takes the request: a broker that is not the controller forwards
it to the controller's control plane (a request another broker forwarded is
answered here or refused, never forwarded again).
"""

from __future__ import annotations

from twisted_kafka.controller.client import forwarded
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclOperation

from ..admin_manager import AdminManager
from ..api_handler import ApiHandler

R = m.ElectLeadersResponse
_Result = R.ReplicaElectionResult
_Partition = R.ReplicaElectionResult.PartitionResult

PREFERRED = 0


def _requested(request) -> list[tuple[str, int]] | None:
    topics = request.body.topic_partitions
    if topics is None:
        return None
    return list(dict.fromkeys((t.topic, p) for t in topics for p in t.partitions))


class ElectLeadersHandler(ApiHandler):
    api_key = ApiKey.ELECT_LEADERS
    cluster_operation = AclOperation.ALTER

    def __init__(self, admin_manager: AdminManager):
        self.admin = admin_manager

    async def handle(self, request):
        body = request.body
        election_type = body.election_type if request.api_version >= 1 else PREFERRED
        requested = _requested(request)
        partitions = requested if requested is not None else self.admin.all_partitions()
        request.mark_local_complete()
        try:
            results = await self.admin.elect_leaders(election_type, partitions, timeout_ms=body.timeout_ms,
                                                     forward=not forwarded(request.header.client_id))
        except KafkaError as exc:
            if exc.code != ErrorCode.NOT_CONTROLLER:
                raise
            results = {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in partitions}
        if requested is None:
            results = {tp: r for tp, r in results.items() if r[0] != ErrorCode.ELECTION_NOT_NEEDED}
        return self._response(results, ErrorCode.NONE)

    @staticmethod
    def _response(results: dict, error: ErrorCode):
        by_topic: dict[str, list] = {}
        for (topic, index), (code, message) in sorted(results.items()):
            by_topic.setdefault(topic, []).append(_Partition(partition_id=index, error_code=code,
                                                             error_message=message))
        return R(throttle_time_ms=0, error_code=error,
                 replica_election_results=[_Result(topic=t, partition_result=p) for t, p in by_topic.items()])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return self._response({tp: (error, message) for tp in (_requested(request) or [])}, error)

"""AlterPartition (56, KIP-497): a partition leader's new ISR, answered by the controller's broker.

Served where the controller runs, on the plane the controller APIs use (the
control plane when there is one).  Only the active controller answers --
the request is never passed on -- with NOT_CONTROLLER (top level)
otherwise, and STALE_BROKER_EPOCH for a leader whose registration is not
the current one (which also closes the connection: see
``server/controller_requests.py``, as for a sender not authorized
CLUSTER_ACTION, checked before anything else); per partition the controller's verdict (fenced by leader
epoch and partition epoch) and the partition's state after it, which the
leader adopts.  The handler gives its slot back while the controller works
(``mark_local_complete``), as Kafka's controller takes AlterPartition as an
event and answers later: the control plane has a single handler, and the
controller may itself be waiting for this broker's answer to a LeaderAndIsr
or UpdateMetadata it sent (to itself) on that plane.
"""

from __future__ import annotations

from twisted_kafka.controller.client import ControllerClient
from twisted_kafka.controller.interface import IsrChange
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey

from ..controller_requests import ControllerApiHandler, ControllerRequestGuard

R = m.AlterPartitionResponse


class AlterPartitionHandler(ControllerApiHandler):
    api_key = ApiKey.ALTER_PARTITION

    def __init__(self, controller: ControllerClient, guard: ControllerRequestGuard):
        self.controller = controller
        self.guard = guard

    async def serve(self, request):
        body = request.body
        changes = {(t.topic_name, p.partition_index): IsrChange(
            p.leader_epoch, p.partition_epoch, tuple(p.new_isr), getattr(p, "leader_recovery_state", 0))
            for t in body.topics for p in t.partitions}
        request.mark_local_complete()
        results = await self.controller.alter_partition(body.broker_id, body.broker_epoch, changes, forward=False)
        by_topic: dict[str, list] = {}
        for (topic, index), result in results.items():
            by_topic.setdefault(topic, []).append(R.TopicData.PartitionData(
                partition_index=index, error_code=result.error, leader_id=result.leader,
                leader_epoch=result.leader_epoch, isr=list(result.isr),
                leader_recovery_state=result.leader_recovery_state, partition_epoch=result.partition_epoch))
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE,
                 topics=[R.TopicData(topic_name=t, partitions=p) for t, p in by_topic.items()])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return R(throttle_time_ms=0, error_code=error, topics=[])

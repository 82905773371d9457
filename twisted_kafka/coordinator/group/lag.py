"""Each group's committed offsets beside the high watermarks of the partitions this broker hosts: consumer lag.

Kafka's broker computes no lag (Burrow and kafka-lag-exporter do, from the
committed offsets and ListOffsets); here the broker's gauges
(``server/broker_metrics.py``) and the admin endpoint's ``/v1/groups``
(``admin/views.py``) both read it from ``group_views``, so the two always agree.
A committed offset of a partition this broker does not host has no lag (its
high watermark is not known here without asking the partition's leader).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .group import assigned_partitions_of
from .state import GroupState


@dataclass
class PartitionLag:
    topic: str
    partition: int
    committed_offset: int
    #: The partition's high watermark, None when this broker does not host the partition.
    log_end_offset: int | None
    metadata: str | None = None

    @property
    def lag(self) -> int | None:
        if self.log_end_offset is None:
            return None
        return max(0, self.log_end_offset - self.committed_offset)


@dataclass
class GroupView:
    """One group this broker coordinates, with its committed offsets and their lag."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str
    generation: int
    members: list[dict[str, Any]]
    partitions: list[PartitionLag] = field(default_factory=list)

    @property
    def lags(self) -> list[int]:
        return [lag for p in self.partitions if (lag := p.lag) is not None]


def group_views(coordinator, replica_manager) -> list[GroupView]:
    """Every live group this broker coordinates (``GroupCoordinator``), lag from hosted partitions."""
    hosted = replica_manager.partitions
    views = []
    for group in coordinator.manager.current_groups:
        if group.is_state(GroupState.DEAD):
            continue
        members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id, "client_id": m.client_id,
                    "client_host": m.client_host,
                    "assignment": [{"topic": t, "partition": p}
                                   for t, p in assigned_partitions_of(m.assignment)]
                    if (group.protocol_type or "") == "consumer" else []}
                   for m in group.members.values()]
        view = GroupView(group.group_id, str(group.state), group.protocol_type or "", group.protocol_name or "",
                         group.generation_id, members)
        for (topic, index), record in sorted(group.offsets.items()):
            partition = hosted.get((topic, index))
            view.partitions.append(PartitionLag(topic, index, record.value.offset,
                                                None if partition is None else partition.high_watermark,
                                                record.value.metadata))
        views.append(view)
    return sorted(views, key=lambda v: v.group_id)

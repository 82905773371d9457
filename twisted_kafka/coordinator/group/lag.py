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
    #: "classic", or "consumer" for a group of the consumer rebalance protocol (KIP-848), whose
    #: ``generation`` is the group epoch and ``protocol`` the server assignor.
    group_type: str = "classic"

    @property
    def lags(self) -> list[int]:
        return [lag for p in self.partitions if (lag := p.lag) is not None]


def group_views(coordinator, replica_manager) -> list[GroupView]:
    """Every live group this broker coordinates (``GroupCoordinator``), lag from hosted partitions."""
    hosted = replica_manager.partitions
    views = []
    consumer_groups = coordinator.consumer.groups if hasattr(coordinator, "consumer") else {}
    for group_id in sorted(set(consumer_groups) - {g.group_id for g in coordinator.manager.current_groups}):
        views.append(_consumer_group_view(coordinator, group_id))
    for group in coordinator.manager.current_groups:
        if group.group_id in consumer_groups:
            view = _consumer_group_view(coordinator, group.group_id)
            _add_lags(view, group, hosted)
            views.append(view)
            continue
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
        _add_lags(view, group, hosted)
        views.append(view)
    return sorted(views, key=lambda v: v.group_id)


def _add_lags(view: GroupView, group, hosted) -> None:
    for (topic, index), record in sorted(group.offsets.items()):
        partition = hosted.get((topic, index))
        view.partitions.append(PartitionLag(topic, index, record.value.offset,
                                            None if partition is None else partition.high_watermark,
                                            record.value.metadata))


def _consumer_group_view(coordinator, group_id: str) -> GroupView:
    """A consumer-protocol group (KIP-848): its members with their epochs and current assignments."""
    d = coordinator.consumer.describe(group_id)
    members = [{"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                "client_host": m.client_host, "member_epoch": m.member_epoch, "rack_id": m.rack_id,
                "assignment": [{"topic": d.topic_names.get(t, str(t)), "partition": p}
                               for t, parts in sorted(m.assigned.items(), key=lambda i: d.topic_names.get(i[0], ""))
                               for p in sorted(parts)]}
               for m in d.members]
    return GroupView(group_id, d.state, "consumer", d.assignor, d.group_epoch, members, group_type="consumer")

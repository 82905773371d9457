"""The broker's data-path gauges, registered in one place: replicas, logs, groups and consumer lag.

``register_broker_metrics`` adds to the broker's ``MetricsRegistry``:

* the ``BrokerTopicStats`` meters (``broker_topic_metrics.py``);
* ``kafka.server:type=ReplicaManager``: PartitionCount, LeaderCount,
  UnderReplicatedPartitions (led here, ISR smaller than the replicas),
  UnderMinIsrPartitionCount, AtMinIsrPartitionCount, OfflineReplicaCount
  (replicas the controller placed here whose log this broker could not create
  or open: a LeaderAndIsr answered KAFKA_STORAGE_ERROR);
* ``kafka.log:type=Log,name=Size|NumLogSegments|LogStartOffset|LogEndOffset,
  topic=T,partition=P`` for every partition this broker hosts;
* ``kafka.coordinator.group:type=GroupMetadataManager``: NumGroups,
  NumGroups<State> and NumOffsets, of the groups this broker coordinates;
* consumer lag, under the names kafka-lag-exporter gives it in Prometheus
  (Kafka's broker has none: lag is what Burrow and kafka-lag-exporter compute
  from the committed offsets and ListOffsets): per group, topic and partition
  ``kafka:type=ConsumerGroup,name=group_lag`` (the partition's high watermark
  minus the group's committed offset, never below 0) and ``group_offset`` (the
  committed offset); per group ``group_max_lag``, ``group_sum_lag``,
  ``group_members`` and ``group_state`` (1, with the state as a tag); per
  partition ``kafka:type=Partition,name=latest_offset`` (the high watermark).

What the lag gauges cover: the groups this broker coordinates, and of their
committed offsets those of partitions this broker hosts -- their high
watermark is known here without asking anyone (a follower's is at most one
fetch behind its leader's).  On a single broker that is every group and
every partition.  In a cluster each coordinator reports its own groups, so
``sum by (group, topic, partition)`` over the brokers is the whole picture
for partitions each group's coordinator hosts; a committed offset of a
partition the coordinator does not host has no lag series (its offset is in
``/v1/groups``), as the broker would have to ask the partition's leader.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from twisted_kafka.coordinator.group.group import assigned_partitions_of
from twisted_kafka.coordinator.group.state import GroupState
from twisted_kafka.metrics import Gauge, MetricName, MetricsRegistry

LAG_GROUP, LAG_TYPE = "kafka", "ConsumerGroup"


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


def _lag_metrics(coordinator, replica_manager) -> Iterator[tuple[MetricName, Gauge]]:
    def name(metric: str, *tags: tuple[str, str], kind: str = LAG_TYPE) -> MetricName:
        return MetricName(LAG_GROUP, kind, metric, tags)

    latest: dict[tuple[str, int], int] = {}
    for view in group_views(coordinator, replica_manager):
        group = ("group", view.group_id)
        yield name("group_members", group), Gauge.of(len(view.members))
        yield name("group_state", group, ("state", view.state)), Gauge.of(1)
        lags = view.lags
        for p in view.partitions:
            tags = (group, ("topic", p.topic), ("partition", str(p.partition)))
            yield name("group_offset", *tags), Gauge.of(p.committed_offset)
            if p.log_end_offset is not None:
                yield name("group_lag", *tags), Gauge.of(p.lag or 0)
                latest[(p.topic, p.partition)] = p.log_end_offset
        if lags:
            yield name("group_max_lag", group), Gauge.of(max(lags))
            yield name("group_sum_lag", group), Gauge.of(sum(lags))
    for (topic, index), offset in sorted(latest.items()):
        yield name("latest_offset", ("topic", topic), ("partition", str(index)), kind="Partition"), Gauge.of(offset)


def _group_manager_metrics(coordinator) -> Iterator[tuple[MetricName, Gauge]]:
    groups = coordinator.manager.current_groups
    counts = {state: 0 for state in GroupState}
    offsets = 0
    for group in groups:
        counts[group.state] += 1
        offsets += len(group.offsets)

    def name(metric: str) -> MetricName:
        return MetricName("kafka.coordinator.group", "GroupMetadataManager", metric)

    yield name("NumOffsets"), Gauge.of(offsets)
    yield name("NumGroups"), Gauge.of(len(groups))
    for state, count in counts.items():
        yield name(f"NumGroups{state}"), Gauge.of(count)


def _log_metrics(replica_manager) -> Iterator[tuple[MetricName, Gauge]]:
    for (topic, index), partition in sorted(replica_manager.partitions.items()):
        log = partition.log
        tags = (("topic", topic), ("partition", str(index)))
        yield MetricName("kafka.log", "Log", "Size", tags), Gauge.of(log.size)
        yield MetricName("kafka.log", "Log", "NumLogSegments", tags), Gauge.of(log.num_segments)
        yield MetricName("kafka.log", "Log", "LogStartOffset", tags), Gauge.of(log.log_start_offset)
        yield MetricName("kafka.log", "Log", "LogEndOffset", tags), Gauge.of(log.log_end_offset)


def offline_replicas(replica_manager, metadata_cache) -> int:
    """Replicas the controller placed on this broker that it does not host (their log could not be created
    or opened)."""
    local = metadata_cache.local_broker_id
    hosted = replica_manager.partitions
    return sum(1 for topic in list(metadata_cache.topics.values()) for index, state in topic.partitions.items()
               if local in state.replicas and (topic.name, index) not in hosted)


def register_broker_metrics(metrics: MetricsRegistry, *, replica_manager, metadata_cache, group_coordinator) -> None:
    """Every gauge of the data path, and the BrokerTopicMetrics meters (see the module docstring)."""
    stats = replica_manager.topic_stats
    replica_manager.add_leadership_listener(stats)
    metrics.add_source(stats)

    def gauge(name: str, read) -> None:
        metrics.gauge(MetricName("kafka.server", "ReplicaManager", name), read)

    def led() -> list:
        return [p for p in replica_manager.partitions.values() if p.is_leader]

    gauge("PartitionCount", lambda: len(replica_manager.partitions))
    gauge("LeaderCount", lambda: len(led()))
    gauge("UnderReplicatedPartitions", lambda: sum(1 for p in led() if len(p.isr) < len(p.replicas)))
    gauge("UnderMinIsrPartitionCount",
          lambda: sum(1 for p in led() if len(p.isr) < p.log.config.min_insync_replicas))
    gauge("AtMinIsrPartitionCount",
          lambda: sum(1 for p in led() if len(p.isr) == p.log.config.min_insync_replicas))
    gauge("OfflineReplicaCount", lambda: offline_replicas(replica_manager, metadata_cache))

    metrics.add_source(lambda: _log_metrics(replica_manager))
    metrics.add_source(lambda: _group_manager_metrics(group_coordinator))
    metrics.add_source(lambda: _lag_metrics(group_coordinator, replica_manager))

"""The JSON documents of the read-only endpoints, built from the broker's own state.

Each function takes the ``SocketServer`` (and what else it reads) and returns
plain dicts and lists; the web layer only serialises them.  Nothing here
changes anything.
"""

from __future__ import annotations

from dataclasses import fields

from twisted_kafka.coordinator.group.lag import group_views
from twisted_kafka.metrics import MetricName, MetricsRegistry
from twisted_kafka.metrics.registry import Meter
from twisted_kafka.network.connection_stats import CLOSE_REASONS, REJECT_REASONS
from twisted_kafka.network.socket_server import LiveConnection, SocketServer

#: The percentiles /v1/planes reports per API (keys of a histogram snapshot).
PERCENTILES = (("p50", "50thPercentile"), ("p95", "95thPercentile"), ("p99", "99thPercentile"),
               ("p999", "999thPercentile"))


def connections(server: SocketServer, *, listener: str | None = None, ip: str | None = None) -> dict:
    """``GET /v1/connections``: per listener and plane, open now and the totals by reason."""
    stats = server.connection_stats
    quotas = server.quotas
    live = server.live_connections() if ip is not None else []
    result = []
    for name, plane in server.listener_planes().items():
        if listener is not None and name.upper() != listener.upper():
            continue
        if ip is None:
            open_now = quotas.per_listener[name]
            accepted = stats.accepted[(name, plane)]
            rejected = stats.rejected_by_reason(name, plane)
            closed = stats.closed_by_reason(name, plane)
        else:
            open_now = sum(1 for c in live if c.listener == name and c.client_host == ip)
            accepted = stats.accepted_per_ip[(name, plane, ip)]
            rejected = stats.rejected_by_reason(name, plane, ip)
            closed = stats.closed_by_reason(name, plane, ip)
        result.append({
            "listener": name, "plane": plane, "open": open_now, "accepted_total": accepted,
            "rejected_total": sum(rejected.values()), "rejected": rejected,
            "closed_total": sum(closed.values()), "closed": closed,
            "throttled_accepts": quotas.throttled_accepts[name] if ip is None else 0,
        })
    return {"open_total": sum(entry["open"] for entry in result), "listeners": result,
            "reject_reasons": list(REJECT_REASONS), "close_reasons": list(CLOSE_REASONS)}


def ips(server: SocketServer, *, ip: str | None = None) -> dict:
    """``GET /v1/connections/ips``: per client IP, open connections, its limit and rejections."""
    quotas = server.quotas
    rejected = server.connection_stats.rejected_per_ip
    addresses = set(quotas.per_ip) | set(rejected) | set(quotas.max_connections_per_ip_overrides)
    if ip is not None:
        addresses = {ip}
    return {"ips": [{
        "ip": address, "open": quotas.per_ip.get(address, 0), "limit": quotas.ip_limit(address),
        "override": address in quotas.max_connections_per_ip_overrides, "rejected": rejected.get(address, 0),
    } for address in sorted(addresses)]}


def live(server: SocketServer, *, listener: str | None = None, ip: str | None = None) -> dict:
    """``GET /v1/connections/live``: every open connection."""
    entries = []
    for conn in server.live_connections():
        if listener is not None and conn.listener.upper() != listener.upper():
            continue
        if ip is not None and conn.client_host != ip:
            continue
        entry = {name: getattr(conn, name) for name in _LIVE_FIELDS}
        entry["peer"] = f"{conn.client_host}:{conn.client_port}"
        entry["connected_since_ms"] = int(conn.connected_since * 1000)
        entries.append(entry)
    return {"connections": entries}


_LIVE_FIELDS = tuple(f.name for f in fields(LiveConnection) if f.name != "connected_since")


def _histogram(metrics: MetricsRegistry, api: str, metric: str):
    return metrics.get(MetricName("kafka.network", "RequestMetrics", metric, (("request", api),)))


def apis(metrics: MetricsRegistry) -> dict[str, dict]:
    """Per API: requests per second (one-minute rate, all versions), count, and the time breakdown."""
    result: dict[str, dict] = {}
    for name, metric in metrics:
        if (name.group == "kafka.network" and name.type == "RequestMetrics" and name.name == "RequestsPerSec"
                and isinstance(metric, Meter)):
            api = dict(name.tags)["request"]
            entry = result.setdefault(api, {"requests_per_sec": 0.0, "requests_total": 0})
            entry["requests_per_sec"] += metric.rates()[0]
            entry["requests_total"] += metric.count
    for api, entry in result.items():
        for metric_name, label in (("TotalTimeMs", "total_time_ms"), ("RequestQueueTimeMs", "request_queue_time_ms"),
                                   ("LocalTimeMs", "local_time_ms"), ("RemoteTimeMs", "remote_time_ms"),
                                   ("ResponseQueueTimeMs", "response_queue_time_ms"),
                                   ("ResponseSendTimeMs", "response_send_time_ms")):
            histogram = _histogram(metrics, api, metric_name)
            if histogram is None:
                continue
            snap = histogram.snapshot()
            entry[label] = {"mean": snap["Mean"], "max": snap["Max"],
                            **{short: snap[key] for short, key in PERCENTILES}}
    return dict(sorted(result.items()))


def planes(server: SocketServer, metrics: MetricsRegistry) -> dict:
    """``GET /v1/planes``: each plane's queue and handlers, and per-API rates and latencies.

    The per-API request metrics are Kafka's (``kafka.network:type=RequestMetrics``),
    which are per API, not per plane: they are reported once, under ``apis``.
    """
    result = []
    for plane in server.planes:
        channel = plane.channel
        idle = metrics.get(MetricName("kafka.server", "KafkaRequestHandlerPool",
                                      f"{plane.metric_prefix}RequestHandlerAvgIdlePercent"))
        result.append({
            "plane": plane.name, "queue_size": channel.queue_size, "queue_capacity": channel.max_queued_requests,
            "queued_bytes": channel.held_bytes, "queued_bytes_capacity": channel.max_queued_bytes,
            "peak_queue_size": channel.peak_queue_size, "requests_total": channel.total_requests,
            "in_flight": channel.outstanding,
            "handler_idle_percent": round(idle.value * 100.0, 3) if idle is not None else None,
            "accepting": plane.open,
        })
    return {"planes": result, "apis": apis(metrics)}


# -- the data: topics, groups, brokers -------------------------------------------------------

#: The BrokerTopicMetrics meters /v1/topics reports, as (key prefix, attribute of ``TopicMetrics``).
_TOPIC_METERS = (("messages_in", "messages_in"), ("bytes_in", "bytes_in"), ("bytes_out", "bytes_out"),
                 ("bytes_rejected", "bytes_rejected"), ("replication_bytes_in", "replication_bytes_in"),
                 ("replication_bytes_out", "replication_bytes_out"),
                 ("produce_requests", "total_produce"), ("failed_produce_requests", "failed_produce"),
                 ("fetch_requests", "total_fetch"), ("failed_fetch_requests", "failed_fetch"))


def _meters(meters) -> dict:
    """Totals (``<name>_total``) and one-minute rates (``<name>_per_sec``) of a ``Meters`` object, or zeros."""
    result: dict[str, float | int] = {}
    for key, attribute in _TOPIC_METERS:
        meter = getattr(meters, attribute, None) if meters is not None else None
        result[f"{key}_total"] = meter.count if meter is not None else 0
        result[f"{key}_per_sec"] = round(meter.rates()[0], 3) if meter is not None else 0.0
    return result


def _offline(state, alive) -> bool:
    return state.leader < 0 or state.leader not in alive


def topics(metadata_cache, replica_manager, *, topic: str | None = None) -> dict:
    """``GET /v1/topics``: every topic as the cluster has it, with this broker's logs and its meters."""
    alive = set(metadata_cache.brokers)
    stats = replica_manager.topic_stats
    hosted = replica_manager.partitions
    result = []
    for name in sorted(metadata_cache.topics):
        if topic is not None and name != topic:
            continue
        state = metadata_cache.topics[name]
        partitions = []
        for index in sorted(state.partitions):
            p = state.partitions[index]
            local = hosted.get((name, index))
            log = local.log if local is not None else None
            partitions.append({
                "partition": index, "leader": p.leader, "leader_epoch": p.leader_epoch,
                "replicas": list(p.replicas), "isr": list(p.isr), "offline_replicas": list(p.offline_replicas),
                "under_replicated": len(p.isr) < len(p.replicas), "offline": _offline(p, alive),
                "hosted": local is not None, "leader_here": local is not None and local.is_leader,
                "size": log.size if log is not None else None,
                "num_segments": log.num_segments if log is not None else None,
                "log_start_offset": log.log_start_offset if log is not None else None,
                "log_end_offset": log.log_end_offset if log is not None else None,
                "high_watermark": log.high_watermark if log is not None else None,
            })
        hosted_sizes = [entry["size"] for entry in partitions if entry["size"] is not None]
        result.append({
            "name": name, "topic_id": str(state.topic_id), "internal": state.is_internal,
            "partition_count": len(partitions),
            "replication_factor": max((len(entry["replicas"]) for entry in partitions), default=0),
            "under_replicated": sum(1 for entry in partitions if entry["under_replicated"]),
            "offline": sum(1 for entry in partitions if entry["offline"]),
            "size": sum(hosted_sizes), **_meters(stats.get(name)), "partitions": partitions,
        })
    return {
        "broker_id": metadata_cache.local_broker_id,
        "totals": _meters(stats.all_topics),
        "under_replicated_partitions": sum(t["under_replicated"] for t in result),
        "offline_partitions": sum(t["offline"] for t in result),
        "topics": result,
    }


def groups(group_coordinator, replica_manager, *, group: str | None = None) -> dict:
    """``GET /v1/groups``: the groups this broker coordinates, their members and lag."""
    result = []
    for view in group_views(group_coordinator, replica_manager):
        if group is not None and view.group_id != group:
            continue
        lags = view.lags
        result.append({
            "group_id": view.group_id, "group_type": view.group_type, "state": view.state,
            "protocol_type": view.protocol_type,
            "protocol": view.protocol, "generation": view.generation, "member_count": len(view.members),
            "members": view.members, "total_lag": sum(lags) if lags else None,
            "max_lag": max(lags) if lags else None,
            "partitions": [{"topic": p.topic, "partition": p.partition, "committed_offset": p.committed_offset,
                            "log_end_offset": p.log_end_offset, "lag": p.lag, "metadata": p.metadata}
                           for p in view.partitions],
        })
    return {"groups": result}


def brokers(metadata_cache, controller_id: int | None = None) -> dict:
    """``GET /v1/brokers``: the cluster as this broker's metadata cache has it (from the controller)."""
    controller = metadata_cache.controller_id if controller_id is None else controller_id
    leaders: dict[int, int] = {}
    replicas: dict[int, int] = {}
    offline = 0
    partition_count = 0
    alive = set(metadata_cache.brokers)
    for topic in metadata_cache.topics.values():
        for state in topic.partitions.values():
            partition_count += 1
            if _offline(state, alive):
                offline += 1
            else:
                leaders[state.leader] = leaders.get(state.leader, 0) + 1
            for broker_id in state.replicas:
                replicas[broker_id] = replicas.get(broker_id, 0) + 1
    entries = []
    for broker_id in sorted(metadata_cache.brokers):
        broker = metadata_cache.brokers[broker_id]
        entries.append({
            "broker_id": broker_id, "rack": broker.rack, "is_controller": broker_id == controller,
            "endpoints": [{"listener": ep.listener_name, "host": ep.host, "port": ep.port,
                           "security_protocol": ep.security_protocol} for ep in broker.endpoints.values()],
            "leader_count": leaders.get(broker_id, 0), "replica_count": replicas.get(broker_id, 0),
        })
    return {
        "cluster_id": metadata_cache.cluster_id, "controller_id": controller,
        "broker_id": metadata_cache.local_broker_id, "brokers": entries, "topic_count": len(metadata_cache.topics),
        "partition_count": partition_count, "offline_partitions": offline,
        # Replicas assigned to brokers that are not registered now (stopped, or gone from ZooKeeper).
        "replicas_on_missing_brokers": {str(b): n for b, n in sorted(replicas.items()) if b not in alive},
    }

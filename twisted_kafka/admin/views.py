"""The JSON documents of the read-only endpoints, built from the broker's own state.

Each function takes the ``SocketServer`` (and what else it reads) and returns
plain dicts and lists; the web layer only serialises them.  Nothing here
changes anything.
"""

from __future__ import annotations

from dataclasses import fields

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

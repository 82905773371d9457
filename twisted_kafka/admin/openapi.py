"""``GET /v1/openapi.json``: the OpenAPI 3.1 description of every endpoint.

Written by hand next to the code it describes; the integration tests check
the live responses against it (schemathesis), so the two cannot drift apart
unnoticed.
"""

from __future__ import annotations

import copy
from typing import Any

from twisted_kafka.network.connection_stats import CLOSE_REASONS, REJECT_REASONS

_INT = {"type": "integer"}
_NULLABLE_INT = {"type": "integer", "nullable": True}
_STR = {"type": "string"}
_NULLABLE_STR = {"type": "string", "nullable": True}
_NUM = {"type": "number"}
_LIMIT = {"type": "integer", "nullable": True, "minimum": 0, "maximum": 2147483647}
_OCTET = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_IPV4 = f"^({_OCTET}\\.){{3}}{_OCTET}$"


def _obj(properties: dict[str, Any], required: list[str] | None = None, **extra) -> dict:
    schema = {"type": "object", "properties": properties,
              "required": list(properties) if required is None else required}
    schema.update(extra)
    return schema


def _counts(reasons) -> dict:
    return _obj({reason: _INT for reason in reasons}, additionalProperties=_INT)


_BOOL = {"type": "boolean"}
_INTS = {"type": "array", "items": _INT}
#: The BrokerTopicMetrics meters of /v1/topics: ``<name>_total`` (count) and ``<name>_per_sec`` (one-minute rate).
_METERS = {f"{name}_{suffix}": (_INT if suffix == "total" else _NUM)
           for name in ("messages_in", "bytes_in", "bytes_out", "bytes_rejected", "replication_bytes_in",
                        "replication_bytes_out", "produce_requests", "failed_produce_requests", "fetch_requests",
                        "failed_fetch_requests")
           for suffix in ("total", "per_sec")}
_ERROR = _obj({"error_code": _STR, "message": _STR}, additionalProperties=False)
_LATENCY = _obj({"mean": _NUM, "max": _NUM, "p50": _NUM, "p95": _NUM, "p99": _NUM, "p999": _NUM})

SCHEMAS: dict[str, Any] = {
    "Error": _ERROR,
    "ListenerConnections": _obj({
        "listener": _STR, "plane": {"type": "string", "enum": ["data", "control"]}, "open": _INT,
        "accepted_total": _INT, "rejected_total": _INT, "rejected": _counts(REJECT_REASONS),
        "closed_total": _INT, "closed": _counts(CLOSE_REASONS), "throttled_accepts": _INT}),
    "Connections": _obj({
        "open_total": _INT,
        "listeners": {"type": "array", "items": {"$ref": "#/components/schemas/ListenerConnections"}},
        "reject_reasons": {"type": "array", "items": _STR}, "close_reasons": {"type": "array", "items": _STR}}),
    "IpConnections": _obj({"ips": {"type": "array", "items": _obj(
        {"ip": _STR, "open": _INT, "limit": _INT, "override": {"type": "boolean"}, "rejected": _INT})}}),
    "LiveConnection": _obj({
        "connection_id": _STR, "listener": _STR, "plane": _STR, "security_protocol": _STR, "client_host": _STR,
        "client_port": _INT, "peer": _STR, "principal": _STR, "client_id": _NULLABLE_STR,
        "client_software_name": _NULLABLE_STR, "client_software_version": _NULLABLE_STR,
        "connected_since_ms": _INT, "idle_ms": _INT, "requests": _INT, "bytes_in": _INT, "bytes_out": _INT,
        "inflight_api": _NULLABLE_STR}),
    "LiveConnections": _obj({"connections": {"type": "array",
                                             "items": {"$ref": "#/components/schemas/LiveConnection"}}}),
    "Closed": _obj({"closed": _STR, "reason": _STR}),
    "TlsReload": _obj({"listeners": {
        "type": "object", "additionalProperties": _STR,
        "description": "TLS listener (and admin.rest for an https admin endpoint) -> reloaded, unchanged, or "
                       "why its new key or trust store was refused (the old one stays in use)"}}),
    "Quotas": _obj({
        "max.connections": _INT, "max.connections.per.ip": _INT, "max.connection.creation.rate": _INT,
        "max.connections.per.ip.overrides": {"type": "object", "additionalProperties": _INT},
        "listeners": {"type": "object", "additionalProperties": _obj(
            {"max.connections": _NULLABLE_INT, "max.connection.creation.rate": _NULLABLE_INT})},
        "ip_connection_creation_rates": {"type": "object", "additionalProperties": _INT}}),
    "QuotasUpdate": {
        "type": "object", "additionalProperties": False,
        "properties": {
            "max.connections": _LIMIT,
            "max.connections.per.ip": {**_LIMIT, "minimum": 1,
                                       "description": "0 is valid only with overrides for the addresses allowed"},
            "max.connection.creation.rate": _LIMIT,
            "max.connections.per.ip.overrides": {
                "type": "object", "nullable": True, "additionalProperties": {**_LIMIT, "nullable": False},
                "propertyNames": {"pattern": _IPV4},
                "description": "address -> limit; replaces every override (a host name is accepted if it "
                               "resolves)"},
            "listeners": {"type": "object", "additionalProperties": False, "properties": {}},
            "ip_connection_creation_rates": {
                "type": "object", "nullable": True, "additionalProperties": _LIMIT,
                "propertyNames": {"pattern": f"{_IPV4}|^<default>$"},
                "description": "connection_creation_rate of the ip entity (KIP-612) per address, <default> for "
                               "every address without its own; null removes one"}}},
    "Planes": _obj({
        "planes": {"type": "array", "items": _obj({
            "plane": _STR, "queue_size": _INT, "queue_capacity": _INT, "queued_bytes": _INT,
            "queued_bytes_capacity": _INT, "peak_queue_size": _INT, "requests_total": _INT, "in_flight": _INT,
            "handler_idle_percent": {"type": "number", "nullable": True}, "accepting": {"type": "boolean"}})},
        "apis": {"type": "object", "additionalProperties": _obj(
            {"requests_per_sec": _NUM, "requests_total": _INT}, additionalProperties=_LATENCY)}}),
    "Meters": _obj(_METERS),
    "TopicPartition": _obj({
        "partition": _INT, "leader": _INT, "leader_epoch": _INT, "replicas": _INTS, "isr": _INTS,
        "offline_replicas": _INTS, "under_replicated": _BOOL, "offline": _BOOL, "hosted": _BOOL,
        "leader_here": _BOOL, "size": _NULLABLE_INT, "num_segments": _NULLABLE_INT,
        "log_start_offset": _NULLABLE_INT, "log_end_offset": _NULLABLE_INT, "high_watermark": _NULLABLE_INT}),
    "Topic": _obj({
        "name": _STR, "topic_id": _STR, "internal": _BOOL, "partition_count": _INT, "replication_factor": _INT,
        "under_replicated": _INT, "offline": _INT, "size": _INT, **_METERS,
        "partitions": {"type": "array", "items": {"$ref": "#/components/schemas/TopicPartition"}}}),
    "Topics": _obj({
        "broker_id": _INT, "totals": {"$ref": "#/components/schemas/Meters"},
        "under_replicated_partitions": _INT, "offline_partitions": _INT,
        "topics": {"type": "array", "items": {"$ref": "#/components/schemas/Topic"}}}),
    "GroupMember": _obj({
        "member_id": _STR, "group_instance_id": _NULLABLE_STR, "client_id": _STR, "client_host": _STR,
        "assignment": {"type": "array", "items": _obj({"topic": _STR, "partition": _INT})}}),
    "Group": _obj({
        "group_id": _STR, "state": {"type": "string", "enum": ["Empty", "PreparingRebalance",
                                                               "CompletingRebalance", "Stable", "Dead"]},
        "protocol_type": _STR, "protocol": _STR, "generation": _INT, "member_count": _INT,
        "members": {"type": "array", "items": {"$ref": "#/components/schemas/GroupMember"}},
        "total_lag": _NULLABLE_INT, "max_lag": _NULLABLE_INT,
        "partitions": {"type": "array", "items": _obj({
            "topic": _STR, "partition": _INT, "committed_offset": _INT, "log_end_offset": _NULLABLE_INT,
            "lag": {"type": "integer", "nullable": True, "minimum": 0}, "metadata": _NULLABLE_STR})}}),
    "Groups": _obj({"groups": {"type": "array", "items": {"$ref": "#/components/schemas/Group"}}}),
    "Brokers": _obj({
        "cluster_id": _NULLABLE_STR, "controller_id": _INT, "broker_id": _INT, "topic_count": _INT,
        "partition_count": _INT, "offline_partitions": _INT,
        "replicas_on_missing_brokers": {"type": "object", "additionalProperties": _INT},
        "brokers": {"type": "array", "items": _obj({
            "broker_id": _INT, "rack": _NULLABLE_STR, "is_controller": _BOOL, "leader_count": _INT,
            "replica_count": _INT, "endpoints": {"type": "array", "items": _obj(
                {"listener": _STR, "host": _STR, "port": _INT, "security_protocol": _STR})}})}}),
    "Health": _obj({"status": _STR, "checks": {"type": "object", "additionalProperties": {"type": "boolean"}}},
                   required=["status"]),
}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(description: str, schema: str) -> dict:
    return {"description": description, "content": {"application/json": {"schema": _ref(schema)}}}


_ERRORS = {"401": _json("Missing or wrong token", "Error")}
_FILTERS = [
    {"name": "listener", "in": "query", "required": False, "schema": _STR, "description": "one listener only"},
    {"name": "ip", "in": "query", "required": False, "schema": _STR, "description": "one client IP only"},
]


def _get(summary: str, schema: str, parameters=None, secured: bool = True) -> dict:
    op: dict[str, Any] = {"summary": summary, "responses": {"200": _json(summary, schema)}}
    if secured:
        op["responses"].update(_ERRORS)
    else:
        op["security"] = []
    if parameters:
        op["parameters"] = parameters
    return {"get": op}


def _quotas_update(listener_names) -> dict:
    """The PUT body's schema: its listener entries are this broker's listeners."""
    schema = copy.deepcopy(SCHEMAS["QuotasUpdate"])
    limits = {"type": "object", "additionalProperties": False,
              "properties": {"max.connections": _LIMIT, "max.connection.creation.rate": _LIMIT}}
    schema["properties"]["listeners"]["properties"] = {name: limits for name in listener_names}
    return schema


def _as_json_schema(node: Any) -> Any:
    """OpenAPI 3.1 schemas are JSON Schema: ``nullable`` becomes a ``"null"`` type."""
    if isinstance(node, list):
        return [_as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _as_json_schema(value) for key, value in node.items()}
    if node.pop("nullable", False) and "type" in node:
        node["type"] = [node["type"], "null"]
    return node


#: Every operation's answer when the endpoint has no token and ``Host`` is not one of its names (hosts.py).
_MISDIRECTED = _json("Host is not one of this endpoint's names (only without admin.rest.auth.token; "
                     "see admin.rest.allowed.hosts)", "Error")


def _with_misdirected(paths: dict) -> dict:
    for operations in paths.values():
        for operation in operations.values():
            operation["responses"].setdefault("421", _MISDIRECTED)
    return paths


def document(listener_names=()) -> dict:
    """The OpenAPI (3.1) document of a broker with these listeners."""
    return _as_json_schema({
        "openapi": "3.1.0",
        "info": {"title": "twisted_kafka admin REST endpoint", "version": "1"},
        "components": {
            "schemas": {**SCHEMAS, "QuotasUpdate": _quotas_update(listener_names)},
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": _with_misdirected({
            "/v1/connections": _get("Connections per listener and plane, by reason", "Connections", _FILTERS),
            "/v1/connections/ips": _get("Connections per client IP with its limit", "IpConnections", _FILTERS[1:]),
            "/v1/connections/live": _get("Every open connection", "LiveConnections", _FILTERS),
            "/v1/connections/{connection_id}": {"delete": {
                "summary": "Close one connection (close reason admin)",
                "parameters": [{"name": "connection_id", "in": "path", "required": True, "schema": _STR}],
                "security": [{"bearer": []}],
                "responses": {"200": _json("Closed", "Closed"), "404": _json("No such connection", "Error"),
                              **_ERRORS}}},
            "/v1/quotas": {
                **_get("Connection quotas in force", "Quotas"),
                "put": {"summary": "Change connection quotas (persisted as dynamic broker configs)",
                        "security": [{"bearer": []}],
                        "requestBody": {"required": True,
                                        "content": {"application/json": {"schema": _ref("QuotasUpdate")}}},
                        "responses": {"200": _json("The quotas now in force", "Quotas"),
                                      "400": _json("Refused", "Error"),
                                      "413": _json("Body over admin.rest.request.max.bytes (refused on the "
                                                   "headers when Content-Length says so)", "Error"),
                                      **_ERRORS}}},
            "/v1/tls/reload": {"post": {
                "summary": "Re-read the key and trust stores of every TLS listener and of this endpoint",
                "security": [{"bearer": []}],
                "responses": {"200": _json("What each listener did", "TlsReload"), **_ERRORS}}},
            "/v1/planes": _get("Request planes: queues, handlers, per-API rates and latencies", "Planes"),
            "/v1/topics": _get("Topics: partitions, leaders, ISR, this broker's logs (size, offsets), in/out meters",
                               "Topics", [{"name": "topic", "in": "query", "required": False, "schema": _STR,
                                           "description": "one topic only"}]),
            "/v1/groups": _get("Consumer groups this broker coordinates: state, members, committed offsets, lag",
                               "Groups", [{"name": "group", "in": "query", "required": False, "schema": _STR,
                                           "description": "one group only"}]),
            "/v1/brokers": _get("The cluster: brokers, their endpoints, leaders and replicas, the controller",
                                "Brokers"),
            "/v1/health/live": _get("The process answers", "Health", secured=False),
            "/v1/health/ready": {"get": {
                "summary": "Listeners bound and logs recovered", "security": [],
                "responses": {"200": _json("Ready", "Health"), "503": _json("Not ready", "Health")}}},
            "/v1/openapi.json": {"get": {"summary": "This document",
                                         "responses": {"200": {"description": "OpenAPI 3.1 document",
                                                               "content": {"application/json": {}}},
                                                       **_ERRORS}}},
            "/metrics": {"get": {"summary": "Prometheus metrics (text format)",
                                 "responses": {"200": {"description": "Prometheus text exposition",
                                                       "content": {"text/plain": {"schema": _STR}}},
                                               **_ERRORS}}},
            "/": {"get": {"summary": "Dashboard (HTML)", "security": [],
                          "responses": {"200": {"description": "The dashboard page",
                                                "content": {"text/html": {"schema": _STR}}}}}},
        }),
    })

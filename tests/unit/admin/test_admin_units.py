"""The admin endpoint's parts on their own: settings checks, the quotas document, Prometheus names,
and routing/authentication of the resource (twisted.web's DummyRequest, a fake backend)."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families
from twisted.web.test.requesthelper import DummyRequest

from twisted_kafka.admin import quotas
from twisted_kafka.admin.hosts import HostRule
from twisted_kafka.admin.prometheus import prometheus_name, render
from twisted_kafka.admin.settings import AdminRestSettings, is_loopback
from twisted_kafka.admin.web import AdminBackend, AdminResource
from twisted_kafka.config import KafkaConfig, StartupError
from twisted_kafka.metrics import MetricName, MetricsRegistry
from twisted_kafka.network.connection_stats import ConnectionStats
from twisted_kafka.protocol.errors import KafkaError


def settings(**props):
    return AdminRestSettings.from_config(KafkaConfig.from_props({k.replace("_", "."): v for k, v in props.items()}))


def test_loopback_is_the_default_and_other_addresses_need_a_token_or_https(tmp_path):
    default = settings()
    assert (default.scheme, default.host, default.port, default.token) == ("http", "127.0.0.1", 9644, None)
    assert settings(admin_rest_listener="") is None
    assert is_loopback("::1") and is_loopback("localhost") and not is_loopback("0.0.0.0")
    with pytest.raises(StartupError, match="admin.rest.listener: http://0.0.0.0:9644: .*admin.rest.auth.token"):
        settings(admin_rest_listener="http://0.0.0.0:9644")
    assert settings(admin_rest_listener="http://0.0.0.0:9644", admin_rest_auth_token="t").token == "t"
    token = tmp_path / "token"
    token.write_text("from-file\n")
    assert settings(admin_rest_listener="http://10.1.1.1:1", admin_rest_auth_token_file=str(token)).token == \
        "from-file"
    with pytest.raises(StartupError, match="admin.rest.auth.token.file"):
        settings(admin_rest_auth_token_file=str(tmp_path / "missing"))
    with pytest.raises(StartupError, match="admin.rest.ssl.keystore.location"):
        settings(admin_rest_listener="https://127.0.0.1:1")
    assert settings(admin_rest_listener="https://0.0.0.0:1", admin_rest_ssl_keystore_location="/k.pem").scheme == \
        "https"
    for bad in ("127.0.0.1:9644", "ftp://127.0.0.1:1", "http://127.0.0.1", "http://127.0.0.1:1/path"):
        with pytest.raises(StartupError, match="admin.rest.listener"):
            settings(admin_rest_listener=bad)


def test_a_quotas_document_becomes_dynamic_configs():
    body = {"max.connections": 10, "max.connections.per.ip": None,
            "max.connections.per.ip.overrides": {"10.0.0.1": 3, "10.0.0.2": 4.0},
            "listeners": {"plaintext": {"max.connections": 5, "max.connection.creation.rate": None}},
            "ip_connection_creation_rates": {"<default>": 2, "10.0.0.9": None}}
    updates = quotas.config_updates(body, ["PLAINTEXT"])
    assert updates == {"max.connections": "10", "max.connections.per.ip": None,
                       "max.connections.per.ip.overrides": "10.0.0.1:3,10.0.0.2:4",
                       "listener.name.plaintext.max.connections": "5",
                       "listener.name.plaintext.max.connection.creation.rate": None}
    assert quotas.ip_rate_updates(body) == {"<default>": 2.0, "10.0.0.9": None}
    assert quotas.merged({"max.connections.per.ip": "3", "log.retention.ms": "1"}, updates) == {
        "log.retention.ms": "1", "max.connections": "10", "max.connections.per.ip.overrides": "10.0.0.1:3,10.0.0.2:4",
        "listener.name.plaintext.max.connections": "5"}
    for bad in ([], {"num.io.threads": 1}, {"max.connections": "10"}, {"max.connections": True},
                {"max.connections": 2**31}, {"listeners": {"OTHER": {}}},
                {"listeners": {"PLAINTEXT": {"max.connections.per.ip": 1}}}):
        with pytest.raises(KafkaError):
            quotas.config_updates(bad, ["PLAINTEXT"])
    with pytest.raises(KafkaError):
        quotas.ip_rate_updates({"ip_connection_creation_rates": {"a-host": 1}})


def test_kafka_metric_names_map_to_prometheus_names():
    assert prometheus_name(MetricName("kafka.network", "RequestChannel", "ControlPlaneRequestQueueSize")) == (
        "kafka_network_requestchannel_requestqueuesize", {"plane": "control"})
    assert prometheus_name(MetricName("kafka.network", "RequestChannel", "RequestQueueSize")) == (
        "kafka_network_requestchannel_requestqueuesize", {"plane": "data"})
    assert prometheus_name(MetricName("kafka.server", "socket-server-metrics", "connection-count",
                                      (("listener", "PLAINTEXT"),))) == (
        "kafka_server_socketserver_connection_count", {"listener": "PLAINTEXT"})
    assert prometheus_name(MetricName("kafka.network", "RequestMetrics", "TotalTimeMs", (("request", "Fetch"),))) == (
        "kafka_network_requestmetrics_totaltimems", {"request": "Fetch"})


def test_render_is_parseable_prometheus_text():
    registry = MetricsRegistry(clock=lambda: 0.0)
    registry.meter(MetricName("kafka.network", "RequestMetrics", "RequestsPerSec",
                              (("request", "Fetch"), ("version", "12")))).mark(3)
    registry.histogram(MetricName("kafka.network", "RequestMetrics", "TotalTimeMs", (("request", "Fetch"),))).update(2)
    registry.gauge(MetricName("kafka.network", "RequestChannel", "RequestQueueSize"), lambda: 4)
    registry.gauge(MetricName("kafka.network", "SocketServer", "Broken"), lambda: 1 / 0)
    families = {f.name: f for f in text_string_to_metric_families(render(registry, ConnectionStats()).decode())}
    assert families["kafka_network_requestmetrics_requestspersec"].samples[0].value == 3
    assert families["kafka_network_requestchannel_requestqueuesize"].samples[0].labels == {"plane": "data"}
    summary = families["kafka_network_requestmetrics_totaltimems"]
    assert {s.labels.get("quantile") for s in summary.samples} >= {"0.5", "0.99"}
    assert "twisted_kafka_connections_rejected" in families


class FakeSocketServer:
    connection_stats = ConnectionStats()

    def __init__(self):
        self.closed: list[str] = []

    def listener_planes(self):
        return {"PLAINTEXT": "data"}

    def close_connection(self, connection_id, reason="admin"):
        self.closed.append(connection_id)
        return connection_id == "known"


def call(resource, method: str, path: str, token: str | None = None, body: bytes | None = None):
    request = DummyRequest([s.encode() for s in path.strip("/").split("/")] if path != "/" else [])
    request.method = method.encode()
    if token is not None:
        request.requestHeaders.setRawHeaders(b"authorization", [f"Bearer {token}".encode()])
    if body is not None:
        from io import BytesIO
        request.content = BytesIO(body)
    result = resource.render(request)
    if isinstance(result, bytes):
        request.write(result)
    return request.responseCode or 200, b"".join(request.written)


def resource(token):
    backend = AdminBackend(socket_server=FakeSocketServer(), admin_manager=None, dynamic_config=None,
                           metrics=MetricsRegistry(), broker_id=0, readiness=lambda: {"log_recovered": False})
    return AdminResource(backend, token, HostRule("127.0.0.1"))


def test_routing_authentication_and_json_errors():
    secured = resource("secret")
    assert call(secured, "GET", "/v1/health/live")[0] == 200
    status, body = call(secured, "GET", "/v1/health/ready")
    assert status == 503 and json.loads(body)["status"] == "not ready"
    assert call(secured, "GET", "/")[0] == 200
    for token in (None, "wrong"):
        status, body = call(secured, "DELETE", "/v1/connections/known", token)
        assert status == 401 and json.loads(body)["error_code"] == "UNAUTHORIZED"
        assert call(secured, "GET", "/v1/openapi.json", token)[0] == 401
    status, body = call(secured, "DELETE", "/v1/connections/known", "secret")
    assert status == 200 and json.loads(body) == {"closed": "known", "reason": "admin"}
    assert call(secured, "DELETE", "/v1/connections/other", "secret")[0] == 404
    assert call(secured, "POST", "/v1/openapi.json", "secret")[0] == 405
    assert call(secured, "POST", "/v1/health/live")[0] == 405
    assert call(secured, "GET", "/v2/anything", "secret")[0] == 404

    open_ = resource(None)
    assert call(open_, "GET", "/v1/openapi.json")[0] == 200
    status, body = call(open_, "PUT", "/v1/quotas", body=b"{}")
    assert status == 401 and "admin.rest.auth.token" in json.loads(body)["message"]


def test_tls_reload_needs_the_token_and_answers_per_listener():
    reloads = []

    def reload_certificates():
        reloads.append(1)
        return {"SSL": "reloaded", "admin.rest": "unchanged"}

    backend = AdminBackend(socket_server=FakeSocketServer(), admin_manager=None, dynamic_config=None,
                           metrics=MetricsRegistry(), broker_id=0, readiness=dict,
                           reload_certificates=reload_certificates)
    hosts = HostRule("127.0.0.1")
    secured, open_ = AdminResource(backend, "secret", hosts), AdminResource(backend, None, hosts)
    for res, token in ((secured, None), (secured, "wrong"), (open_, None)):
        assert call(res, "POST", "/v1/tls/reload", token)[0] == 401
    assert reloads == []
    assert call(secured, "GET", "/v1/tls/reload", "secret")[0] == 405
    status, body = call(secured, "POST", "/v1/tls/reload", "secret")
    assert status == 200 and json.loads(body) == {"listeners": {"SSL": "reloaded", "admin.rest": "unchanged"}}
    assert reloads == [1]


def test_tls_keys_are_every_declared_admin_ssl_key():
    from twisted_kafka.admin.settings import TLS_KEYS, TLS_PREFIX
    from twisted_kafka.config import BROKER_CONFIG

    assert set(TLS_KEYS) == {k for k in BROKER_CONFIG if k.startswith(TLS_PREFIX + "ssl.")}


def test_request_limits_and_allowed_hosts_are_read_from_their_keys():
    from twisted_kafka.config import ConfigError

    default = settings()
    assert (default.max_request_bytes, default.request_timeout, default.allowed_hosts) == (65536, 10.0, ())
    tuned = settings(admin_rest_request_max_bytes="1024", admin_rest_request_timeout_ms="1500",
                     admin_rest_allowed_hosts="a.internal, b.internal:9644,")
    assert (tuned.max_request_bytes, tuned.request_timeout, tuned.allowed_hosts) == (
        1024, 1.5, ("a.internal", "b.internal:9644"))
    for key in ("admin.rest.request.max.bytes", "admin.rest.request.timeout.ms"):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            KafkaConfig.from_props({key: "0"})

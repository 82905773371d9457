"""Authentication, startup checks, https, Prometheus, planes and health of the admin REST endpoint."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from support.broker_process import BrokerExited
from support.raw_client import RawClient

from .support import TOKEN, Admin, AdminRestTestCase

pytestmark = pytest.mark.integration

READS = ("/v1/connections", "/v1/connections/ips", "/v1/connections/live", "/v1/quotas", "/v1/planes",
         "/metrics", "/v1/openapi.json")


class AuthenticationTest(AdminRestTestCase):
    async def test_with_a_token_every_call_but_health_needs_it(self):
        broker = self.broker_factory({"admin.rest.auth.token": TOKEN})
        admin = Admin(broker)
        for path in READS:
            for token in (None, "wrong-token"):
                status, body = await admin.request("GET", path, token=token)
                assert status == 401 and body["error_code"] == "UNAUTHORIZED", (path, token, body)
            status, _ = await admin.request("GET", path)
            assert status == 200, path
        for method, path, body in (("PUT", "/v1/quotas", {"max.connections": 10}),
                                   ("DELETE", "/v1/connections/nope", None)):
            for token in (None, "wrong-token"):
                status, error = await admin.request(method, path, body, token=token)
                assert status == 401 and error["error_code"] == "UNAUTHORIZED", (method, token, error)
        assert (await admin.get("/v1/quotas"))["max.connections"] == 2147483647, "refused calls changed nothing"
        for path in ("/v1/health/live", "/v1/health/ready", "/"):
            status, _ = await admin.request("GET", path, token=None)
            assert status == 200, path

    async def test_without_a_token_reads_are_open_and_changes_refused(self):
        broker = self.broker_factory()
        admin = Admin(broker, token=None)
        for path in READS:
            status, _ = await admin.request("GET", path)
            assert status == 200, path
        status, error = await admin.request("PUT", "/v1/quotas", {"max.connections": 10})
        assert status == 401 and "admin.rest.auth.token" in error["message"]
        status, error = await admin.request("DELETE", "/v1/connections/some-id")
        assert status == 401

    async def test_a_token_file_is_read(self):
        token_file = self.tmp_path / "token"
        token_file.write_text(" file-token\n")
        broker = self.broker_factory({"admin.rest.auth.token.file": str(token_file)})
        assert (await Admin(broker, token="file-token").request("GET", "/v1/quotas"))[0] == 200
        assert (await Admin(broker, token="other").request("GET", "/v1/quotas"))[0] == 401


class StartupTest(AdminRestTestCase):
    def test_a_non_loopback_address_without_token_or_tls_is_refused(self):
        with pytest.raises(BrokerExited) as exc:
            self.broker_factory({"admin.rest.listener": "http://0.0.0.0:0"})
        assert exc.value.returncode == 1
        (line,) = [ln for ln in exc.value.log.splitlines() if "Broker startup failed" in ln]
        assert "admin.rest.listener: http://0.0.0.0:0" in line and "admin.rest.auth.token" in line

    def test_a_bad_listener_is_refused(self):
        with pytest.raises(BrokerExited) as exc:
            self.broker_factory({"admin.rest.listener": "ftp://127.0.0.1:1"})
        assert "admin.rest.listener: ftp://127.0.0.1:1" in exc.value.log

    async def test_https_with_a_pem_keystore(self):
        import trustme
        from treq.client import HTTPClient
        from twisted.internet import reactor, ssl
        from twisted.web.client import Agent, BrowserLikePolicyForHTTPS

        ca = trustme.CA()
        server = ca.issue_cert("127.0.0.1")
        keystore = self.tmp_path / "admin.pem"
        keystore.write_bytes(server.private_key_and_cert_chain_pem.bytes())
        broker = self.broker_factory({"admin.rest.listener": "https://0.0.0.0:0",
                                      "admin.rest.ssl.keystore.location": str(keystore)})
        assert broker.admin_url.startswith("https://")
        port = broker.admin_url.rsplit(":", 1)[1]
        trust = ssl.Certificate.loadPEM(ca.cert_pem.bytes())
        agent = Agent(reactor, contextFactory=BrowserLikePolicyForHTTPS(trustRoot=trust))
        response = await HTTPClient(agent).get(f"https://127.0.0.1:{port}/v1/health/live")
        assert response.code == 200
        assert (await response.json()) == {"status": "live"}


    async def test_https_with_a_truststore_needs_a_client_certificate(self):
        import trustme
        from treq.client import HTTPClient
        from twisted.internet import reactor, ssl
        from twisted.web.client import Agent, ResponseFailed, ResponseNeverReceived
        from twisted.web.iweb import IPolicyForHTTPS
        from zope.interface import implementer

        ca = trustme.CA()
        keystore = self.tmp_path / "admin.pem"
        keystore.write_bytes(ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.bytes())
        truststore = self.tmp_path / "ca.pem"
        truststore.write_bytes(ca.cert_pem.bytes())
        broker = self.broker_factory({"admin.rest.listener": "https://127.0.0.1:0",
                                      "admin.rest.ssl.keystore.location": str(keystore),
                                      "admin.rest.ssl.truststore.location": str(truststore)})
        url = broker.admin_url + "/v1/health/live"
        trust = ssl.Certificate.loadPEM(ca.cert_pem.bytes())
        client_pem = ca.issue_cert("operator@example.com").private_key_and_cert_chain_pem.bytes()

        @implementer(IPolicyForHTTPS)
        class Policy:
            def __init__(self, certificate):
                self.certificate = certificate

            def creatorForNetloc(self, hostname, port):
                return ssl.optionsForClientTLS("127.0.0.1", trustRoot=trust, clientCertificate=self.certificate)

        with_cert = HTTPClient(Agent(reactor, contextFactory=Policy(ssl.PrivateCertificate.loadPEM(client_pem))))
        response = await with_cert.get(url)
        assert response.code == 200
        without = HTTPClient(Agent(reactor, contextFactory=Policy(None)))
        with pytest.raises((ResponseNeverReceived, ResponseFailed)):   # the handshake is refused
            await without.get(url)


class MetricsTest(AdminRestTestCase):
    async def test_prometheus_planes_health_and_errors(self):
        broker = self.broker_factory()
        admin = Admin(broker, token=None)
        with RawClient(broker.data_port) as raw:
            for _ in range(3):
                raw.api_versions(version=3)
            raw.metadata()
            text = await admin.get("/metrics")
        families = {family.name: family for family in text_string_to_metric_families(text)}
        queue = families["kafka_network_requestchannel_requestqueuesize"]
        assert {s.labels["plane"] for s in queue.samples} == {"data", "control"}
        count = families["kafka_server_socketserver_connection_count"]
        assert {s.labels["listener"]: s.value for s in count.samples}["PLAINTEXT"] == 1
        total = families["kafka_network_requestmetrics_totaltimems"]
        assert total.type == "summary"
        api_versions = [s for s in total.samples if s.labels.get("request") == "ApiVersions"]
        assert any(s.name.endswith("_count") and s.value >= 3 for s in api_versions)
        assert any(s.labels.get("quantile") == "0.99" for s in api_versions)
        idle = families["kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent"]
        assert {s.labels["plane"] for s in idle.samples} == {"data", "control"}
        accepted = families["twisted_kafka_connections_accepted"]
        assert any(s.labels == {"listener": "PLAINTEXT", "plane": "data"} and s.value == 1 for s in accepted.samples)

        planes = await admin.get("/v1/planes")
        by_name = {p["plane"]: p for p in planes["planes"]}
        assert set(by_name) == {"data", "control"}
        assert by_name["control"]["queue_capacity"] == 20 and by_name["data"]["queue_capacity"] == 500
        assert 0 <= by_name["data"]["handler_idle_percent"] <= 100
        assert planes["apis"]["ApiVersions"]["requests_total"] >= 3
        assert set(planes["apis"]["ApiVersions"]["total_time_ms"]) == {"mean", "max", "p50", "p95", "p99", "p999"}

        assert (await admin.get("/v1/health/live")) == {"status": "live"}
        ready = await admin.get("/v1/health/ready")
        assert ready["status"] == "ready" and all(ready["checks"].values())
        status, error = await admin.request("GET", "/v1/nowhere")
        assert status == 404 and set(error) == {"error_code", "message"}
        status, error = await admin.request("POST", "/v1/quotas")
        assert status == 405 and error["error_code"] == "METHOD_NOT_ALLOWED"
        status, error = await admin.request("PUT", "/v1/quotas", token=None)
        assert status == 401

    async def test_health_answers_when_the_connection_caps_are_reached(self):
        broker = self.broker_factory({"max.connections": "1", "admin.rest.auth.token": TOKEN})
        admin = Admin(broker)
        with RawClient(broker.data_port) as holder:
            holder.api_versions()
            assert (await admin.get("/v1/health/ready"))["status"] == "ready"
            assert (await admin.listener())["open"] == 1

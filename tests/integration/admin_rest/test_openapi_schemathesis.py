"""schemathesis against the live admin endpoint: every operation of ``/v1/openapi.json``, called with
generated (valid and invalid) input, answers without a 5xx and as its schema says."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

from support.broker_process import BrokerProcess

from .support import TOKEN

pytestmark = pytest.mark.integration

AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def admin_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("openapi"), {"admin.rest.auth.token": TOKEN}).start()
    yield broker
    assert broker.stop() == 0


def operations(url: str):
    schema = schemathesis.openapi.from_url(url + "/v1/openapi.json", headers=AUTH)
    return [result.ok() for result in schema.get_all_operations()]


def test_the_api_conforms_to_its_openapi_document(admin_broker):
    """Every operation, through schemathesis' Python API (its strategies and checks) with hypothesis."""
    url = admin_broker.admin_url
    found = operations(url)
    assert {f"{op.method.upper()} {op.path}" for op in found} >= {
        "GET /v1/connections", "GET /v1/connections/ips", "GET /v1/connections/live",
        "DELETE /v1/connections/{connection_id}", "GET /v1/quotas", "PUT /v1/quotas", "GET /v1/planes",
        "GET /metrics", "GET /v1/health/live", "GET /v1/health/ready", "GET /", "POST /v1/tls/reload"}
    for operation in found:
        @given(case=operation.as_strategy())
        @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def conforms(case):
            case.call_and_validate(base_url=url, headers=AUTH)

        conforms()

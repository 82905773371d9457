"""ApiVersions (18): the plane's APIs with the registry's ranges; KIP-511's answers to odd versions and names."""

from __future__ import annotations

import pytest

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.codec import decode_response
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import CONTROLLER_API_KEYS, REGISTRY, ApiKey
from twisted_kafka.server.authorization import ALLOW_ALL
from twisted_kafka.server.handlers.api_versions import ApiVersionsHandler
from twisted_kafka.server.kafka_apis import KafkaApis

from .helpers import bodiless_request, decode, decode_at_version, make_request, response_bytes, result_of

SERVED = [ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.API_VERSIONS, ApiKey.LEADER_AND_ISR]


class Served:
    """The plane's served keys, as the SocketServer's planes answer them; remembers who asked."""

    def __init__(self):
        self.contexts = []

    def __call__(self, context):
        self.contexts.append(context)
        keys = SERVED if context.plane == "control" else [k for k in SERVED if k not in CONTROLLER_API_KEYS]
        return list(keys)


def ask(version, *, plane="data", **fields):
    served = Served()
    apis = KafkaApis([ApiVersionsHandler(served)], authorization=ALLOW_ALL)
    request = make_request(m.ApiVersionsRequest(**fields), version, plane=plane)
    return request, result_of(apis.handle(request)), served


def table(body):
    return [(k.api_key, k.min_version, k.max_version) for k in body.api_keys]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_old_versions_list_the_plane_s_apis(version):
    request, response, served = ask(version)
    body = decode(request, response)
    assert body.error_code == ErrorCode.NONE
    assert table(body) == REGISTRY.api_versions_entries([k for k in SERVED if k not in CONTROLLER_API_KEYS])
    assert [c.plane for c in served.contexts] == ["data"]


@pytest.mark.parametrize("version", [3, 4])
def test_new_versions_name_the_client_software(version):
    request, response, _ = ask(version, plane="control", client_software_name="librdkafka",
                               client_software_version="2.16.0")
    body = decode(request, response)
    assert body.error_code == ErrorCode.NONE
    assert table(body) == REGISTRY.api_versions_entries(SERVED)
    spec = REGISTRY[ApiKey.LEADER_AND_ISR]
    assert (ApiKey.LEADER_AND_ISR, spec.min_version, spec.max_version) in table(body)


@pytest.mark.parametrize(("name", "version"), [("", "1.0"), ("bad name", "1.0"), ("kcat", ""),
                                               ("-lead", "1"), ("kcat", "1.0-")])
def test_an_invalid_client_software_name_or_version_is_an_invalid_request(name, version):
    request, response, served = ask(3, client_software_name=name, client_software_version=version)
    # Kafka answers at the request's version (only UNSUPPORTED_VERSION falls back to v0)
    body = decode_at_version(m.ApiVersionsResponse, response_bytes(response)[8:], 3)
    assert (body.error_code, body.api_keys) == (ErrorCode.INVALID_REQUEST, [])
    assert served.contexts == []


def test_an_unsupported_version_is_answered_in_v0_with_the_supported_range():
    apis = KafkaApis([ApiVersionsHandler(Served())], authorization=ALLOW_ALL)
    request = bodiless_request(ApiKey.API_VERSIONS, 99)
    response = result_of(apis.handle(request))
    correlation_id, body = decode_response(ApiKey.API_VERSIONS, 0, response_bytes(response)[4:], strict=True)
    spec = REGISTRY[ApiKey.API_VERSIONS]
    assert correlation_id == request.correlation_id
    assert body.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert table(body) == [(ApiKey.API_VERSIONS, spec.min_version, spec.max_version)]


def test_the_broker_advertises_what_its_table_serves(node):
    request, response = node.handle(m.ApiVersionsRequest(client_software_name="kcat", client_software_version="1"),
                                    3)
    assert [k for k, _, _ in table(decode(request, response))] == node.apis.served_keys


def test_group_version_is_finalized_while_the_consumer_protocol_is_served():
    """KIP-848: ApiVersions v3+ lists group.version (supported from v4: Kafka omits features whose
    minimum is 0 before) and finalizes it at 1 when ConsumerGroupHeartbeat is served."""
    from kafka.protocol.metadata import ApiVersionsResponse

    from twisted_kafka.protocol.codec import api_versions_response

    def decoded(keys, version):
        return ApiVersionsResponse.decode(api_versions_response(keys, version=version).encode(version=version),
                                          version=version)

    served = decoded([18, 68, 69], 4)
    assert [(f.name, f.min_version, f.max_version) for f in served.supported_features] == [("group.version", 0, 1)]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in served.finalized_features] == \
        [("group.version", 1, 1)]
    assert decoded([18, 68, 69], 3).supported_features == []
    assert decoded([18], 4).finalized_features == []

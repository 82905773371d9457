"""Every advertised (api_key, version): our encoded responses parse in the clients.

Each response is encoded by ``codec.encode_response`` (size, response header,
body) and handed to the clients' own response parsers, header included:
kafka-python's response classes for every version, and aiokafka's response
structs (an independent implementation) wherever aiokafka can receive that
version. Both must read back exactly the fields we encoded.
"""

from __future__ import annotations

import io
import random
import struct

import pytest

from twisted_kafka.protocol.codec import encode_response
from twisted_kafka.protocol.header import RequestHeader
from twisted_kafka.protocol.registry import REGISTRY, ApiKey

from .clients import AIOKAFKA_REQUESTS, AIOKAFKA_RESPONSES
from .schema_values import assert_object_matches, assert_positional_matches, build_object, random_values

SEEDS = 6
CASES = [(spec.api_key, version) for spec in REGISTRY for version in range(spec.min_version, spec.max_version + 1)]


def _id(case):
    api_key, version = case
    return f"{REGISTRY[api_key].name}-v{version}"


def encoded_response(api_key: int, version: int, seed: int):
    spec = REGISTRY[api_key]
    struct_field = spec.response_class._struct
    rng = random.Random(f"response-{api_key}-{version}-{seed}")
    values = random_values(rng, struct_field, version)
    if api_key == ApiKey.API_VERSIONS:
        # A non-zero error makes every client read the body as v0 (KIP-511); that
        # path has its own test.
        values["error_code"] = 0
    body = build_object(spec.response_class, struct_field, version, values)
    header = RequestHeader(api_key=api_key, api_version=version, correlation_id=rng.randint(-2 ** 31, 2 ** 31 - 1),
                           client_id="c")
    frame = b"".join(encode_response(header, body))
    return header, values, frame


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_response_parses_in_kafka_python(case):
    api_key, version = case
    spec = REGISTRY[api_key]
    for seed in range(SEEDS):
        header, values, frame = encoded_response(api_key, version, seed)
        (size,) = struct.unpack_from(">i", frame)
        assert size == len(frame) - 4
        decoded = spec.response_class.decode(frame[4:], version=version, header=True)
        assert decoded.header.correlation_id == header.correlation_id
        assert_object_matches(decoded, spec.response_class._struct, version, values, path="[kafka-python] ")


AIOKAFKA_CASES = [case for case in CASES if case in AIOKAFKA_RESPONSES]


@pytest.mark.parametrize("case", AIOKAFKA_CASES, ids=_id)
def test_response_parses_in_aiokafka(case):
    api_key, version = case
    spec = REGISTRY[api_key]
    response_struct = AIOKAFKA_RESPONSES[case]
    request_struct = AIOKAFKA_REQUESTS[case]
    for seed in range(SEEDS):
        header, values, frame = encoded_response(api_key, version, seed)
        stream = io.BytesIO(frame[4:])
        # aiokafka reads the response header as its request struct dictates (conn.py).
        response_header = object.__new__(request_struct).parse_response_header(stream)
        assert response_header.correlation_id == header.correlation_id
        decoded = response_struct.decode(stream)
        assert stream.read() == b"", "aiokafka left bytes unread"
        assert_positional_matches(decoded, response_struct.SCHEMA, spec.response_class._struct, version, values,
                                  path="[aiokafka] ")


def test_aiokafka_covers_the_versions_it_has():
    assert len(AIOKAFKA_CASES) >= 60

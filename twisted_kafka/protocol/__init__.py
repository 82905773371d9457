"""Sans-IO Kafka protocol codec: bytes in, objects out.

Nothing in this package imports Twisted (a test enforces it), so the codec can
be exercised, fuzzed and benchmarked without a reactor.

Layout: ``primitives`` (wire types), ``header`` (request/response headers),
``registry`` (API keys, advertised versions), ``messages`` (message classes),
``codec`` (decode requests, encode responses), ``fetch_response`` and
``metadata_response`` (hand-written encoders for the two big responses),
``records`` (RecordBatch v2), ``errors`` and ``exceptions``.
"""

from .codec import (
    api_versions_error_response,
    api_versions_response,
    decode_request,
    decode_request_body,
    decode_response,
    encode_api_versions_error,
    encode_api_versions_response,
    encode_request,
    encode_response,
)
from .errors import ErrorCode, KafkaError
from .exceptions import ProtocolDecodeError
from .header import RequestHeader, encode_response_header, parse_request_header
from .registry import REGISTRY, ApiKey, ApiSpec

__all__ = [
    "ApiKey", "ApiSpec", "ErrorCode", "KafkaError", "ProtocolDecodeError", "REGISTRY", "RequestHeader",
    "api_versions_error_response", "api_versions_response", "decode_request", "decode_request_body",
    "decode_response", "encode_api_versions_error", "encode_api_versions_response", "encode_request", "encode_response",
    "encode_response_header", "parse_request_header",
]

"""ApiVersions (18): the first request of every connection.

The answer lists exactly the APIs the connection's plane serves, with the
registry's ranges.  Two KIP-511 behaviours matter to real clients: any
version is accepted (an unsupported one is answered in v0 format with
UNSUPPORTED_VERSION and ApiVersions' own range, so the client retries with a
version both share), and v3+ requests must name the client software
(alphanumerics with inner '.' and '-'), else INVALID_REQUEST.  The network
layer records the name and version on the connection for operators.
"""

from __future__ import annotations

from collections.abc import Callable

from twisted_kafka.network.request import RequestContext
from twisted_kafka.protocol.codec import (
    api_versions_response,
    encode_api_versions_error,
    encode_api_versions_response,
)
from twisted_kafka.protocol.connection import valid_client_software
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey

from ..api_handler import ApiHandler, Encoded


class ApiVersionsHandler(ApiHandler):
    api_key = ApiKey.API_VERSIONS

    def __init__(self, advertised_keys: Callable[[RequestContext], list[int]]):
        self.advertised_keys = advertised_keys

    async def handle(self, request):
        if request.body is None:
            return Encoded(encode_api_versions_error(request.header), {ErrorCode.UNSUPPORTED_VERSION: 1})
        if request.api_version >= 3 and not valid_client_software(request.body.client_software_name,
                                                                   request.body.client_software_version):
            return self.error_response(request, ErrorCode.INVALID_REQUEST)
        return Encoded(encode_api_versions_response(request.header, self.advertised_keys(request.context)),
                       {ErrorCode.NONE: 1})

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        response = api_versions_response((), version=request.api_version)
        response.error_code = error
        return response

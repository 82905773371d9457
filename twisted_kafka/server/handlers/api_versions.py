"""ApiVersions (18): the first request of every connection.

The answer lists exactly the APIs this broker has handlers for, with the
registry's ranges.  Two KIP-511 behaviours matter to real clients: any
version is accepted (an unsupported one is answered in v0 format with
UNSUPPORTED_VERSION and ApiVersions' own range, so the client retries with a
version both share), and v3+ requests name the client software, which is
recorded on the connection for operators.
"""

from __future__ import annotations

import re

from twisted_kafka.protocol.codec import (
    api_versions_response,
    encode_api_versions_error,
    encode_api_versions_response,
)
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey

# KIP-511: names and versions must be alphanumerics with inner '.' and '-'.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


class ApiVersionsHandler:
    api_key = ApiKey.API_VERSIONS

    def __init__(self, apis):
        self.apis = apis

    async def handle(self, request):
        if request.body is None:
            return encode_api_versions_error(request.header)
        if request.api_version >= 3:
            name = request.body.client_software_name
            version = request.body.client_software_version
            if not (name and version and _SOFTWARE.fullmatch(name) and _SOFTWARE.fullmatch(version)):
                return self.error_response(request, ErrorCode.INVALID_REQUEST)
            request.processor.client_software_name = name
            request.processor.client_software_version = version
        return encode_api_versions_response(request.header, self.apis.served_keys)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        response = api_versions_response((), version=request.api_version)
        response.error_code = error
        return response

    def response_version(self, request) -> int:
        return request.api_version

"""SaslHandshake (17) and SaslAuthenticate (36) once they reach ``KafkaApis``.

Before authentication these requests never get here: the connection's
authenticator answers them in the network layer (``twisted_kafka.sasl``), as
Kafka's ``SaslServerAuthenticator`` does.  What does reach the handlers is a
handshake on a connection that needs none (a PLAINTEXT listener) or has
already authenticated, and Kafka answers both with ILLEGAL_SASL_STATE.  The
handlers also make the two APIs served, so ApiVersions advertises them.
"""

from __future__ import annotations

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey

from ..api_handler import ApiHandler


class SaslHandshakeHandler(ApiHandler):
    api_key = ApiKey.SASL_HANDSHAKE

    async def handle(self, request):
        return self.error_response(request, ErrorCode.ILLEGAL_SASL_STATE)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.SaslHandshakeResponse(error_code=error, mechanisms=[])


class SaslAuthenticateHandler(ApiHandler):
    api_key = ApiKey.SASL_AUTHENTICATE

    async def handle(self, request):
        return self.error_response(request, ErrorCode.ILLEGAL_SASL_STATE,
                                   "SaslAuthenticate request received after successful authentication")

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.SaslAuthenticateResponse(error_code=error, error_message=message, auth_bytes=b"",
                                          session_lifetime_ms=0)

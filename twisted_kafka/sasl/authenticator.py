"""One SASL connection's authentication, sans-IO: Kafka's ``SaslServerAuthenticator``.

A SASL listener's connection authenticates before anything but ApiVersions
is served (KIP-43):

1. SaslHandshake names a mechanism.  If the listener has enabled it
   (``sasl.enabled.mechanisms``, per listener with ``listener.name.<l>.``)
   the answer is NONE with the enabled list; otherwise
   UNSUPPORTED_SASL_MECHANISM with the list, and authentication has failed.
   Handshake v1 (KIP-152) continues with SaslAuthenticate requests, v0 with
   raw tokens in size-prefixed frames.
2. Each SaslAuthenticate request (or raw token) is evaluated by the
   mechanism; the answer carries its challenge.  Once the mechanism has
   completed, the connection's principal is ``User:<name>`` and every API is
   served.  ``session_lifetime_ms`` is 0: re-authentication (KIP-368,
   ``connections.max.reauth.ms``) is not offered, so sessions do not expire.
3. A failure is answered (SASL_AUTHENTICATION_FAILED with a message that
   does not tell users apart; nothing for a raw token) and the connection is
   closed after ``connection.failed.authentication.delay.ms`` by the network
   layer, which reads nothing more from it.

This class produces the response *messages*; the network layer encodes and
writes them, applies the outcome to its ``ServerConnection`` and keeps time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode

from .credential_store import ScramCredentialStore
from .errors import AuthenticationFailed
from .plain import PLAIN, PlainServer
from .scram import ScramServer
from .scram_credentials import MECHANISMS as SCRAM_MECHANISMS

#: The mechanisms this broker implements.
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)


@dataclass(frozen=True)
class SaslServerConfig:
    """What one SASL listener offers: its enabled mechanisms, PLAIN's users and the SCRAM credentials."""

    listener_name: str
    enabled_mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=dict)
    scram_store: ScramCredentialStore | None = None

    def new_authenticator(self) -> SaslServerAuthenticator:
        return SaslServerAuthenticator(self)


@dataclass(frozen=True, slots=True)
class SaslStep:
    """What one handshake, SaslAuthenticate request or raw token led to.

    ``response``: the message to answer with (None: nothing, for a raw token
    that failed); ``raw``: the challenge of a raw-token exchange, to be sent
    in a size-prefixed frame; ``handshake``: "framed" or "raw" after a
    successful SaslHandshake; ``principal``: set once authentication has
    completed; ``failure``: why authentication failed (the connection is
    then closed after the delay).
    """

    response: Any = None
    raw: bytes | None = None
    handshake: str | None = None
    principal: str | None = None
    failure: str | None = None


class SaslServerAuthenticator:
    """The SASL state of one connection (see the module docstring)."""

    def __init__(self, config: SaslServerConfig):
        self.config = config
        self.mechanism: str | None = None
        self._server: PlainServer | ScramServer | None = None
        self.principal: str | None = None
        self.failed = False

    def _start(self, mechanism: str) -> None:
        self.mechanism = mechanism
        if mechanism == PLAIN:
            self._server = PlainServer(self.config.plain_users)
        else:
            assert self.config.scram_store is not None, "SCRAM enabled without a credential store"
            self._server = ScramServer(SCRAM_MECHANISMS[mechanism], self.config.scram_store)

    def handshake(self, version: int, mechanism: str) -> SaslStep:
        enabled = list(self.config.enabled_mechanisms)
        if self._server is not None or self.failed:
            self.failed = True
            return SaslStep(response=m.SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE,
                                                             mechanisms=enabled),
                            failure="SaslHandshake repeated during SASL authentication")
        if mechanism not in self.config.enabled_mechanisms:
            self.failed = True
            return SaslStep(response=m.SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM,
                                                             mechanisms=enabled),
                            failure=f"Unsupported SASL mechanism {mechanism} (enabled: {', '.join(enabled)})")
        self._start(mechanism)
        return SaslStep(response=m.SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled),
                        handshake="raw" if version == 0 else "framed")

    def _evaluate(self, token: bytes) -> tuple[bytes, str | None]:
        assert self._server is not None
        challenge = self._server.evaluate(token)
        if self._server.complete:
            assert self._server.user is not None
            self.principal = f"User:{self._server.user}"
        return challenge, self.principal

    def authenticate(self, version: int, auth_bytes: bytes) -> SaslStep:
        """A SaslAuthenticate request (after a v1 handshake)."""
        if self._server is None or self.failed:
            self.failed = True
            return SaslStep(response=self._authenticate_response(
                version, ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate before a successful SaslHandshake"),
                failure="SaslAuthenticate before a successful SaslHandshake")
        try:
            challenge, principal = self._evaluate(auth_bytes)
        except AuthenticationFailed as exc:
            self.failed = True
            return SaslStep(response=self._authenticate_response(version, ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                                 exc.client_message),
                            failure=exc.reason)
        return SaslStep(response=self._authenticate_response(version, ErrorCode.NONE, None, challenge),
                        principal=principal)

    def raw_token(self, token: bytes) -> SaslStep:
        """A raw token (after a v0 handshake): the challenge goes back in a size-prefixed frame."""
        if self._server is None or self.failed:
            self.failed = True
            return SaslStep(failure="raw SASL token before a successful SaslHandshake")
        try:
            challenge, principal = self._evaluate(token)
        except AuthenticationFailed as exc:
            self.failed = True
            return SaslStep(failure=exc.reason)
        return SaslStep(raw=challenge, principal=principal)

    @staticmethod
    def _authenticate_response(version: int, error: ErrorCode, message: str | None, auth_bytes: bytes = b""):
        return m.SaslAuthenticateResponse(error_code=error, error_message=message, auth_bytes=auth_bytes,
                                          session_lifetime_ms=0)


__all__ = ["SaslServerConfig", "SaslServerAuthenticator", "SaslStep", "SUPPORTED_MECHANISMS"]

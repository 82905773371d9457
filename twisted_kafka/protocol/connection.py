"""The broker's side of one Kafka connection, sans-IO: bytes in, events out (like h11).

``ServerConnection`` knows everything about a connection that does not need
a socket: framing (with ``socket.request.max.bytes``), request headers, which
APIs and versions this listener serves, body decoding, per-connection
ordering, and the pre-authentication state of a SASL listener.  The Twisted
adapter (``network.processor.Processor``) feeds it bytes and acts on its
events; tests drive it with bytes alone.

Ordering (Kafka's "mute"): once a request has been handed out, no further
event is produced until ``response_complete()`` -- a client pipelining five
requests gets five responses in order, and cannot make the broker queue
unbounded work.  Undelivered bytes simply stay buffered.

Errors never raise: a malformed frame, an unknown or unserved API key, an
unsupported version or a body that does not parse becomes one
``ProtocolViolation`` event naming the reason, after which the connection is
``CLOSED`` (the adapter closes the socket; no response is sent, as Kafka
does).  The single exception is ApiVersions at an unsupported version, which
KIP-511 answers: it is handed out with ``body=None`` and the handler replies in
v0 format with UNSUPPORTED_VERSION.

Pre-authentication (SASL listeners, KIP-43/KIP-152): until authentication
completes only ApiVersions and SaslHandshake are accepted, then
SaslAuthenticate (handshake v1), or -- after a v0 handshake -- raw SASL tokens
in Kafka's size-prefixed frames, which are handed out as ``SaslTokenReceived``.
Anything else before authentication is a protocol violation.  Until then
frames are limited by ``sasl.server.max.receive.size`` (``max_authentication_size``)
rather than ``socket.request.max.bytes``, as Kafka's authenticator reads them.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .codec import decode_request_body
from .exceptions import ProtocolDecodeError
from .framing import FrameBuffer, InvalidFrameSize, looks_like_tls
from .header import RequestHeader, parse_request_header
from .registry import ApiKey, ApiSpec


class _Sentinel:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: Not enough bytes buffered for the next frame.
NEED_DATA = _Sentinel("NEED_DATA")
#: A request is in flight: nothing more is handed out until ``response_complete()``.
PAUSED = _Sentinel("PAUSED")
#: The connection violated the protocol; nothing more will be handed out.
CLOSED = _Sentinel("CLOSED")


@dataclass(frozen=True, slots=True)
class RequestReceived:
    """A whole, decoded request.  ``body`` is None only for KIP-511's unsupported ApiVersions."""

    header: RequestHeader
    body: Any
    spec: ApiSpec
    size: int              # bytes on the wire, including the 4-byte size


@dataclass(frozen=True, slots=True)
class SaslTokenReceived:
    """A raw SASL token (after a SaslHandshake v0): the payload of one frame."""

    token: bytes
    size: int


@dataclass(frozen=True, slots=True)
class NoRoom:
    """A whole request of ``size`` bytes is buffered, but the caller's queue has no room for it."""

    size: int


@dataclass(frozen=True, slots=True)
class ProtocolViolation:
    """The connection must be closed; ``message`` says why (for the log, with the peer)."""

    message: str
    tls_record: bool = False    # the bytes were a TLS record: a TLS client on a plaintext listener


class AuthState(enum.Enum):
    NOT_REQUIRED = "not required"      # a PLAINTEXT or SSL listener
    HANDSHAKE = "handshake"            # SASL: ApiVersions or SaslHandshake expected
    AUTHENTICATE = "authenticate"      # SASL: SaslAuthenticate requests expected (handshake v1)
    RAW_TOKENS = "raw tokens"          # SASL: raw token frames expected (handshake v0)
    AUTHENTICATED = "authenticated"


_BEFORE_AUTHENTICATION = {
    AuthState.HANDSHAKE: frozenset({ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE}),
    AuthState.AUTHENTICATE: frozenset({ApiKey.SASL_AUTHENTICATE}),
}

# KIP-511: client software names and versions are alphanumerics with inner '.' and '-'.
_CLIENT_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def valid_client_software(name: str | None, version: str | None) -> bool:
    """Whether an ApiVersions v3+ request names its client software as KIP-511 requires."""
    return bool(name and version and _CLIENT_SOFTWARE.fullmatch(name) and _CLIENT_SOFTWARE.fullmatch(version))


class ServerConnection:
    """One connection's protocol state on the broker; see the module docstring."""

    def __init__(self, *, max_request_size: int, serves: Callable[[int], ApiSpec | None],
                 authentication_required: bool = False, max_authentication_size: int = 524288):
        self._frames = FrameBuffer(max_request_size, kind="request", limit_name="socket.request.max.bytes")
        self._max_request_size = max_request_size
        if authentication_required:
            self._frames.max_frame_size = max_authentication_size
            self._frames.limit_name = "sasl.server.max.receive.size, before authentication"
        self._serves = serves
        self.in_flight: RequestHeader | bytes | None = None
        self.closed = False
        self.auth_state = AuthState.HANDSHAKE if authentication_required else AuthState.NOT_REQUIRED
        self.client_id: str | None = None
        self.client_software_name: str | None = None
        self.client_software_version: str | None = None
        self.requests_received = 0

    @property
    def max_request_size(self) -> int:
        return self._max_request_size

    @property
    def buffered_bytes(self) -> int:
        return len(self._frames)

    def receive_data(self, data: bytes) -> None:
        if not self.closed:
            self._frames.feed(data)

    def next_event(self, has_room: Callable[[int], bool] | None = None):
        """The next event: a request, a raw SASL token, NEED_DATA, PAUSED, NoRoom, a violation, CLOSED.

        ``has_room(size)`` lets the caller refuse a whole request its queue
        cannot take yet (backpressure): the request stays buffered and
        ``NoRoom(size)`` is returned.
        """
        if self.closed:
            return CLOSED
        if self.in_flight is not None:
            return PAUSED
        try:
            size = self._frames.next_size()
        except InvalidFrameSize as exc:
            return self._violation(str(exc), tls_record=looks_like_tls(exc.prefix))
        if size is None or len(self._frames) < size:
            return NEED_DATA
        if has_room is not None and not has_room(size):
            return NoRoom(size)
        frame = self._frames.pop()
        if self.auth_state is AuthState.RAW_TOKENS:
            self.in_flight = frame
            return SaslTokenReceived(frame, size)
        return self._request(frame, size)

    def _request(self, frame: bytes, size: int):
        try:
            header = parse_request_header(frame)
        except ProtocolDecodeError as exc:
            return self._violation(f"unreadable request header: {exc}")
        where = f"correlation_id={header.correlation_id}"
        spec = self._serves(header.api_key)
        if spec is None:
            return self._violation(f"unknown or unserved api_key {header.api_key} ({where})")
        allowed = _BEFORE_AUTHENTICATION.get(self.auth_state)
        if allowed is not None and header.api_key not in allowed:
            return self._violation(f"{spec.name} request before authentication completed "
                                   f"(SASL state: {self.auth_state.value}, {where})")
        body = None
        if not spec.is_advertised(header.api_version):
            if header.api_key != ApiKey.API_VERSIONS:
                return self._violation(f"unsupported version {header.api_version} of {spec.name} "
                                       f"(supported {spec.min_version}-{spec.max_version}, {where})")
            # KIP-511: answered in v0 format with UNSUPPORTED_VERSION; the body is not parsed.
        else:
            try:
                body = decode_request_body(header, frame)
            except ProtocolDecodeError as exc:
                return self._violation(f"malformed {spec.name} request: {exc}")
            if header.api_key == ApiKey.API_VERSIONS and header.api_version >= 3:
                name, version = body.client_software_name, body.client_software_version
                if valid_client_software(name, version):
                    self.client_software_name, self.client_software_version = name, version
        if header.client_id is not None:
            self.client_id = header.client_id
        self.in_flight = header
        self.requests_received += 1
        return RequestReceived(header, body, spec, size)

    def _violation(self, message: str, *, tls_record: bool = False) -> ProtocolViolation:
        self.closed = True
        self._frames.clear()
        return ProtocolViolation(message, tls_record)

    def close(self) -> None:
        """The transport is gone: drop what is buffered and hand out nothing more."""
        self.closed = True
        self._frames.clear()

    def response_complete(self) -> None:
        """The in-flight request has been answered (or needs no answer): the next may be handed out."""
        self.in_flight = None

    # -- SASL (driven by the SaslHandshake/SaslAuthenticate handlers' outcomes) ------

    def sasl_handshake_complete(self, *, raw_tokens: bool) -> None:
        """A SaslHandshake succeeded: v1 continues with SaslAuthenticate, v0 with raw tokens."""
        if self.auth_state is AuthState.HANDSHAKE:
            self.auth_state = AuthState.RAW_TOKENS if raw_tokens else AuthState.AUTHENTICATE

    def authentication_complete(self) -> None:
        """SASL succeeded: every served API is allowed from now on."""
        if self.auth_state is not AuthState.NOT_REQUIRED:
            self.auth_state = AuthState.AUTHENTICATED
            self._frames.max_frame_size = self._max_request_size
            self._frames.limit_name = "socket.request.max.bytes"

    @property
    def authenticated(self) -> bool:
        return self.auth_state in (AuthState.NOT_REQUIRED, AuthState.AUTHENTICATED)


__all__ = [
    "ServerConnection", "AuthState", "RequestReceived", "SaslTokenReceived", "NoRoom", "ProtocolViolation",
    "NEED_DATA", "PAUSED", "CLOSED", "valid_client_software",
]

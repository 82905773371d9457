"""SASL authentication of a new client connection, before any other request (KIP-43, KIP-152).

Kafka's client sends, on a SASL_PLAINTEXT or SASL_SSL connection (after the
TLS handshake for SASL_SSL): SaslHandshake v1 naming the mechanism, then
SaslAuthenticate requests carrying the mechanism's tokens until the
mechanism has completed.  The tokens come from the sans-IO mechanisms of
``twisted_kafka.sasl.client``; this module only carries them.  Any refusal
(the mechanism not enabled, wrong credentials, a server that cannot prove
its SCRAM key) raises ``SaslAuthenticationFailed``, a ``ConnectFailed``: the
connection attempt has failed, and its owner retries it as any other.
"""

from __future__ import annotations

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.sasl.client import SaslClientConfig
from twisted_kafka.sasl.errors import AuthenticationFailed

from .errors import ConnectFailed
from .protocol import KafkaClientProtocol

HANDSHAKE_VERSION = 1
AUTHENTICATE_VERSION = 2
#: No mechanism here needs more than this many SaslAuthenticate rounds (SCRAM: two).
MAX_ROUNDS = 4


class SaslAuthenticationFailed(ConnectFailed):
    """The broker at ``peer`` refused this client's SASL authentication (or could not prove its own)."""

    def __init__(self, peer: str, config: SaslClientConfig, error: str):
        super().__init__(peer, f"SASL authentication with {config.mechanism} as user {config.username!r} "
                               f"on listener {config.listener_name} failed: {error}")
        self.error = error


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"error {code}"


async def authenticate(client: KafkaClientProtocol, config: SaslClientConfig) -> None:
    """Authenticate ``client``'s connection with ``config``; ``SaslAuthenticationFailed`` if refused."""
    def failed(error: str) -> SaslAuthenticationFailed:
        return SaslAuthenticationFailed(client.peer, config, error)

    handshake = await client.request(m.SaslHandshakeRequest(version=HANDSHAKE_VERSION, mechanism=config.mechanism),
                                     HANDSHAKE_VERSION)
    if handshake.error_code != ErrorCode.NONE:
        raise failed(f"{_error_name(handshake.error_code)} in SaslHandshake (the listener enables "
                     f"{', '.join(handshake.mechanisms) or 'no mechanism'})")
    mechanism = config.new_mechanism()
    token: bytes | None = mechanism.initial_response()
    for _ in range(MAX_ROUNDS):
        assert token is not None
        response = await client.request(m.SaslAuthenticateRequest(version=AUTHENTICATE_VERSION, auth_bytes=token),
                                        AUTHENTICATE_VERSION)
        if response.error_code != ErrorCode.NONE:
            raise failed(f"{_error_name(response.error_code)}: {response.error_message or 'no message'}")
        try:
            token = mechanism.evaluate(response.auth_bytes)
        except AuthenticationFailed as exc:
            raise failed(exc.reason) from None
        if mechanism.complete:
            return
    raise failed(f"the exchange did not complete within {MAX_ROUNDS} rounds")


__all__ = ["authenticate", "SaslAuthenticationFailed"]

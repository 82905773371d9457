"""SASL on the client side, sans-IO: what the broker's own connections send (Kafka's ``SaslClientAuthenticator``).

The controller's channels and the replica fetchers authenticate to a SASL
control-plane or inter-broker listener with ``sasl.mechanism.inter.broker.protocol``
and the credentials of that listener's JAAS configuration.  A mechanism here
turns the server's challenges into the client's responses, on bytes only:

* ``PlainClient`` (RFC 4616): one message, ``NUL user NUL password`` (an
  empty authorization id, as Kafka's client sends);
* ``ScramClient`` (RFC 5802, RFC 7677): client-first with a random nonce,
  client-final with the proof once the salt and iteration count are known,
  and the server signature of server-final checked -- so a server that does
  not hold the user's credential is not trusted.  The hashes and HMACs are
  those of ``scram_credentials``, shared with the server side.

The Kafka messages that carry these tokens (SaslHandshake v1, SaslAuthenticate)
are sent by ``twisted_kafka.client.sasl``.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import secrets
from dataclasses import dataclass

from .errors import AuthenticationFailed
from .plain import PLAIN
from .scram_credentials import MECHANISMS as SCRAM_MECHANISMS
from .scram_credentials import ScramMechanism, client_key, salted_password, scram_hash, scram_hmac, server_key

_SERVER_FIRST = re.compile(r"(?:m=[^,]*,)?r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+),s=(?P<salt>[A-Za-z0-9+/=]+),"
                           r"i=(?P<iterations>[0-9]+)(?:,[A-Za-z]+=[^,]*)*")
_SERVER_FINAL = re.compile(r"(?:e=(?P<error>[^,]*)|v=(?P<signature>[A-Za-z0-9+/=]+))(?:,[A-Za-z]+=[^,]*)*")


@dataclass(frozen=True)
class SaslClientConfig:
    """How the broker authenticates to one SASL listener: the listener, the mechanism and the credentials."""

    listener_name: str
    mechanism: str
    username: str
    password: str

    def new_mechanism(self) -> PlainClient | ScramClient:
        if self.mechanism == PLAIN:
            return PlainClient(self.username, self.password)
        return ScramClient(SCRAM_MECHANISMS[self.mechanism], self.username, self.password)

    def __repr__(self) -> str:       # never the password in a log line
        return f"SaslClientConfig({self.listener_name!r}, {self.mechanism!r}, {self.username!r})"


class PlainClient:
    """PLAIN's single message; the server's (empty) answer ends the exchange."""

    mechanism = PLAIN

    def __init__(self, username: str, password: str):
        self._message = b"\0" + username.encode("utf-8") + b"\0" + password.encode("utf-8")
        self._sent = False
        self.complete = False

    def initial_response(self) -> bytes:
        self._sent = True
        return self._message

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The server's answer to the message: the exchange is complete (nothing more to send)."""
        if not self._sent or self.complete:
            raise AuthenticationFailed("PLAIN: unexpected challenge from the server")
        self.complete = True
        return None


def saslname(user: str) -> str:
    """RFC 5802's saslname encoding: ',' is ``=2C`` and '=' is ``=3D``."""
    return user.replace("=", "=3D").replace(",", "=2C")


class ScramClient:
    """One SCRAM exchange: client-first, then client-final from server-first, then server-final checked."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str, *, nonce: str | None = None):
        self._mechanism = mechanism
        self.mechanism = mechanism.name
        self._password = password
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._client_first_bare = f"n={saslname(username)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self._step = 0
        self.complete = False

    def _failed(self, reason: str) -> AuthenticationFailed:
        self._step = 3
        return AuthenticationFailed(f"{self.mechanism}: {reason}")

    def initial_response(self) -> bytes:
        """client-first: ``n,,n=<user>,r=<nonce>`` (no channel binding, no authorization id)."""
        self._step = 1
        return ("n,," + self._client_first_bare).encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The response to server-first (client-final), or None after a verified server-final."""
        try:
            message = challenge.decode("utf-8")
        except UnicodeDecodeError:
            raise self._failed("the server's message is not UTF-8") from None
        if self._step == 1:
            return self._client_final(message)
        if self._step == 2:
            self._server_final(message)
            return None
        raise self._failed("unexpected message from the server")

    def _client_final(self, server_first: str) -> bytes:
        match = _SERVER_FIRST.fullmatch(server_first)
        if match is None:
            raise self._failed(f"invalid server-first message {server_first[:60]!r}")
        nonce = match["nonce"]
        if not nonce.startswith(self._nonce) or len(nonce) == len(self._nonce):
            raise self._failed("the server's nonce does not extend the client's")
        iterations = int(match["iterations"])
        if iterations < self._mechanism.min_iterations:
            raise self._failed(f"the server asks for {iterations} iterations, fewer than "
                               f"{self._mechanism.min_iterations}")
        try:
            salt = base64.b64decode(match["salt"], validate=True)
        except binascii.Error:
            raise self._failed("invalid salt encoding in server-first") from None
        salted = salted_password(self._mechanism, self._password, salt, iterations)
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = ",".join((self._client_first_bare, server_first, without_proof)).encode()
        key = client_key(self._mechanism, salted)
        signature = scram_hmac(self._mechanism, scram_hash(self._mechanism, key), auth_message)
        proof = bytes(a ^ b for a, b in zip(key, signature, strict=True))
        self._server_signature = scram_hmac(self._mechanism, server_key(self._mechanism, salted), auth_message)
        self._step = 2
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _server_final(self, server_final: str) -> None:
        match = _SERVER_FINAL.fullmatch(server_final)
        if match is None:
            raise self._failed(f"invalid server-final message {server_final[:60]!r}")
        if match["error"] is not None:
            raise self._failed(f"the server refused the proof: {match['error']}")
        try:
            signature = base64.b64decode(match["signature"], validate=True)
        except binascii.Error:
            raise self._failed("invalid server signature encoding") from None
        assert self._server_signature is not None
        if not hmac.compare_digest(signature, self._server_signature):
            raise self._failed("the server signature is wrong: the server does not know the credential")
        self._step = 3
        self.complete = True


__all__ = ["SaslClientConfig", "PlainClient", "ScramClient", "saslname"]

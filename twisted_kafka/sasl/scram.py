"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 on the server (RFC 5802, RFC 7677), as Kafka runs them.

Two client messages, each answered in one SaslAuthenticate response::

    client-first  n,[a=<authzid>],n=<user>,r=<client nonce>[,<extensions>]
    server-first  r=<client nonce><server nonce>,s=<salt>,i=<iterations>
    client-final  c=<channel binding>,r=<nonce>[,<extensions>],p=<proof>
    server-final  v=<server signature>

The messages are matched with the patterns of Kafka's ``ScramMessages``, and
Kafka's checks are kept where they differ from a strict reading of the RFC,
since clients are tested against Kafka: only the "n" GS2 flag (no channel
binding), an authorization id must equal the user name, unknown extensions
are ignored, and the client-final nonce must *end with* the nonce the server
sent (librdkafka before 2.x repeats its own nonce in front of it).  The proof
is checked against the stored credential only (StoredKey, ServerKey: the
password is never known here), in constant time.  A failure tells the client
no more than Kafka's generic "invalid credentials" message; the log gets the
detail (unknown user, wrong proof).  Delegation tokens (``tokenauth``) are
not supported and fail.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
import secrets

from .credential_store import ScramCredentialStore
from .errors import AuthenticationFailed
from .scram_credentials import ScramCredential, ScramMechanism, scram_hash, scram_hmac

_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_BASE64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
CLIENT_FIRST = re.compile(rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
                          rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})")
CLIENT_FINAL = re.compile(rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})")


def username(saslname: str) -> str:
    """RFC 5802's saslname decoding: ``=2C`` is ',' and ``=3D`` is '='."""
    return saslname.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One SCRAM exchange for one connection."""

    def __init__(self, mechanism: ScramMechanism, store: ScramCredentialStore, *, server_nonce: str | None = None):
        self._mechanism = mechanism
        self.mechanism = mechanism.name
        self._credentials_store = store
        self._server_nonce = server_nonce if server_nonce is not None else secrets.token_urlsafe(24)
        self._step = 0
        self.complete = False
        self.user: str | None = None
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._server_first = ""

    def _failed(self, reason: str, client_message: str | None = None) -> AuthenticationFailed:
        self._step = 3
        return AuthenticationFailed(f"{self.mechanism}: {reason}", client_message or (
            "Authentication failed during authentication due to invalid credentials with SASL mechanism "
            f"{self.mechanism}"))

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._failed("message is not UTF-8") from None
        if self._step == 0:
            return self._client_first(message)
        if self._step == 1:
            return self._client_final(message)
        raise self._failed("unexpected message after the exchange ended")

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return scram_hmac(self._mechanism, key, message)

    def _client_first(self, message: str) -> bytes:
        match = CLIENT_FIRST.fullmatch(message)
        if match is None:
            raise self._failed(f"invalid client-first message {message[:60]!r}")
        user = username(match["saslname"])
        extensions = dict(item.split("=", 1) for item in match["extensions"].split(",")[1:])
        if extensions.get("tokenauth", "").lower() == "true":
            raise self._failed(f"delegation tokens are not supported (token {user!r})")
        credential = self._credentials_store.get(user, self.mechanism)
        if credential is None:
            raise self._failed(f"unknown user {user!r}")
        authzid = match["authzid"]
        if authzid and username(authzid) != user:
            raise self._failed(f"authorization id {authzid!r} requested by user {user!r}",
                               "Authentication failed: Client requested an authorization id that is different "
                               "from username")
        if credential.iterations < self._mechanism.min_iterations:
            raise self._failed(f"the credential of user {user!r} has too few iterations ({credential.iterations})")
        self.user, self._credential = user, credential
        self._client_first_bare = f"n={match['saslname']},r={match['nonce']}" + match["extensions"]
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={match['nonce']}{self._server_nonce},s={salt},i={credential.iterations}"
        self._step = 1
        return self._server_first.encode()

    def _client_final(self, message: str) -> bytes:
        credential = self._credential
        assert credential is not None
        match = CLIENT_FINAL.fullmatch(message)
        if match is None:
            raise self._failed(f"invalid client-final message from user {self.user!r}")
        server_nonce = self._server_first.split(",", 1)[0][2:]
        if not match["nonce"].endswith(server_nonce):
            raise self._failed(f"invalid nonce in the client-final message of user {self.user!r}")
        try:
            proof = base64.b64decode(match["proof"], validate=True)
        except binascii.Error:
            raise self._failed(f"invalid proof encoding from user {self.user!r}") from None
        auth_message = ",".join((self._client_first_bare, self._server_first,
                                 f"c={match['channel']},r={match['nonce']}")).encode()
        client_signature = self._hmac(credential.stored_key, auth_message)
        if len(proof) != len(client_signature):
            raise self._failed(f"invalid proof length from user {self.user!r}")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        if not hmac.compare_digest(scram_hash(self._mechanism, client_key), credential.stored_key):
            raise self._failed(f"invalid proof for user {self.user!r} (wrong password)")
        server_signature = self._hmac(credential.server_key, auth_message)
        self._step = 2
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


__all__ = ["ScramServer", "username"]

"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 on the server (RFC 5802, RFC 7677), as Kafka runs them.

The message parsing, nonces and proofs are ``scramp``'s ``ScramServer``;
what is Kafka's is here: credentials come from the broker's
``ScramCredentialStore`` (salted: the password is never known), the
exchange is two client messages (client-first, client-final) each answered
in one SaslAuthenticate response (server-first, server-final), no channel
binding is offered (the ``-PLUS`` variants are not Kafka mechanisms), and a
failure says no more to the client than Kafka's generic "invalid
credentials" message -- the log gets the detail (unknown user, wrong proof).
Delegation tokens (the ``tokenauth`` extension) are not supported and fail,
and so does an authorization id in the GS2 header (scramp refuses any; Kafka
accepts one equal to the user name, which none of its clients send).
"""

from __future__ import annotations

import scramp

from .credential_store import ScramCredentialStore
from .errors import AuthenticationFailed
from .scram_credentials import ScramMechanism


class ScramServer:
    """One SCRAM exchange for one connection."""

    def __init__(self, mechanism: ScramMechanism, store: ScramCredentialStore, *, server_nonce: str | None = None):
        self.mechanism = mechanism.name
        self._credentials_store = store
        # A random nonce unless one is given (the RFC's test vectors need theirs).
        self._server = scramp.ScramMechanism(mechanism.name).make_server(self._credential, s_nonce=server_nonce)
        self._step = 0
        self.complete = False
        self.user: str | None = None
        self._unknown_user: str | None = None

    @property
    def _generic_failure(self) -> str:
        return ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
                f"{self.mechanism}")

    def _credential(self, user: str):
        credential = self._credentials_store.get(user, self.mechanism)
        if credential is None:
            self._unknown_user = user
            return None
        self.user = user
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed(f"{self.mechanism}: message is not UTF-8", self._generic_failure) from None
        try:
            if self._step == 0:
                self._step = 1
                return self._client_first(message)
            if self._step == 1:
                self._step = 2
                self._server.set_client_final(message)
                final = self._server.get_server_final()
                self.complete = True
                return final.encode("utf-8")
        except scramp.ScramException as exc:
            if self._unknown_user is not None:
                reason = f"{self.mechanism}: unknown user {self._unknown_user!r}"
            elif self._step == 2:
                reason = f"{self.mechanism}: invalid proof for user {self.user!r} ({exc})"
            else:
                reason = f"{self.mechanism}: {exc}"
            raise AuthenticationFailed(reason, self._generic_failure) from None
        raise AuthenticationFailed(f"{self.mechanism}: unexpected message after the exchange completed",
                                   self._generic_failure)

    def _client_first(self, message: str) -> bytes:
        parts = message.split(",", 2)       # gs2-cbind-flag, [authzid], client-first-message-bare
        bare = parts[2] if len(parts) > 2 else ""
        if any(attribute == "tokenauth=true" for attribute in bare.split(",")):
            raise AuthenticationFailed(f"{self.mechanism}: delegation tokens are not supported",
                                       self._generic_failure)
        self._server.set_client_first(message)
        return self._server.get_server_first().encode("utf-8")


__all__ = ["ScramServer"]

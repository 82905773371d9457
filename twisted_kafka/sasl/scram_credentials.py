"""Salted SCRAM credentials (RFC 5802 section 3), as Kafka stores them.

A credential is what the broker keeps instead of a password: the salt, the
iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key")) and
ServerKey = HMAC(SaltedPassword, "Server Key").  That is enough to verify a
client's proof and to prove the server knows the credential, not enough to
log in as the user.

AlterUserScramCredentials (KIP-554) carries the salt and the *salted*
password computed by the client, never the password; the broker derives
StoredKey and ServerKey from it.  Passwords are hashed as UTF-8 without
SASLprep, as Kafka's ``ScramFormatter`` does, so a credential made here
matches the one a Kafka broker makes for the same password.

The text form is Kafka's ``ScramCredentialUtils.credentialToString``:
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` -- the value
of ``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` in ZooKeeper's ``/config/users/<user>``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    """One SCRAM mechanism: its SASL name, its code in the admin APIs and its iteration bounds."""

    name: str
    type: int             # AlterUserScramCredentials / DescribeUserScramCredentials ``mechanism``
    hash_name: str
    min_iterations: int = 4096
    max_iterations: int = 16384

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", 1, "sha256")
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", 2, "sha512")
MECHANISMS: dict[str, ScramMechanism] = {m.name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_TYPE: dict[int, ScramMechanism] = {m.type: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}

#: The iteration count the tool uses when none is given (Kafka's kafka-configs default).
DEFAULT_ITERATIONS = 4096


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_text(cls, text: str) -> ScramCredential:
        fields = dict(part.split("=", 1) for part in text.split(",") if "=" in part)
        try:
            return cls(salt=base64.b64decode(fields["salt"], validate=True),
                       stored_key=base64.b64decode(fields["stored_key"], validate=True),
                       server_key=base64.b64decode(fields["server_key"], validate=True),
                       iterations=int(fields["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from None


def salted_password(mechanism: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def scram_hmac(mechanism: ScramMechanism, key: bytes, message: bytes) -> bytes:
    """HMAC(key, message) of RFC 5802 with the mechanism's hash."""
    return hmac.new(key, message, mechanism.hash_name).digest()


def scram_hash(mechanism: ScramMechanism, data: bytes) -> bytes:
    """H(data) of RFC 5802 with the mechanism's hash."""
    return hashlib.new(mechanism.hash_name, data).digest()


def client_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    """ClientKey = HMAC(SaltedPassword, "Client Key")."""
    return scram_hmac(mechanism, salted, b"Client Key")


def server_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    """ServerKey = HMAC(SaltedPassword, "Server Key")."""
    return scram_hmac(mechanism, salted, b"Server Key")


def credential_from_salted_password(mechanism: ScramMechanism, salt: bytes, salted: bytes,
                                    iterations: int) -> ScramCredential:
    stored_key = scram_hash(mechanism, client_key(mechanism, salted))
    return ScramCredential(salt=salt, stored_key=stored_key, server_key=server_key(mechanism, salted),
                           iterations=iterations)


def credential_from_password(mechanism: ScramMechanism, password: str, iterations: int = DEFAULT_ITERATIONS,
                             salt: bytes | None = None) -> ScramCredential:
    """A new credential for ``password`` (a random 32-byte salt unless one is given)."""
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                           iterations)


__all__ = ["ScramMechanism", "ScramCredential", "SCRAM_SHA_256", "SCRAM_SHA_512", "MECHANISMS", "BY_TYPE",
           "DEFAULT_ITERATIONS", "salted_password", "scram_hmac", "scram_hash", "client_key", "server_key",
           "credential_from_salted_password", "credential_from_password"]

"""SASL/PLAIN on the server (RFC 4616), with Kafka's users from a JAAS configuration.

The client's single message is ``[authzid] NUL authcid NUL passwd``.  As in
Kafka's ``PlainSaslServer``, an authorization id must be empty or equal to the
user name, and a wrong password and an unknown user fail alike.  Passwords
are compared in constant time.

The users are those of ``listener.name.<l>.plain.sasl.jaas.config`` in
Kafka's ``PlainLoginModule`` syntax::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret"
        user_admin="admin-secret" user_alice="alice-secret";

``user_<name>="<password>"`` declares a user; ``username``/``password`` are
the broker's own client credentials (unused until the broker authenticates to
itself over SASL).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping

from .errors import AuthenticationFailed

PLAIN = "PLAIN"
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"

_MODULE = re.compile(r"^\s*(?P<module>[A-Za-z_$][\w.$]*)\s+(?P<flag>required|requisite|sufficient|optional)\b"
                     r"(?P<options>.*?);?\s*$", re.DOTALL)
_OPTION = re.compile(r'\s*(?P<key>[^\s=;"]+)\s*=\s*(?:"(?P<quoted>(?:[^"\\]|\\.)*)"|(?P<bare>[^\s;"]+))')


def parse_jaas_options(text: str) -> tuple[str, dict[str, str]]:
    """``(login module class, options)`` of a one-module ``sasl.jaas.config`` value; ValueError if malformed."""
    match = _MODULE.match(text)
    if match is None:
        raise ValueError("expected '<LoginModule class> required|requisite|sufficient|optional key=\"value\" ...;'")
    options: dict[str, str] = {}
    rest = match["options"]
    position = 0
    while rest[position:].strip():
        option = _OPTION.match(rest, position)
        if option is None:
            raise ValueError(f"cannot parse the options from {rest[position:].strip()[:40]!r}")
        value = option["quoted"] if option["quoted"] is not None else option["bare"]
        options[option["key"]] = re.sub(r"\\(.)", r"\1", value)
        position = option.end()
    return match["module"], options


def plain_users(jaas_config: str) -> dict[str, str]:
    """``{user: password}`` from the ``user_<name>`` options of a PlainLoginModule configuration."""
    module, options = parse_jaas_options(jaas_config)
    if module != PLAIN_LOGIN_MODULE:
        raise ValueError(f"the PLAIN mechanism needs {PLAIN_LOGIN_MODULE}, not {module}")
    return {key[len("user_"):]: value for key, value in options.items() if key.startswith("user_")}


class PlainServer:
    """One PLAIN exchange: a single client message, an empty answer on success."""

    mechanism = PLAIN

    def __init__(self, users: Mapping[str, str]):
        self._users = users
        self.complete = False
        self.user: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise AuthenticationFailed("PLAIN authentication already completed")
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        try:
            authzid, user, password = (part.decode("utf-8") for part in parts)
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(user)
        # Compare against something even for an unknown user, so timing does not tell users apart.
        matches = hmac.compare_digest((expected if expected is not None else "\0" + password).encode(),
                                      password.encode())
        if expected is None or not matches:
            reason = "unknown user" if expected is None else "wrong password"
            raise AuthenticationFailed(f"Authentication failed for user {user!r}: {reason}",
                                       "Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise AuthenticationFailed("Authentication failed: Client requested an authorization id that is "
                                       "different from username")
        self.complete = True
        self.user = user
        return b""


__all__ = ["PlainServer", "plain_users", "parse_jaas_options", "PLAIN", "PLAIN_LOGIN_MODULE"]

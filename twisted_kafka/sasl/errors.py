"""Why an authentication failed: what the client is told, and what the operator is told."""

from __future__ import annotations


class AuthenticationFailed(Exception):
    """Authentication failed; the connection is closed after ``connection.failed.authentication.delay.ms``.

    ``client_message`` goes into the SaslAuthenticate response's
    ``error_message``: as in Kafka it never says whether the user exists.
    ``reason`` (``str()``) is for the broker's log and the connection event.
    """

    def __init__(self, reason: str, client_message: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.client_message = client_message if client_message is not None else reason


__all__ = ["AuthenticationFailed"]

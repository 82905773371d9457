"""Why a request to a broker was not answered, naming the broker.

A broker's own client (the controller's channels, a replica fetcher) talks to
many peers; an error that only says "connection lost" cannot be acted on in a
log.  Every error here carries the peer's description (``broker 2 at
host:9093``) and reads as a sentence.  They are ``ConnectionError``s, so code
that retries on connection failures needs no Kafka-specific clause.
"""

from __future__ import annotations


class KafkaConnectionError(ConnectionError):
    """A connection to ``peer`` failed; ``reason`` says how (for logs)."""

    def __init__(self, message: str, *, peer: str, reason: str):
        super().__init__(message)
        self.peer = peer
        self.reason = reason


class ConnectFailed(KafkaConnectionError):
    """No connection to ``peer`` could be made (refused, unreachable, or not within the connect timeout)."""

    def __init__(self, peer: str, reason: str):
        super().__init__(f"cannot connect to {peer}: {reason}", peer=peer, reason=reason)


class ConnectionLost(KafkaConnectionError):
    """The connection to ``peer`` ended before the response to a request arrived.

    ``request`` names that request (``LeaderAndIsr v5, correlation id 7``),
    or is None for a request made after the connection had already ended.
    The request may or may not have reached the broker: a caller that
    retries must tolerate it being applied twice (the controller's requests
    are idempotent for that reason).
    """

    def __init__(self, peer: str, reason: str, request: str | None = None):
        if request is None:
            message = f"connection to {peer} is closed ({reason})"
        else:
            message = f"connection to {peer} lost before the response to {request} arrived ({reason})"
        super().__init__(message, peer=peer, reason=reason)
        self.request = request


class ProtocolViolationError(ConnectionLost):
    """The connection was dropped because ``peer`` broke the Kafka protocol.

    A malformed frame or body, or a response out of order: the stream
    cannot be trusted any more, so every outstanding request fails with this.
    Unlike a plain ``ConnectionLost`` it is likely to recur if the same
    request is sent again.
    """


__all__ = ["KafkaConnectionError", "ConnectFailed", "ConnectionLost", "ProtocolViolationError"]

"""The client's side of one Kafka connection, sans-IO: the twin of ``ServerConnection``.

The broker is also a Kafka client: its controller sends LeaderAndIsr,
UpdateMetadata and StopReplica to brokers' control planes, and followers
fetch from leaders.  ``ClientConnection`` frames requests with fresh
correlation ids, lets the caller pipeline them, and matches each response to
its request.  A Kafka broker answers the requests of one connection in the
order it received them, so a response whose correlation id is not the oldest
outstanding one means the stream is out of step: that is a
``ProtocolViolation`` and the connection must be dropped (every outstanding
request then failed by the caller).

Requests that get no response (Produce with acks=0) are sent with
``expect_response=False`` and are never waited for.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import count
from typing import Any

from .codec import decode_response, encode_request
from .connection import CLOSED, NEED_DATA, ProtocolViolation
from .exceptions import ProtocolDecodeError
from .framing import FrameBuffer, InvalidFrameSize

#: Largest response a client accepts by default (Kafka clients bound it by their fetch sizes).
DEFAULT_MAX_RESPONSE_SIZE = 2**31 - 1


@dataclass(frozen=True, slots=True)
class ResponseReceived:
    correlation_id: int
    api_key: int
    api_version: int
    body: Any


@dataclass(frozen=True, slots=True)
class _Outstanding:
    correlation_id: int
    api_key: int
    api_version: int


class ClientConnection:
    """Request framing and response matching for one connection to a broker."""

    def __init__(self, *, client_id: str | None, max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
                 first_correlation_id: int = 1):
        self.client_id = client_id
        self._frames = FrameBuffer(max_response_size, kind="response", limit_name="the client's limit")
        self._ids = count(first_correlation_id)
        self._outstanding: deque[_Outstanding] = deque()
        self.closed = False

    @property
    def outstanding(self) -> int:
        """Requests sent whose responses have not arrived yet."""
        return len(self._outstanding)

    def send_request(self, body, version: int, *, expect_response: bool = True) -> tuple[int, list[bytes]]:
        """``(correlation_id, bytes to write)`` for ``body`` (a message object) at ``version``."""
        if self.closed:
            raise ConnectionError("the connection is closed")
        correlation_id = next(self._ids) & 0x7FFFFFFF
        chunks = encode_request(body, version, correlation_id, self.client_id)
        if expect_response:
            self._outstanding.append(_Outstanding(correlation_id, type(body).API_KEY, version))
        return correlation_id, chunks

    def receive_data(self, data: bytes) -> None:
        if not self.closed:
            self._frames.feed(data)

    def next_event(self):
        """``ResponseReceived``, NEED_DATA, a ``ProtocolViolation`` (then CLOSED)."""
        if self.closed:
            return CLOSED
        try:
            if not self._frames.complete():
                return NEED_DATA
        except InvalidFrameSize as exc:
            return self._violation(str(exc))
        frame = self._frames.pop()
        if not self._outstanding:
            return self._violation(f"a response of {len(frame)} bytes arrived with no request outstanding")
        expected = self._outstanding[0]
        try:
            correlation_id, body = decode_response(expected.api_key, expected.api_version, frame)
        except ProtocolDecodeError as exc:
            return self._violation(f"malformed response to correlation id {expected.correlation_id}: {exc}")
        if correlation_id != expected.correlation_id:
            return self._violation(f"response correlation id {correlation_id} does not match the oldest "
                                   f"outstanding request ({expected.correlation_id})")
        self._outstanding.popleft()
        return ResponseReceived(correlation_id, expected.api_key, expected.api_version, body)

    def _violation(self, message: str) -> ProtocolViolation:
        self.closed = True
        self._frames.clear()
        return ProtocolViolation(message)

    def fail_outstanding(self) -> list[int]:
        """The connection is gone: the correlation ids that will never be answered (and forget them)."""
        ids = [entry.correlation_id for entry in self._outstanding]
        self._outstanding.clear()
        self.closed = True
        return ids


__all__ = ["ClientConnection", "ResponseReceived", "DEFAULT_MAX_RESPONSE_SIZE"]

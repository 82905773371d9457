"""A tiny blocking Kafka client on a raw socket, for tests that need exact bytes.

Real clients hide what the broker did with a connection (they reconnect, retry,
negotiate); these tests need to see it: which frame came back, in which order,
and whether the broker closed the connection.

    with RawClient(broker.data_port) as client:
        response = client.request(ApiVersionsRequest(version=3, client_software_name="t",
                                                      client_software_version="1"), version=3)
        client.send_raw(b"GET / HTTP/1.1\\r\\n\\r\\n")
        assert client.wait_closed()

Requests are built with ``twisted_kafka.protocol.messages`` (kafka-python's
message classes) and framed by ``codec.encode_request``; responses are decoded
by ``codec.decode_response``.  ``RawClient(port, source="127.0.0.2")`` binds
the client side to another loopback address, so the broker sees another IP.
"""

from __future__ import annotations

import errno
import itertools
import select
import socket
import struct
import time

from twisted_kafka.protocol.codec import decode_response, encode_request
from twisted_kafka.protocol.messages import ApiVersionsRequest, MetadataRequest

__all__ = ["RawClient", "Closed", "api_versions_frame", "frame"]

_SIZE = struct.Struct(">i")


class Closed(Exception):
    """The broker closed the connection (EOF or reset) while a frame was expected."""


def frame(payload: bytes) -> bytes:
    """``payload`` with its 4-byte big-endian size in front."""
    return _SIZE.pack(len(payload)) + payload


def api_versions_frame(correlation_id: int = 1, version: int = 0, client_id: str | None = "raw") -> bytes:
    """A framed ApiVersions request (v0 by default: valid for every broker)."""
    if version >= 3:
        body = ApiVersionsRequest(version=version, client_software_name="raw-client", client_software_version="1.0")
    else:
        body = ApiVersionsRequest(version=version)
    return b"".join(encode_request(body, version, correlation_id, client_id))


class RawClient:
    def __init__(self, port: int, host: str = "127.0.0.1", *, source: str | None = None, timeout: float = 10.0,
                 connect: bool = True):
        self.host = host
        self.port = port
        self.source = source
        self.timeout = timeout
        self._ids = itertools.count(1)
        self._buffer = bytearray()
        self.sock: socket.socket | None = None
        if connect:
            self.connect()

    # -- connection -----------------------------------------------------------------

    def connect(self) -> RawClient:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.source is not None:
            sock.bind((self.source, 0))
        sock.settimeout(self.timeout)
        sock.connect((self.host, self.port))
        self.sock = sock
        return self

    @property
    def local_address(self) -> tuple[str, int]:
        return self.sock.getsockname()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def abort(self) -> None:
        """Close with a TCP reset (SO_LINGER 0), as a crashed client's kernel would."""
        if self.sock is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.sock.close()
            self.sock = None

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- sending --------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(frame(payload))

    def next_correlation_id(self) -> int:
        return next(self._ids)

    def send_request(self, body, version: int | None = None, *, correlation_id: int | None = None,
                     client_id: str | None = "raw-client") -> int:
        """Send a request message (``twisted_kafka.protocol.messages``); returns its correlation id."""
        if version is None:
            version = body.version
        if correlation_id is None:
            correlation_id = self.next_correlation_id()
        self.sock.sendall(b"".join(encode_request(body, version, correlation_id, client_id)))
        return correlation_id

    # -- receiving ------------------------------------------------------------------

    def _fill(self, deadline: float) -> None:
        """Read at least one more chunk into the buffer, or raise Closed / TimeoutError."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no data from 127.0.0.1:{self.port} in time")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(1 << 16)
        except TimeoutError:
            raise TimeoutError(f"no data from 127.0.0.1:{self.port} in time") from None
        except ConnectionResetError:
            raise Closed("connection reset by the broker") from None
        if not chunk:
            raise Closed("EOF from the broker")
        self._buffer += chunk

    def read_frame(self, timeout: float | None = None) -> bytes:
        """The next response frame (without its size), or raise Closed / TimeoutError."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while len(self._buffer) < 4:
            self._fill(deadline)
        (size,) = _SIZE.unpack_from(self._buffer, 0)
        while len(self._buffer) < 4 + size:
            self._fill(deadline)
        payload = bytes(self._buffer[4:4 + size])
        del self._buffer[:4 + size]
        return payload

    def read_response(self, api_key: int, version: int, timeout: float | None = None):
        """``(correlation_id, message)`` of the next response, decoded as ``api_key`` v``version``."""
        return decode_response(api_key, version, self.read_frame(timeout))

    def request(self, body, version: int | None = None, *, timeout: float | None = None,
                client_id: str | None = "raw-client"):
        """Send ``body`` and return its decoded response (checking the correlation id)."""
        if version is None:
            version = body.version
        correlation_id = self.send_request(body, version, client_id=client_id)
        got, message = self.read_response(type(body).API_KEY, version, timeout)
        if got != correlation_id:
            raise AssertionError(f"correlation id {got} answers request {correlation_id}")
        return message

    def api_versions(self, version: int = 0, timeout: float | None = None):
        if version >= 3:
            body = ApiVersionsRequest(version=version, client_software_name="raw-client",
                                      client_software_version="1.0")
        else:
            body = ApiVersionsRequest(version=version)
        return self.request(body, version, timeout=timeout)

    def metadata(self, version: int = 1, topics=None, timeout: float | None = None):
        kwargs = {"version": version, "topics": topics if version >= 1 else (topics or [])}
        if version >= 4:
            kwargs["allow_auto_topic_creation"] = False
        return self.request(MetadataRequest(**kwargs), version, timeout=timeout)

    def wait_closed(self, timeout: float = 5.0) -> bool:
        """True if the broker closes the connection (EOF or reset) within ``timeout``.

        Any data the broker sends meanwhile is an error: a connection the
        broker is expected to close must not be answered first.
        """
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError:
                return False
            except ConnectionResetError:
                return True
            if not chunk:
                return True
            raise AssertionError(f"expected the broker to close the connection, got {len(chunk)} byte(s): "
                                 f"{chunk[:32]!r}")

    def is_open(self) -> bool:
        """The broker has neither closed nor reset this connection (non-blocking check)."""
        if self.sock is None:
            return False
        readable, _, _ = select.select([self.sock], [], [], 0)
        if not readable:
            return True
        try:
            chunk = self.sock.recv(1 << 16, socket.MSG_PEEK)
        except OSError as exc:
            if exc.errno in (errno.ECONNRESET, errno.EPIPE):
                return False
            raise
        return bool(chunk)

    def no_response_within(self, seconds: float) -> bool:
        """True if nothing at all arrives (no frame, no EOF) within ``seconds``."""
        readable, _, _ = select.select([self.sock], [], [], seconds)
        return not readable and not self._buffer

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
message classes).  The framing and matching are the product's own, sans-IO:
every byte read goes through a ``FrameBuffer`` (``protocol/framing.py``), and
``request()`` frames, numbers and matches its request with a
``ClientConnection`` -- so a test sees the broker through exactly the code the
broker's own client uses.  The lower-level calls stay raw on purpose:
``send_request()`` (optionally with a chosen correlation id), ``read_frame()`` /
``read_response()`` (decode the next frame as a given API, whatever it
answers), ``send_raw()`` / ``send_frame()`` (any bytes at all, malformed ones
included).  ``RawClient(port, source="127.0.0.2")`` binds the client side to
another loopback address, so the broker sees another IP;
``RawClient(port, tls=context)`` speaks TLS (an ``ssl.SSLContext``, with a
client certificate for an mTLS listener).
"""

from __future__ import annotations

import errno
import socket
import ssl
import struct
import time

from support.readiness import readable_within
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.client_connection import DEFAULT_MAX_RESPONSE_SIZE, ClientConnection, ResponseReceived
from twisted_kafka.protocol.codec import decode_response, encode_request
from twisted_kafka.protocol.framing import SIZE_PREFIX, FrameBuffer
from twisted_kafka.protocol.messages import ApiVersionsRequest, MetadataRequest

__all__ = ["RawClient", "Closed", "api_versions_frame", "frame", "auto_create_topic"]


class Closed(Exception):
    """The broker closed the connection (EOF or reset) while a frame was expected."""


def frame(payload: bytes) -> bytes:
    """``payload`` with its 4-byte big-endian size in front (for hand-made, possibly malformed, frames)."""
    return len(payload).to_bytes(SIZE_PREFIX, "big", signed=True) + payload


def api_versions_frame(correlation_id: int = 1, version: int = 0, client_id: str | None = "raw") -> bytes:
    """A framed ApiVersions request (v0 by default: valid for every broker)."""
    if version >= 3:
        body = ApiVersionsRequest(version=version, client_software_name="raw-client", client_software_version="1.0")
    else:
        body = ApiVersionsRequest(version=version)
    return b"".join(encode_request(body, version, correlation_id, client_id))


class RawClient:
    def __init__(self, port: int, host: str = "127.0.0.1", *, source: str | None = None, timeout: float = 10.0,
                 connect: bool = True, tls: ssl.SSLContext | None = None, server_hostname: str = "localhost"):
        self.host = host
        self.tls = tls
        self.server_hostname = server_hostname
        self.port = port
        self.source = source
        self.timeout = timeout
        self._frames = FrameBuffer(DEFAULT_MAX_RESPONSE_SIZE, kind="response", limit_name="the client's limit")
        self._connection = ClientConnection(client_id="raw-client")
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
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_hostname=self.server_hostname)
        self.sock = sock
        # A new connection: nothing buffered, nothing outstanding, correlation ids from 1.
        self._frames.clear()
        self._connection = ClientConnection(client_id="raw-client")
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

    def send_request(self, body, version: int | None = None, *, correlation_id: int | None = None,
                     client_id: str | None = "raw-client") -> int:
        """Send a request message (``twisted_kafka.protocol.messages``); returns its correlation id.

        Its response is not waited for or matched: read it with
        ``read_response()``.  Without ``correlation_id`` the connection's next
        one is used (``request()`` never reuses it); with one, that exact id.
        """
        if version is None:
            version = body.version
        if correlation_id is None:
            self._connection.client_id = client_id
            correlation_id, chunks = self._connection.send_request(body, version, expect_response=False)
        else:
            chunks = encode_request(body, version, correlation_id, client_id)
        self.sock.sendall(b"".join(chunks))
        return correlation_id

    # -- receiving ------------------------------------------------------------------

    def _fill(self, deadline: float) -> None:
        """Read at least one more chunk into the buffer, or raise Closed / TimeoutError."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"no data from {self.host}:{self.port} in time")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(1 << 16)
        except TimeoutError:
            raise TimeoutError(f"no data from {self.host}:{self.port} in time") from None
        except ConnectionResetError:
            raise Closed("connection reset by the broker") from None
        if not chunk:
            raise Closed("EOF from the broker")
        self._frames.feed(chunk)

    def read_frame(self, timeout: float | None = None) -> bytes:
        """The next response frame (without its size), or raise Closed / TimeoutError.

        A negative size raises ``InvalidFrameSize``: the stream cannot be
        read any further.
        """
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while not self._frames.complete():
            self._fill(deadline)
        return self._frames.pop()

    def read_response(self, api_key: int, version: int, timeout: float | None = None):
        """``(correlation_id, message)`` of the next response, decoded as ``api_key`` v``version``."""
        return decode_response(api_key, version, self.read_frame(timeout))

    def request(self, body, version: int | None = None, *, timeout: float | None = None,
                client_id: str | None = "raw-client"):
        """Send ``body`` and return its decoded response.

        The next frame must answer it: a response to anything else (an
        earlier ``send_request()`` not yet read, a ``request()`` that timed
        out) or one that does not decode raises AssertionError.
        """
        if version is None:
            version = body.version
        self._connection.client_id = client_id
        correlation_id, chunks = self._connection.send_request(body, version)
        self.sock.sendall(b"".join(chunks))
        # The frame is read here (so read_frame's buffer stays the one reader of the
        # socket) and handed to the ClientConnection, which decodes and matches it.
        self._connection.receive_data(frame(self.read_frame(timeout)))
        event = self._connection.next_event()
        if not isinstance(event, ResponseReceived):
            raise AssertionError(f"no response to request {correlation_id}: {getattr(event, 'message', event)}")
        if event.correlation_id != correlation_id:
            # The late answer to an earlier request() that timed out.
            raise AssertionError(f"correlation id {event.correlation_id} answers request {correlation_id}")
        return event.body

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
        if not readable_within(self.sock, 0):
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
        return not readable_within(self.sock, seconds) and not len(self._frames)


def auto_create_topic(client, topic: str, partitions: int | None = None) -> None:
    """Create ``topic`` the way a producer does: Metadata v4 with allow_auto_topic_creation
    (the broker must have auto.create.topics.enable=true); ``partitions`` checks the count."""
    response = client.request(m.MetadataRequest(version=4, topics=[m.MetadataRequest.MetadataRequestTopic(
        name=topic)], allow_auto_topic_creation=True), 4)
    (entry,) = response.topics
    assert entry.error_code == 0, entry
    if partitions is not None:
        assert len(entry.partitions) == partitions, entry

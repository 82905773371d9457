"""Processor: one client connection's framing, muting and response ordering.

In Kafka a Processor thread multiplexes many connections over a Selector;
here the reactor is the selector, so each connection's protocol instance does
the Processor's per-connection work:

* reads size-prefixed frames (``KafkaFrameReceiver``) of at most
  ``socket.request.max.bytes``;
* parses the header, checks the API is served in a supported version, decodes
  the body and queues the ``Request`` on its plane's ``RequestChannel``;
* *mutes* the connection — stops reading it — until that request's response
  is written, so responses leave in request order and a client cannot queue
  unbounded work (SPEC S3).  A request that expects no response (acks=0
  Produce) unmutes as soon as its handler is done with it;
* when the plane's channel is full, stops reading and waits for room;
* closes the connection, logging peer and reason, on anything malformed: a
  bad frame size, an unknown API key, an unsupported version (except
  ApiVersions, KIP-511), a body that does not parse.  Other connections never
  notice.

Each plane has its own subclass so logs, metrics and stack traces say which
plane a connection belongs to.
"""

from __future__ import annotations

import socket
from time import perf_counter_ns

from twisted.internet.error import ConnectionDone
from twisted.logger import Logger

from twisted_kafka.protocol.codec import decode_request_body
from twisted_kafka.protocol.exceptions import ProtocolDecodeError
from twisted_kafka.protocol.header import parse_request_header
from twisted_kafka.protocol.registry import ApiKey

from .framing import KafkaFrameReceiver, likely_mistake
from .request import Request


class CloseReason:
    """Why a connection closed, as counted by ConnectionQuotas and shown to operators."""

    CLIENT = "client"
    IDLE = "idle"
    QUOTA = "quota"
    PROTOCOL_ERROR = "protocol_error"
    AUTHENTICATION = "authentication"
    PRODUCE_ERROR = "produce_error"   # an acks=0 Produce failed: closing tells the producer (Kafka does the same)
    TLS = "tls"
    SHUTDOWN = "shutdown"


class Processor(KafkaFrameReceiver):
    """The per-connection half of Kafka's SocketServer Processor (see module docstring)."""

    plane_name = "data"
    log = Logger(namespace="twisted_kafka.network.Processor")

    def __init__(self, acceptor, addr, connection_id: str):
        self.acceptor = acceptor
        self.plane = acceptor.plane
        self.channel = acceptor.plane.channel
        self.listener_name: str = acceptor.listener_name
        self.security_protocol: str = acceptor.security_protocol
        self.MAX_LENGTH = acceptor.max_request_size
        self.client_host: str = addr.host
        self.client_port: int = addr.port
        self.connection_id = connection_id
        self.principal = "User:ANONYMOUS"
        self.client_id: str | None = None
        self.client_software_name: str | None = None
        self.client_software_version: str | None = None
        self.slot = None            # ConnectionSlot once admitted
        self.parked = False         # accepted by the kernel, not yet admitted by the quotas
        self.closing = False
        self.close_reason: str | None = None
        self._inflight: Request | None = None
        self._waiting_for_room = False
        self.last_active = acceptor.reactor.seconds()
        self.requests_received = 0
        self._auth_close_call = None   # pending delayed close after a failed authentication
        self._muted = False            # the transport is paused (not read)

    # -- lifecycle --------------------------------------------------------------------

    @property
    def peer(self) -> str:
        return f"{self.client_host}:{self.client_port}"

    @property
    def busy(self) -> bool:
        """A request is being handled (or a delayed close is pending): the idle reaper must
        not close this connection."""
        return self._inflight is not None or self._auth_close_call is not None

    def connectionMade(self) -> None:
        super().connectionMade()
        handle = None if self.acceptor.socket_options_inherited else getattr(self.transport, "getHandle", None)
        sock = handle() if handle is not None else None
        if isinstance(sock, socket.socket):  # not Linux: set what the listening socket could not pass on
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            send_buffer = self.acceptor.socket_send_buffer_bytes
            if send_buffer != -1:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
        if self.parked:
            self._mute()

    def admit(self, slot) -> None:
        """The quotas admitted this connection (at accept time, or later for a parked one)."""
        self.slot = slot
        was_parked, self.parked = self.parked, False
        self.last_active = self.acceptor.reactor.seconds()
        self.acceptor.registry.add(self)
        if was_parked and self.connected:
            self.deliverFrames()
            self._unmute_if_idle()

    def close(self, reason: str, message: str | None = None, *, abort: bool = True) -> None:
        """Close this connection for ``reason`` (a ``CloseReason``), logging ``message``."""
        if self.closing:
            return
        self.closing = True
        self.close_reason = reason
        if message is not None:
            self.log.warn("Closing connection {connection_id} from {peer} on listener {listener} "
                          "({plane} plane): {message}",
                          connection_id=self.connection_id, peer=self.peer, listener=self.listener_name,
                          plane=self.plane_name, message=message)
        if self.transport is not None:
            if abort:
                self.transport.abortConnection()
            else:
                self.transport.loseConnection()

    def close_after_authentication_failure(self, reason: str) -> None:
        """Authentication failed: mute this connection now and close it after
        ``connection.failed.authentication.delay.ms`` (SPEC S6).

        As in Kafka, the delay slows down a client guessing credentials
        without holding a handler: nothing more is read from the connection,
        a response already being written (the authentication error) still
        goes out, and the close is counted with reason "authentication"
        whoever ends up closing it.
        """
        if self.closing or self._auth_close_call is not None:
            return
        self.close_reason = CloseReason.AUTHENTICATION
        self.log.info("Authentication failed for connection {connection_id} from {peer} on listener {listener}: "
                      "{reason}; closing in {delay} ms", connection_id=self.connection_id, peer=self.peer,
                      listener=self.listener_name, reason=reason, delay=self.acceptor.failed_authentication_delay_ms)
        if self.transport is not None:
            self._mute()
        delay = max(0, self.acceptor.failed_authentication_delay_ms) / 1000.0
        self._auth_close_call = self.acceptor.reactor.callLater(delay, self._close_after_authentication_delay)

    def _close_after_authentication_delay(self) -> None:
        self._auth_close_call = None
        # Graceful: the authentication error response, if any, is flushed first.
        self.close(CloseReason.AUTHENTICATION, None, abort=False)

    def connectionLost(self, reason=ConnectionDone) -> None:
        self.closing = True
        if self._auth_close_call is not None:
            if self._auth_close_call.active():
                self._auth_close_call.cancel()
            self._auth_close_call = None
        if self._waiting_for_room:
            self.channel.forget_waiter(self._room_available)
            self._waiting_for_room = False
        self.acceptor.connection_closed(self, self.close_reason or CloseReason.CLIENT)
        self._buffer = bytearray()
        super().connectionLost(reason)

    # -- receiving ----------------------------------------------------------------------

    def dataReceived(self, data: bytes) -> None:
        self.last_active = self.acceptor.reactor.seconds()
        self.acceptor.registry.touch(self)
        super().dataReceived(data)

    def readyForFrame(self, size: int) -> bool:
        if self.closing or self.parked:
            return False
        if self._auth_close_call is not None or self._inflight is not None or not self.plane.open:
            self._mute()
            return False
        if not self.channel.has_room(size):
            if not self._waiting_for_room:
                self._waiting_for_room = True
                self.channel.wait_for_room(self._room_available, size)
            self._mute()
            return False
        return True

    def _room_available(self) -> None:
        self._waiting_for_room = False
        if not self.closing and self.connected:
            self.deliverFrames()
            self._unmute_if_idle()

    # -- muting -------------------------------------------------------------------------
    #
    # A connection is muted (its transport paused) while one of its requests is
    # in flight, while its plane's channel has no room, when it is parked, and
    # after a failed authentication.  Muting is applied when control returns
    # to the reactor rather than the moment a request is queued: a request
    # answered synchronously (most are) then costs no pause/resume round trip
    # through the reactor, and no byte is read from the socket in between.

    def _mute(self) -> None:
        if not self._muted:
            self._muted = True
            self.transport.pauseProducing()

    def _unmute_if_idle(self) -> None:
        if (self._muted and self._inflight is None and not self._waiting_for_room and not self.closing
                and not self.parked and self._auth_close_call is None and self.plane.open):
            self._muted = False
            self.transport.resumeProducing()

    def deliverFrames(self) -> None:
        super().deliverFrames()
        if self._inflight is not None and not self._delivering and not self.closing:
            self._mute()

    def invalidFrameSize(self, size: int, prefix: bytes) -> None:
        problem = "negative" if size < 0 else f"larger than socket.request.max.bytes ({self.MAX_LENGTH})"
        message = f"invalid request size {size}: {problem}"
        hint = likely_mistake(prefix)
        if hint:
            message = f"{message}; {hint}"
        self.close(CloseReason.PROTOCOL_ERROR, message)

    def stringReceived(self, frame: bytes) -> None:
        start_ns = perf_counter_ns()
        try:
            header = parse_request_header(frame)
        except ProtocolDecodeError as exc:
            self.close(CloseReason.PROTOCOL_ERROR, f"unreadable request header: {exc}")
            return
        spec = self.plane.served_spec(header.api_key)
        if spec is None:
            self.close(CloseReason.PROTOCOL_ERROR,
                       f"unknown or unserved api_key {header.api_key} (correlation_id={header.correlation_id})")
            return
        body = None
        if not spec.min_version <= header.api_version <= spec.max_version:
            if header.api_key != ApiKey.API_VERSIONS:
                self.close(CloseReason.PROTOCOL_ERROR,
                           f"unsupported version {header.api_version} of {spec.name} "
                           f"(supported {spec.min_version}-{spec.max_version}, correlation_id={header.correlation_id})")
                return
            # KIP-511: answered in v0 format with UNSUPPORTED_VERSION; the body is not parsed.
        else:
            try:
                body = decode_request_body(header, frame)
            except ProtocolDecodeError as exc:
                self.close(CloseReason.PROTOCOL_ERROR, f"malformed {spec.name} request: {exc}")
                return
        if header.client_id is not None:
            self.client_id = header.client_id
        request = Request(
            processor=self, header=header, body=body, spec=spec, size=len(frame) + 4,
            plane=self.plane_name, listener_name=self.listener_name,
            security_protocol=self.security_protocol, client_host=self.client_host,
            client_port=self.client_port, connection_id=self.connection_id, start_ns=start_ns)
        self._inflight = request
        self.requests_received += 1
        self.channel.send_request(request)

    # -- sending ------------------------------------------------------------------------

    def send_response(self, request: Request, chunks) -> None:
        """Write ``request``'s response (``None``: it expects none) and unmute the connection."""
        if request is not self._inflight:
            return  # the connection was closed and this is a stale response
        request.response_dequeue_ns = perf_counter_ns()
        if chunks is not None and self.connected and not self.closing:
            if all(type(chunk) is bytes for chunk in chunks):
                self.transport.writeSequence(chunks)
            else:
                # Twisted transports take only bytes; record chunks read from
                # segments may be memoryviews, so join them once here rather
                # than converting each (Twisted would join again).
                self.transport.write(b"".join(chunks))
        request.complete_ns = perf_counter_ns()
        self.plane.request_metrics.record(request)
        self._inflight = None
        self.last_active = self.acceptor.reactor.seconds()
        self.acceptor.registry.touch(self)
        if self.connected and not self.closing and self._auth_close_call is None:
            self.deliverFrames()
            self._unmute_if_idle()


class DataPlaneProcessor(Processor):
    """A connection on a data-plane listener (clients, and brokers' inter-broker traffic)."""

    plane_name = "data"
    log = Logger(namespace="twisted_kafka.network.DataPlaneProcessor")


class ControlPlaneProcessor(Processor):
    """A connection on the control-plane listener (the controller's requests only)."""

    plane_name = "control"
    log = Logger(namespace="twisted_kafka.network.ControlPlaneProcessor")

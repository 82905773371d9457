"""Processor: the Twisted adapter between one client socket and its plane.

In Kafka a Processor thread multiplexes many connections over a Selector;
here the reactor is the selector, so each connection's protocol instance does
the Processor's per-connection work.  Everything about the bytes -- framing
with ``socket.request.max.bytes``, headers, served APIs and versions, body
decoding, ordering, SASL's pre-authentication state -- is the sans-IO
``ServerConnection``'s; this class only moves bytes and decisions between it,
the transport and the plane:

* a decoded request becomes a ``Request`` with this connection's
  ``RequestContext`` and goes on the plane's ``RequestChannel``;
* one request per connection is in flight at a time (the sans-IO
  connection hands out no other until it is answered), so responses leave
  in request order and a client cannot queue unbounded work; meanwhile the
  connection keeps reading only until ``READ_AHEAD_BYTES`` are buffered, so
  a pipelining client costs no pause/resume of its transport per request
  and a flooding one is held by the kernel's buffers, not ours;
* the connection is *muted* -- its transport paused -- beyond that bound,
  while it is parked by the quotas, after a failed authentication and once
  shutdown stops reading requests;
* the plane's ``RequestChannel`` hands back ``SendResponse`` /
  ``NoOpResponse`` / ``CloseConnectionResponse``; the answer is written, the
  timing recorded, and the next buffered request read;
* the connection is also the transport's streaming producer of *writes*
  (``ResponseFlow``): while the transport holds more unsent bytes than its
  limit, no further request is handed out and nothing more is read, until
  the transport has drained -- Kafka keeps a connection muted until its
  response has actually left, so a client that does not read its responses
  costs one response plus the transport's limit, not every response it asked
  for.  A connection whose responses make no progress for
  ``connections.max.idle.ms`` is closed as idle;
* anything malformed closes this connection alone, with one log line naming
  peer and reason;
* on a SASL listener, the connection authenticates first, as in Kafka's
  network layer (``SaslServerAuthenticator`` sits in the channel, below
  ``KafkaApis``): SaslHandshake and SaslAuthenticate requests -- and the raw
  tokens after a v0 handshake -- are answered here by the connection's
  sans-IO ``twisted_kafka.sasl`` authenticator, ApiVersions goes to its
  handler as usual, and anything else, an oversized frame
  (``sasl.server.max.receive.size``) or a failed exchange ends in
  ``close_after_authentication_failure``.  Once authenticated the
  principal (``User:<name>``) is in every request's context.

Each plane has its own subclass so logs, metrics and stack traces say which
plane a connection belongs to.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from functools import partial
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

from twisted.internet import tcp
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IHandshakeListener, IPushProducer
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from zope.interface import implementer

from twisted_kafka.protocol.codec import encode_response
from twisted_kafka.protocol.connection import (
    NEED_DATA,
    PAUSED,
    NoRoom,
    ProtocolViolation,
    RequestReceived,
    SaslTokenReceived,
    ServerConnection,
)
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.sasl.authenticator import SaslStep

from .close_reasons import CloseReason
from .connection_events import TLS_FAILURE_PREFIX
from .direct_write import close_regions, has_regions, send_now, skip_sent, unsent_part
from .request import (
    ANONYMOUS,
    CloseConnectionResponse,
    ConnectionUpdate,
    NoOpResponse,
    Request,
    RequestContext,
    Response,
    SendResponse,
)
from .tls import describe_failure

if TYPE_CHECKING:
    from .acceptor import Acceptor

#: While a request is in flight or waits for room in the channel, the connection keeps reading
#: until this many bytes are buffered (one read's worth: Twisted reads 64 KiB at a time), then
#: is muted.  A client pipelining a few requests is never paused and resumed per request.
READ_AHEAD_BYTES = 64 * 1024

#: Seconds a failed authentication's graceful close may take once its delay is over (its last bytes
#: leaving) before the connection is aborted: only a client that does not read its responses needs it.
FAILED_AUTHENTICATION_CLOSE_GRACE = 0.5


@implementer(IPushProducer)
class ResponseFlow:
    """The producer a connection registers with its transport, for the bytes it *writes*.

    The transport calls ``pauseProducing`` when its buffer of unsent bytes
    goes over its limit (Twisted's ``bufferSize``, 64 KiB) and
    ``resumeProducing`` once it has handed everything to the socket.  The
    names are Twisted's and collide with the transport's own
    ``pauseProducing`` (which *mutes* reading), hence this separate object
    forwarding to ``Processor.send_buffer_full`` / ``send_buffer_drained``.
    """

    __slots__ = ("processor",)

    def __init__(self, processor: Processor):
        self.processor = processor

    def pauseProducing(self) -> None:
        self.processor.send_buffer_full()

    def resumeProducing(self) -> None:
        self.processor.send_buffer_drained()

    def stopProducing(self) -> None:
        """The connection is lost; ``connectionLost`` follows and does the cleaning up."""


@implementer(IHandshakeListener)
class Processor(Protocol):
    """The per-connection half of Kafka's SocketServer Processor (see module docstring)."""

    plane_name = "data"
    log = Logger(namespace="twisted_kafka.network.Processor")
    # A TCP (or TLS-over-TCP) transport: besides ITransport it is the push producer
    # muting pauses, and it can be aborted (ITCPTransport, IPushProducer).
    transport: Any

    def __init__(self, acceptor: Acceptor, addr, connection_id: str):
        self.acceptor = acceptor
        self.plane = acceptor.plane
        self.channel = acceptor.plane.channel
        self.listener_name: str = acceptor.listener_name
        self.security_protocol: str = acceptor.security_protocol
        self.client_host: str = addr.host
        self.client_port: int = addr.port
        self.connection_id = connection_id
        self.connection = ServerConnection(max_request_size=acceptor.max_request_size,
                                           serves=acceptor.plane.serves,
                                           authentication_required=acceptor.authentication_required,
                                           max_authentication_size=acceptor.sasl_max_receive_size)
        sasl = acceptor.sasl if acceptor.authentication_required else None
        self.authenticator = sasl.new_authenticator() if sasl is not None else None
        self.principal = ANONYMOUS
        self.slot = None            # ConnectionSlot once admitted
        self.parked = False         # accepted by the kernel, not yet admitted by the quotas
        self.closing = False
        self.close_reason: str | None = None
        self._inflight: Request | None = None
        self._waiting_for_room = False
        self.last_active = acceptor.reactor.seconds()
        self.connected_at = self.last_active   # wall-clock seconds (the reactor's clock)
        self.bytes_in = 0              # bytes read from the socket, for operators
        self.bytes_out = 0             # response bytes handed to the transport
        self._auth_close_call = None   # pending delayed close after a failed authentication
        self._muted = False            # the transport is paused (not read)
        self._fd: int | None = None    # the socket's descriptor, for the plane's ReadinessWatch
        self._flow: ResponseFlow | None = None   # registered with the transport as its producer
        self.send_backlogged = False   # the transport holds more unsent bytes than its limit
        self._unsent: Request | None = None   # the request whose response went over that limit
        self._backlog: list | None = None     # what a direct write with file regions left to send
        self._processing = False
        self._process_again = False
        self._context: RequestContext | None = None
        self._has_room = partial(self.channel.has_room, connection_id=connection_id)
        self._direct = False           # responses may be written to the socket directly (connectionMade)

    # -- what operators and the quotas see --------------------------------------------

    @property
    def peer(self) -> str:
        return f"{self.client_host}:{self.client_port}"

    @property
    def busy(self) -> bool:
        """A request is being handled, or is read and waiting for room in the channel, or a
        delayed close is pending: the idle reaper must not close this connection."""
        return self._inflight is not None or self._waiting_for_room or self._auth_close_call is not None

    @property
    def inflight_api(self) -> str | None:
        """The name of the API whose request is being handled now, if any."""
        request = self._inflight
        if request is None:
            return None
        return request.spec.name if request.spec is not None else f"ApiKey{request.api_key}"

    @property
    def requests_received(self) -> int:
        return self.connection.requests_received

    @property
    def client_id(self) -> str | None:
        return self.connection.client_id

    @property
    def client_software_name(self) -> str | None:
        return self.connection.client_software_name

    @property
    def client_software_version(self) -> str | None:
        return self.connection.client_software_version

    def context(self) -> RequestContext:
        """This connection's RequestContext now (rebuilt only when something in it changed)."""
        conn = self.connection
        ctx = self._context
        if (ctx is None or ctx.client_id != conn.client_id or ctx.principal != self.principal
                or ctx.client_software_name != conn.client_software_name
                or ctx.client_software_version != conn.client_software_version):
            ctx = self._context = RequestContext(
                connection_id=self.connection_id, listener_name=self.listener_name,
                security_protocol=self.security_protocol, plane=self.plane_name,
                client_host=self.client_host, client_port=self.client_port, principal=self.principal,
                client_id=conn.client_id, client_software_name=conn.client_software_name,
                client_software_version=conn.client_software_version)
        return ctx

    # -- lifecycle --------------------------------------------------------------------

    def connectionMade(self) -> None:
        handle = None if self.acceptor.socket_options_inherited else getattr(self.transport, "getHandle", None)
        sock = handle() if handle is not None else None
        if isinstance(sock, socket.socket):  # not Linux: set what the listening socket could not pass on
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            send_buffer = self.acceptor.socket_send_buffer_bytes
            if send_buffer != -1:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
        self._flow = ResponseFlow(self)
        self.transport.registerProducer(self._flow, True)
        # A plain TCP transport (not TLS, whose bytes must go through its TLS connection): responses
        # are written to its socket directly when nothing is queued in it (see _write).
        self._direct = isinstance(self.transport, tcp.Connection) and not self.transport.TLS
        fileno = getattr(self.transport, "fileno", None)
        fd = fileno() if fileno is not None else -1
        self._fd = fd if isinstance(fd, int) and fd >= 0 else None
        if self.parked:
            self._mute()
        else:
            self._watch(True)

    def admit(self, slot) -> None:
        """The quotas admitted this connection (at accept time, or later for a parked one)."""
        self.slot = slot
        was_parked, self.parked = self.parked, False
        self.last_active = self.connected_at = self.acceptor.reactor.seconds()
        self.acceptor.registry.add(self)
        self.channel.register_connection(self)
        if was_parked and self.connected:
            self._process()

    def close(self, reason: str, message: str | None = None, *, abort: bool = True) -> None:
        """Close this connection for ``reason`` (a ``CloseReason``), logging ``message``."""
        if self.closing:
            return
        self.closing = True
        self.close_reason = reason
        self._watch(False)          # the transport reads nothing more, whatever arrives
        if message is not None:
            self.log.warn("Closing connection {connection_id} from {peer} on listener {listener} "
                          "({plane} plane): {message}",
                          connection_id=self.connection_id, peer=self.peer, listener=self.listener_name,
                          plane=self.plane_name, message=message)
        if self.transport is not None:
            if abort:
                self.transport.abortConnection()
            else:
                if self._backlog is not None:
                    # The rest of a response still to send leaves before the close, through the
                    # transport's buffer (whose drain then lets the close go, as below).
                    backlog, self._backlog = self._backlog, None
                    try:
                        self.transport.write(b"".join(unsent_part(backlog, 0)))
                    except OSError:
                        self.transport.abortConnection()
                        return
                # Responses already written leave first.  If the transport is over its
                # limit, it waits for this producer: send_buffer_drained lets it go.
                # Otherwise the producer goes now: a TLS transport would wait for it.
                if self._flow is not None and not self.send_backlogged and self.connected:
                    self._flow = None
                    self.transport.unregisterProducer()
                self.transport.loseConnection()

    def close_idle(self, max_idle_ms: int) -> None:
        """The idle reaper's close: no request, read or response progress for ``max_idle_ms``.

        That includes a graceful close whose last responses are not being
        read: it is aborted, as the connection would otherwise stay open,
        holding them, for as long as the client wants.
        """
        if self.closing:
            if self.connected and self.transport is not None:
                self.transport.abortConnection()
            return
        message = None
        if self.send_backlogged:
            message = (f"its responses have made no progress for {max_idle_ms} ms (connections.max.idle.ms): "
                       "the client is not reading them")
        self.close(CloseReason.IDLE, message)

    def close_after_authentication_failure(self, reason: str) -> None:
        """Authentication failed: mute this connection now and close it after
        ``connection.failed.authentication.delay.ms``.

        As in Kafka, the delay slows down a client guessing credentials
        without holding a handler: nothing more is read from the connection,
        a response already being written (the authentication error) still
        goes out, and the close is counted with reason "authentication"
        whoever ends up closing it.
        """
        if self.closing or self._auth_close_call is not None:
            return
        self.close_reason = CloseReason.AUTHENTICATION
        self.acceptor.authentication_failed(self, reason)
        self.log.info("Authentication failed for connection {connection_id} from {peer} on listener {listener}: "
                      "{reason}; closing in {delay} ms", connection_id=self.connection_id, peer=self.peer,
                      listener=self.listener_name, reason=reason, delay=self.acceptor.failed_authentication_delay_ms)
        if self.transport is not None:
            self._mute()
        delay = max(0, self.acceptor.failed_authentication_delay_ms) / 1000.0
        self._auth_close_call = self.acceptor.reactor.callLater(delay, self._close_after_authentication_delay)

    def _close_after_authentication_delay(self) -> None:
        """The delay is over: close, gracefully -- what was written, the authentication error, leaves
        first -- but never waiting on the client.  A client that has not read its responses by now
        holds the close up only until ``FAILED_AUTHENTICATION_CLOSE_GRACE`` has passed, then the
        connection is aborted: as Kafka's Selector closes such a channel at the delay, a failed login
        gives back its descriptor and its connection-quota slot on time whatever the client does."""
        self._auth_close_call = None
        self.close(CloseReason.AUTHENTICATION, None, abort=False)
        if self.connected and self.transport is not None:
            self._auth_close_call = self.acceptor.reactor.callLater(FAILED_AUTHENTICATION_CLOSE_GRACE,
                                                                    self._abort_failed_authentication)

    def _abort_failed_authentication(self) -> None:
        self._auth_close_call = None
        if self.connected and self.transport is not None:
            self.log.info("Connection {connection_id} from {peer} on listener {listener} does not read its "
                          "responses; aborting it after its failed authentication",
                          connection_id=self.connection_id, peer=self.peer, listener=self.listener_name)
            self.transport.abortConnection()

    def handshakeCompleted(self) -> None:
        """The TLS handshake is done: on an SSL listener the client certificate names the principal."""
        tls = self.acceptor.tls
        if tls is None or self.security_protocol != "SSL":
            return      # SASL_SSL: the principal is SASL's
        try:
            principal = tls.principal(self.transport)
        except Exception as exc:   # no rule of ssl.principal.mapping.rules applies
            self.tls_failed(describe_failure(exc) or str(exc))
            self.close(CloseReason.TLS)
            return
        if principal is not None:
            self.principal = principal

    def tls_failed(self, problem: str) -> None:
        """The TLS handshake failed (or its certificate names no principal): a failed authentication, as in
        Kafka (SslAuthenticationException), logged with the peer and closed with reason "tls"."""
        if self.close_reason is not None:
            return
        self.close_reason = CloseReason.TLS
        self.log.info("TLS handshake failed for connection {connection_id} from {peer} on listener {listener} "
                      "({plane} plane): {problem}", connection_id=self.connection_id, peer=self.peer,
                      listener=self.listener_name, plane=self.plane_name, problem=problem)
        self.acceptor.authentication_failed(self, f"{TLS_FAILURE_PREFIX}{problem}")

    def connectionLost(self, reason=ConnectionDone) -> None:
        if self.acceptor.tls is not None and self.close_reason is None:
            problem = describe_failure(reason, getattr(self.transport, "first_bytes", b""))
            if problem is not None:
                self.tls_failed(problem)
        self.closing = True
        if self._auth_close_call is not None:
            if self._auth_close_call.active():
                self._auth_close_call.cancel()
            self._auth_close_call = None
        if self._waiting_for_room:
            self.channel.forget_waiter(self._room_available)
            self._waiting_for_room = False
        self.channel.unregister_connection(self)
        self.acceptor.connection_closed(self, self.close_reason or CloseReason.CLIENT)
        self.connection.close()
        self._flow = None
        self._watch(False)
        if self._backlog is not None:
            backlog, self._backlog = self._backlog, None
            close_regions(backlog)
        if self._unsent is not None:
            # As Kafka does for responses in flight at a disconnect: their timing is recorded.
            self._record_unsent()

    # -- receiving ----------------------------------------------------------------------

    def dataReceived(self, data: bytes) -> None:
        self.bytes_in += len(data)
        self.last_active = self.acceptor.reactor.seconds()
        self.acceptor.registry.touch(self)
        self.connection.receive_data(data)
        self._process()

    def _may_read(self) -> bool:
        return bool(self.connected and not self.closing and not self.parked and self._auth_close_call is None
                and self.plane.open and not self.send_backlogged)

    def _process(self) -> None:
        """Hand every buffered request to the plane, as long as the connection may read.

        Re-entrant calls (a response sent synchronously from the channel
        resumes this connection, which processes again) only flag that
        another pass is due, so requests are never handed out twice or out
        of order.
        """
        if self._processing:
            self._process_again = True
            return
        self._processing = True
        try:
            self._process_again = True
            while self._process_again:
                self._process_again = False
                self._process_once()
        finally:
            self._processing = False
        # Mute when control returns to the reactor rather than the moment a
        # request is queued, and only once the bytes buffered behind the request
        # in flight (or waiting for room) reach READ_AHEAD_BYTES: the next
        # requests of a pipelining client are read without a pause/resume round
        # trip, and handed out one at a time by the sans-IO connection.
        if not self._may_read() or ((self._inflight is not None or self._waiting_for_room)
                                    and self.connection.buffered_bytes >= READ_AHEAD_BYTES):
            if not self.closing and self.transport is not None:
                self._mute()
        else:
            self._unmute()

    def _process_once(self) -> None:
        while self._may_read():
            event = self.connection.next_event(self._has_room)
            if event is NEED_DATA or event is PAUSED:
                return
            if isinstance(event, NoRoom):
                if not self._waiting_for_room:
                    self._waiting_for_room = True
                    self.channel.wait_for_room(self._room_available, event.size)
                return
            if isinstance(event, RequestReceived):
                request = Request(context=self.context(), header=event.header, body=event.body,
                                  spec=event.spec, size=event.size, start_ns=perf_counter_ns())
                self._inflight = request
                if self.authenticator is not None and not self.connection.authenticated \
                        and event.header.api_key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
                    self._authenticate(request)
                else:
                    self.channel.send_request(request)
                continue
            if isinstance(event, ProtocolViolation):
                if event.tls_record and self.acceptor.tls is None:
                    self.close(CloseReason.TLS, f"{event.message} (TLS handshake on a {self.security_protocol} "
                                                "listener)")
                elif self.authenticator is not None and not self.connection.authenticated:
                    # Kafka's authenticator fails the authentication (IllegalSaslStateException, an
                    # oversized receive): the close waits for connection.failed.authentication.delay.ms.
                    self.close_after_authentication_failure(event.message)
                else:
                    self.close(CloseReason.PROTOCOL_ERROR, event.message)
                return
            if isinstance(event, SaslTokenReceived):
                self._raw_token(event.token)
                continue
            return  # CLOSED

    # -- SASL (pre-authentication requests answered on the connection, as Kafka's authenticator does) --

    def _authenticate(self, request: Request) -> None:
        """Answer a pre-authentication SaslHandshake / SaslAuthenticate with the connection's authenticator."""
        assert self.authenticator is not None
        body = request.body
        if request.api_key == ApiKey.SASL_HANDSHAKE:
            step = self.authenticator.handshake(request.api_version, body.mechanism)
        else:
            step = self.authenticator.authenticate(request.api_version, body.auth_bytes)
        request.dequeue_ns = request.local_complete_ns = request.remote_complete_ns = perf_counter_ns()
        if step.failure is not None:
            # Muted and closing first, so nothing after this request is read; the response still leaves.
            self.close_after_authentication_failure(step.failure)
        chunks = encode_response(request.header, step.response, request.api_version)
        self.send(SendResponse(request, chunks, self._update(step)))

    def _raw_token(self, token: bytes) -> None:
        """A raw token (after a v0 handshake): its challenge goes back in a size-prefixed frame."""
        if self.authenticator is None:
            self.close(CloseReason.PROTOCOL_ERROR, "raw SASL token on a listener without SASL")
            return
        step = self.authenticator.raw_token(token)
        if step.failure is not None:
            self.close_after_authentication_failure(step.failure)
            return
        assert step.raw is not None
        if self.connected and not self.closing:
            self.transport.write(len(step.raw).to_bytes(4, "big") + step.raw)
        self.connection.response_complete()
        update = self._update(step)
        if update is not None:
            self._apply(update)

    def _update(self, step: SaslStep) -> ConnectionUpdate | None:
        if step.handshake is None and step.principal is None:
            return None
        if step.principal is not None:
            self.log.debug("Connection {connection_id} from {peer} authenticated as {principal} ({mechanism})",
                           connection_id=self.connection_id, peer=self.peer, principal=step.principal,
                           mechanism=self.authenticator.mechanism if self.authenticator else None)
        return ConnectionUpdate(sasl_handshake=step.handshake, authenticated_principal=step.principal)

    def _room_available(self) -> None:
        self._waiting_for_room = False
        if not self.closing and self.connected:
            self._process()

    # -- muting -------------------------------------------------------------------------

    def _mute(self) -> None:
        if not self._muted:
            self._muted = True
            self._watch(False)
            self.transport.pauseProducing()

    def _unmute(self) -> None:
        if self._muted:
            self._muted = False
            self.transport.resumeProducing()
            self._watch(True)

    def _watch(self, reading: bool) -> None:
        """Tell the plane's ReadinessWatch (the control plane has one) whether this connection is read."""
        readiness = self.plane.readiness
        if readiness is not None and self._fd is not None:
            if reading:
                readiness.watch(self._fd)
            else:
                readiness.unwatch(self._fd)

    # -- sending ------------------------------------------------------------------------

    def send_buffer_full(self) -> None:
        """The transport's unsent bytes went over its limit (``ResponseFlow.pauseProducing``).

        Called from inside the write of a response: ``send`` then hands out
        no further request and mutes the connection.  Twisted calls it again
        on every write while the buffer is full; only the first counts.
        """
        if self.send_backlogged:
            return
        self.send_backlogged = True
        if not self._processing and not self.closing and self.connected:
            self._mute()

    def send_buffer_drained(self) -> None:
        """The transport handed every buffered byte to the socket (``ResponseFlow.resumeProducing``).

        That is progress for the idle reaper, the end of the response that
        filled the buffer (its ResponseSendTimeMs), and the connection reads
        and hands out requests again.
        """
        if not self.send_backlogged:
            return
        self.last_active = self.acceptor.reactor.seconds()
        self.acceptor.registry.touch(self)
        if self._backlog is not None and not self._send_backlog():
            return
        self.send_backlogged = False
        if self._unsent is not None:
            self._record_unsent()
        if self.closing:
            # A graceful close was waiting for the buffer: a transport with a paused
            # producer does not close until the producer is unregistered.
            if self._flow is not None and self.connected:
                self._flow = None
                self.transport.unregisterProducer()
            return
        if self.connected:
            self._process()

    def _send_backlog(self) -> bool:
        """Go on with a response whose file regions the socket did not take at once; True once all
        of it has left (or the connection is gone), False while the socket is still full."""
        backlog = self._backlog
        assert backlog is not None
        if not self.connected or self.closing:
            self._backlog = None
            close_regions(backlog)
            return True
        try:
            sent = send_now(self.transport.socket, backlog)
            backlog = skip_sent(backlog, sent)
        except OSError as exc:
            self._backlog = None
            close_regions(backlog)
            self.close(CloseReason.PROTOCOL_ERROR, f"cannot read the records of a response: {exc}")
            return True
        if backlog:
            self._backlog = backlog
            self._await_writable()
            return False
        self._backlog = None
        return True

    def _await_writable(self) -> None:
        """Have the transport tell this connection (``ResponseFlow.resumeProducing``) once its socket
        can take more: a transport with nothing buffered, asked to write, finds its buffer empty
        and resumes its paused producer -- Twisted's own path for a drained buffer."""
        transport = self.transport
        transport.producerPaused = True
        transport.startWriting()

    def _record_unsent(self) -> None:
        request, self._unsent = self._unsent, None
        assert request is not None
        request.complete_ns = perf_counter_ns()
        self.plane.request_metrics.record(request)

    def send(self, response: Response) -> None:
        """Answer the in-flight request (called by the plane's RequestChannel)."""
        request = response.request
        if request is not self._inflight:
            return  # the connection was closed and this is a stale response
        request.response_dequeue_ns = perf_counter_ns()
        chunks = response.chunks if not isinstance(response, NoOpResponse) else ()
        if chunks and self.connected and not self.closing:
            self._write(chunks)
        if self.send_backlogged:
            # This response went over the transport's limit: it has left once the buffer drains.
            self._unsent = request
        else:
            request.complete_ns = perf_counter_ns()
            self.plane.request_metrics.record(request)
        self._inflight = None
        self.connection.response_complete()
        self.last_active = self.acceptor.reactor.seconds()
        self.acceptor.registry.touch(self)
        if isinstance(response, CloseConnectionResponse):
            self.close(response.reason, response.message, abort=not response.graceful)
            return
        if response.update is not None:
            self._apply(response.update)
        if self.connected and not self.closing:
            self._process()

    def _write(self, chunks: Sequence) -> None:
        """Write a response: straight to the socket when the transport holds nothing unsent.

        Twisted's ``write`` only buffers: the transport registers for
        writability (an ``epoll_ctl``), the reactor polls once more, writes,
        and unregisters (another ``epoll_ctl``) -- three system calls and a
        reactor turn per response.  On a plain TCP transport with an empty
        buffer the response goes out at once with one ``sendmsg`` (the chunks
        as they are: no join, no copy of record chunks); only what the
        socket does not take is handed to the transport, whose buffer and
        producer (``ResponseFlow``) then pace the connection exactly as
        before.  A client that pipelines (bytes of its next request are
        already buffered here) gets the Twisted path too: its answers, taken
        in the same slice as follow-ups, leave together in one write.  Record batches a Fetch left in their segment file
        (``FileRegion``) go with ``sendfile``.  TLS transports, and any
        transport with bytes still queued (so the order on the wire holds),
        take the Twisted path, with regions read into bytes first.
        """
        size = 0
        for chunk in chunks:
            size += len(chunk)
        self.bytes_out += size
        transport = self.transport
        try:
            if (self._direct and not transport.dataBuffer and not transport._tempDataLen
                    and not self.connection.buffered_bytes):
                sent = send_now(transport.socket, chunks)
                if sent == size:
                    close_regions(chunks)
                    return
                if has_regions(chunks):
                    # The socket is full before the records are out: the rest waits for it here,
                    # regions unread, and leaves with sendfile when the socket takes more.
                    self._backlog = skip_sent(chunks, sent)
                    self.send_buffer_full()
                    self._await_writable()
                    self.plane.wrote = True
                    return
                chunks = unsent_part(chunks, sent)
            elif has_regions(chunks):
                chunks = unsent_part(chunks, 0)
        except OSError as exc:     # a segment file could not give the bytes of a region it held
            self.close(CloseReason.PROTOCOL_ERROR, f"cannot read the records of a response: {exc}")
            return
        if len(chunks) == 1 and type(chunks[0]) is bytes:
            transport.write(chunks[0])
        elif all(type(chunk) is bytes for chunk in chunks):
            transport.writeSequence(chunks)
        else:
            # Twisted transports take only bytes; record chunks read from
            # segments may be memoryviews, so join them once here rather
            # than converting each (Twisted would join again).
            transport.write(b"".join(chunks))
        self.plane.wrote = True    # bytes wait for the reactor to write them out

    def _apply(self, update: ConnectionUpdate) -> None:
        if update.sasl_handshake is not None:
            self.connection.sasl_handshake_complete(raw_tokens=update.sasl_handshake == "raw")
        if update.authenticated_principal is not None:
            self.principal = update.authenticated_principal
            self.connection.authentication_complete()


class DataPlaneProcessor(Processor):
    """A connection on a data-plane listener (clients, and brokers' inter-broker traffic)."""

    plane_name = "data"
    log = Logger(namespace="twisted_kafka.network.DataPlaneProcessor")


class ControlPlaneProcessor(Processor):
    """A connection on the control-plane listener (the controller's requests only)."""

    plane_name = "control"
    log = Logger(namespace="twisted_kafka.network.ControlPlaneProcessor")


__all__ = ["Processor", "DataPlaneProcessor", "ControlPlaneProcessor"]

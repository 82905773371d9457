"""Acceptor: one per listener, it turns accepted sockets into admitted Processors.

The listening socket is a Twisted server endpoint; the Acceptor is its
factory.  Before a connection becomes a ``Processor`` the shared
``ConnectionQuotas`` decide:

* over the IP's limit → ``buildProtocol`` returns ``None`` and Twisted closes
  the socket at once (the client reads EOF); the control-plane listener's
  connections are not counted per IP (see ``ListenerConfig.counts_per_ip``);
* at the broker-wide or listener limit, or over a creation rate → the
  Acceptor stops reading its listening socket, so further connections wait in
  the kernel backlog, as Kafka's blocking acceptor thread makes them wait.
  Twisted accepts several sockets per readiness event, so a connection
  accepted in the same batch as the one that reached the limit is *parked*:
  held, unread and uncounted, and admitted first when a slot frees.

Listeners are bound at startup but a data-plane acceptor only starts
accepting once the broker enables request processing (Kafka's
``SocketServer.enableRequestProcessing``): the ports are known -- and
advertised -- before clients are let in.
"""

from __future__ import annotations

import contextlib
import socket
import sys
from collections import deque
from itertools import count

from twisted.internet.defer import Deferred
from twisted.internet.protocol import ServerFactory
from twisted.logger import Logger

from twisted_kafka.sasl.authenticator import SaslServerConfig

from .close_reasons import CloseReason
from .connection_events import ConnectionEvent, ConnectionEventKind, ConnectionEvents
from .connection_quotas import ConnectionQuotas, TooManyConnections
from .connections import ConnectionRegistry
from .endpoints import SASL_PROTOCOLS, listen
from .listeners import EndPoint

#: Accepted sockets inherit TCP_NODELAY, SO_SNDBUF and SO_RCVBUF from the listening socket.
SOCKET_OPTIONS_INHERITED = sys.platform.startswith("linux")


class Acceptor(ServerFactory):
    log = Logger(namespace="twisted_kafka.network.Acceptor")
    noisy = False

    def __init__(self, *, endpoint: EndPoint, plane, quotas: ConnectionQuotas, registry: ConnectionRegistry,
                 reactor, config, processor_class, protected: bool, events: ConnectionEvents | None = None,
                 tls=None, sasl: SaslServerConfig | None = None):
        self.endpoint = endpoint
        self.tls = tls              # the listener's ServerTls (SSL, SASL_SSL), else None
        self.events = events
        self.listener_name = endpoint.listener_name
        self.security_protocol = endpoint.security_protocol
        self.authentication_required = endpoint.security_protocol in SASL_PROTOCOLS
        self.plane = plane
        self.quotas = quotas
        self.registry = registry
        self.reactor = reactor
        self.processor_class = processor_class
        self.protected = protected
        self.max_request_size: int = config["socket.request.max.bytes"]
        self.socket_send_buffer_bytes: int = config["socket.send.buffer.bytes"]
        self.failed_authentication_delay_ms: int = config["connection.failed.authentication.delay.ms"]
        #: What this SASL listener offers (mechanisms, users); each connection gets its own authenticator.
        self.sasl = sasl
        if self.authentication_required and sasl is None:
            raise ValueError(f"SASL listener {self.listener_name} has no SASL configuration")
        self.sasl_max_receive_size: int = config.listener_effective(self.listener_name,
                                                                    "sasl.server.max.receive.size")
        self.socket_receive_buffer_bytes: int = config["socket.receive.buffer.bytes"]
        self.backlog: int = config["socket.listen.backlog.size"]
        self.socket_options_inherited = False   # True once the listening socket carries them
        self.port = None
        self.enabled = False        # accepting; False until the broker enables request processing
        self.paused_for: str | None = None
        self._resume_call = None
        self._parked: deque = deque()
        self._stopping = False
        self._ids = count()
        self._id_prefix = f"{endpoint.host}:{endpoint.port}-"
        self.processors: set = set()
        quotas.on_slot_freed(self._slot_freed)

    # -- listening --------------------------------------------------------------------

    def listen(self) -> Deferred:
        """Bind the listening socket; connections are accepted once ``enable()`` is called."""
        return listen(self.reactor, self.endpoint, self, backlog=self.backlog, tls=self.tls).addCallback(
            self._listening)

    def enable(self) -> None:
        """Start accepting connections (the broker is ready for this listener's plane)."""
        self.enabled = True
        self._update_reading()

    def _update_reading(self) -> None:
        if self.port is None:
            return
        if self.enabled and self.paused_for is None and not self._stopping:
            self.port.startReading()
        else:
            self.port.stopReading()

    def _listening(self, port):
        self.port = port
        # Kafka's connection id names the port actually bound: with port 0 configured,
        # several listeners of one plane would otherwise hand out the same ids.
        self._id_prefix = f"{self.endpoint.host}:{port.getHost().port}-"
        self._update_reading()
        if self.socket_receive_buffer_bytes != -1:
            # Accepted sockets inherit the listening socket's receive buffer,
            # which must be set before the connection's window is negotiated.
            port.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.socket_receive_buffer_bytes)
        if SOCKET_OPTIONS_INHERITED:
            # Linux copies these to every accepted socket: set once here rather
            # than with two system calls per connection (Processor.connectionMade).
            port.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.socket_send_buffer_bytes != -1:
                port.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.socket_send_buffer_bytes)
            self.socket_options_inherited = True
        self.log.info("Listening on {listener} {address} ({plane} plane)", listener=self.listener_name,
                      address=self.bound_address, plane=self.plane.name)
        return port

    @property
    def bound_address(self) -> str:
        assert self.port is not None, "not listening"
        host = self.port.getHost()
        return f"{host.host}:{host.port}"

    @property
    def bound_port(self) -> int:
        assert self.port is not None, "not listening"
        return self.port.getHost().port

    def stop_listening(self) -> Deferred | None:
        """Stop accepting (shutdown): close the listening socket and every parked connection.

        Idempotent: the broker stops accepting first thing at shutdown, and the
        socket server does so again (harmlessly) when it stops.
        """
        if self._stopping:
            return None
        self._stopping = True
        self.quotas.remove_slot_freed(self._slot_freed)
        if self._resume_call is not None and self._resume_call.active():
            self._resume_call.cancel()
        while self._parked:
            self._parked.popleft().close(CloseReason.SHUTDOWN)
        if self.port is not None:
            return self.port.stopListening()
        return None

    # -- accepting --------------------------------------------------------------------

    def buildProtocol(self, addr):
        if self._stopping:
            return None
        connection_id = f"{self._id_prefix}{addr.host}:{addr.port}-{next(self._ids)}"
        processor = self.processor_class(self, addr, connection_id)
        if self._parked or not self._may_admit_now():
            processor.parked = True
            self._parked.append(processor)
            self.processors.add(processor)
            return processor
        if not self._admit(processor):
            return None
        self.processors.add(processor)
        return processor

    def _may_admit_now(self) -> bool:
        reason = self.quotas.limit_reached(self.listener_name)
        if reason is not None:
            self._pause(reason)
            return False
        delay = self.quotas.creation_delay(self.listener_name)
        if delay > 0:
            self.quotas.throttled_accepts[self.listener_name] += 1
            self._pause("connection creation rate", delay)
            return False
        return True

    def _admit(self, processor) -> bool:
        try:
            slot = self.quotas.inc(self.listener_name, processor.client_host)
        except TooManyConnections as exc:
            self.log.info("Rejected connection from {peer} on listener {listener}: {reason} "
                          "({quota})", peer=processor.peer, listener=self.listener_name,
                          reason=exc, quota=exc.quota)
            self._emit(ConnectionEventKind.REJECTED, processor, exc.quota)
            return False
        processor.admit(slot)
        self._emit(ConnectionEventKind.ACCEPTED, processor)
        if self.protected and self.quotas.over_broker_limit():
            victim = self.registry.least_recently_used(
                exclude_listeners=self.quotas.listeners.protected_listeners | {self.listener_name})
            if victim is not None:
                victim.close(CloseReason.QUOTA, "closed as the least recently used connection to make room "
                                                f"for inter-broker listener {self.listener_name} (max.connections)")
        limit = self.quotas.limit_reached(self.listener_name)
        if limit is not None:
            self._pause(limit)
        return True

    def _pause(self, reason: str, delay: float | None = None) -> None:
        if self.paused_for is None and self.port is not None:
            self.paused_for = reason
            self._update_reading()
            self.log.debug("Listener {listener} stops accepting: {reason}", listener=self.listener_name,
                           reason=reason)
        self.paused_for = reason
        if delay is not None and (self._resume_call is None or not self._resume_call.active()):
            self._resume_call = self.reactor.callLater(delay, self._try_resume)

    def _slot_freed(self) -> None:
        if self.paused_for is not None or self._parked:
            self._try_resume()

    def _try_resume(self) -> None:
        if self._stopping:
            return
        while self._parked:
            if not self._may_admit_now():
                return
            processor = self._parked.popleft()
            if not processor.connected or processor.closing:
                continue
            if not self._admit(processor):
                processor.close(CloseReason.QUOTA)
        if self.paused_for is not None and self._may_admit_now():
            self.paused_for = None
            self._update_reading()

    # -- bookkeeping --------------------------------------------------------------------

    def connection_closed(self, processor, reason: str) -> None:
        self.processors.discard(processor)
        if processor.parked:
            with contextlib.suppress(ValueError):
                self._parked.remove(processor)
            return
        self.registry.remove(processor)
        if processor.slot is not None and not processor.slot.released:
            processor.slot.release(reason)
            self._emit(ConnectionEventKind.CLOSED, processor, reason)

    def authentication_failed(self, processor, reason: str) -> None:
        """``processor`` failed to authenticate (it closes after the delay, as a CLOSED event of its own)."""
        self._emit(ConnectionEventKind.AUTHENTICATION_FAILED, processor, reason)

    def _emit(self, kind: ConnectionEventKind, processor, reason: str | None = None) -> None:
        if self.events is not None:
            self.events.emit(ConnectionEvent(
                kind=kind, timestamp_ms=int(self.reactor.seconds() * 1000), listener=self.listener_name,
                plane=self.plane.name, ip=processor.client_host, port=processor.client_port,
                connection_id=processor.connection_id, principal=processor.principal, reason=reason))

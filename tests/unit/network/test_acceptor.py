"""Acceptor: quota decisions at accept time, parking and resuming, creation-rate pacing,
protected-listener eviction, on a MemoryReactorClock."""

from __future__ import annotations

from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.protocol.messages import ApiVersionsRequest

from .helpers import THREE_LISTENERS, Stack, request_bytes

API_VERSIONS = request_bytes(ApiVersionsRequest(version=0))


def test_per_ip_rejection_returns_no_protocol_and_is_not_counted_as_a_connection():
    stack = Stack(max_connections_per_ip="2")
    assert stack.connect() is not None and stack.connect() is not None
    assert stack.connect() is None                       # Twisted closes the socket: the client reads EOF
    assert stack.connect(ip="127.0.0.2") is not None     # another IP is unaffected
    assert stack.quotas.total == 3
    assert stack.quotas.rejected[("PLAINTEXT", "max.connections.per.ip")] == 1
    assert stack.ports["PLAINTEXT"].reading                # per-IP limits never stop the listener


def test_broker_limit_pauses_the_listener_and_parks_the_rest_of_the_accept_batch():
    stack = Stack(THREE_LISTENERS, max_connections="2")
    port = stack.ports["CLIENT"]
    first, second = stack.connect("CLIENT"), stack.connect("CLIENT")
    assert not port.reading, "at the limit the listener stops accepting (kernel backlog)"
    parked = stack.connect("CLIENT")                     # accepted in the same batch by Twisted
    assert parked.parked and parked.transport.paused and parked.slot is None
    assert stack.quotas.total == 2
    parked.dataReceived(API_VERSIONS)
    assert stack.server.data_plane.channel.queue_size == 0, "a parked connection is not read"
    first.transport.client_closes()
    assert not parked.parked and parked.slot is not None
    assert stack.server.data_plane.channel.queue_size == 1, "admitted: its buffered request is read"
    assert not port.reading                               # at the limit again
    second.transport.client_closes()
    assert port.reading
    assert stack.quotas.total == 1


def test_listener_limit_parks_on_that_listener_only():
    stack = Stack({"listener.name.plaintext.max.connections": "1"})
    stack.connect("PLAINTEXT")
    assert not stack.ports["PLAINTEXT"].reading
    assert stack.connect("PLAINTEXT").parked
    control = stack.connect("CONTROLLER")
    assert not control.parked and stack.ports["CONTROLLER"].reading


def test_parked_connection_closed_by_its_client_releases_nothing_and_leaves_the_queue():
    stack = Stack(THREE_LISTENERS, max_connections="1")
    admitted = stack.connect("CLIENT")
    parked = stack.connect("CLIENT")
    parked.transport.client_closes()
    acceptor = stack.acceptor("CLIENT")
    assert not acceptor._parked and parked not in acceptor.processors
    assert stack.quotas.total == 1 and stack.quotas.closed == {}
    admitted.transport.client_closes()
    assert stack.quotas.total == 0 and stack.ports["CLIENT"].reading


def test_parked_connections_are_admitted_in_arrival_order():
    stack = Stack(THREE_LISTENERS, max_connections="1")
    first = stack.connect("CLIENT")
    waiting = [stack.connect("CLIENT") for _ in range(3)]
    order = []
    current = first
    for _ in range(3):
        current.transport.client_closes()
        admitted = [p for p in waiting if not p.parked and p not in order]
        assert len(admitted) == 1
        order.extend(admitted)
        current = admitted[0]
    assert order == waiting


def test_creation_rate_spaces_accepts_without_refusing_any():
    stack = Stack(THREE_LISTENERS, max_connection_creation_rate="2")
    port = stack.ports["CLIENT"]
    a, b = stack.connect("CLIENT"), stack.connect("CLIENT")
    assert not a.parked and not b.parked
    c = stack.connect("CLIENT")
    assert c.parked and not port.reading
    assert stack.quotas.throttled_accepts["CLIENT"] >= 1
    stack.clock.advance(0.4)
    assert c.parked
    stack.clock.advance(0.11)
    assert not c.parked, "admitted once a token is available (0.5 s at 2/s)"
    assert not port.reading, "c took that token: the listener waits for the next one"
    stack.clock.advance(0.5)
    assert port.reading
    assert stack.quotas.total == 3


def test_stop_listening_closes_parked_connections():
    stack = Stack(THREE_LISTENERS, max_connections="1")
    stack.connect("CLIENT")
    parked = stack.connect("CLIENT")
    stack.acceptor("CLIENT").stop_listening()
    stack.flush()
    assert parked.transport.closed and parked.close_reason == CloseReason.SHUTDOWN
    assert stack.connect("CLIENT") is None, "no new connection once stopping"


def test_inter_broker_connection_past_the_broker_limit_evicts_the_lru_connection_of_another_listener():
    stack = Stack(THREE_LISTENERS, max_connections="2")
    old = stack.connect("CLIENT")
    recent = stack.connect("CLIENT")
    stack.clock.advance(1)
    old.dataReceived(b"\x00")        # activity: 'recent' is now the least recently used
    internal = stack.connect("INTERNAL")
    assert internal is not None and not internal.parked
    assert recent.closing and recent.close_reason == CloseReason.QUOTA
    assert not old.closing
    stack.flush()
    assert stack.quotas.total == 2
    assert stack.quotas.closed[("CLIENT", CloseReason.QUOTA)] == 1
    assert not stack.ports["CLIENT"].reading, "clients still wait: the broker is at its limit"
    assert stack.ports["INTERNAL"].reading


def test_a_control_plane_connection_past_the_broker_limit_evicts_a_client_never_an_inter_broker_one():
    stack = Stack(THREE_LISTENERS, max_connections="2")
    internal = stack.connect("INTERNAL")
    client = stack.connect("CLIENT")
    stack.clock.advance(1)
    client.dataReceived(b"\x00")     # activity: the inter-broker connection is now the least recently used
    controller = stack.connect("CONTROLLER")
    assert controller is not None and not controller.parked
    assert client.closing and client.close_reason == CloseReason.QUOTA
    assert not internal.closing


def test_the_control_plane_is_not_counted_per_ip():
    stack = Stack(THREE_LISTENERS, max_connections_per_ip="1")
    assert stack.connect("CLIENT") is not None
    controllers = [stack.connect("CONTROLLER") for _ in range(3)]
    assert all(c is not None and not c.parked for c in controllers)
    assert stack.connect("CLIENT") is None, "the client IP's one connection is in use"


def test_inter_broker_listener_still_obeys_its_own_limit():
    stack = Stack({**THREE_LISTENERS, "listener.name.internal.max.connections": "1"})
    stack.connect("INTERNAL")
    assert stack.connect("INTERNAL").parked


# -- binding first, accepting once enabled ----------------------------------------------

def test_listeners_are_bound_but_accept_only_once_their_plane_is_enabled():
    """Kafka's enableRequestProcessing: ports are known before any client gets in, and the
    control plane can be let in before the data plane."""
    stack = Stack(enable=False)
    assert all(acceptor.port is not None for acceptor in stack.server.acceptors.values())
    assert not stack.ports["PLAINTEXT"].reading and not stack.ports["CONTROLLER"].reading
    stack.server.enable_request_processing("control")
    assert stack.ports["CONTROLLER"].reading and not stack.ports["PLAINTEXT"].reading
    stack.server.enable_request_processing("data")
    assert stack.ports["PLAINTEXT"].reading


def test_start_service_lets_in_only_the_control_plane_and_stop_closes_every_connection():
    stack = Stack(enable=False)
    stack.server.startService()
    assert stack.ports["CONTROLLER"].reading and not stack.ports["PLAINTEXT"].reading
    stack.server.enable_request_processing("data")
    client, controller = stack.connect(), stack.connect("CONTROLLER")
    stack.server.stopService()
    stack.flush()
    assert all(port.stopped for port in stack.ports.values())
    assert client.transport.closed and controller.transport.closed and not client.transport.aborted
    assert stack.quotas.total == 0
    assert stack.quotas.closed == {("PLAINTEXT", CloseReason.SHUTDOWN): 1, ("CONTROLLER", CloseReason.SHUTDOWN): 1}


def test_without_a_control_plane_start_service_lets_in_the_data_plane():
    stack = Stack({"listeners": "PLAINTEXT://127.0.0.1:9092", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
                   "control.plane.listener.name": ""}, enable=False)
    stack.server.startService()
    assert stack.ports["PLAINTEXT"].reading
    stack.server.stopService()


def test_a_stopped_listener_is_not_restarted_by_enabling_or_by_a_freed_slot():
    stack = Stack(THREE_LISTENERS, max_connections="1")
    admitted = stack.connect("CLIENT")
    stack.acceptor("CLIENT").stop_listening()
    stack.server.enable_request_processing()
    admitted.transport.client_closes()
    assert not stack.ports["CLIENT"].reading


def test_port_zero_is_advertised_with_the_port_bound():
    stack = Stack({"listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:9093"})
    advertised = {ep.listener_name: ep.port for ep in stack.server.advertised_endpoints()}
    assert advertised["PLAINTEXT"] == stack.ports["PLAINTEXT"].port != 0
    assert advertised["CONTROLLER"] == 9093
    assert stack.server.bound_port("plaintext") == advertised["PLAINTEXT"]


def test_socket_options_are_set_on_the_listening_socket():
    """Accepted sockets inherit the receive buffer (which must precede the window negotiation)
    and, on Linux, TCP_NODELAY and the send buffer."""
    import socket

    from twisted_kafka.network.acceptor import SOCKET_OPTIONS_INHERITED

    stack = Stack(socket_receive_buffer_bytes="65536", socket_send_buffer_bytes="131072")
    options = stack.ports["PLAINTEXT"].socket.options
    assert options[(socket.SOL_SOCKET, socket.SO_RCVBUF)] == 65536
    if SOCKET_OPTIONS_INHERITED:
        assert options[(socket.IPPROTO_TCP, socket.TCP_NODELAY)] == 1
        assert options[(socket.SOL_SOCKET, socket.SO_SNDBUF)] == 131072
        assert stack.acceptor().socket_options_inherited


def test_a_parked_connection_over_its_ip_limit_when_admitted_is_closed_as_quota():
    stack = Stack(THREE_LISTENERS, max_connections="2", max_connections_per_ip="1")
    first = stack.connect("CLIENT", ip="10.0.0.1")
    stack.connect("CLIENT", ip="10.0.0.2")
    parked = stack.connect("CLIENT", ip="10.0.0.2")     # same IP as an admitted one
    assert parked.parked
    first.transport.client_closes()
    assert parked.closing and parked.close_reason == CloseReason.QUOTA
    stack.flush()
    assert stack.quotas.total == 1 and stack.quotas.rejected[("CLIENT", "max.connections.per.ip")] == 1


def test_connection_ids_are_unique_across_listeners_bound_to_port_zero():
    """Responses find their connection by id (RequestChannel) and the idle/LRU registry is keyed
    by it, so two listeners of one plane must never hand out the same id.  With port 0 the
    configured port says nothing; the id uses the port actually bound, as Kafka's does.  A
    client's ephemeral port may be reused towards another destination port, so the same peer
    address on two listeners is possible."""
    stack = Stack({**THREE_LISTENERS, "listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0,"
                                                   "CONTROLLER://127.0.0.1:9093"})
    client = stack.connect("CLIENT", port=40000)
    internal = stack.connect("INTERNAL", port=40000)
    assert client.connection_id != internal.connection_id
    assert str(stack.ports["CLIENT"].port) in client.connection_id
    client.dataReceived(API_VERSIONS)
    internal.dataReceived(API_VERSIONS)
    stack.serve(count=2)
    assert client.transport.value() and internal.transport.value(), "each connection gets its own answer"
    assert len(stack.server.registry) == 2


def test_every_accept_rejection_and_close_is_one_event_on_the_bus():
    from twisted_kafka.network.connection_events import ConnectionEventKind

    stack = Stack(max_connections_per_ip="1")
    events = []
    stack.server.connection_events.subscribe(events.append)
    first = stack.connect()
    assert stack.connect() is None                      # over 127.0.0.1's limit
    first.close(CloseReason.IDLE)
    stack.flush()
    first.transport.client_closes()                     # a second close path: still one event
    assert [(e.kind, e.listener, e.plane, e.ip, e.reason) for e in events] == [
        (ConnectionEventKind.ACCEPTED, "PLAINTEXT", "data", "127.0.0.1", None),
        (ConnectionEventKind.REJECTED, "PLAINTEXT", "data", "127.0.0.1", "max.connections.per.ip"),
        (ConnectionEventKind.CLOSED, "PLAINTEXT", "data", "127.0.0.1", CloseReason.IDLE),
    ]
    assert events[0].connection_id == events[2].connection_id == first.connection_id
    assert events[0].principal == "User:ANONYMOUS" and events[0].timestamp_ms == int(stack.clock.seconds() * 1000)


def test_an_authentication_failure_is_an_event_before_its_close():
    from twisted_kafka.network.connection_events import ConnectionEventKind

    stack = Stack(connection_failed_authentication_delay_ms="100")
    events = []
    stack.server.connection_events.subscribe(events.append)
    p = stack.connect()
    p.close_after_authentication_failure("invalid credentials")
    stack.clock.advance(0.1)
    stack.flush()
    assert [(e.kind, e.reason) for e in events] == [
        (ConnectionEventKind.ACCEPTED, None),
        (ConnectionEventKind.AUTHENTICATION_FAILED, "invalid credentials"),
        (ConnectionEventKind.CLOSED, CloseReason.AUTHENTICATION),
    ]
    assert len({e.connection_id for e in events}) == 1

"""ConnectionQuotas against a real broker process, over loopback sockets.

Clients bind 127.0.0.2 / 127.0.0.3 as their source address to appear as other
IPs.  The broker's own controller keeps a connection to its control plane
from 127.0.0.1, which counts neither against 127.0.0.1's per-IP limit nor
against the broker-wide one; without a control plane it connects to the data
plane like a client, open from startup on, and limits on 127.0.0.1 and on the
total then leave exactly one connection fewer for the test's clients.  The
harness itself opens none.

Nothing here measures time: that a connection *waits* is seen as no answer
within ``WAIT`` (a connection the broker holds back cannot be answered, so a
slow machine cannot make that check wrong), and everything the broker is
expected to do is waited for.  The exact timing of the creation rate and of
idle reaping is proven on a ``task.Clock`` in tests/unit/network.
"""

from __future__ import annotations

import re
import time

import pytest

from support.raw_client import Closed, RawClient, api_versions_frame
from support.wait import wait_until

pytestmark = pytest.mark.integration

WAIT = 0.5   # how long a waiting connection is watched for an (unwanted) answer
ANSWER = 10  # how long an answer the broker owes is waited for


def admitted(port: int, source: str | None = None) -> RawClient:
    client = RawClient(port, source=source)
    assert client.api_versions(0).error_code == 0
    return client


def waiting(port: int, source: str | None = None) -> RawClient:
    """A connection the kernel accepted but the broker does not serve yet (its ApiVersions is pending)."""
    client = RawClient(port, source=source)
    client.send_raw(api_versions_frame(correlation_id=99))
    return client


def answered(client: RawClient, timeout: float = ANSWER) -> bool:
    correlation_id, response = client.read_response(18, 0, timeout=timeout)
    return correlation_id == 99 and response.error_code == 0


def admitted_once_free(port: int, source: str) -> RawClient:
    """A connection from ``source`` that is served, once the broker has released a slot for that IP.

    Until the broker has seen an earlier connection close, a new one is
    still over the per-IP limit and is closed: try again until one is served.
    """
    def attempt() -> RawClient | None:
        client = RawClient(port, source=source)
        try:
            client.api_versions(0, timeout=ANSWER)
        except Closed:
            client.close()
            return None
        return client
    return wait_until(attempt, timeout=ANSWER, what=f"a connection from {source} to be admitted")


def close(clients) -> None:
    for client in clients:
        client.close()


def test_per_ip_limit_closes_the_connection_over_it_and_spares_other_ips(broker_factory):
    broker = broker_factory({"max.connections.per.ip": "5"})
    held = [admitted(broker.data_port, "127.0.0.2") for _ in range(5)]
    sixth = RawClient(broker.data_port, source="127.0.0.2")
    assert sixth.wait_closed(5), "the 6th connection from 127.0.0.2 must read EOF"
    other = admitted(broker.data_port, "127.0.0.3")
    control = admitted(broker.control_port, "127.0.0.3")          # counts are shared by both planes
    assert all(c.api_versions(0).error_code == 0 for c in held), "held connections unaffected"
    held.pop().close()
    again = admitted_once_free(broker.data_port, "127.0.0.2")     # a slot freed for that IP
    broker.wait_for_log(r"Rejected connection from 127\.0\.0\.2:\d+ on listener PLAINTEXT.*max\.connections\.per\.ip")
    close(held + [sixth, other, control, again])


def test_per_ip_limit_counts_the_data_plane_and_not_the_control_plane(broker_factory):
    """Control-plane connections are inter-broker traffic: counted on their listener, not per IP."""
    broker = broker_factory({"max.connections.per.ip": "2"})
    control = [admitted(broker.control_port, "127.0.0.2") for _ in range(3)]
    data = [admitted(broker.data_port, "127.0.0.2") for _ in range(2)]
    third = RawClient(broker.data_port, source="127.0.0.2")
    assert third.wait_closed(5)
    close(control + data + [third])


def test_the_controllers_connection_does_not_use_a_client_ips_budget(broker_factory):
    """The controller reaches its broker on the control plane from 127.0.0.1: that is inter-broker
    traffic, counted on the control-plane listener and not against 127.0.0.1's per-IP budget."""
    broker = broker_factory({"max.connections.per.ip": "2"})
    broker.wait_for_log(r"Controller 0 active")
    clients = [admitted(broker.data_port, "127.0.0.1") for _ in range(2)]
    third = RawClient(broker.data_port, source="127.0.0.1")
    assert third.wait_closed(5), "the third connection from 127.0.0.1 is over max.connections.per.ip=2"
    assert all(c.api_versions(0).error_code == 0 for c in clients)
    close(clients + [third])


def test_per_ip_overrides_raise_one_ip_limit(broker_factory):
    broker = broker_factory({"max.connections.per.ip": "2", "max.connections.per.ip.overrides": "127.0.0.2:4"})
    raised = [admitted(broker.data_port, "127.0.0.2") for _ in range(4)]
    assert RawClient(broker.data_port, source="127.0.0.2").wait_closed(5)
    default = [admitted(broker.data_port, "127.0.0.3") for _ in range(2)]
    assert RawClient(broker.data_port, source="127.0.0.3").wait_closed(5)
    close(raised + default)


def test_per_ip_default_zero_with_overrides(broker_factory):
    """max.connections.per.ip=0 with overrides: only the listed IPs may connect."""
    broker = broker_factory({"max.connections.per.ip": "0",
                             "max.connections.per.ip.overrides": "127.0.0.1:50,127.0.0.2:1"})
    allowed = admitted(broker.data_port, "127.0.0.2")
    assert RawClient(broker.data_port, source="127.0.0.3").wait_closed(5)
    close([allowed])


def test_max_connections_makes_new_connections_wait_until_one_closes(broker_factory):
    # A single listener is not protected, so max.connections applies to it (with two,
    # the inter-broker listener would be exempt).  The broker's controller holds one
    # of the four slots itself.
    broker = broker_factory({"max.connections": "4"}, control_plane=False)
    held = [waiting(broker.data_port) for _ in range(3)]
    assert all(answered(client) for client in held)
    pending = waiting(broker.data_port)
    assert pending.no_response_within(WAIT), "a fifth connection is served under max.connections=4"
    assert pending.is_open(), "a waiting connection is not closed, it waits"
    held.pop(0).close()
    assert answered(pending), "admitted once a slot freed"
    late = waiting(broker.data_port)
    assert late.no_response_within(WAIT), "at the limit again"
    held.pop(0).close()
    assert answered(late)
    close(held + [pending, late])


def test_listener_limit_makes_that_listener_wait_and_not_the_others(broker_factory):
    broker = broker_factory({"listener.name.plaintext.max.connections": "3"})
    held = [admitted(broker.data_port) for _ in range(3)]
    pending = waiting(broker.data_port)
    assert pending.no_response_within(WAIT)
    control = admitted(broker.control_port)                       # another listener: unaffected
    held[1].close()
    assert answered(pending)
    close(held + [pending, control])


THREE_LISTENERS = {
    "listeners": "CLIENT://127.0.0.1:{port:CLIENT},INTERNAL://127.0.0.1:{port:INTERNAL},"
                 "CONTROLLER://127.0.0.1:{port:CONTROLLER}",
    "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
    "control.plane.listener.name": "CONTROLLER",
}


def test_inter_broker_listener_is_admitted_past_max_connections_and_evicts_the_lru(broker_factory):
    broker = broker_factory({**THREE_LISTENERS, "max.connections": "4"})
    client_port, internal_port = broker.port("CLIENT"), broker.port("INTERNAL")
    # The controller's connection to CONTROLLER is the fourth: the broker is at its limit.
    clients = [admitted(client_port) for _ in range(3)]
    late = waiting(client_port)
    assert late.no_response_within(WAIT), "a client connection past max.connections waits"
    late.close()                    # and gives up
    mark = broker.log_mark()
    clients[0].api_versions(0)      # now clients[1] is the least recently used client connection
    # Each internal connection is admitted although the broker is at its limit, and evicts the least
    # recently used connection of another listener.  The first victim may be the controller's own
    # connection (idle since startup).  An eviction is decided, and logged, when the internal
    # connection is admitted, before its first request is read: once it is answered, the log says
    # whether a client connection was evicted.
    internal: list[RawClient] = []
    while not evictions(broker, mark, "CLIENT"):
        assert len(internal) < 2, f"no client connection evicted:\n{broker.log_text()[mark:]}"
        internal.append(admitted(internal_port))
    [evicted] = evictions(broker, mark, "CLIENT")
    assert evicted == clients[1].sock.getsockname()[1], "the least recently used client connection is evicted"
    assert clients[1].wait_closed(ANSWER)
    assert clients[0].api_versions(0).error_code == 0 and clients[2].api_versions(0).error_code == 0
    assert all(c.api_versions(0).error_code == 0 for c in internal)
    close(clients + internal)


def evictions(broker, mark: int, listener: str) -> list[int]:
    """Client ports of the connections on ``listener`` evicted for an inter-broker connection since ``mark``."""
    return [int(port) for port in re.findall(
        rf"Closing connection \S+ from [\d.]+:(\d+) on listener {listener} .*: closed as the least recently "
        r"used connection to make room for inter-broker listener INTERNAL", broker.log_text()[mark:])]


def test_creation_rate_holds_connections_back_and_refuses_none(broker_factory):
    """max.connection.creation.rate throttles accepts: connections past the burst wait, none is refused.

    The token bucket holds at most one second's worth (``rate`` connections),
    and more are admitted only as tokens come back, ``1 / rate`` s apart: the
    last of ``rate + extra`` connections opened at once cannot be answered
    sooner than ``extra / rate`` s after they were opened.  That is a lower
    bound, which a slow machine only makes easier to meet; the exact spacing
    is proven on a Clock in tests/unit/network/test_acceptor.py.  (A single
    listener, so it is not the protected inter-broker listener, which the
    broker-wide rate exempts.)
    """
    rate, extra = 5, 5
    broker = broker_factory({"max.connection.creation.rate": str(rate)}, control_plane=False)
    opened = time.monotonic()
    clients = [waiting(broker.data_port) for _ in range(rate + extra)]
    assert all(answered(client) for client in clients), "throttled connections wait; they are never refused"
    assert time.monotonic() - opened >= extra / rate * 0.9, "more connections admitted than the rate allows"
    close(clients)


def test_idle_connections_are_closed_after_connections_max_idle_ms(broker_factory):
    broker = broker_factory({"connections.max.idle.ms": "500"})
    idle = admitted(broker.data_port)
    assert idle.wait_closed(ANSWER), "the idle connection was not closed"
    fresh = admitted(broker.data_port)          # the broker still serves new connections
    assert broker.stop() == 0
    fresh.close()
    broker.wait_for_log(r"Connections at shutdown: .*closed \{[^}]*'PLAINTEXT/idle': [12]\b")

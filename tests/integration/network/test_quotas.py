"""ConnectionQuotas against a real broker process, over loopback sockets.

Clients bind 127.0.0.2 / 127.0.0.3 as their source address to appear as other
IPs.  The broker's own controller keeps a connection to its control plane from
127.0.0.1, which counts neither against 127.0.0.1's per-IP limit nor against
the broker-wide one; without a control plane it connects to the data plane
like a client, and limits on the total are checked with it allowed for.
"""

from __future__ import annotations

import time

import pytest

from tests.support import load
from tests.support.raw_client import RawClient, api_versions_frame

pytestmark = pytest.mark.integration

WAIT = 0.5   # how long a waiting connection is watched for an (unwanted) answer


def admitted(port: int, source: str | None = None) -> RawClient:
    client = RawClient(port, source=source)
    assert client.api_versions(0).error_code == 0
    return client


def waiting(port: int, source: str | None = None) -> RawClient:
    """A connection the kernel accepted but the broker does not serve yet (its ApiVersions is pending)."""
    client = RawClient(port, source=source)
    client.send_raw(api_versions_frame(correlation_id=99))
    return client


def answered(client: RawClient, timeout: float = 5.0) -> bool:
    correlation_id, response = client.read_response(18, 0, timeout=timeout)
    return correlation_id == 99 and response.error_code == 0


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
    time.sleep(0.1)
    again = admitted(broker.data_port, "127.0.0.2")               # a slot freed for that IP
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
    # the inter-broker listener would be exempt).  The broker's controller may hold one
    # of the slots itself.
    broker = broker_factory({"max.connections": "4"}, control_plane=False)
    held = []
    while True:
        client = waiting(broker.data_port)
        if client.no_response_within(WAIT):
            pending = client
            break
        assert answered(client)
        held.append(client)
        assert len(held) <= 4, "more connections than max.connections were served"
    assert len(held) >= 3, f"only {len(held)} connection(s) served under max.connections=4"
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
    clients = []
    while True:
        client = waiting(client_port)
        if client.no_response_within(WAIT):
            client.close()          # the limit is reached: this one gives up
            break
        assert answered(client)
        clients.append(client)
    assert 3 <= len(clients) <= 4
    mark = broker.log_mark()
    time.sleep(0.05)
    clients[0].api_versions(0)      # now clients[1] is the least recently used client connection
    internal = []
    while all(c.is_open() for c in clients) and len(internal) < 3:
        internal.append(admitted(internal_port))       # admitted although the broker is at its limit
        time.sleep(0.2)
    assert not clients[1].is_open(), "the least recently used client connection is closed to make room"
    assert clients[0].is_open() and clients[0].api_versions(0).error_code == 0
    assert all(c.api_versions(0).error_code == 0 for c in internal)
    broker.wait_for_log(r"closed as the least recently used connection to make room for inter-broker "
                        r"listener INTERNAL", after=mark)
    close(clients + internal)


def test_creation_rate_bounds_accepts_per_second(broker_factory):
    rate = 25
    broker = broker_factory({"max.connection.creation.rate": str(rate)}, control_plane=False)
    time.sleep(1.0)   # a full bucket: one second's worth of burst
    result = load.collect(load.spawn("accept", port=broker.data_port, concurrency=10, duration=3.0))
    seconds, completed = result["seconds"], result["completed"]
    print(f"\ncreation rate {rate}/s: {completed} connections in {seconds:.2f}s "
          f"({completed / seconds:.1f}/s including the initial burst of {rate})")
    assert result["failed"] == 0, "throttled connections wait; they are never refused"
    assert completed <= rate + rate * seconds + 3, result
    assert completed >= rate + rate * (seconds - 1) * 0.7, result


def test_idle_connections_are_closed_after_connections_max_idle_ms(broker_factory):
    broker = broker_factory({"connections.max.idle.ms": "600"})
    idle = admitted(broker.data_port)
    busy = admitted(broker.data_port)
    opened = time.monotonic()
    closed_at = None
    while time.monotonic() - opened < 2.0:
        busy.api_versions(0)                  # activity every 100 ms keeps a connection open
        if closed_at is None and not idle.is_open():
            closed_at = time.monotonic() - opened
        time.sleep(0.1)
    assert closed_at is not None, "the idle connection was not closed"
    assert 0.5 <= closed_at <= 1.5, closed_at
    assert busy.is_open()
    close([idle, busy])

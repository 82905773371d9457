"""ConnectionStats: the connection-event bus summed by listener, plane, reason and client IP."""

from __future__ import annotations

from twisted_kafka.network.close_reasons import CloseReason
from twisted_kafka.network.connection_events import (
    TLS_FAILURE_PREFIX,
    ConnectionEvent,
    ConnectionEventKind,
    ConnectionEvents,
)
from twisted_kafka.network.connection_stats import CLOSE_REASONS, REJECT_REASONS, ConnectionStats, reject_reason


def event(kind, ip="10.0.0.1", reason=None, listener="PLAINTEXT", plane="data"):
    return ConnectionEvent(kind=kind, timestamp_ms=0, listener=listener, plane=plane, ip=ip, port=1,
                           connection_id="c", principal="User:ANONYMOUS", reason=reason)


def test_reject_reasons_name_the_quota_for_operators():
    assert reject_reason("max.connections.per.ip") == "per_ip"
    assert reject_reason("listener.name.plaintext.max.connections") == "listener_limit"
    assert reject_reason("max.connections") == "broker_limit"
    assert reject_reason("quota.ip.connection.creation.rate") == "creation_rate"
    assert reject_reason("max.connection.creation.rate") == "creation_rate"
    assert reject_reason("tls") == "tls"


def test_events_are_counted_by_listener_plane_reason_and_ip():
    bus = ConnectionEvents()
    stats = ConnectionStats()
    bus.subscribe(stats)
    A, R, C, F = (ConnectionEventKind.ACCEPTED, ConnectionEventKind.REJECTED, ConnectionEventKind.CLOSED,
                  ConnectionEventKind.AUTHENTICATION_FAILED)
    for e in (event(A), event(A, ip="10.0.0.2"), event(R, reason="max.connections.per.ip"),
              event(R, ip="10.0.0.2", reason="tls"), event(F, reason="bad password"),
              event(C, reason=CloseReason.ADMIN), event(C, ip="10.0.0.2", reason=None),
              event(A, listener="CONTROLLER", plane="control")):
        bus.emit(e)
    assert stats.accepted[("PLAINTEXT", "data")] == 2 and stats.accepted[("CONTROLLER", "control")] == 1
    rejected = stats.rejected_by_reason("PLAINTEXT", "data")
    assert list(rejected)[:len(REJECT_REASONS)] == list(REJECT_REASONS)
    assert rejected == {"per_ip": 1, "listener_limit": 0, "broker_limit": 0, "creation_rate": 0,
                        "authentication": 1, "tls": 1}
    closed = stats.closed_by_reason("PLAINTEXT", "data")
    assert set(closed) == set(CLOSE_REASONS) and closed["admin"] == 1 and closed["client"] == 1
    assert stats.rejected_by_reason("PLAINTEXT", "data", "10.0.0.2")["tls"] == 1
    assert stats.rejected_by_reason("PLAINTEXT", "data", "10.0.0.2")["per_ip"] == 0
    assert stats.closed_by_reason("PLAINTEXT", "data", "10.0.0.1")["admin"] == 1
    assert stats.rejected_per_ip == {"10.0.0.1": 2, "10.0.0.2": 1}
    assert stats.accepted_per_ip[("PLAINTEXT", "data", "10.0.0.2")] == 1


def test_per_ip_counts_stop_at_the_tracked_address_limit(monkeypatch):
    import twisted_kafka.network.connection_stats as module

    monkeypatch.setattr(module, "MAX_TRACKED_IPS", 2)
    stats = ConnectionStats()
    for ip in ("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.1"):
        stats(event(ConnectionEventKind.ACCEPTED, ip=ip))
        stats(event(ConnectionEventKind.REJECTED, ip=ip, reason="max.connections.per.ip"))
    assert stats.accepted[("PLAINTEXT", "data")] == 4, "the listener totals count every address"
    assert stats.rejected_by_reason("PLAINTEXT", "data")["per_ip"] == 4
    assert set(stats.rejected_per_ip) == {"10.0.0.1", "10.0.0.2"} and stats.rejected_per_ip["10.0.0.1"] == 2


def test_a_tls_handshake_failure_counts_as_tls_not_authentication():
    stats = ConnectionStats()
    stats(event(ConnectionEventKind.AUTHENTICATION_FAILED, listener="SSL",
                reason=f"{TLS_FAILURE_PREFIX}wrong version number"))
    stats(event(ConnectionEventKind.CLOSED, listener="SSL", reason=CloseReason.TLS))
    stats(event(ConnectionEventKind.AUTHENTICATION_FAILED, listener="SSL", reason="invalid credentials"))
    rejected = stats.rejected_by_reason("SSL", "data")
    assert (rejected["tls"], rejected["authentication"]) == (1, 1)
    assert stats.closed_by_reason("SSL", "data")["tls"] == 1

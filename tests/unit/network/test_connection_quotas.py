"""ConnectionQuotas: per-IP limits and overrides (not on the control plane), broker/listener
limits, protected inter-broker and control-plane listeners, creation-rate token buckets,
release exactly once."""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from twisted_kafka.config import ConfigError
from twisted_kafka.network.connection_quotas import ConnectionQuotas, TokenBucket, TooManyConnections
from twisted_kafka.network.listeners import parse_listeners

from .helpers import THREE_LISTENERS, make_config

# Two client listeners beside the inter-broker one, no control plane.
TWO_CLIENT_LISTENERS = {
    "listeners": "CLIENT://127.0.0.1:9092,OTHER://127.0.0.1:9095,INTERNAL://127.0.0.1:9094",
    "listener.security.protocol.map": "CLIENT:PLAINTEXT,OTHER:PLAINTEXT,INTERNAL:PLAINTEXT",
    "inter.broker.listener.name": "INTERNAL",
    "control.plane.listener.name": "",
}


def quotas(props=None, *, resolve=None, **overrides):
    config = make_config(props, **overrides)
    kwargs = {"resolve": resolve} if resolve is not None else {}
    return ConnectionQuotas(config, parse_listeners(config), Clock(), **kwargs)


def test_per_ip_limit_rejects_the_connection_over_it_and_counts_the_rejection():
    q = quotas(max_connections_per_ip="2")
    slots = [q.inc("PLAINTEXT", "10.0.0.1"), q.inc("PLAINTEXT", "10.0.0.1")]
    with pytest.raises(TooManyConnections):
        q.inc("PLAINTEXT", "10.0.0.1")
    q.inc("PLAINTEXT", "10.0.0.2")  # other IPs unaffected
    assert q.rejected[("PLAINTEXT", "max.connections.per.ip")] == 1 and q.rejected_per_ip["10.0.0.1"] == 1
    slots[0].release("client")
    q.inc("PLAINTEXT", "10.0.0.1")
    assert q.per_ip["10.0.0.1"] == 2 and q.total == 3


def test_per_ip_limit_is_shared_by_the_data_plane_listeners_and_spares_the_control_plane():
    """The control plane's connections are the controller's (inter-broker traffic): they
    neither count against their IP's max.connections.per.ip nor are refused by it."""
    q = quotas(THREE_LISTENERS, max_connections_per_ip="2")
    controller = q.inc("CONTROLLER", "10.0.0.1")
    q.inc("CLIENT", "10.0.0.1")
    q.inc("INTERNAL", "10.0.0.1")
    with pytest.raises(TooManyConnections):
        q.inc("CLIENT", "10.0.0.1")
    q.inc("CONTROLLER", "10.0.0.1")
    assert q.per_ip["10.0.0.1"] == 2 and q.per_listener["CONTROLLER"] == 2 and q.total == 4
    controller.release("client")
    assert q.per_ip["10.0.0.1"] == 2 and q.total == 3


def test_overrides_raise_or_lower_one_ip_and_names_are_resolved():
    resolved = {"broker-host": "10.0.0.9", "127.0.0.1": "127.0.0.1"}
    q = quotas(max_connections_per_ip="1", max_connections_per_ip_overrides="broker-host:3,127.0.0.1:0",
               resolve=resolved.__getitem__)
    assert q.ip_limit("10.0.0.9") == 3 and q.ip_limit("127.0.0.1") == 0 and q.ip_limit("10.0.0.5") == 1
    for _ in range(3):
        q.inc("PLAINTEXT", "10.0.0.9")
    with pytest.raises(TooManyConnections):
        q.inc("PLAINTEXT", "10.0.0.9")
    with pytest.raises(TooManyConnections):
        q.inc("PLAINTEXT", "127.0.0.1")


def test_default_may_be_zero_with_overrides():
    q = quotas(max_connections_per_ip="0", max_connections_per_ip_overrides="10.0.0.1:2",
               resolve=lambda host: host)
    q.inc("PLAINTEXT", "10.0.0.1")
    with pytest.raises(TooManyConnections):
        q.inc("PLAINTEXT", "10.0.0.2")


def test_unresolvable_override_fails_naming_the_key():
    def resolve(host):
        raise OSError("no such host")

    with pytest.raises(ConfigError, match="max.connections.per.ip.overrides"):
        quotas(max_connections_per_ip_overrides="nowhere.invalid:3", resolve=resolve)


def test_broker_wide_limit_stops_every_unprotected_listener():
    q = quotas({**TWO_CLIENT_LISTENERS, "max.connections": "2"})
    assert q.limit_reached("CLIENT") is None
    q.inc("CLIENT", "10.0.0.1")
    q.inc("OTHER", "10.0.0.2")
    assert q.limit_reached("CLIENT") == "max.connections"
    assert q.limit_reached("OTHER") == "max.connections"
    assert q.limit_reached("INTERNAL") is None


def test_with_two_listeners_the_inter_broker_and_control_plane_ones_are_protected():
    """etc/server.properties: PLAINTEXT is both the client and the inter-broker listener,
    so (as in Kafka) max.connections does not stop it; nor the control plane, which carries
    the controller's (inter-broker) traffic only."""
    q = quotas(max_connections="1")
    q.inc("PLAINTEXT", "10.0.0.1")
    assert q.limit_reached("PLAINTEXT") is None
    assert q.limit_reached("CONTROLLER") is None


def test_listener_limit_applies_to_its_listener_only():
    q = quotas({"listener.name.plaintext.max.connections": "1"})
    q.inc("PLAINTEXT", "10.0.0.1")
    assert q.limit_reached("PLAINTEXT") == "listener.name.plaintext.max.connections"
    assert q.limit_reached("CONTROLLER") is None


def test_inter_broker_listener_is_exempt_from_the_broker_limit_but_not_its_own():
    q = quotas({**THREE_LISTENERS, "max.connections": "2", "listener.name.internal.max.connections": "3"})
    q.inc("CLIENT", "10.0.0.1")
    q.inc("CLIENT", "10.0.0.2")
    assert q.limit_reached("CLIENT") == "max.connections"
    assert q.limit_reached("CONTROLLER") is None
    assert q.limit_reached("INTERNAL") is None
    q.inc("INTERNAL", "10.0.0.3")
    assert q.over_broker_limit()
    q.inc("INTERNAL", "10.0.0.3")
    q.inc("INTERNAL", "10.0.0.3")
    assert q.limit_reached("INTERNAL") == "listener.name.internal.max.connections"


def test_a_single_listener_is_not_protected():
    q = quotas({"listeners": "PLAINTEXT://127.0.0.1:9092", "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT",
                "control.plane.listener.name": "", "max.connections": "1"})
    q.inc("PLAINTEXT", "10.0.0.1")
    assert q.limit_reached("PLAINTEXT") == "max.connections"


def test_release_is_exactly_once_and_counts_the_close_reason():
    q = quotas()
    freed = []
    q.on_slot_freed(lambda: freed.append(1))
    slot = q.inc("PLAINTEXT", "10.0.0.1")
    slot.release("idle")
    slot.release("client")
    assert q.total == 0 and dict(q.per_ip) == {} and q.per_listener["PLAINTEXT"] == 0
    assert q.closed == {("PLAINTEXT", "idle"): 1}
    assert freed == [1]
    snapshot = q.snapshot()
    assert snapshot["total"] == 0 and snapshot["closed"] == {"PLAINTEXT/idle": 1}


def test_token_bucket_allows_a_one_second_burst_then_paces():
    bucket = TokenBucket(10, now=0.0)
    for _ in range(10):
        assert bucket.delay(0.0) == 0.0
        bucket.take(0.0)
    assert bucket.delay(0.0) == pytest.approx(0.1)
    assert bucket.delay(0.05) == pytest.approx(0.05)
    assert bucket.delay(0.1) == 0.0
    bucket.take(0.1)
    # refill never exceeds one second's worth
    assert bucket.delay(100.0) == 0.0
    for _ in range(10):
        bucket.take(100.0)
    assert bucket.delay(100.0) > 0


def test_token_bucket_with_a_rate_below_one_and_zero():
    slow = TokenBucket(0.5, now=0.0)
    assert slow.delay(0.0) == 0.0
    slow.take(0.0)
    assert slow.delay(0.0) == pytest.approx(2.0)
    zero = TokenBucket(0, now=0.0)
    assert zero.delay(0.0) == TokenBucket.ZERO_RATE_RECHECK
    assert zero.delay(1000.0) == TokenBucket.ZERO_RATE_RECHECK


def test_creation_delay_combines_listener_and_broker_rates_and_exempts_the_protected_listener():
    props = {**TWO_CLIENT_LISTENERS, "max.connection.creation.rate": "2",
             "listener.name.client.max.connection.creation.rate": "1"}
    q = quotas(props)
    q.inc("CLIENT", "10.0.0.1")
    assert q.creation_delay("CLIENT") == pytest.approx(1.0)      # its own bucket of 1/s
    assert q.creation_delay("OTHER") == 0.0                       # broker bucket still has a token
    q.inc("OTHER", "10.0.0.1")
    assert q.creation_delay("OTHER") == pytest.approx(0.5)       # broker bucket empty
    assert q.creation_delay("INTERNAL") == 0.0                    # protected: exempt from the broker rate
    q.clock.advance(0.5)
    assert q.creation_delay("OTHER") == 0.0
    assert q.creation_delay("CLIENT") == pytest.approx(0.5)


def test_the_control_plane_is_exempt_from_the_broker_rate_but_not_its_own():
    q = quotas({**THREE_LISTENERS, "max.connection.creation.rate": "1",
                "listener.name.controller.max.connection.creation.rate": "1"})
    q.inc("CLIENT", "10.0.0.1")
    assert q.creation_delay("CLIENT") == pytest.approx(1.0)
    assert q.creation_delay("CONTROLLER") == 0.0
    q.inc("CONTROLLER", "10.0.0.1")
    assert q.creation_delay("CONTROLLER") == pytest.approx(1.0)

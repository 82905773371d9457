"""ConnectionQuotas at runtime: ip-entity connection creation rates (KIP-612) on a Clock, and the
listener-level limits and rates a dynamic config changes."""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from twisted_kafka.config import ConfigError
from twisted_kafka.network.connection_quotas import (
    UNLIMITED,
    ConnectionQuotas,
    ConnectionRateExceeded,
    format_ip_rates,
    parse_ip_rates,
)
from twisted_kafka.network.listeners import parse_listeners

from .helpers import THREE_LISTENERS, make_config


def make(props=None, **overrides) -> tuple[ConnectionQuotas, Clock]:
    config = make_config(props, **overrides)
    clock = Clock()
    return ConnectionQuotas(config, parse_listeners(config), clock), clock


def test_ip_rates_parse_and_format_round_trip():
    rates = parse_ip_rates("<default>:20, 10.0.0.7:100,::1:5")
    assert rates == {"<default>": 20.0, "10.0.0.7": 100.0, "::1": 5.0}
    assert parse_ip_rates(format_ip_rates(rates)) == rates
    assert parse_ip_rates("") == {}
    for bad in ("10.0.0.7", "host:3", "10.0.0.7:-1", "10.0.0.7:1.5"):
        with pytest.raises(ConfigError):
            parse_ip_rates(bad)


def test_an_ip_over_its_rate_is_refused_until_a_token_is_back():
    q, clock = make({"quota.ip.connection.creation.rate": "10.0.0.1:2,<default>:1"})
    q.inc("PLAINTEXT", "10.0.0.1")
    q.inc("PLAINTEXT", "10.0.0.1")
    with pytest.raises(ConnectionRateExceeded) as exc:
        q.inc("PLAINTEXT", "10.0.0.1")
    assert exc.value.quota == "quota.ip.connection.creation.rate"
    q.inc("PLAINTEXT", "10.0.0.2")                      # the default rate, its own bucket
    with pytest.raises(ConnectionRateExceeded):
        q.inc("PLAINTEXT", "10.0.0.2")
    assert q.rejected[("PLAINTEXT", "quota.ip.connection.creation.rate")] == 2
    assert q.rejected_per_ip == {"10.0.0.1": 1, "10.0.0.2": 1}
    assert q.total == 3, "a refused connection is not counted"
    clock.advance(0.5)
    q.inc("PLAINTEXT", "10.0.0.1")                      # 2/s: one token back after half a second
    with pytest.raises(ConnectionRateExceeded):
        q.inc("PLAINTEXT", "10.0.0.2")                  # 1/s: not yet
    clock.advance(0.5)
    q.inc("PLAINTEXT", "10.0.0.2")


def test_the_control_plane_is_not_subject_to_ip_rates():
    q, _ = make(THREE_LISTENERS, **{"quota.ip.connection.creation.rate": "<default>:1"})
    for _ in range(3):
        q.inc("CONTROLLER", "10.0.0.1")


def test_update_limits_applies_ip_rates_listener_limits_and_rates():
    q, clock = make()
    assert q.ip_rate("10.0.0.1") is None
    updated = make_config({"quota.ip.connection.creation.rate": "10.0.0.1:1",
                           "listener.name.plaintext.max.connections": "5",
                           "listener.name.plaintext.max.connection.creation.rate": "3",
                           "max.connection.creation.rate": "7"})
    q.update_limits(updated)
    assert q.ip_rate("10.0.0.1") == 1.0
    assert q.listener_max_connections["PLAINTEXT"] == 5
    assert q.creation_rates() == {"": 7.0, "PLAINTEXT": 3.0, "CONTROLLER": None}
    q.update_limits(make_config())
    assert q.listener_max_connections["PLAINTEXT"] == UNLIMITED
    assert q.creation_rates() == {"": None, "PLAINTEXT": None, "CONTROLLER": None} and q.ip_rates == {}

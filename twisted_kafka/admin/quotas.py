"""``/v1/quotas``: the connection quotas as one JSON document, read and changed as dynamic broker configs.

The document names Kafka's keys::

    {"max.connections": 100, "max.connections.per.ip": 10,
     "max.connections.per.ip.overrides": {"10.0.0.7": 50},
     "max.connection.creation.rate": 2147483647,
     "listeners": {"PLAINTEXT": {"max.connections": null, "max.connection.creation.rate": null}},
     "ip_connection_creation_rates": {"<default>": 20, "10.0.0.7": 100}}

A PUT carries any part of it.  It becomes this broker's dynamic configs
(``listener.name.<l>.`` for the listener entries, ``host:count`` pairs for the
overrides) and goes through ``AdminManager.alter_broker_configs`` -- the path
of an AlterConfigs request for the broker resource -- so it is validated the
same way, stored by the controller (it survives a restart) and applied to the
running ``ConnectionQuotas``.  ``null`` removes a dynamic value (the static
or default value applies again).

``ip_connection_creation_rates`` are the ``connection_creation_rate`` quotas
of the ``ip`` entity (KIP-612), the state DescribeClientQuotas and
AlterClientQuotas show and change: a PUT sets or (with ``null``) removes the
addresses it names, through ``AdminManager.alter_ip_connection_rates``, the
path of AlterClientQuotas.  As in Kafka, a lower limit refuses the next
connection over it and closes none that is open.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from twisted_kafka.config.prefixes import listener_key_name
from twisted_kafka.network.connection_quotas import DEFAULT_IP, IP_RATES_KEY, parse_ip_rates
from twisted_kafka.protocol.errors import ErrorCode, KafkaError

BROKER_KEYS = ("max.connections", "max.connections.per.ip", "max.connection.creation.rate")
OVERRIDES_KEY = "max.connections.per.ip.overrides"
LISTENER_KEYS = ("max.connections", "max.connection.creation.rate")
IP_RATES = "ip_connection_creation_rates"


def describe(config, listener_names) -> dict:
    """The quotas in force (``config`` is the running ``KafkaConfig``)."""
    doc: dict[str, Any] = {key: config[key] for key in BROKER_KEYS}
    doc[OVERRIDES_KEY] = dict(config.max_connections_per_ip_overrides)
    doc["listeners"] = {name: {key: config.listener_value(name, key) for key in LISTENER_KEYS}
                        for name in listener_names}
    doc[IP_RATES] = {address: int(rate) for address, rate in sorted(parse_ip_rates(config[IP_RATES_KEY]).items())}
    return doc


def ip_rate_updates(body: Any) -> dict[str, float | None]:
    """The ip-entity rate changes a PUT body asks for (None: remove); raises INVALID_REQUEST."""
    if not isinstance(body, Mapping) or body.get(IP_RATES) is None:
        return {}
    value = body[IP_RATES]
    if not isinstance(value, Mapping):
        raise _invalid(f"{IP_RATES} must be an object of address -> rate")
    updates: dict[str, float | None] = {}
    for address, rate in value.items():
        if address != DEFAULT_IP:
            try:
                address = str(ipaddress.ip_address(address))
            except ValueError:
                raise _invalid(f"{IP_RATES}: {address!r} is not an IP address (or {DEFAULT_IP})") from None
        text = _int_value(f"{IP_RATES}[{address}]", rate)
        updates[address] = None if text is None else float(text)
    return updates


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


def _int_value(key: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= 2147483647:
        raise _invalid(f"{key} must be between 0 and 2147483647")
    if isinstance(value, float) and value.is_integer():
        value = int(value)        # JSON has one number type: 5.0 is the integer 5 (as in JSON Schema)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"{key} must be an integer or null")
    return str(value)


def config_updates(body: Any, listener_names) -> dict[str, str | None]:
    """The dynamic-config changes a PUT body asks for (None: remove); raises INVALID_REQUEST."""
    if not isinstance(body, Mapping):
        raise _invalid("the body must be a JSON object")
    updates: dict[str, str | None] = {}
    for key, value in body.items():
        if key in BROKER_KEYS:
            updates[key] = _int_value(key, value)
        elif key == OVERRIDES_KEY:
            if value is None:
                updates[key] = None
                continue
            if not isinstance(value, Mapping):
                raise _invalid(f"{OVERRIDES_KEY} must be an object of host -> limit")
            pairs = []
            for host, limit in value.items():
                limit_text = _int_value(f"{OVERRIDES_KEY}[{host}]", limit)
                if limit_text is None or not isinstance(host, str) or not host or "," in host:
                    raise _invalid(f"{OVERRIDES_KEY} needs a host and an integer limit for every entry")
                pairs.append(f"{host}:{limit_text}")
            updates[key] = ",".join(pairs) if pairs else None
        elif key == "listeners":
            if not isinstance(value, Mapping):
                raise _invalid("listeners must be an object of listener -> limits")
            known = {name.upper(): name for name in listener_names}
            for listener, limits in value.items():
                if not isinstance(listener, str) or listener.upper() not in known:
                    raise _invalid(f"unknown listener {listener!r}")
                if not isinstance(limits, Mapping):
                    raise _invalid(f"listeners.{listener} must be an object")
                for limit_key, limit in limits.items():
                    if limit_key not in LISTENER_KEYS:
                        raise _invalid(f"listeners.{listener}.{limit_key} is not a listener quota "
                                       f"(one of {', '.join(LISTENER_KEYS)})")
                    updates[listener_key_name(known[listener.upper()], limit_key)] = _int_value(
                        f"listeners.{listener}.{limit_key}", limit)
        elif key == IP_RATES:
            continue      # see ip_rate_updates
        else:
            raise _invalid(f"{key} is not a connection quota")
    return updates


def merged(current: Mapping[str, str], updates: Mapping[str, str | None]) -> dict[str, str]:
    """A dynamic layer with ``updates`` applied (None removes the key)."""
    layer = dict(current)
    for key, value in updates.items():
        if value is None:
            layer.pop(key, None)
        else:
            layer[key] = value
    return layer

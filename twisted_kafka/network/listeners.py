"""Listeners: which ports the broker binds, what it advertises, which is the control plane.

Kafka's rules for ``listeners``, ``advertised.listeners``,
``listener.security.protocol.map``, ``inter.broker.listener.name`` and
``control.plane.listener.name`` are checked here, once, at startup: a broker
that starts with a listener layout Kafka would refuse would fail later in ways
far harder to diagnose (clients told to connect to ``0.0.0.0``, a controller
sharing a queue with the data plane it is meant to bypass).  Each failure is a
``ConfigError`` naming the key at fault.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from twisted_kafka.config import ConfigError, ConfigSource
from twisted_kafka.config.csvutil import parse_csv_list

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

# Security protocols whose transport this build can serve: TLS listeners get a
# context each (network/tls.py); SASL runs on the connection whatever carries
# it (twisted_kafka.sasl).
SUPPORTED_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

_LISTENER_RE = re.compile(r"^(?P<name>[A-Za-z0-9_.-]+)://(?P<host>\[[0-9a-fA-F:.]*\]|[^:/\[\]]*):(?P<port>-?\d+)$")


@dataclass(frozen=True, slots=True)
class EndPoint:
    """One ``NAME://host:port`` entry; ``host`` empty means every interface."""

    listener_name: str
    host: str
    port: int
    security_protocol: str

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True, slots=True)
class ListenerConfig:
    """The validated listener layout of one broker."""

    listeners: tuple[EndPoint, ...]
    advertised: tuple[EndPoint, ...]
    inter_broker_listener_name: str
    control_plane_listener_name: str | None

    @property
    def data_plane_listeners(self) -> tuple[EndPoint, ...]:
        return tuple(ep for ep in self.listeners if ep.listener_name != self.control_plane_listener_name)

    @property
    def control_plane_listener(self) -> EndPoint | None:
        for ep in self.listeners:
            if ep.listener_name == self.control_plane_listener_name:
                return ep
        return None

    def advertised_for(self, listener_name: str) -> EndPoint | None:
        for ep in self.advertised:
            if ep.listener_name == listener_name:
                return ep
        return None

    def is_protected(self, listener_name: str) -> bool:
        """Whether a listener carries inter-broker traffic and is exempt from the broker-wide limits.

        Kafka exempts the inter-broker listener from ``max.connections`` and
        ``max.connection.creation.rate`` (when there is more than one
        listener), so brokers can always reach each other; the control-plane
        listener carries only controller traffic, which is inter-broker
        traffic too.  Their own ``listener.name.<l>.`` limits still apply.
        """
        return len(self.listeners) > 1 and listener_name in (self.inter_broker_listener_name,
                                                              self.control_plane_listener_name)

    @property
    def protected_listeners(self) -> frozenset[str]:
        return frozenset(ep.listener_name for ep in self.listeners if self.is_protected(ep.listener_name))

    def counts_per_ip(self, listener_name: str) -> bool:
        """Whether connections on this listener count against their IP's ``max.connections.per.ip``.

        Not on the control plane: its connections are the controller's, which
        shares an address with clients whenever brokers and clients share a
        machine (a single node's controller connects from 127.0.0.1), and must
        not use up a client IP's budget.  Without a control plane the
        controller connects to the inter-broker listener and is counted there
        like any client, as in Kafka.
        """
        return listener_name != self.control_plane_listener_name


def _protocol_map(config) -> dict[str, str]:
    mapping = config.listener_security_protocol_map  # validated by the config layer
    for name, proto in mapping.items():
        if proto.upper() not in SECURITY_PROTOCOLS:
            raise ConfigError("listener.security.protocol.map",
                              f"unknown security protocol {proto!r} for listener {name}; "
                              f"expected one of {', '.join(SECURITY_PROTOCOLS)}")
    return {name.upper(): proto.upper() for name, proto in mapping.items()}


def _parse_endpoints(config, key: str, entries, protocols: dict[str, str], *, advertised: bool) -> tuple[EndPoint, ...]:
    endpoints: list[EndPoint] = []
    for raw in entries:
        match = _LISTENER_RE.match(raw.strip())
        if not match:
            raise ConfigError(key, f"{raw!r} is not of the form LISTENER_NAME://host:port")
        name = match["name"].upper()
        host = match["host"].strip("[]")
        port = int(match["port"])
        if not 0 <= port <= 65535:
            raise ConfigError(key, f"port {port} of listener {name} is out of range")
        if name not in protocols:
            raise ConfigError("listener.security.protocol.map",
                              f"listener {name} (from {key}) has no security protocol; "
                              f"add {name}:<protocol> to listener.security.protocol.map")
        if any(ep.listener_name == name for ep in endpoints):
            raise ConfigError(key, f"listener name {name} appears more than once")
        if advertised and host in ("0.0.0.0", "::"):
            raise ConfigError(key, f"advertised listener {name} uses the meta-address {host!r}; "
                                   "clients cannot connect to it: advertise a routable host name")
        endpoints.append(EndPoint(name, host, port, protocols[name]))
    if not advertised:
        ports = [ep.port for ep in endpoints if ep.port != 0]
        duplicate = {p for p in ports if ports.count(p) > 1}
        if duplicate:
            raise ConfigError(key, f"port {duplicate.pop()} is used by more than one listener")
    return tuple(endpoints)


def parse_listeners(config) -> ListenerConfig:
    """Validate and resolve the listener layout by Kafka's rules (KIP-103 listeners, KIP-291 control plane)."""
    protocols = _protocol_map(config)
    listeners = _parse_endpoints(config, "listeners", parse_csv_list(config["listeners"]), protocols,
                                 advertised=False)
    if not listeners:
        raise ConfigError("listeners", "at least one listener is required")

    advertised_entries = parse_csv_list(config["advertised.listeners"])
    if advertised_entries:
        advertised = _parse_endpoints(config, "advertised.listeners", advertised_entries, protocols, advertised=True)
        names = {ep.listener_name for ep in listeners}
        for ep in advertised:
            if ep.listener_name not in names:
                raise ConfigError("advertised.listeners",
                                  f"advertised listener {ep.listener_name} is not one of listeners")
    else:
        for ep in listeners:
            if ep.host in ("", "0.0.0.0", "::"):
                raise ConfigError("advertised.listeners",
                                  f"listener {ep.listener_name} binds {ep.host or 'every interface'}, "
                                  "so advertised.listeners must name a host clients can reach")
        advertised = listeners

    inter_broker = config["inter.broker.listener.name"]
    security_inter_broker = config.source("security.inter.broker.protocol") != ConfigSource.DEFAULT_CONFIG
    if inter_broker and security_inter_broker:
        raise ConfigError("inter.broker.listener.name",
                          "only one of inter.broker.listener.name and security.inter.broker.protocol may be set")
    if inter_broker:
        inter_broker = inter_broker.upper()
        key = "inter.broker.listener.name"
    else:
        inter_broker = (config["security.inter.broker.protocol"] or "PLAINTEXT").upper()
        key = "security.inter.broker.protocol"
    if all(ep.listener_name != inter_broker for ep in advertised):
        raise ConfigError(key, f"inter-broker listener {inter_broker} must be one of advertised.listeners "
                               f"({', '.join(ep.listener_name for ep in advertised)})")

    control_plane = config["control.plane.listener.name"]
    if control_plane:
        control_plane = control_plane.upper()
        key = "control.plane.listener.name"
        if all(ep.listener_name != control_plane for ep in listeners):
            raise ConfigError(key, f"control plane listener {control_plane} must be one of listeners "
                                   f"({', '.join(ep.listener_name for ep in listeners)})")
        if control_plane == inter_broker:
            raise ConfigError(key, f"control plane listener {control_plane} must differ from the "
                                   "inter-broker listener")
        if control_plane not in protocols:
            raise ConfigError(key, f"control plane listener {control_plane} has no entry in "
                                   "listener.security.protocol.map")
        if all(ep.listener_name != control_plane for ep in advertised):
            raise ConfigError(key, f"control plane listener {control_plane} must be advertised "
                                   "(the controller connects to it)")

    for ep in listeners:
        if ep.security_protocol not in SUPPORTED_SECURITY_PROTOCOLS:
            raise ConfigError("listener.security.protocol.map",
                              f"listener {ep.listener_name} uses {ep.security_protocol}, which this "
                              f"broker does not serve yet (supported: {', '.join(SUPPORTED_SECURITY_PROTOCOLS)})")
    return ListenerConfig(listeners, advertised, inter_broker, control_plane or None)

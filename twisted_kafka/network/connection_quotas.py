"""ConnectionQuotas: one ledger of connections for every listener of both planes.

Kafka bounds connections three ways and this class answers all three, so a
connection is counted once whichever plane it arrived on:

* per IP (``max.connections.per.ip`` and ``max.connections.per.ip.overrides``):
  a connection over the limit is accepted and closed at once.  Connections on
  the control-plane listener are the controller's (inter-broker traffic) and
  are not counted per IP: the controller shares 127.0.0.1, or a host, with
  clients, and must not use up their budget;
* broker-wide and per listener (``max.connections``,
  ``listener.name.<l>.max.connections``): at the limit the acceptor stops
  accepting, so new connections wait in the kernel backlog until one closes;
* creation rate (KIP-612: ``max.connection.creation.rate`` and the listener
  form): accepts are spaced out, never refused.

The inter-broker and control-plane listeners are *protected* when there are
several listeners: they are exempt from the broker-wide limits (not from their
own) so brokers and the controller can always reach each other, and when one
pushes the total over ``max.connections`` the least recently used connection
of an unprotected listener is closed to make room.

Counts are released exactly once per admitted connection, whatever closes it;
``ConnectionSlot.release`` is idempotent so every close path can call it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections import Counter
from collections.abc import Callable

from twisted.logger import Logger

from twisted_kafka.config import ConfigError

from .listeners import ListenerConfig

UNLIMITED = 2147483647
#: Per-IP rate buckets kept before the full ones are dropped.
MAX_IP_BUCKETS = 10_000


class TooManyConnections(Exception):
    """The IP already holds as many connections as it may."""

    quota = "max.connections.per.ip"

    def __init__(self, ip: str, limit: int):
        super().__init__(f"{ip} already has {limit} connection(s), its limit")
        self.ip = ip
        self.limit = limit


class ConnectionRateExceeded(TooManyConnections):
    """The IP opens connections faster than its ``connection_creation_rate`` quota (KIP-612)."""

    quota = IP_RATE_KEY = "quota.ip.connection.creation.rate"

    def __init__(self, ip: str, rate: float):
        Exception.__init__(self, f"{ip} opens connections faster than its connection_creation_rate of {rate:g}/s")
        self.ip = ip
        self.limit = int(rate)


#: The cluster-wide dynamic broker config holding the ip entities' connection_creation_rate (KIP-612).
IP_RATES_KEY = "quota.ip.connection.creation.rate"

#: The name of the default entry in ``quota.ip.connection.creation.rate`` (Kafka's default ip entity).
DEFAULT_IP = "<default>"


def parse_ip_rates(value: str | None) -> dict[str, float]:
    """``quota.ip.connection.creation.rate`` as {address or "<default>": rate}; raises ``ConfigError``."""
    rates: dict[str, float] = {}
    for item in (value or "").split(","):
        item = item.strip()
        if not item:
            continue
        address, sep, rate_text = item.rpartition(":")
        try:
            rate = float(rate_text)
        except ValueError:
            rate = -1.0
        if not sep or not address or rate < 0 or not rate.is_integer():
            raise ConfigError(ConnectionRateExceeded.IP_RATE_KEY,
                              f"{item!r} is not address:rate with a whole number of connections per second")
        if address != DEFAULT_IP:
            try:
                address = str(ipaddress.ip_address(address.strip("[]")))
            except ValueError:
                raise ConfigError(ConnectionRateExceeded.IP_RATE_KEY,
                                  f"{address!r} is not an IP address") from None
        rates[address] = rate
    return rates


def format_ip_rates(rates: dict[str, float]) -> str:
    """The stored form of {address or "<default>": rate} (see ``parse_ip_rates``)."""
    return ",".join(f"{address}:{int(rate)}" for address, rate in sorted(rates.items()))


class TokenBucket:
    """Accept-rate limiter: ``rate`` tokens a second, bursts of at most one second's worth.

    A bucket answers how long to wait before the next accept; it never
    refuses, because Kafka's acceptor throttles rather than rejects when a
    connection creation rate is exceeded.
    """

    #: With a rate of 0 nothing is ever accepted; the acceptor re-checks this often.
    ZERO_RATE_RECHECK = 1.0

    def __init__(self, rate: float, now: float):
        self.rate = float(rate)
        self.capacity = max(1.0, self.rate) if self.rate > 0 else 0.0
        self.tokens = self.capacity
        self.updated = now

    def _refill(self, now: float) -> None:
        if now > self.updated:
            self.tokens = min(self.capacity, self.tokens + (now - self.updated) * self.rate)
            self.updated = now

    def delay(self, now: float) -> float:
        """Seconds until a token is available (0 when one is)."""
        self._refill(now)
        if self.tokens >= 1.0:
            return 0.0
        if self.rate <= 0:
            return self.ZERO_RATE_RECHECK
        return (1.0 - self.tokens) / self.rate

    def take(self, now: float) -> None:
        self._refill(now)
        self.tokens -= 1.0


class ConnectionSlot:
    """One admitted connection's place in the counts; released exactly once."""

    __slots__ = ("_quotas", "listener_name", "ip", "released")

    def __init__(self, quotas: ConnectionQuotas, listener_name: str, ip: str | None):
        self._quotas = quotas
        self.listener_name = listener_name
        self.ip = ip              # None: not counted per IP (control plane)
        self.released = False

    def release(self, reason: str) -> None:
        if not self.released:
            self.released = True
            self._quotas._dec(self, reason)


def _resolve(host: str) -> str:
    return str(socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)[0][4][0])


def resolve_ip_overrides(config, resolve: Callable[[str], str] = _resolve) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` by address: Kafka resolves host names when the value is set."""
    resolved: dict[str, int] = {}
    for host, limit in config.max_connections_per_ip_overrides.items():
        if limit < 0:
            raise ConfigError("max.connections.per.ip.overrides", f"limit for {host} must be at least 0")
        try:
            resolved[resolve(host.strip("[]"))] = limit
        except OSError as exc:
            raise ConfigError("max.connections.per.ip.overrides", f"cannot resolve host {host!r}: {exc}") from None
    return resolved


class ConnectionQuotas:
    """Counts, limits and accept pacing for every listener; see the module docstring."""

    log = Logger(namespace="twisted_kafka.network.ConnectionQuotas")

    def __init__(self, config, listeners: ListenerConfig, clock, *, resolve: Callable[[str], str] = _resolve):
        self.clock = clock
        self.listeners = listeners
        self._resolve = resolve
        self.max_connections_per_ip: int = config["max.connections.per.ip"]
        self.max_connections_per_ip_overrides = resolve_ip_overrides(config, resolve)
        self.max_connections: int = config["max.connections"]
        now = clock.seconds()
        broker_rate = config["max.connection.creation.rate"]
        self._broker_rate = TokenBucket(broker_rate, now) if broker_rate < UNLIMITED else None
        self.listener_max_connections: dict[str, int] = {}
        self._listener_rate: dict[str, TokenBucket] = {}
        for ep in listeners.listeners:
            limit = config.listener_value(ep.listener_name, "max.connections")
            self.listener_max_connections[ep.listener_name] = UNLIMITED if limit is None else limit
            rate = config.listener_value(ep.listener_name, "max.connection.creation.rate")
            if rate is not None and rate < UNLIMITED:
                self._listener_rate[ep.listener_name] = TokenBucket(rate, now)

        self.ip_rates: dict[str, float] = parse_ip_rates(config[ConnectionRateExceeded.IP_RATE_KEY])
        self._ip_buckets: dict[str, TokenBucket] = {}

        self.total = 0
        self.per_listener: Counter[str] = Counter()
        self.per_ip: Counter[str] = Counter()
        # Statistics for operators (the admin endpoint reads these).
        self.accepted: Counter[str] = Counter()
        self.rejected: Counter[tuple[str, str]] = Counter()     # (listener, quota) -> count
        self.rejected_per_ip: Counter[str] = Counter()
        self.closed: Counter[tuple[str, str]] = Counter()       # (listener, reason) -> count
        self.throttled_accepts: Counter[str] = Counter()
        self._slot_freed: list[Callable[[], None]] = []

    # -- limits ---------------------------------------------------------------------

    def ip_limit(self, ip: str) -> int:
        return self.max_connections_per_ip_overrides.get(ip, self.max_connections_per_ip)

    def limit_reached(self, listener_name: str) -> str | None:
        """The key whose limit stops this listener from accepting now, or None."""
        if self.per_listener[listener_name] >= self.listener_max_connections.get(listener_name, UNLIMITED):
            return f"listener.name.{listener_name.lower()}.max.connections"
        if not self.listeners.is_protected(listener_name) and self.total >= self.max_connections:
            return "max.connections"
        return None

    def creation_delay(self, listener_name: str) -> float:
        """Seconds before this listener may accept again under the creation-rate quotas."""
        now = self.clock.seconds()
        delay = 0.0
        bucket = self._listener_rate.get(listener_name)
        if bucket is not None:
            delay = bucket.delay(now)
        if self._broker_rate is not None and not self.listeners.is_protected(listener_name):
            delay = max(delay, self._broker_rate.delay(now))
        return delay

    def over_broker_limit(self) -> bool:
        """True when protected connections have pushed the total past ``max.connections``."""
        return self.total > self.max_connections

    # -- counting -------------------------------------------------------------------

    def inc(self, listener_name: str, ip: str) -> ConnectionSlot:
        """Admit one connection, or raise ``TooManyConnections`` for its IP."""
        per_ip = self.listeners.counts_per_ip(listener_name)
        if per_ip:
            limit = self.ip_limit(ip)
            if self.per_ip[ip] >= limit:
                self.rejected[(listener_name, "max.connections.per.ip")] += 1
                self.rejected_per_ip[ip] += 1
                raise TooManyConnections(ip, limit)
        now = self.clock.seconds()
        if per_ip and self.ip_rates:
            self._take_ip_token(listener_name, ip, now)
        bucket = self._listener_rate.get(listener_name)
        if bucket is not None:
            bucket.take(now)
        if self._broker_rate is not None and not self.listeners.is_protected(listener_name):
            self._broker_rate.take(now)
        if per_ip:
            self.per_ip[ip] += 1
        self.per_listener[listener_name] += 1
        self.total += 1
        self.accepted[listener_name] += 1
        return ConnectionSlot(self, listener_name, ip if per_ip else None)

    def ip_rate(self, ip: str) -> float | None:
        """The connection creation rate quota of ``ip`` (its own, else the default), or None."""
        return self.ip_rates.get(ip, self.ip_rates.get(DEFAULT_IP))

    def _take_ip_token(self, listener_name: str, ip: str, now: float) -> None:
        """Count a new connection of ``ip`` against its rate; raise ``ConnectionRateExceeded`` over it.

        As in Kafka (KIP-612), a connection over its IP's rate is closed at once
        (the client retries after its backoff), not held in the backlog.
        """
        rate = self.ip_rate(ip)
        if rate is None:
            return
        bucket = self._ip_buckets.get(ip)
        if bucket is None or bucket.rate != rate:
            if len(self._ip_buckets) >= MAX_IP_BUCKETS:
                # Addresses whose bucket is full again have no history worth keeping.
                for address, old in list(self._ip_buckets.items()):
                    if old.delay(now) == 0.0 and old.tokens >= old.capacity:
                        del self._ip_buckets[address]
            bucket = self._ip_buckets[ip] = TokenBucket(rate, now)
        if bucket.delay(now) > 0:
            self.rejected[(listener_name, ConnectionRateExceeded.IP_RATE_KEY)] += 1
            self.rejected_per_ip[ip] += 1
            raise ConnectionRateExceeded(ip, rate)
        bucket.take(now)

    def _dec(self, slot: ConnectionSlot, reason: str) -> None:
        if slot.ip is not None:
            self.per_ip[slot.ip] -= 1
            if self.per_ip[slot.ip] <= 0:
                del self.per_ip[slot.ip]
        self.per_listener[slot.listener_name] -= 1
        self.total -= 1
        self.closed[(slot.listener_name, reason)] += 1
        for notify in list(self._slot_freed):
            notify()

    def creation_rates(self) -> dict[str, float | None]:
        """The connection creation rates in force: "" for the broker's, else per listener (None: unlimited)."""
        rates: dict[str, float | None] = {"": self._broker_rate.rate if self._broker_rate is not None else None}
        for ep in self.listeners.listeners:
            bucket = self._listener_rate.get(ep.listener_name)
            rates[ep.listener_name] = bucket.rate if bucket is not None else None
        return rates

    def update_limits(self, config) -> None:
        """Apply new ``max.connections``/``max.connections.per.ip(.overrides)`` and creation rates,
        broker-wide and per listener (dynamic broker configs).

        Raises ``ConfigError`` (and changes nothing) if an override host cannot
        be resolved.  Acceptors paused at the old limit are woken so a raised
        limit admits waiting connections at once.
        """
        overrides = resolve_ip_overrides(config, self._resolve)
        ip_rates = parse_ip_rates(config[ConnectionRateExceeded.IP_RATE_KEY])
        self.ip_rates = ip_rates
        self.max_connections = config["max.connections"]
        self.max_connections_per_ip = config["max.connections.per.ip"]
        self.max_connections_per_ip_overrides = overrides
        now = self.clock.seconds()
        broker_rate = config["max.connection.creation.rate"]
        if broker_rate >= UNLIMITED:
            self._broker_rate = None
        elif self._broker_rate is None or self._broker_rate.rate != broker_rate:
            self._broker_rate = TokenBucket(broker_rate, now)
        for ep in self.listeners.listeners:
            limit = config.listener_value(ep.listener_name, "max.connections")
            self.listener_max_connections[ep.listener_name] = UNLIMITED if limit is None else limit
            rate = config.listener_value(ep.listener_name, "max.connection.creation.rate")
            bucket = self._listener_rate.get(ep.listener_name)
            if rate is None or rate >= UNLIMITED:
                self._listener_rate.pop(ep.listener_name, None)
            elif bucket is None or bucket.rate != rate:
                self._listener_rate[ep.listener_name] = TokenBucket(rate, now)
        for notify in list(self._slot_freed):
            notify()

    def on_slot_freed(self, notify: Callable[[], None]) -> None:
        """Call ``notify`` whenever a connection is released (acceptors resume here)."""
        self._slot_freed.append(notify)

    def remove_slot_freed(self, notify: Callable[[], None]) -> None:
        if notify in self._slot_freed:
            self._slot_freed.remove(notify)

    def record_rejection(self, listener_name: str, quota: str) -> None:
        self.rejected[(listener_name, quota)] += 1

    def snapshot(self) -> dict:
        """Current use and limits, for the admin endpoint and tests."""
        return {
            "total": self.total,
            "max.connections": self.max_connections,
            "per_listener": dict(self.per_listener),
            "listener_limits": dict(self.listener_max_connections),
            "per_ip": dict(self.per_ip),
            "max.connections.per.ip": self.max_connections_per_ip,
            "max.connections.per.ip.overrides": dict(self.max_connections_per_ip_overrides),
            "accepted": dict(self.accepted),
            "rejected": {f"{listener}/{quota}": n for (listener, quota), n in self.rejected.items()},
            "closed": {f"{listener}/{reason}": n for (listener, reason), n in self.closed.items()},
            "throttled_accepts": dict(self.throttled_accepts),
        }

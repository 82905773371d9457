"""Keys the broker accepts but does not act on, and why.

Every Kafka broker key is defined so that a ``server.properties`` written for
Kafka loads unchanged.  Some of them govern features this broker does not
have yet (SASL, transactions, replication, ...) or concepts a single reactor
does not have (network threads).  Accepting such a key silently would let an
operator believe it works: the docs mark each one, and a key set explicitly
is warned about at startup.  A test keeps this table honest both ways — a key
listed here must not be read by the broker, and a key the broker never reads
must be listed here.

Keys Kafka 3.x has deprecated but still accepts are accepted too, so a
configuration or a tool written for Kafka 3.x keeps working: each is warned
about as deprecated when set (``deprecation``), saying whether it still acts.
"""

from __future__ import annotations

SECURITY = "this security feature is not built (GSSAPI, OAUTHBEARER, pluggable classes)"
KIP_890 = ("KIP-890's partition verification is not built: as in Kafka before 3.6, a partition leader "
           "accepts a transactional batch without asking the coordinator whether the partition was added")
REPLICATION = "the broker's own client connections (controller channels, replica fetchers) do not apply it yet"
SOCKET_BUFFERS = "the broker's client connections use the operating system's socket buffer sizes"
ZOOKEEPER = ("the ZooKeeper client (kazoo) pipelines requests without a limit of its own; the session "
             "keys (zookeeper.connect, zookeeper.session.timeout.ms, zookeeper.connection.timeout.ms, "
             "zookeeper.set.acl) take effect")
SASL = ("SASL offers PLAIN and SCRAM-SHA-256/512 (sasl.enabled.mechanisms, the PLAIN users of "
        "listener.name.<l>.plain.sasl.jaas.config, sasl.server.max.receive.size), and the broker's own "
        "connections authenticate with them (sasl.mechanism.inter.broker.protocol); GSSAPI, OAUTHBEARER and "
        "pluggable SASL classes are not built")
METRICS = "metrics are kept under Kafka's names; reporters and sampling are not configurable yet"
REACTOR = ("the reactor's single thread does all socket I/O, so there are no network threads to size "
           "(docs/architecture.md, 'num.network.threads')")
RECOMPRESSION = ("batches are stored as producers compressed them (Kafka's 'producer'); "
                 "recompression to another codec is not built yet")
BACKGROUND = "background work runs on the reactor and the I/O thread pool (sized by num.io.threads)"
TIERED_STORAGE = "tiered storage (KIP-405) is not built: every segment stays in the log directories"
DOWN_CONVERSION = ("Fetch versions that would need batches in message format v0 or v1 (below 4) are not "
                   "offered, so nothing is ever down-converted")

JSSE = ("a setting of Java's TLS implementation (JSSE); TLS here is OpenSSL's, through pyOpenSSL, with "
        "its own defaults")
TLS_VERSION = "the TLS versions offered are ssl.enabled.protocols; OpenSSL has no separate context protocol"

_PREFIXES = {
    "sasl.": SASL,
    "zookeeper.": ZOOKEEPER,
    "metrics.": METRICS,
    "remote.": TIERED_STORAGE,
}

_KEYS = {
    "ssl.protocol": TLS_VERSION,
    "ssl.provider": JSSE,
    "ssl.keymanager.algorithm": JSSE,
    "ssl.trustmanager.algorithm": JSSE,
    "ssl.secure.random.implementation": JSSE,
    "ssl.engine.factory.class": JSSE,
    "connections.max.reauth.ms": ("SASL re-authentication (KIP-368) is not offered: sessions do not expire "
                                  "(SaslAuthenticate answers session_lifetime_ms 0)"),
    "principal.builder.class": SECURITY,
    "security.providers": SECURITY,
    "transaction.partition.verification.enable": KIP_890,
    "compression.type": RECOMPRESSION,
    "compression.gzip.level": RECOMPRESSION,
    "compression.lz4.level": RECOMPRESSION,
    "compression.zstd.level": RECOMPRESSION,
    "log.message.downconversion.enable": DOWN_CONVERSION,
    "log.local.retention.ms": TIERED_STORAGE,
    "log.local.retention.bytes": TIERED_STORAGE,
    "replica.socket.receive.buffer.bytes": SOCKET_BUFFERS,
    "socket.connection.setup.timeout.ms": REPLICATION,
    "socket.connection.setup.timeout.max.ms": REPLICATION,
    "metric.reporters": METRICS,
    "num.network.threads": REACTOR,
    "background.threads": BACKGROUND,
}


#: Why a deprecated key is deprecated, and what it still does here.
MESSAGE_FORMAT = ("deprecated since Kafka 3.0 (KIP-724) and ignored, as Kafka ignores it from inter-broker "
                  "protocol 3.0: batches are stored in message format v2, as produced")
TIMESTAMP_DIFFERENCE = ("deprecated since Kafka 3.6 (KIP-937): the message.timestamp.before.max.ms and "
                        "message.timestamp.after.max.ms keys replace it; it still stands for either of them "
                        "left at its default")

#: Keys Kafka 3.x deprecated but still accepts (broker and topic keys) -> (why, whether they act).
_DEPRECATED: dict[str, tuple[str, bool]] = {
    "log.message.format.version": (MESSAGE_FORMAT, False),
    "message.format.version": (MESSAGE_FORMAT, False),
    "log.message.timestamp.difference.max.ms": (TIMESTAMP_DIFFERENCE, True),
    "message.timestamp.difference.max.ms": (TIMESTAMP_DIFFERENCE, True),
}


def deprecation(name: str) -> str | None:
    """Why key ``name`` (broker or topic key) is deprecated, or None if it is not."""
    entry = _DEPRECATED.get(name)
    return entry[0] if entry else None


# Read although a prefix above matches: the ZooKeeper session's keys (cluster mode) and SASL's.
_EFFECTIVE = frozenset({"zookeeper.connect", "zookeeper.session.timeout.ms", "zookeeper.connection.timeout.ms",
                        "zookeeper.set.acl",
                        "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.server.max.receive.size",
                        "sasl.mechanism.inter.broker.protocol"})


def not_effective_reason(name: str) -> str | None:
    """Why the broker does not act on key ``name``, or None if it does."""
    if name in _EFFECTIVE:
        return None
    deprecated = _DEPRECATED.get(name)
    if deprecated is not None:
        return None if deprecated[1] else deprecated[0]
    reason = _KEYS.get(name)
    if reason is not None:
        return reason
    for prefix, reason in _PREFIXES.items():
        if name.startswith(prefix):
            return reason
    return None

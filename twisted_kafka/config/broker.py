"""``BROKER_CONFIG``: the broker keys this project reads, as Apache Kafka defines them.

Names, types, defaults, validators, importance and dynamic update modes are
those of Apache Kafka 3.9 (the last line with ZooKeeper mode, which this
broker's cluster mode follows); the doc lines are this project's own words.
The keys of the last group, "Extensions", are this project's own
(``extension=True``): Kafka has no such keys.
A key Kafka has but this broker does not define is reported as unknown at
startup instead of being silently accepted, so an operator is never misled
into thinking a setting took effect.
"""

from __future__ import annotations

from typing import Any

from twisted_kafka.security.authorizer import AUTHORIZER_CLASS_NAMES
from twisted_kafka.security.password_encoder import (
    AES_KEY_LENGTHS,
    CIPHER_ALGORITHMS,
    DEFAULT_CIPHER_ALGORITHM,
    DEFAULT_ITERATIONS,
    DEFAULT_KEY_FACTORY_ALGORITHM,
    DEFAULT_KEY_LENGTH,
    KEY_FACTORY_ALGORITHMS,
)

from .definition import ConfigDef, ConfigKey, Importance, UpdateMode
from .types import Type
from .validators import at_least, between, custom, metadata_version, one_of, valid_list

__all__ = [
    "BROKER_CONFIG",
    "SECURITY_PROTOCOLS",
    "COMPRESSION_TYPES",
    "MECHANISM_PREFIX_REQUIRED",
    "LISTENER_RECONFIGURABLE_KEYS",
    "AUTHORIZER_CLASS_NAMES",
]

HIGH, MEDIUM, LOW = Importance.HIGH, Importance.MEDIUM, Importance.LOW
BOOLEAN, SHORT, INT, LONG, DOUBLE = Type.BOOLEAN, Type.SHORT, Type.INT, Type.LONG, Type.DOUBLE
STRING, LIST, PASSWORD, CLASS = Type.STRING, Type.LIST, Type.PASSWORD, Type.CLASS
READ_ONLY = UpdateMode.READ_ONLY
PER_BROKER = UpdateMode.PER_BROKER
CLUSTER_WIDE = UpdateMode.CLUSTER_WIDE

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
DOUBLE_MAX = 1.7976931348623157e308

#: Kafka's SecurityProtocol names, in declaration order.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: Kafka's BrokerCompressionType names.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
#: The order Kafka's docs print the default map in (a Java HashMap's order).
_DEFAULT_PROTOCOL_MAP = "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT"

_keys: list[ConfigKey] = []


def _gzip_level(level: int) -> None:
    """Kafka's gzip levels: Deflater's 1 to 9, or -1 (its default)."""
    if level != -1 and not 1 <= level <= 9:
        raise ValueError("Value must be between 1 and 9 or equal to -1")


def _log_levels(items: list[str]) -> None:
    """logger=LEVEL pairs (the loggers themselves are checked once the broker's modules are loaded)."""
    from twisted_kafka.logging.levels import parse_level_list

    parse_level_list(items)


def _aes_key_length(bits: int) -> None:
    if bits not in AES_KEY_LENGTHS:
        raise ValueError(f"must be an AES key length: {', '.join(map(str, AES_KEY_LENGTHS))}")


def _define(
    name: str,
    type_: Type,
    default: Any,
    importance: Importance,
    doc: str,
    *,
    validator: Any = None,
    mode: UpdateMode = READ_ONLY,
    listener: bool = False,
    mechanism: bool = False,
    default_doc: str | None = None,
    extension: bool = False,
) -> None:
    _keys.append(
        ConfigKey(
            name,
            type_,
            default,
            validator,
            importance,
            doc,
            _group,
            listener_override=listener or mechanism,
            per_mechanism=mechanism,
            update_mode=mode,
            default_doc=default_doc,
            extension=extension,
        )
    )


# --------------------------------------------------------------------------
_group = "Broker"
_define("broker.id", INT, -1, HIGH,
        "This broker's id in the cluster. With the default -1 and "
        "broker.id.generation.enable, an id above reserved.broker.max.id is "
        "generated on first start and remembered in the log directories "
        "(in a ZooKeeper cluster from the sequence /brokers/seqid, so ids are unique).")
_define("broker.id.generation.enable", BOOLEAN, True, MEDIUM,
        "Let the broker generate its id when broker.id is -1 (and none is stored).")
_define("reserved.broker.max.id", INT, 1000, MEDIUM,
        "Highest id an operator may assign; generated ids start above it.",
        validator=at_least(0))
_define("broker.rack", STRING, None, MEDIUM,
        "Rack (or availability zone) of this broker; replica placement spreads "
        "partitions across racks.")
_define("message.max.bytes", INT, 1048588, HIGH,
        "Largest record batch the broker accepts, after compression; "
        "max.message.bytes overrides it per topic.",
        validator=at_least(0), mode=CLUSTER_WIDE)
_define("num.io.threads", INT, 8, HIGH,
        "Number of request handlers of the data plane, which run KafkaApis "
        "for queued requests.",
        validator=at_least(1), mode=CLUSTER_WIDE)
_define("background.threads", INT, 10, HIGH,
        "Workers for background chores such as deleting old segment files.",
        validator=at_least(1), mode=CLUSTER_WIDE)
_define("request.timeout.ms", INT, 30000, HIGH,
        "How long the broker's own clients (inter-broker, controller) wait for "
        "a response before retrying or failing the request.")
_define("socket.connection.setup.timeout.ms", LONG, 10000, MEDIUM,
        "How long the broker's own clients wait for a new connection to be "
        "established before giving up on it.")
_define("socket.connection.setup.timeout.max.ms", LONG, 30000, MEDIUM,
        "Upper bound of the connection setup timeout, which grows "
        "exponentially on consecutive failures.")
_define("delete.topic.enable", BOOLEAN, True, HIGH,
        "Allow DeleteTopics; when false, topic deletion requests are refused.")
_define("auto.create.topics.enable", BOOLEAN, True, HIGH,
        "Create a topic on first use (metadata request for an unknown topic) "
        "with num.partitions and default.replication.factor.")
_define("num.partitions", INT, 1, MEDIUM,
        "Partition count of automatically created topics and of CreateTopics "
        "requests that leave it unset.",
        validator=at_least(1))
_define("default.replication.factor", INT, 1, MEDIUM,
        "Replication factor of automatically created topics and of "
        "CreateTopics requests that leave it unset.")
_define("min.insync.replicas", INT, 1, HIGH,
        "With acks=all, the fewest in-sync replicas that must hold a write for "
        "it to succeed; below that the producer gets NOT_ENOUGH_REPLICAS.",
        validator=at_least(1), mode=CLUSTER_WIDE)
_define("unclean.leader.election.enable", BOOLEAN, False, HIGH,
        "Allow a replica outside the ISR to become leader when no in-sync "
        "replica is left, trading possible data loss for availability.",
        mode=CLUSTER_WIDE)
_define("compression.type", STRING, "producer", HIGH,
        "Compression of stored batches: 'producer' keeps what the producer "
        "sent; a codec name makes the broker store that codec.",
        validator=one_of(*COMPRESSION_TYPES), mode=CLUSTER_WIDE)
_define("compression.gzip.level", INT, -1, MEDIUM,
        "Level of gzip compression when compression.type is gzip; -1 is the codec's default.",
        validator=custom(_gzip_level, "[1,...,9] or -1"), mode=CLUSTER_WIDE)
_define("compression.lz4.level", INT, 9, MEDIUM,
        "Level of lz4 compression when compression.type is lz4.",
        validator=between(1, 17), mode=CLUSTER_WIDE)
_define("compression.zstd.level", INT, 3, MEDIUM,
        "Level of zstd compression when compression.type is zstd.",
        validator=between(-131072, 22), mode=CLUSTER_WIDE)
_define("fetch.max.bytes", INT, 57671680, MEDIUM,
        "Upper bound on the bytes one fetch response carries, whatever the "
        "request asks for.",
        validator=at_least(1024))
_define("max.incremental.fetch.session.cache.slots", INT, 1000, MEDIUM,
        "How many incremental fetch sessions (KIP-227) the broker keeps, consumers' "
        "and followers' together (0: none; every fetch is then a full fetch). When "
        "all slots are taken a new session takes the slot of the least recently "
        "used one idle for over 2 minutes; otherwise that of the session of least "
        "value -- a consumer's before a follower's, then the fewest partitions -- if "
        "the new one is worth more and that session is over 2 minutes old or (for a "
        "follower's new session) a consumer's. A fetcher refused a session keeps to "
        "full fetches.",
        validator=at_least(0))

# --------------------------------------------------------------------------
_group = "Socket server"
_define("socket.send.buffer.bytes", INT, 102400, HIGH,
        "SO_SNDBUF of accepted sockets; -1 leaves the operating system default.")
_define("socket.receive.buffer.bytes", INT, 102400, HIGH,
        "SO_RCVBUF of accepted sockets; -1 leaves the operating system default.")
_define("socket.request.max.bytes", INT, 104857600, HIGH,
        "Largest request frame accepted; a connection announcing a larger (or "
        "negative) size is closed.",
        validator=at_least(1))
_define("socket.listen.backlog.size", INT, 50, MEDIUM,
        "Backlog of pending connections passed to listen() on each listener.",
        validator=at_least(1))
_define("queued.max.requests", INT, 500, HIGH,
        "Capacity of the data-plane request queue; when it is full the network "
        "layer stops reading from data-plane connections.",
        validator=at_least(1))
_define("queued.max.request.bytes", LONG, -1, MEDIUM,
        "Bound on the bytes held by queued requests (KIP-72); -1 means no bound. "
        "When positive it must be at least socket.request.max.bytes.")
_define("num.network.threads", INT, 3, HIGH,
        "Kafka's count of network processor threads per listener. Here the "
        "reactor performs the network I/O; see docs/ for how the key is honoured.",
        validator=at_least(1), mode=CLUSTER_WIDE, listener=True)
_define("connections.max.idle.ms", LONG, 600000, MEDIUM,
        "Close connections that have been idle for this long.")
_define("connection.failed.authentication.delay.ms", INT, 100, LOW,
        "Delay before closing a connection whose authentication failed, to "
        "slow down password guessing; must be below connections.max.idle.ms.",
        validator=at_least(0))

# --------------------------------------------------------------------------
_group = "Listeners"
_define("listeners", STRING, "PLAINTEXT://:9092", HIGH,
        "Comma-separated NAME://host:port endpoints to listen on; an empty host "
        "binds all interfaces. Names other than the four security protocols "
        "need listener.security.protocol.map.",
        mode=PER_BROKER)
_define("advertised.listeners", STRING, None, HIGH,
        "Endpoints given to clients in metadata responses, when they differ "
        "from listeners (NAT, containers). Unset means: use listeners.",
        mode=PER_BROKER)
_define("listener.security.protocol.map", STRING, _DEFAULT_PROTOCOL_MAP, LOW,
        "NAME:PROTOCOL pairs giving each listener name its security protocol "
        "(PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL).",
        mode=PER_BROKER)
_define("inter.broker.listener.name", STRING, None, MEDIUM,
        "Listener other brokers use to reach this one. Unset means the listener "
        "whose name is security.inter.broker.protocol. Set only one of the two.")
_define("security.inter.broker.protocol", STRING, "PLAINTEXT", MEDIUM,
        "Security protocol between brokers, when inter.broker.listener.name is "
        "not set.",
        validator=one_of(*SECURITY_PROTOCOLS))
_define("control.plane.listener.name", STRING, None, HIGH,
        "Listener reserved for controller requests: it gets its own acceptor, "
        "queue (20) and a single handler. Must be one of listeners and differ "
        "from the inter-broker listener. Unset: controller traffic uses the "
        "data plane.")

# --------------------------------------------------------------------------
_group = "Connection quotas"
_define("max.connections.per.ip", INT, INT_MAX, MEDIUM,
        "Most connections allowed from one IP address; a further connection is "
        "accepted and closed at once. 0 is allowed only with overrides. "
        "Connections on the control-plane listener (the controller's) are not "
        "counted.",
        validator=at_least(0), mode=CLUSTER_WIDE)
_define("max.connections.per.ip.overrides", STRING, "", MEDIUM,
        "Per-host or per-IP exceptions to max.connections.per.ip, as "
        "host:count pairs separated by commas.",
        mode=CLUSTER_WIDE)
_define("max.connections", INT, INT_MAX, MEDIUM,
        "Most connections the broker holds; at the limit, listeners stop "
        "accepting until one closes. The inter-broker and control-plane "
        "listeners are exempt (with more than one listener). With the "
        "listener.name.<l>. prefix: a limit for that listener.",
        validator=at_least(0), mode=CLUSTER_WIDE, listener=True)
_define("max.connection.creation.rate", INT, INT_MAX, MEDIUM,
        "Most new connections accepted per second (KIP-612), broker-wide or, "
        "with the listener.name.<l>. prefix, per listener.",
        validator=at_least(0), mode=CLUSTER_WIDE, listener=True)

# --------------------------------------------------------------------------
_group = "Security"
_define("principal.builder.class", CLASS,
        "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder",
        MEDIUM,
        "Builds the principal of an authenticated connection: by default the "
        "TLS subject (after ssl.principal.mapping.rules) or the SASL user name.",
        mode=PER_BROKER, listener=True)
_define("connections.max.reauth.ms", LONG, 0, MEDIUM,
        "Longest life of an authenticated SASL session before the client must "
        "re-authenticate (KIP-368); 0 disables re-authentication.",
        listener=True, mechanism=True)
_define("security.providers", STRING, None, LOW,
        "Java security provider creators; accepted for compatibility, unused here.")
_define("password.encoder.secret", PASSWORD, None, MEDIUM,
        "Secret the key encrypting passwords set at runtime is derived from "
        "(AlterConfigs of listener.name.<l>.ssl.key.password, "
        "listener.name.<l>.<mechanism>.sasl.jaas.config, ...): they are stored "
        "only encrypted, in Kafka's form, and such an AlterConfigs is refused "
        "while this is unset.")
_define("password.encoder.old.secret", PASSWORD, None, MEDIUM,
        "The previous password.encoder.secret, while changing it: stored "
        "passwords are decoded with it and re-encoded with the new secret at "
        "startup. Remove it once the broker has started.")
_define("password.encoder.keyfactory.algorithm", STRING, None, LOW,
        "PBKDF2 variant deriving the encryption key of new encoded passwords; "
        f"unset means {DEFAULT_KEY_FACTORY_ALGORITHM}. Stored values keep the one "
        "they were written with.",
        validator=one_of(*KEY_FACTORY_ALGORITHMS))
_define("password.encoder.cipher.algorithm", STRING, DEFAULT_CIPHER_ALGORITHM, LOW,
        "Cipher of new encoded passwords (Java's transformation names).",
        validator=one_of(*CIPHER_ALGORITHMS))
_define("password.encoder.key.length", INT, DEFAULT_KEY_LENGTH, LOW,
        "Key length, in bits, of new encoded passwords.",
        validator=custom(_aes_key_length, f"[{', '.join(map(str, AES_KEY_LENGTHS))}]"))
_define("password.encoder.iterations", INT, DEFAULT_ITERATIONS, LOW,
        "PBKDF2 iterations of new encoded passwords.",
        validator=at_least(1024))

# --------------------------------------------------------------------------
_group = "TLS"
_define("ssl.protocol", STRING, "TLSv1.3", MEDIUM,
        "TLS protocol used to create the server context.",
        mode=PER_BROKER, listener=True)
_define("ssl.provider", STRING, None, MEDIUM,
        "Name of the security provider for TLS; unused with pyOpenSSL.",
        mode=PER_BROKER, listener=True)
_define("ssl.enabled.protocols", LIST, "TLSv1.2,TLSv1.3", MEDIUM,
        "TLS protocol versions the server accepts.",
        mode=PER_BROKER, listener=True)
_define("ssl.cipher.suites", LIST, "", MEDIUM,
        "Cipher suites to allow; empty means the TLS library's defaults.",
        mode=PER_BROKER, listener=True)
_define("ssl.keystore.type", STRING, "JKS", MEDIUM,
        "Format of the key store: PEM or PKCS12 (JKS, Kafka's default, is a Java "
        "format a TLS listener refuses at startup).",
        mode=PER_BROKER, listener=True)
_define("ssl.keystore.location", STRING, None, MEDIUM,
        "Path of the key store holding the server certificate and private key.",
        mode=PER_BROKER, listener=True)
_define("ssl.keystore.password", PASSWORD, None, MEDIUM,
        "Password of the key store file.",
        mode=PER_BROKER, listener=True)
_define("ssl.key.password", PASSWORD, None, MEDIUM,
        "Password of the private key in the key store (or of the PEM key in "
        "ssl.keystore.key).",
        mode=PER_BROKER, listener=True)
_define("ssl.keystore.key", PASSWORD, None, MEDIUM,
        "The private key itself, PEM-encoded, instead of a key store file "
        "(ssl.keystore.type=PEM).",
        mode=PER_BROKER, listener=True)
_define("ssl.keystore.certificate.chain", PASSWORD, None, MEDIUM,
        "The certificate chain, PEM-encoded, that goes with ssl.keystore.key.",
        mode=PER_BROKER, listener=True)
_define("ssl.truststore.type", STRING, "JKS", MEDIUM,
        "Format of the trust store: PEM or PKCS12 (JKS is refused, as for the "
        "key store).",
        mode=PER_BROKER, listener=True)
_define("ssl.truststore.location", STRING, None, MEDIUM,
        "Path of the trust store with the CA certificates client certificates "
        "are verified against.",
        mode=PER_BROKER, listener=True)
_define("ssl.truststore.password", PASSWORD, None, MEDIUM,
        "Password of the trust store file.",
        mode=PER_BROKER, listener=True)
_define("ssl.truststore.certificates", PASSWORD, None, MEDIUM,
        "Trusted CA certificates, PEM-encoded, instead of a trust store file.",
        mode=PER_BROKER, listener=True)
_define("ssl.keymanager.algorithm", STRING, "SunX509", MEDIUM,
        "Java key manager algorithm; accepted for compatibility, unused here.",
        mode=PER_BROKER, listener=True,
        default_doc="SunX509 (the JVM's default)")
_define("ssl.trustmanager.algorithm", STRING, "PKIX", MEDIUM,
        "Java trust manager algorithm; accepted for compatibility, unused here.",
        mode=PER_BROKER, listener=True,
        default_doc="PKIX (the JVM's default)")
_define("ssl.endpoint.identification.algorithm", STRING, "https", LOW,
        "Host name verification of the peer's certificate when this broker "
        "connects out; empty disables it.",
        mode=PER_BROKER, listener=True)
_define("ssl.secure.random.implementation", STRING, None, LOW,
        "Java SecureRandom implementation; accepted for compatibility, unused here.",
        mode=PER_BROKER, listener=True)
_define("ssl.engine.factory.class", CLASS, None, LOW,
        "Pluggable factory of TLS engines; unused here.",
        mode=PER_BROKER, listener=True)
_define("ssl.client.auth", STRING, "none", MEDIUM,
        "Client certificates on TLS listeners: required, requested (verified "
        "when offered) or none.",
        validator=one_of("required", "requested", "none"),
        mode=PER_BROKER, listener=True)
_define("ssl.principal.mapping.rules", STRING, "DEFAULT", LOW,
        "Rules that turn a certificate subject into a principal name; DEFAULT "
        "keeps the full distinguished name.",
        listener=True)
_define("ssl.allow.dn.changes", BOOLEAN, False, LOW,
        "Allow a dynamically updated key store whose certificate has a "
        "different subject.",
        listener=True)
_define("ssl.allow.san.changes", BOOLEAN, False, LOW,
        "Allow a dynamically updated key store whose certificate has different "
        "subject alternative names.",
        listener=True)

# --------------------------------------------------------------------------
_group = "SASL"
_define("sasl.enabled.mechanisms", LIST, "GSSAPI", MEDIUM,
        "SASL mechanisms offered on SASL listeners; this broker implements "
        "PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 and refuses to start with "
        "another enabled on a SASL listener (so Kafka's default GSSAPI must be "
        "replaced there).",
        mode=PER_BROKER, listener=True)
_define("sasl.mechanism.inter.broker.protocol", STRING, "GSSAPI", MEDIUM,
        "SASL mechanism of the broker's own connections (the controller's, the "
        "replica fetchers') to a SASL control-plane or inter-broker listener: "
        "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, enabled on that listener; the "
        "credentials are the username/password options of that listener's "
        "listener.name.<l>.<mechanism>.sasl.jaas.config.",
        mode=PER_BROKER)
_define("sasl.jaas.config", PASSWORD, None, MEDIUM,
        "JAAS login settings. Brokers read it only per listener and mechanism: "
        "listener.name.<l>.<mechanism>.sasl.jaas.config, mechanism in lower case. "
        "For PLAIN, the PlainLoginModule's user_<name>=\"<password>\" options "
        "are the users; the username/password options of the module for "
        "sasl.mechanism.inter.broker.protocol are the broker's own credentials.",
        mode=PER_BROKER, mechanism=True)
_define("sasl.server.callback.handler.class", CLASS, None, MEDIUM,
        "Pluggable server-side SASL callback handler, set per listener and "
        "mechanism.",
        mechanism=True)
_define("sasl.login.class", CLASS, None, MEDIUM,
        "Pluggable login class, set per listener and mechanism.",
        mechanism=True)
_define("sasl.login.callback.handler.class", CLASS, None, MEDIUM,
        "Pluggable login callback handler, set per listener and mechanism.",
        mechanism=True)
_define("sasl.kerberos.service.name", STRING, None, MEDIUM,
        "Kerberos service name of the broker (GSSAPI only).",
        mode=PER_BROKER, listener=True)
_define("sasl.kerberos.principal.to.local.rules", LIST, "DEFAULT", MEDIUM,
        "Rules mapping Kerberos principals to short names (GSSAPI only).",
        mode=PER_BROKER, listener=True)
_define("sasl.kerberos.kinit.cmd", STRING, "/usr/bin/kinit", MEDIUM,
        "Path of Kerberos' kinit command (GSSAPI only).",
        mode=PER_BROKER, listener=True)
_define("sasl.kerberos.ticket.renew.window.factor", DOUBLE, 0.8, MEDIUM,
        "Share of a Kerberos ticket's lifetime after which its renewal is tried "
        "(GSSAPI only).",
        mode=PER_BROKER, listener=True)
_define("sasl.kerberos.ticket.renew.jitter", DOUBLE, 0.05, MEDIUM,
        "Random share of a Kerberos ticket's lifetime added to its renewal time "
        "(GSSAPI only).",
        mode=PER_BROKER, listener=True)
_define("sasl.kerberos.min.time.before.relogin", LONG, 60000, MEDIUM,
        "Shortest time between two Kerberos logins, in milliseconds (GSSAPI only).",
        mode=PER_BROKER, listener=True)
_define("sasl.login.refresh.window.factor", DOUBLE, 0.8, MEDIUM,
        "Share of a login credential's lifetime after which it is refreshed "
        "(OAUTHBEARER only).",
        mode=PER_BROKER, listener=True)
_define("sasl.login.refresh.window.jitter", DOUBLE, 0.05, MEDIUM,
        "Random share of a login credential's lifetime added to its refresh time "
        "(OAUTHBEARER only).",
        mode=PER_BROKER, listener=True)
_define("sasl.login.refresh.min.period.seconds", SHORT, 60, MEDIUM,
        "Shortest time between two refreshes of a login credential, in seconds "
        "(OAUTHBEARER only).",
        mode=PER_BROKER, listener=True)
_define("sasl.login.refresh.buffer.seconds", SHORT, 300, MEDIUM,
        "Time before a login credential expires that its refresh must happen by, "
        "in seconds (OAUTHBEARER only).",
        mode=PER_BROKER, listener=True)
_define("sasl.server.max.receive.size", INT, 524288, MEDIUM,
        "Largest frame (request or raw SASL token) accepted before SASL "
        "authentication completes; a larger one fails the authentication.",
        listener=True)

# --------------------------------------------------------------------------
_group = "Authorization"
_define("authorizer.class.name", STRING, "", LOW,
        "The authorizer checking every request against the cluster's ACLs: "
        "one of the ACL authorizer's names (Kafka's class names are "
        "accepted); empty disables authorization (everything is allowed, "
        "and the ACL APIs answer SECURITY_DISABLED).",
        validator=one_of("", *AUTHORIZER_CLASS_NAMES))
_define("allow.everyone.if.no.acl.found", BOOLEAN, False, MEDIUM,
        "Read by the ACL authorizer: allow any principal every operation on "
        "a resource that no ACL applies to at all.")
_define("super.users", STRING, None, MEDIUM,
        "Read by the ACL authorizer: principals allowed everything whatever "
        "the ACLs say, separated by semicolons (User:admin;User:broker).")

# --------------------------------------------------------------------------
_group = "Log"
_define("log.dirs", STRING, None, HIGH,
        "Comma-separated directories holding partition logs; when unset, "
        "log.dir is used.")
_define("log.dir", STRING, "/tmp/kafka-logs", HIGH,
        "Single log directory, used only when log.dirs is unset.")
_define("log.segment.bytes", INT, 1073741824, HIGH,
        "Size at which a partition's active segment is rolled; topic key "
        "segment.bytes.",
        validator=at_least(14), mode=CLUSTER_WIDE)
_define("log.roll.ms", LONG, None, HIGH,
        "Age at which the active segment is rolled, in milliseconds; when "
        "unset, log.roll.hours applies. Topic key segment.ms.",
        mode=CLUSTER_WIDE)
_define("log.roll.hours", INT, 168, HIGH,
        "Segment roll age in hours, used when log.roll.ms is unset.",
        validator=at_least(1))
_define("log.roll.jitter.ms", LONG, None, HIGH,
        "Random reduction of the roll age, so that segments of many partitions "
        "do not roll together; when unset, log.roll.jitter.hours applies.",
        mode=CLUSTER_WIDE)
_define("log.roll.jitter.hours", INT, 0, HIGH,
        "Roll jitter in hours, used when log.roll.jitter.ms is unset.",
        validator=at_least(0))
_define("log.retention.ms", LONG, None, HIGH,
        "How long closed segments are kept before deletion; -1 keeps them "
        "forever. Takes precedence over log.retention.minutes and "
        "log.retention.hours. Topic key retention.ms.",
        mode=CLUSTER_WIDE)
_define("log.retention.minutes", INT, None, HIGH,
        "Retention in minutes, used when log.retention.ms is unset.")
_define("log.retention.hours", INT, 168, HIGH,
        "Retention in hours, used when neither log.retention.ms nor "
        "log.retention.minutes is set.")
_define("log.retention.bytes", LONG, -1, HIGH,
        "Size a partition may grow to before its oldest segments are deleted; "
        "-1 means no size limit. Topic key retention.bytes.",
        mode=CLUSTER_WIDE)
_define("log.retention.check.interval.ms", LONG, 300000, MEDIUM,
        "How often the retention task looks for deletable segments.",
        validator=at_least(1))
_define("log.segment.delete.delay.ms", LONG, 60000, HIGH,
        "Grace period between removing a segment from the log and deleting "
        "its files. Topic key file.delete.delay.ms.",
        validator=at_least(0), mode=CLUSTER_WIDE)
_define("log.flush.interval.messages", LONG, LONG_MAX, HIGH,
        "Force an fsync after this many appended records; the default leaves "
        "flushing to the operating system. Topic key flush.messages.",
        validator=at_least(1), mode=CLUSTER_WIDE)
_define("log.flush.interval.ms", LONG, None, HIGH,
        "Force an fsync when unflushed data is this old; when unset, "
        "log.flush.scheduler.interval.ms applies. Topic key flush.ms.",
        mode=CLUSTER_WIDE)
_define("log.flush.scheduler.interval.ms", LONG, LONG_MAX, HIGH,
        "How often the flusher checks whether a log needs an fsync.")
_define("log.flush.offset.checkpoint.interval.ms", INT, 60000, HIGH,
        "How often the recovery-point checkpoint is written.",
        validator=at_least(0))
_define("log.flush.start.offset.checkpoint.interval.ms", INT, 60000, HIGH,
        "How often the log-start-offset checkpoint is written.",
        validator=at_least(0))
_define("log.index.size.max.bytes", INT, 10485760, MEDIUM,
        "Largest offset (and time) index file of a segment; a full index rolls "
        "the segment. Topic key segment.index.bytes.",
        validator=at_least(4), mode=CLUSTER_WIDE)
_define("log.index.interval.bytes", INT, 4096, MEDIUM,
        "Bytes appended between two offset index entries. Topic key "
        "index.interval.bytes.",
        validator=at_least(0), mode=CLUSTER_WIDE)
_define("log.cleanup.policy", LIST, "delete", MEDIUM,
        "What happens to old segments: delete, compact, or both. Topic key "
        "cleanup.policy.",
        validator=valid_list("compact", "delete"), mode=CLUSTER_WIDE)
_define("log.preallocate", BOOLEAN, False, MEDIUM,
        "Preallocate segment files at their full size when they are created. "
        "Topic key preallocate.",
        mode=CLUSTER_WIDE)
_define("log.message.timestamp.type", STRING, "CreateTime", MEDIUM,
        "Which timestamp records keep: the producer's (CreateTime) or the "
        "broker's append time (LogAppendTime).",
        validator=one_of("CreateTime", "LogAppendTime"), mode=CLUSTER_WIDE)
_define("log.message.timestamp.before.max.ms", LONG, LONG_MAX, MEDIUM,
        "With CreateTime, reject batches whose timestamp is further than this "
        "in the past (KIP-937).",
        validator=at_least(0), mode=CLUSTER_WIDE)
_define("log.message.timestamp.after.max.ms", LONG, LONG_MAX, MEDIUM,
        "With CreateTime, reject batches whose timestamp is further than this "
        "in the future (KIP-937).",
        validator=at_least(0), mode=CLUSTER_WIDE)
_define("log.message.timestamp.difference.max.ms", LONG, LONG_MAX, MEDIUM,
        "With CreateTime, reject batches whose timestamp is further than this "
        "from the broker's clock; stands for "
        "log.message.timestamp.before.max.ms and .after.max.ms when they are "
        "left at their default. Topic key message.timestamp.difference.max.ms.",
        validator=at_least(0), mode=CLUSTER_WIDE)
_define("log.message.format.version", STRING, "3.0-IV1", MEDIUM,
        "The message format of appended batches: ignored, batches are stored "
        "in message format v2. Topic key message.format.version.",
        validator=metadata_version())
_define("log.message.downconversion.enable", BOOLEAN, True, LOW,
        "Whether batches may be converted to an older message format for a "
        "fetch that asks for one.",
        mode=CLUSTER_WIDE)
_define("num.recovery.threads.per.data.dir", INT, 1, HIGH,
        "Workers per log directory that load logs at startup and flush them at "
        "shutdown.",
        validator=at_least(1), mode=CLUSTER_WIDE)

# --------------------------------------------------------------------------
_group = "Log cleaner"
_define("log.cleaner.enable", BOOLEAN, True, MEDIUM,
        "Run the log cleaner, which compacts topics with cleanup.policy=compact.")
_define("log.cleaner.threads", INT, 1, MEDIUM,
        "How many logs are cleaned at once (each cleaning works in the I/O "
        "thread pool, one step at a time).",
        validator=at_least(0), mode=CLUSTER_WIDE)
_define("log.cleaner.io.max.bytes.per.second", DOUBLE, DOUBLE_MAX, MEDIUM,
        "Throttle on the cleaner's combined read and write rate, shared by "
        "all cleanings.",
        mode=CLUSTER_WIDE)
_define("log.cleaner.dedupe.buffer.size", LONG, 134217728, MEDIUM,
        "Memory for the key maps the cleaner builds, shared by the cleanings "
        "running at once (more than 1 MiB each); about 136 bytes per key.",
        mode=CLUSTER_WIDE)
_define("log.cleaner.io.buffer.size", INT, 524288, MEDIUM,
        "I/O buffer memory of the cleaner, shared by the cleanings running at "
        "once; half of each share is what one cleaning step reads.",
        validator=at_least(0), mode=CLUSTER_WIDE)
_define("log.cleaner.io.buffer.load.factor", DOUBLE, 0.9, MEDIUM,
        "How full the cleaner's key map may get before a pass stops.",
        mode=CLUSTER_WIDE)
_define("log.cleaner.backoff.ms", LONG, 15000, MEDIUM,
        "Pause of the cleaner when no log needs cleaning.",
        validator=at_least(0), mode=CLUSTER_WIDE)
_define("log.cleaner.min.cleanable.ratio", DOUBLE, 0.5, MEDIUM,
        "Share of a log that must be uncompacted before it is cleaned. Topic "
        "key min.cleanable.dirty.ratio.",
        validator=between(0, 1), mode=CLUSTER_WIDE)
_define("log.cleaner.delete.retention.ms", LONG, 86400000, MEDIUM,
        "How long tombstones and transaction markers survive compaction once "
        "removable, so consumers can see deletes and transaction ends. "
        "Topic key delete.retention.ms.",
        validator=at_least(0), mode=CLUSTER_WIDE)
_define("log.cleaner.min.compaction.lag.ms", LONG, 0, MEDIUM,
        "Youngest a record may be and still be compacted away. Topic key "
        "min.compaction.lag.ms.",
        validator=at_least(0), mode=CLUSTER_WIDE)
_define("log.cleaner.max.compaction.lag.ms", LONG, LONG_MAX, MEDIUM,
        "Oldest an uncompacted record may get before its log is cleaned "
        "regardless of the dirty ratio. Topic key max.compaction.lag.ms.",
        validator=at_least(1), mode=CLUSTER_WIDE)

# --------------------------------------------------------------------------
_group = "Tiered storage"
_define("log.local.retention.ms", LONG, -2, MEDIUM,
        "With tiered storage (KIP-405), how long segments stay in the log "
        "directories once copied to remote storage; -2 means log.retention.ms.",
        validator=at_least(-2), mode=CLUSTER_WIDE)
_define("log.local.retention.bytes", LONG, -2, MEDIUM,
        "With tiered storage, how large a partition's local segments may grow "
        "once copied to remote storage; -2 means log.retention.bytes.",
        validator=at_least(-2), mode=CLUSTER_WIDE)
_define("remote.log.index.file.cache.total.size.bytes", LONG, 1073741824, LOW,
        "With tiered storage, the bytes of remote segments' indexes cached locally.",
        validator=at_least(1), mode=CLUSTER_WIDE)
_define("remote.log.manager.copy.max.bytes.per.second", LONG, LONG_MAX, MEDIUM,
        "With tiered storage, the most bytes per second copied to remote storage.",
        validator=at_least(1), mode=CLUSTER_WIDE)
_define("remote.log.manager.fetch.max.bytes.per.second", LONG, LONG_MAX, MEDIUM,
        "With tiered storage, the most bytes per second read from remote storage.",
        validator=at_least(1), mode=CLUSTER_WIDE)
_define("remote.fetch.max.wait.ms", INT, 500, MEDIUM,
        "With tiered storage, how long a fetch of remote data may wait.",
        validator=at_least(1), mode=CLUSTER_WIDE)

# --------------------------------------------------------------------------
_group = "Replication"
_define("controller.socket.timeout.ms", INT, 30000, MEDIUM,
        "Timeout of the controller's requests to brokers over the control plane.")
_define("replica.lag.time.max.ms", LONG, 30000, HIGH,
        "A follower that has not caught up with the leader for this long "
        "leaves the ISR.")
_define("replica.socket.timeout.ms", INT, 30000, HIGH,
        "Socket timeout of follower fetches; at least replica.fetch.wait.max.ms.")
_define("replica.socket.receive.buffer.bytes", INT, 65536, HIGH,
        "SO_RCVBUF of follower fetch connections.")
_define("replica.fetch.max.bytes", INT, 1048576, MEDIUM,
        "Bytes a follower asks for per partition in one fetch (a larger first "
        "batch is still returned).",
        validator=at_least(0))
_define("replica.fetch.wait.max.ms", INT, 500, HIGH,
        "Longest a follower fetch waits on the leader for data; at most "
        "replica.lag.time.max.ms.")
_define("replica.fetch.min.bytes", INT, 1, HIGH,
        "Bytes a follower fetch waits for before the leader answers.")
_define("replica.fetch.backoff.ms", INT, 1000, MEDIUM,
        "Pause of a follower after a fetch error.",
        validator=at_least(0))
_define("replica.fetch.response.max.bytes", INT, 10485760, MEDIUM,
        "Bytes a follower asks for in one fetch response overall.",
        validator=at_least(0))
_define("num.replica.fetchers", INT, 1, HIGH,
        "Fetchers per source broker that replicate its partitions.",
        mode=CLUSTER_WIDE)
_define("replica.high.watermark.checkpoint.interval.ms", LONG, 5000, HIGH,
        "How often high watermarks are checkpointed to disk.")
_define("auto.leader.rebalance.enable", BOOLEAN, True, HIGH,
        "Let the controller move leadership back to preferred replicas (checked every "
        "leader.imbalance.check.interval.seconds, once the cluster has two brokers).")
_define("leader.imbalance.per.broker.percentage", INT, 10, HIGH,
        "Share of non-preferred leaders on a broker that triggers a rebalance.")
_define("leader.imbalance.check.interval.seconds", LONG, 300, HIGH,
        "How often the controller checks leader balance.",
        validator=at_least(1))

# --------------------------------------------------------------------------
_group = "Controlled shutdown"
_define("controlled.shutdown.enable", BOOLEAN, True, MEDIUM,
        "On shutdown, ask the controller to move leadership away first.")
_define("controlled.shutdown.max.retries", INT, 3, MEDIUM,
        "Attempts of the ControlledShutdown request before an unclean shutdown.")
_define("controlled.shutdown.retry.backoff.ms", LONG, 5000, MEDIUM,
        "Pause between ControlledShutdown attempts.")

# --------------------------------------------------------------------------
_group = "ZooKeeper"
_define("zookeeper.connect", STRING, None, HIGH,
        "host:port[,host:port...][/chroot] of the ZooKeeper ensemble. Set: "
        "cluster mode, where ZooKeeper elects the controller and holds the cluster "
        "state, as in Kafka's ZooKeeper mode. Unset: the single-node embedded controller.")
_define("zookeeper.session.timeout.ms", INT, 18000, HIGH,
        "ZooKeeper session timeout: a broker that stops answering is removed from the "
        "cluster (its registration expires) after this long.")
_define("zookeeper.connection.timeout.ms", INT, None, HIGH,
        "How long to wait for a ZooKeeper connection; when unset, "
        "zookeeper.session.timeout.ms.")
_define("zookeeper.set.acl", BOOLEAN, False, HIGH,
        "Create ZooKeeper nodes with secure ACLs. They need an authenticated "
        "ZooKeeper connection (SASL or TLS), which this broker cannot make yet: "
        "true fails startup, as it does in Kafka without one.")
_define("zookeeper.max.in.flight.requests", INT, 10, HIGH,
        "Unacknowledged ZooKeeper requests allowed before the client blocks.",
        validator=at_least(1))

# --------------------------------------------------------------------------
_group = "Group coordinator"
_define("group.min.session.timeout.ms", INT, 6000, MEDIUM,
        "Shortest session timeout a consumer may ask for when joining a group.")
_define("group.max.session.timeout.ms", INT, 1800000, MEDIUM,
        "Longest session timeout a consumer may ask for when joining a group.")
_define("group.initial.rebalance.delay.ms", INT, 3000, MEDIUM,
        "How long a new (empty) group waits for more members before its first "
        "rebalance completes.")
_define("group.max.size", INT, INT_MAX, MEDIUM,
        "Most members one consumer group may have.",
        validator=at_least(1))
_define("group.coordinator.rebalance.protocols", LIST, "classic,consumer", MEDIUM,
        "The rebalance protocols the group coordinator serves: classic (JoinGroup/SyncGroup) and consumer "
        "(KIP-848's ConsumerGroupHeartbeat, for clients with group.protocol=consumer). Without consumer, "
        "ConsumerGroupHeartbeat and ConsumerGroupDescribe are not advertised and the group.version feature is 0.",
        validator=valid_list("classic", "consumer"))
_define("group.consumer.session.timeout.ms", INT, 45000, MEDIUM,
        "How long a member of a consumer-protocol group may go without a heartbeat before it is removed "
        "and its partitions move.", validator=at_least(1))
_define("group.consumer.min.session.timeout.ms", INT, 45000, MEDIUM,
        "Lower bound of group.consumer.session.timeout.ms.", validator=at_least(1))
_define("group.consumer.max.session.timeout.ms", INT, 60000, MEDIUM,
        "Upper bound of group.consumer.session.timeout.ms.", validator=at_least(1))
_define("group.consumer.heartbeat.interval.ms", INT, 5000, MEDIUM,
        "The heartbeat interval the coordinator gives consumer-protocol members; a member learns of a "
        "new assignment (or of partitions it may now take) at its next heartbeat.", validator=at_least(1))
_define("group.consumer.min.heartbeat.interval.ms", INT, 5000, MEDIUM,
        "Lower bound of group.consumer.heartbeat.interval.ms.", validator=at_least(1))
_define("group.consumer.max.heartbeat.interval.ms", INT, 15000, MEDIUM,
        "Upper bound of group.consumer.heartbeat.interval.ms.", validator=at_least(1))
_define("group.consumer.max.size", INT, INT_MAX, MEDIUM,
        "Most members one consumer-protocol group may have (GROUP_MAX_SIZE_REACHED beyond).",
        validator=at_least(1))
_define("group.consumer.assignors", LIST, "uniform,range", MEDIUM,
        "The server-side assignors consumer-protocol groups may use (a member's group.remote.assignor); "
        "the first is the default. uniform: balanced, sticky, rack-aware; range: per-topic ranges.",
        validator=valid_list("uniform", "range"))

# --------------------------------------------------------------------------
_group = "Offsets"
_define("offset.metadata.max.bytes", INT, 4096, HIGH,
        "Largest metadata string stored with a committed offset.")
_define("offsets.load.buffer.size", INT, 5242880, HIGH,
        "Read size used when loading the offsets topic into memory.",
        validator=at_least(1))
_define("offsets.topic.replication.factor", SHORT, 3, HIGH,
        "Replication factor of __consumer_offsets; creation waits until that "
        "many brokers exist (set 1 for a single broker).",
        validator=at_least(1))
_define("offsets.topic.num.partitions", INT, 50, HIGH,
        "Partition count of __consumer_offsets; fixed once it is created.",
        validator=at_least(1))
_define("offsets.topic.segment.bytes", INT, 104857600, HIGH,
        "Segment size of __consumer_offsets, kept small for fast loading.",
        validator=at_least(1))
_define("offsets.topic.compression.codec", INT, 0, HIGH,
        "Compression codec id of offset commit batches (0 = none).")
_define("offsets.retention.minutes", INT, 10080, HIGH,
        "How long committed offsets of an empty group are kept.",
        validator=at_least(1))
_define("offsets.retention.check.interval.ms", LONG, 600000, HIGH,
        "How often expired offsets are looked for.",
        validator=at_least(1))
_define("offsets.commit.timeout.ms", INT, 5000, HIGH,
        "Longest an offset commit waits for its write to be replicated.",
        validator=at_least(1))

# --------------------------------------------------------------------------
_group = "Transactions"
_define("transactional.id.expiration.ms", INT, 604800000, HIGH,
        "How long an idle transactional id is remembered.",
        validator=at_least(1))
_define("transaction.max.timeout.ms", INT, 900000, HIGH,
        "Longest transaction timeout a producer may ask for.",
        validator=at_least(1))
_define("transaction.state.log.num.partitions", INT, 50, HIGH,
        "Partition count of __transaction_state.",
        validator=at_least(1))
_define("transaction.state.log.replication.factor", SHORT, 3, HIGH,
        "Replication factor of __transaction_state (set 1 for a single broker).",
        validator=at_least(1))
_define("transaction.state.log.min.isr", INT, 2, HIGH,
        "min.insync.replicas of __transaction_state (set 1 for a single broker).",
        validator=at_least(1))
_define("transaction.state.log.segment.bytes", INT, 104857600, HIGH,
        "Segment size of __transaction_state.",
        validator=at_least(1))
_define("transaction.state.log.load.buffer.size", INT, 5242880, HIGH,
        "Read size used when loading __transaction_state into memory.",
        validator=at_least(1))
_define("transaction.abort.timed.out.transaction.cleanup.interval.ms", INT, 10000, LOW,
        "How often transactions past their timeout are aborted.",
        validator=at_least(1))
_define("transaction.remove.expired.transaction.cleanup.interval.ms", INT, 3600000, LOW,
        "How often expired transactional ids are removed.",
        validator=at_least(1))
_define("transaction.partition.verification.enable", BOOLEAN, True, LOW,
        "Check that a partition was added to the transaction before accepting "
        "a transactional write to it (KIP-890).",
        mode=CLUSTER_WIDE)
_define("producer.id.expiration.ms", INT, 86400000, LOW,
        "How long a partition leader keeps the state (epoch, last sequences) of an "
        "idempotent producer after the timestamp of its last batch; a producer "
        "forgotten this way is accepted with any sequence on its next batch.",
        validator=at_least(1), mode=CLUSTER_WIDE)
_define("producer.id.expiration.check.interval.ms", INT, 600000, LOW,
        "How often partition leaders forget producer ids idle for "
        "producer.id.expiration.ms (an internal key in Kafka, for tests).",
        validator=at_least(1))

# --------------------------------------------------------------------------
_group = "Metrics"
_define("metrics.num.samples", INT, 2, LOW,
        "Samples kept per rate or windowed metric.",
        validator=at_least(1))
_define("metrics.sample.window.ms", LONG, 30000, LOW,
        "Length of one metric sample window.",
        validator=at_least(1))
_define("metrics.recording.level", STRING, "INFO", LOW,
        "Highest recording level of metrics that are recorded.")
_define("metric.reporters", LIST, "", LOW,
        "Additional metric reporter classes.",
        mode=CLUSTER_WIDE)

# --------------------------------------------------------------------------
_group = "Extensions"
_define("connection.events.enable", BOOLEAN, True, LOW,
        "Write every connection event of this broker (accepted, rejected by a "
        "connection quota, authentication failed, closed, with listener, plane, "
        "client IP and port, principal, reason and time) to the internal topic "
        "__connection_events, for bin/twisted-kafka-connection-report and "
        "other readers. The topic is created on first use with one partition "
        "and cleanup.policy=delete; retention follows log.retention.*.",
        extension=True)

_define("log.levels", LIST, "", MEDIUM,
        "Levels of the broker's own loggers at start, as logger=LEVEL pairs separated "
        "by commas, e.g. kafka.request.logger=DEBUG,kafka.controller=TRACE: what "
        "log4j.logger.<name>=LEVEL lines of Kafka's log4j.properties say (root=LEVEL "
        "sets the root logger, INFO unless given; --log-level on the command line wins "
        "over it). Names are Kafka's logger names (kafka.controller, "
        "kafka.request.logger, kafka.log.LogCleaner, state.change.logger, ...) or the "
        "broker's own namespaces (twisted_kafka.network.processor, ...); levels are "
        "TRACE, DEBUG, INFO, WARN, ERROR and FATAL, in any case. A name that is no "
        "logger stops startup. Levels change at runtime with IncrementalAlterConfigs "
        "on the BROKER_LOGGER resource of the broker's id (KIP-412); such changes last "
        "until restart (docs/operations.md, \"Logging\").",
        validator=custom(_log_levels, "[logger=LEVEL,...] with LEVEL one of TRACE, DEBUG, INFO, WARN, ERROR, FATAL"),
        extension=True)
_define("log.format", STRING, "text", MEDIUM,
        "Format of the broker's own log lines (where twistd sends them: standard "
        "output, --logfile): text, Twisted's plain lines, or json, one JSON object "
        "per line with timestamp (ISO-8601, UTC), level, logger, message, the "
        "exception's traceback if any, and the event's fields. Not the format of "
        "partitions' logs. With twistd's --syslog the lines stay text.",
        validator=one_of("text", "json"), extension=True)
_define("quota.ip.connection.creation.rate", STRING, "", MEDIUM,
        "Connection creation rates per client IP (KIP-612's connection_creation_rate "
        "of the ip entity), as address:rate pairs separated by commas, <default> "
        "naming the rate of every address without its own. A connection from an "
        "address over its rate is closed at once. Set with AlterClientQuotas or the "
        "admin REST endpoint's PUT /v1/quotas, which store it as a cluster-wide "
        "dynamic broker config (Kafka keeps these quotas under /config/ips).",
        mode=CLUSTER_WIDE, extension=True)
_define("admin.rest.listener", STRING, "http://127.0.0.1:9644", MEDIUM,
        "Where the admin REST endpoint listens (connection statistics, "
        "connection quotas, Prometheus metrics at /metrics, health checks, a "
        "dashboard at /): http://host:port or https://host:port (with "
        "admin.rest.ssl.keystore.location). Port 0 lets the kernel pick; the "
        "port bound is logged. Empty: no admin endpoint. A non-loopback address "
        "needs admin.rest.auth.token (or its file) or https.",
        extension=True)
_define("admin.rest.auth.token", PASSWORD, None, MEDIUM,
        "Bearer token the admin REST endpoint requires (Authorization: Bearer "
        "<token>) for every call but the health checks. Unset: read-only calls "
        "are open and changes are refused.",
        extension=True)
_define("admin.rest.auth.token.file", STRING, None, MEDIUM,
        "File holding admin.rest.auth.token (surrounding whitespace ignored), "
        "read at startup; used when admin.rest.auth.token is not set.",
        extension=True)
_define("admin.rest.ssl.keystore.type", STRING, "PEM", MEDIUM,
        "Format of admin.rest.ssl.keystore.location: PEM or PKCS12, read as a "
        "TLS listener's ssl.keystore.type is.",
        extension=True)
_define("admin.rest.ssl.keystore.location", STRING, None, MEDIUM,
        "Key store of the admin REST endpoint's certificate (chain) and private "
        "key, for an https:// admin.rest.listener: a PEM file with both, or "
        "PKCS12. Re-read by POST /v1/tls/reload and SIGHUP. Protocols and "
        "cipher suites are the broker-wide ssl.enabled.protocols and "
        "ssl.cipher.suites.",
        extension=True)
_define("admin.rest.ssl.keystore.password", PASSWORD, None, MEDIUM,
        "Password of a PKCS12 admin.rest.ssl.keystore.location.",
        extension=True)
_define("admin.rest.ssl.key.password", PASSWORD, None, MEDIUM,
        "Password of an encrypted PEM private key in "
        "admin.rest.ssl.keystore.location.",
        extension=True)
_define("admin.rest.ssl.truststore.type", STRING, "PEM", MEDIUM,
        "Format of admin.rest.ssl.truststore.location: PEM or PKCS12.",
        extension=True)
_define("admin.rest.ssl.truststore.location", STRING, None, MEDIUM,
        "CA certificates (PEM or PKCS12): when set, https clients of the admin "
        "REST endpoint must present a certificate signed by one of them.",
        extension=True)
_define("admin.rest.ssl.truststore.password", PASSWORD, None, MEDIUM,
        "Password of a PKCS12 admin.rest.ssl.truststore.location.",
        extension=True)
_define("admin.rest.request.max.bytes", INT, 65536, MEDIUM,
        "Largest request body the admin REST endpoint accepts, in bytes. A "
        "Content-Length over it is refused with 413 on the request's headers, "
        "before any of the body is read; a chunked body is refused with 413 "
        "once it passes the limit. Bodies are held in memory, never in a file. "
        "The connection is closed after a refusal.",
        validator=at_least(1), extension=True)
_define("admin.rest.request.timeout.ms", INT, 10000, MEDIUM,
        "Time a client of the admin REST endpoint has to send a whole request "
        "(request line, headers and body), counted from the moment the "
        "connection opens or its previous response has been written, not from "
        "the last byte received. When it passes, the connection is closed, "
        "with 408 if part of a request had arrived. An idle keep-alive "
        "connection is closed after the same time.",
        validator=at_least(1), extension=True)
_define("admin.rest.allowed.hosts", LIST, "", MEDIUM,
        "Further names the admin REST endpoint answers to when it has no "
        "admin.rest.auth.token (the Host header's name, the port ignored). "
        "Without a token, a request is served only when its Host names the "
        "endpoint's own address (the listener's host or the address the "
        "connection reached), localhost, or one of these names; any other is "
        "refused with 421 before any work, which keeps web pages from reading "
        "the endpoint through DNS rebinding. Not used with a token.",
        extension=True)

#: Per-mechanism keys a Kafka broker reads *only* in the form
#: listener.name.<l>.<mechanism>.<key>; the listener-level form is ignored.
MECHANISM_PREFIX_REQUIRED = frozenset(
    {
        "sasl.jaas.config",
        "sasl.server.callback.handler.class",
        "sasl.login.class",
        "sasl.login.callback.handler.class",
    }
)

#: Keys AlterConfigs may set for one existing listener (``listener.name.<l>.<key>``) besides the TLS
#: stores, and the only per-listener keys the cluster default may hold: Kafka's
#: ``SocketServer.ListenerReconfigurableConfigs`` and ``DataPlaneAcceptor.ListenerReconfigurableConfigs``
#: (KIP-402, KIP-612), which are also its ``ClusterLevelListenerConfigs``.
LISTENER_RECONFIGURABLE_KEYS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})

#: Every broker key, in documentation order.
BROKER_CONFIG = ConfigDef(_keys)

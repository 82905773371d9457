"""The API registry: every API key this broker can speak, with its advertised range.

The registry is the single source of the ApiVersions response. It knows every
API the codec can carry; which of them a listener actually *serves* is the
server's decision (the keys it has handlers for), passed to
:meth:`ApiRegistry.api_versions_entries`.

The advertised ranges come from the versions each client can send
(librdkafka 2.16 inside confluent-kafka, librdkafka 2.0.2 inside Debian's
kcat 1.7.1, kafka-python 3.0.12, aiokafka 0.14.0) and from these constraints
of theirs:

* librdkafka before 2.11.1 (so kcat) enables a feature only when one exact
  version lies inside the advertised range (``src/rdkafka_feature.c``), and
  compression only when Produce v0 does: the ranges keep Produce 0, 3 and 7;
  Fetch 4 and 10; InitProducerId 0; SaslHandshake 1 with SaslAuthenticate 0;
  FindCoordinator 0; ListOffsets 1;
* aiokafka only has discrete request structs and fails when an advertised
  minimum is above its highest one (``aiokafka/protocol/api.py``), so the
  minimums stay low;
* kafka-python infers a broker version from this table
  (``kafka/protocol/broker_version_data.py``) and picks its record format,
  idempotence and zstd support from it; the full table is inferred as (3, 0)
  or newer (a unit test calls kafka-python's function);
* a maximum is only advertised where the message layout is implemented,
  since clients send the highest version both sides share.

The group APIs: FindCoordinator keeps v0 (old librdkafka's check) and goes
up to the batched v4+ (kafka-python sends v6); JoinGroup 0-7 holds aiokafka's
v5 and v0-v2 structs, SyncGroup 0-5 its v3, Heartbeat and LeaveGroup start at
0 (aiokafka sends v0-v1); OffsetCommit starts at 2, Kafka 4.0's baseline and
inside aiokafka's 2-3, OffsetFetch at 1.  DescribeGroups goes up to 6 as in
Kafka; aiokafka reads its v3 answer with its v2 layout (no authorized
operations), so it misreads an answer describing more than one group --
against Kafka as well.  OffsetDelete has only v0.

The controller APIs (LeaderAndIsr, StopReplica, UpdateMetadata,
ControlledShutdown) are never sent by clients, only by controllers and
brokers: they are served from the first version that carries the receiving
(or, for ControlledShutdown, the sending) broker's epoch -- LeaderAndIsr v2,
StopReplica v1, UpdateMetadata v5, ControlledShutdown v2 (KIP-380) -- since
a request without one cannot be checked against the broker it is meant for.
AlterPartition (56) 0-1, from partition leaders to the controller, is one
of them too (v1 carries the leader recovery state, KIP-704).

ElectLeaders 0-2, AlterPartitionReassignments 0-1 (v1:
``allow_replication_factor_change``, KIP-860) and ListPartitionReassignments
0 are every version kafka-python's message classes have; librdkafka elects
leaders with ElectLeaders v0-v2, kafka-python's admin reassigns with v0.

DescribeClientQuotas and AlterClientQuotas are advertised 0-1 (v1: flexible),
every version Kafka has; they serve the ``ip`` entity (KIP-612).

Describe/AlterUserScramCredentials (KIP-554) have only v0.  SaslHandshake
0-1 and SaslAuthenticate 0-2 are every version Kafka has; which of them a
connection may send when is ``protocol.connection``'s pre-authentication
state.

ListOffsets keeps v0, which Kafka 4.0 removed (KIP-896): Burrow 1.2 (the
Debian package; Sarama 1.22) asks every partition's latest offset with
ListOffsets v0 whatever its ``kafka-version``, and sees no offsets at all
otherwise.  v0's answer is a list of offsets (``max_num_offsets`` of them at
most); the broker answers the one offset v1 would.

DescribeLogDirs is advertised 0-4 (v4: a directory's total and usable
bytes); v5's cordoned directories (KIP-1066) do not exist here.

The transactional APIs (KIP-98): AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn and TxnOffsetCommit are advertised 0-3.  aiokafka has v0 structs
only (hence the minimum 0), kafka-python and librdkafka take the highest
version both sides share; v3 is flexible, and TxnOffsetCommit v3 carries
KIP-447's generation and member id.  AddPartitionsToTxn v4+ is KIP-890's
broker-to-coordinator form and EndTxn/TxnOffsetCommit v5 transaction
version 2, neither built.  WriteTxnMarkers, sent by coordinators to partition
leaders only, has v1 (Kafka 4 removed v0; v2 adds transaction version 2).
DescribeProducers and DescribeTransactions have v0 only; ListTransactions 0-1 (v1: the duration
filter; v2's transactional id pattern is a Java regular expression, not
served).

ACLs are advertised 0-3: kafka-python sends up to v3, aiokafka picks its
highest struct inside the range (DescribeAcls v2, Create/DeleteAcls v1) and
librdkafka uses v0-v1.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import IntEnum

from .messages import MESSAGE_CLASSES, ApiMessage


class ApiKey(IntEnum):
    """Kafka's API keys, named as in ``org.apache.kafka.common.protocol.ApiKeys``."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    LEADER_AND_ISR = 4
    STOP_REPLICA = 5
    UPDATE_METADATA = 6
    CONTROLLED_SHUTDOWN = 7
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    CREATE_DELEGATION_TOKEN = 38
    RENEW_DELEGATION_TOKEN = 39
    EXPIRE_DELEGATION_TOKEN = 40
    DESCRIBE_DELEGATION_TOKEN = 41
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    VOTE = 52
    BEGIN_QUORUM_EPOCH = 53
    END_QUORUM_EPOCH = 54
    DESCRIBE_QUORUM = 55
    ALTER_PARTITION = 56
    UPDATE_FEATURES = 57
    ENVELOPE = 58
    FETCH_SNAPSHOT = 59
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    BROKER_REGISTRATION = 62
    BROKER_HEARTBEAT = 63
    UNREGISTER_BROKER = 64
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


#: Advertised (min, max) per API key; see the module docstring for the reasons.
ADVERTISED_RANGES: dict[ApiKey, tuple[int, int]] = {
    ApiKey.PRODUCE: (0, 10),
    ApiKey.FETCH: (4, 12),
    ApiKey.LIST_OFFSETS: (0, 7),
    ApiKey.METADATA: (0, 13),
    ApiKey.LEADER_AND_ISR: (2, 7),
    ApiKey.STOP_REPLICA: (1, 4),
    ApiKey.UPDATE_METADATA: (5, 8),
    ApiKey.CONTROLLED_SHUTDOWN: (2, 3),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.FIND_COORDINATOR: (0, 6),
    ApiKey.JOIN_GROUP: (0, 7),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (0, 7),
    ApiKey.DELETE_TOPICS: (0, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.WRITE_TXN_MARKERS: (1, 1),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.DESCRIBE_ACLS: (0, 3),
    ApiKey.CREATE_ACLS: (0, 3),
    ApiKey.DELETE_ACLS: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (0, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (0, 4),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 1),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 2),
    ApiKey.ALTER_PARTITION: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
}

#: APIs whose requests are exchanged between the controller and brokers only.
CONTROLLER_API_KEYS = frozenset({
    ApiKey.LEADER_AND_ISR, ApiKey.STOP_REPLICA,
    ApiKey.UPDATE_METADATA, ApiKey.CONTROLLED_SHUTDOWN, ApiKey.ALTER_PARTITION,
})


@dataclass(frozen=True, slots=True)
class ApiSpec:
    """One API: its message classes, advertised range and flexible threshold.

    ``min_version``/``max_version`` are the *advertised* range, not what the
    message classes could represent. ``first_flexible`` is the first version
    that uses KIP-482 compact encodings and tagged fields (``None`` if none do);
    it is read from the message schema, and applies to any version number at
    or above it, including versions newer than the schema knows (which is how
    the header of an ApiVersions v99 request is still parsed as v2).
    """

    api_key: ApiKey
    name: str
    request_class: type[ApiMessage]
    response_class: type[ApiMessage]
    min_version: int
    max_version: int
    first_flexible: int | None

    def is_flexible(self, version: int) -> bool:
        return self.first_flexible is not None and version >= self.first_flexible

    def is_advertised(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def request_header_version(self, version: int) -> int:
        """2 for flexible versions, else 1; ControlledShutdown v0 alone uses header v0
        (it predates the client id field)."""
        if self.is_flexible(version):
            return 2
        if self.api_key == ApiKey.CONTROLLED_SHUTDOWN and version == 0:
            return 0
        return 1

    def response_header_version(self, version: int) -> int:
        """1 (with tagged fields) for flexible versions, else 0. ApiVersions responses
        always use header v0, so a client that does not yet know the broker's
        versions can read the correlation id."""
        if self.api_key == ApiKey.API_VERSIONS:
            return 0
        return 1 if self.is_flexible(version) else 0

    @property
    def schema_max_version(self) -> int:
        """Highest version the message classes can encode and decode."""
        return self.request_class.max_version


def _first_flexible(cls: type[ApiMessage]) -> int | None:
    flexible = cls._flexible_versions
    if flexible is None or flexible[0] < 0:
        return None
    return flexible[0]


class ApiRegistry:
    """Lookup of :class:`ApiSpec` by API key."""

    def __init__(self, specs: Iterable[ApiSpec]):
        self._specs: dict[int, ApiSpec] = {int(spec.api_key): spec for spec in specs}

    def __getitem__(self, api_key: int) -> ApiSpec:
        return self._specs[api_key]

    def get(self, api_key: int) -> ApiSpec | None:
        return self._specs.get(api_key)

    def __contains__(self, api_key: object) -> bool:
        return api_key in self._specs

    def __iter__(self) -> Iterator[ApiSpec]:
        return iter(sorted(self._specs.values(), key=lambda spec: spec.api_key))

    def __len__(self) -> int:
        return len(self._specs)

    def keys(self) -> list[ApiKey]:
        return sorted(spec.api_key for spec in self._specs.values())

    def api_versions_entries(self, served_keys: Iterable[int]) -> list[tuple[int, int, int]]:
        """``(api_key, min_version, max_version)`` for each served key, sorted by key.

        Raises ``KeyError`` for a served key the registry does not know: a
        handler without a codec would answer requests nobody can decode.
        """
        entries = []
        for key in sorted(set(served_keys)):
            spec = self._specs.get(key)
            if spec is None:
                raise KeyError(f"api key {key} has no entry in the protocol registry")
            entries.append((int(spec.api_key), spec.min_version, spec.max_version))
        return entries


def _build_registry() -> ApiRegistry:
    specs = []
    for api_key, (low, high) in ADVERTISED_RANGES.items():
        request_class, response_class = MESSAGE_CLASSES[api_key]
        if high > request_class.max_version or high > response_class.max_version:
            raise AssertionError(f"{api_key.name}: advertised max {high} beyond the schema")
        first_flexible = _first_flexible(request_class)
        if first_flexible != _first_flexible(response_class):
            raise AssertionError(f"{api_key.name}: request and response flexible versions differ")
        specs.append(ApiSpec(
            api_key=api_key,
            name=request_class.json["name"].removesuffix("Request"),
            request_class=request_class,
            response_class=response_class,
            min_version=low,
            max_version=high,
            first_flexible=first_flexible,
        ))
    return ApiRegistry(specs)


REGISTRY = _build_registry()

__all__ = ["ApiKey", "ApiSpec", "ApiRegistry", "REGISTRY", "ADVERTISED_RANGES", "CONTROLLER_API_KEYS"]

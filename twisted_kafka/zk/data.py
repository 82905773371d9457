"""Kafka's ZooKeeper layout: every znode path and JSON format a Kafka 3.x broker uses in ZooKeeper mode.

The paths and the JSON of each znode are Kafka's (``kafka.zk.ZkData``), so
Kafka's tools that read ZooKeeper find what they expect:

==========================================================  ==================================================
znode                                                       content
==========================================================  ==================================================
``/cluster/id``                                             ``{"version":"1","id":"<cluster id>"}``
``/controller`` (ephemeral)                                 ``{"version":2,"brokerid":1,"timestamp":"<ms>",
                                                            "kraftControllerEpoch":-1}``
``/controller_epoch``                                       the epoch as a decimal string
``/brokers/ids/<id>`` (ephemeral)                           registration v5: host, port, endpoints, listener
                                                            map, rack, jmx_port, timestamp, features; its
                                                            czxid is the broker epoch (KIP-380)
``/brokers/seqid``                                          data-less; its version generates broker ids
``/brokers/topics/<t>``                                     ``{"version":3,"topic_id":..,"partitions":{"0":
                                                            [1,2]},"adding_replicas":{},"removing_replicas":{}}``
``/brokers/topics/<t>/partitions/<p>/state``                ``{"version":1,"leader":1,"leader_epoch":0,
                                                            "controller_epoch":1,"isr":[1,2]}`` (plus
                                                            ``leader_recovery_state`` when recovering); the
                                                            znode's version is the partition epoch
``/config/topics/<t>``, ``/config/brokers/<id|<default>>``  ``{"version":1,"config":{...}}``
``/config/changes/config_change_<seq>``                     ``{"version":2,"entity_path":"topics/<t>"}``
``/admin/delete_topics/<t>``                                data-less: topic queued for deletion
``/admin/preferred_replica_election``                       ``{"version":1,"partitions":[{"topic":..,
                                                            "partition":..}]}``
==========================================================  ==================================================

Everything here is pure (bytes in, values out); ``twisted_kafka.zk.client``
does the I/O.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# -- paths ------------------------------------------------------------------------------

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKERS = "/brokers"
BROKER_IDS = "/brokers/ids"
BROKER_SEQUENCE_ID = "/brokers/seqid"
TOPICS = "/brokers/topics"
CONFIG = "/config"
CONFIG_TOPICS = "/config/topics"
CONFIG_BROKERS = "/config/brokers"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"
ADMIN = "/admin"
DELETE_TOPICS = "/admin/delete_topics"
PREFERRED_REPLICA_ELECTION = "/admin/preferred_replica_election"
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
LOG_DIR_EVENT_NOTIFICATION = "/log_dir_event_notification"
#: Producer id blocks (ZkData.ProducerIdBlockZNode): the last block any broker claimed.
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONSUMERS = "/consumers"

#: Config entity types (Kafka's ConfigType) and the cluster-default broker entity (ConfigEntityName.Default).
TOPIC_CONFIG = "topics"
BROKER_CONFIG = "brokers"
DEFAULT_ENTITY = "<default>"

#: The persistent paths a Kafka broker creates at startup (ZkData.PersistentZkPaths), config entity types included.
PERSISTENT_PATHS = (CONSUMERS, BROKER_IDS, TOPICS, CONFIG_CHANGES, DELETE_TOPICS, BROKER_SEQUENCE_ID,
                    ISR_CHANGE_NOTIFICATION, LATEST_PRODUCER_ID_BLOCK, LOG_DIR_EVENT_NOTIFICATION,
                    CONFIG_TOPICS, "/config/clients", "/config/users", CONFIG_BROKERS, "/config/ips")

#: Kafka's KafkaController.InitialControllerEpoch: the value /controller_epoch is created with.
INITIAL_CONTROLLER_EPOCH = 0
#: Kafka's LeaderAndIsr.NoLeader.
NO_LEADER = -1
#: Leader recovery states (KIP-704).
RECOVERED, RECOVERING = 0, 1


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def config_path(entity_type: str, entity: str) -> str:
    return f"{CONFIG}/{entity_type}/{entity}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


# -- JSON -------------------------------------------------------------------------------

def _dumps(value) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode("utf-8")


def _loads(data: bytes | None):
    if not data:
        return None
    return json.loads(data.decode("utf-8"))


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dumps({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(_loads(data)["id"])


def encode_controller(broker_id: int, timestamp_ms: int | None = None) -> bytes:
    timestamp_ms = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return _dumps({"version": 2, "brokerid": broker_id, "timestamp": str(timestamp_ms), "kraftControllerEpoch": -1})


def decode_controller(data: bytes | None) -> int | None:
    value = _loads(data)
    if value is None:
        return None
    if isinstance(value, int):          # a version-1 registration was the bare broker id
        return value
    return int(value["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode("ascii")


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode("ascii"))


# -- broker registration ---------------------------------------------------------------

@dataclass(frozen=True)
class RegisteredEndpoint:
    listener_name: str
    host: str
    port: int
    security_protocol: str

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in (self.host or "") else (self.host or "")
        return f"{self.listener_name}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerInfo:
    """A ``/brokers/ids/<id>`` registration (Kafka's BrokerInfo), with its epoch (the znode's czxid)."""

    broker_id: int
    endpoints: tuple[RegisteredEndpoint, ...]
    rack: str | None = None
    epoch: int = -1
    features: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def encode_broker(broker_id: int, endpoints: Iterable[RegisteredEndpoint], rack: str | None,
                  timestamp_ms: int | None = None) -> bytes:
    """Registration JSON version 5 (Kafka's BrokerIdZNode.encode); host and port are the first PLAINTEXT
    endpoint's, for old clients (empty host and -1 without one)."""
    endpoints = list(endpoints)
    plaintext = next((e for e in endpoints if e.security_protocol == "PLAINTEXT"), None)
    value = {
        "version": 5,
        "host": plaintext.host if plaintext else None,
        "port": plaintext.port if plaintext else -1,
        "endpoints": [e.connection_string for e in endpoints],
        "jmx_port": -1,
        "timestamp": str(int(time.time() * 1000) if timestamp_ms is None else timestamp_ms),
        "listener_security_protocol_map": {e.listener_name: e.security_protocol for e in endpoints},
        "features": {},
    }
    if rack is not None:
        value["rack"] = rack
    return _dumps(value)


def _parse_endpoint(text: str, protocols: Mapping[str, str]) -> RegisteredEndpoint:
    listener, _, address = text.partition("://")
    host, _, port = address.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    protocol = protocols.get(listener, listener)   # v2-v3 registrations named the security protocol
    return RegisteredEndpoint(listener, host, int(port), protocol)


def decode_broker(broker_id: int, data: bytes, czxid: int = -1) -> BrokerInfo:
    value = _loads(data)
    version = int(value["version"])
    if version < 1:
        raise ValueError(f"unsupported broker registration version {version}")
    if version == 1:
        endpoints: tuple[RegisteredEndpoint, ...] = (
            RegisteredEndpoint("PLAINTEXT", value["host"], int(value["port"]), "PLAINTEXT"),)
    else:
        protocols = value.get("listener_security_protocol_map") or {}
        endpoints = tuple(_parse_endpoint(e, protocols) for e in value["endpoints"])
    return BrokerInfo(broker_id, endpoints, value.get("rack"), czxid, value.get("features") or {})


# -- topics -------------------------------------------------------------------------------

@dataclass(frozen=True)
class TopicAssignment:
    """``/brokers/topics/<t>``: the topic id and each partition's replicas (with a reassignment's
    adding and removing replicas)."""

    topic_id: uuid.UUID | None
    partitions: Mapping[int, tuple[int, ...]]
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)


def _kafka_uuid(value: uuid.UUID) -> str:
    """A topic id as Kafka writes one (``Uuid.toString``: 22 characters of URL-safe base64)."""
    import base64
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode("ascii")


def _parse_uuid(text: str) -> uuid.UUID:
    import base64
    if len(text) == 22:
        return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=="))
    return uuid.UUID(text)


def encode_topic(assignment: TopicAssignment) -> bytes:
    value: dict = {
        "version": 3,
        "partitions": {str(p): list(r) for p, r in sorted(assignment.partitions.items())},
        "adding_replicas": {str(p): list(r) for p, r in sorted(assignment.adding.items()) if r},
        "removing_replicas": {str(p): list(r) for p, r in sorted(assignment.removing.items()) if r},
    }
    if assignment.topic_id is not None:
        value["topic_id"] = _kafka_uuid(assignment.topic_id)
    return _dumps(value)


def decode_topic(data: bytes | None) -> TopicAssignment:
    value = _loads(data) or {}
    topic_id = value.get("topic_id")

    def replicas(key: str) -> dict[int, tuple[int, ...]]:
        return {int(p): tuple(int(b) for b in r) for p, r in (value.get(key) or {}).items()}

    return TopicAssignment(_parse_uuid(topic_id) if topic_id else None, replicas("partitions"),
                           replicas("adding_replicas"), replicas("removing_replicas"))


@dataclass(frozen=True)
class PartitionState:
    """``.../partitions/<p>/state`` (Kafka's LeaderIsrAndControllerEpoch); ``version`` is the znode's."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    leader_recovery_state: int = RECOVERED
    version: int = 0


def encode_partition_state(state: PartitionState) -> bytes:
    value = {"version": 1, "leader": state.leader, "leader_epoch": state.leader_epoch,
             "controller_epoch": state.controller_epoch, "isr": list(state.isr)}
    if state.leader_recovery_state != RECOVERED:
        value["leader_recovery_state"] = state.leader_recovery_state
    return _dumps(value)


def decode_partition_state(data: bytes, version: int) -> PartitionState:
    value = _loads(data)
    return PartitionState(int(value["leader"]), int(value["leader_epoch"]), tuple(int(b) for b in value["isr"]),
                          int(value["controller_epoch"]), int(value.get("leader_recovery_state", RECOVERED)),
                          version)


# -- configs ------------------------------------------------------------------------------

def encode_config(configs: Mapping[str, str]) -> bytes:
    return _dumps({"version": 1, "config": dict(sorted(configs.items()))})


def decode_config(data: bytes | None) -> dict[str, str]:
    value = _loads(data)
    if not isinstance(value, dict):
        return {}
    return {str(k): str(v) for k, v in (value.get("config") or {}).items()}


def encode_config_change(entity_type: str, entity: str) -> bytes:
    return _dumps({"version": 2, "entity_path": f"{entity_type}/{entity}"})


def decode_config_change(data: bytes) -> tuple[str, str]:
    """(entity type, entity name) of a change notification (version 1 named them separately)."""
    value = _loads(data)
    if int(value.get("version", 1)) == 1:
        return str(value["entity_type"]), str(value["entity_name"])
    entity_type, _, entity = str(value["entity_path"]).partition("/")
    return entity_type, entity


def config_change_sequence(name: str) -> int:
    return int(name[len(CONFIG_CHANGE_PREFIX):])


# -- admin --------------------------------------------------------------------------------

def encode_partition_list(partitions: Iterable[tuple[str, int]]) -> bytes:
    return _dumps({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


def decode_partition_list(data: bytes | None) -> list[tuple[str, int]]:
    value = _loads(data) or {}
    return [(str(p["topic"]), int(p["partition"])) for p in value.get("partitions", [])]


# -- ACLs (Kafka's ZkAclStore / ZkAclChangeStore) ------------------------------------------------
#
# LITERAL patterns under /kafka-acl/<ResourceType>/<name>, other pattern types under
# /kafka-acl-extended/<pattern type, lower case>/<ResourceType>/<name>; the data is
# {"version": 1, "acls": [{"principal", "permissionType", "operation", "host"}]} with Kafka's upper
# camel case names (SecurityUtils).  A change of a resource's ACLs is announced by a sequential
# node: /kafka-acl-changes/acl_changes_<n> holding "<RESOURCE_TYPE>:<name>" (literal), or
# /kafka-acl-extended-changes/acl_changes_<n> holding {"version": 1, "resourceType", "name", "patternType"}.

ACL_PATH = "/kafka-acl"
EXTENDED_ACL_PATH = "/kafka-acl-extended"
ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"


def acl_root(pattern_type_name: str) -> str:
    """The root holding ACLs of a pattern type (``LITERAL``, ``PREFIXED``)."""
    return ACL_PATH if pattern_type_name == "LITERAL" else f"{EXTENDED_ACL_PATH}/{pattern_type_name.lower()}"


def encode_acl_change(resource_type_name: str, name: str, pattern_type_name: str) -> tuple[str, bytes]:
    """(change path prefix, data) announcing a change of one resource pattern's ACLs."""
    if pattern_type_name == "LITERAL":
        return f"{ACL_CHANGES}/{ACL_CHANGE_PREFIX}", f"{resource_type_name}:{name}".encode()
    return (f"{EXTENDED_ACL_CHANGES}/{ACL_CHANGE_PREFIX}",
            json.dumps({"version": 1, "resourceType": resource_type_name, "name": name,
                        "patternType": pattern_type_name}).encode())

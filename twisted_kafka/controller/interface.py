"""The controller's interface: the types and rules other layers use when they deal with it.

Nothing outside ``controller/`` imports another controller module except
``client.py`` (``ControllerClient``, how a broker asks) -- and
``KafkaServer``, which builds the controller's services
(``tests/unit/test_layers.py`` checks it).  What crosses the boundary is
here: the requests and results of the admin operations, a leader's ISR
change (AlterPartition), a broker's registration as the controller sees it,
the leader value of a partition being deleted, and Kafka's topic-name rules
(``topic_names``), which a broker checks before it asks -- and Kafka's replica
assignment rule (``assign_replicas``, ``AdminUtils.assignReplicasToBrokers``),
which the reassignment tool's ``--generate`` proposes with.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .replica_assignment import assign_replicas
from .topic_names import INTERNAL_TOPICS, validate_topic_name

#: Kafka's LeaderAndIsr.LeaderDuringDelete: in UpdateMetadata, "this partition is being deleted".
LEADER_DURING_DELETE = -2

#: The most partitions one CreateTopics or CreatePartitions request may create.
#: Kafka's controller refuses a user operation that would generate more than
#: 10,000 metadata records -- one per partition -- with POLICY_VIOLATION,
#: "Unable to perform excessively large batch operation" (KAFKA-14996,
#: ``QuorumController.MAX_RECORDS_PER_USER_OP``); here the count is checked
#: before a single partition is planned, so an absurd count costs nothing.
MAX_PARTITIONS_PER_REQUEST = 10_000


def excessive_batch_error(partitions: int) -> KafkaError:
    """POLICY_VIOLATION for a request that would create ``partitions`` (> the per-request limit)."""
    return KafkaError(ErrorCode.POLICY_VIOLATION,
                      f"Unable to perform excessively large batch operation: the request would create "
                      f"{partitions} partitions, and one request may create at most "
                      f"{MAX_PARTITIONS_PER_REQUEST}.")


@dataclass
class NewTopic:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] | None = None
    configs: dict[str, str | None] = field(default_factory=dict)  # None values are refused (INVALID_CONFIG)


@dataclass
class TopicResult:
    name: str
    error: ErrorCode = ErrorCode.NONE
    message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ElectionOutcome:
    """One partition's ElectLeaders result: NONE with the new leader, or an error."""

    error: ErrorCode
    message: str | None = None
    leader: int = -1


@dataclass(frozen=True)
class IsrChange:
    """One partition of a leader's AlterPartition: the epochs it saw, and the ISR it wants."""

    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: int = 0


@dataclass(frozen=True)
class IsrResult:
    """One partition of an AlterPartition answer: the error, and the partition's state after it."""

    error: ErrorCode
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    leader_recovery_state: int = 0


@dataclass(frozen=True)
class ReassignmentState:
    """An ongoing reassignment: all replicas, the ones being added and the ones being removed."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True)
class LiveBroker:
    """A registered broker: what the controller needs to reach and describe it."""

    broker_id: int
    epoch: int
    endpoints: tuple  # advertised EndPoints (listener_name, host, port, security_protocol)
    control_listener: str  # listener the controller talks to (control plane, else inter-broker)
    rack: str | None = None
    #: Most partitions the broker takes on (derived from its open-file limit); None: no limit.
    partition_budget: int | None = None

    def endpoint(self, listener_name: str):
        for ep in self.endpoints:
            if ep.listener_name == listener_name:
                return ep
        return None


__all__ = ["assign_replicas", "LEADER_DURING_DELETE", "MAX_PARTITIONS_PER_REQUEST", "excessive_batch_error",
           "NewTopic", "TopicResult", "ElectionOutcome", "IsrChange", "IsrResult", "ReassignmentState", "LiveBroker",
           "INTERNAL_TOPICS", "validate_topic_name"]

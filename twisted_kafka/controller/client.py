"""ControllerClient: how a broker asks the active controller to change the cluster.

In Kafka's ZooKeeper mode, topic administration and controlled shutdown are
the controller's: a broker that receives CreateTopics writes to ZooKeeper for
the controller to act on, and a stopping broker sends ControlledShutdown to
the controller.  The broker side here depends only on this interface:

* ``LocalControllerClient`` -- the controller runs in this broker's process
  (the single node, or the cluster member that won the election);
* ``NoControllerClient`` -- this broker cannot reach a controller: every call
  fails with NOT_CONTROLLER, which clients retry elsewhere;
* ``ClusterControllerClient`` (``cluster_client.py``) -- a ZooKeeper
  cluster: topic and config changes are written to ZooKeeper for the
  controller to act on (any broker may), the rest goes to the active
  controller -- this broker's, or another's over its control plane.

The broker never touches the controller's objects (its store, its channels,
its in-memory state); what it needs to know about topics and configs reaches
it over its control plane in UpdateMetadata, as it would from a remote
controller.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.security.acl import AclBinding, AclBindingFilter

from .interface import ElectionOutcome, IsrResult, NewTopic, ReassignmentState, TopicResult

if TYPE_CHECKING:
    from .kafka_controller import KafkaController

#: The client id a broker's requests to the controller carry ends with this: the controller's broker
#: answers them itself and never forwards them again (two brokers briefly disagreeing about who the
#: controller is must not pass a request back and forth).
FORWARDED_SUFFIX = "-to-controller"


def forwarding_client_id(broker_id: int) -> str:
    return f"broker-{broker_id}{FORWARDED_SUFFIX}"


def forwarded(client_id: str | None) -> bool:
    """Whether a request came from another broker on its way to the controller."""
    return bool(client_id) and str(client_id).endswith(FORWARDED_SUFFIX)


class ControllerClient(ABC):
    """The controller's operations, as a broker calls them; each raises ``KafkaError`` on failure."""

    @property
    @abstractmethod
    def controller_id(self) -> int | None:
        """The broker id of the active controller as this broker knows it (ZooKeeper's
        ``/controller`` in a cluster), or None: the only sender whose controller
        requests this broker accepts."""

    @abstractmethod
    async def create_topics(self, topics: list[NewTopic], *, validate_only: bool = False,
                            wait_for_brokers: bool = True, timeout_ms: int | None = None) -> list[TopicResult]:
        """One result per topic, in order; see ``KafkaController.create_topics``."""

    @abstractmethod
    async def delete_topics(self, names: list[str], *, wait_for_brokers: bool = True,
                            timeout_ms: int | None = None) -> dict[str, TopicResult]:
        """One result per distinct name."""

    @abstractmethod
    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None, *,
                                validate_only: bool = False, wait_for_brokers: bool = True,
                                timeout_ms: int | None = None) -> None:
        """Grow a topic to ``count`` partitions."""

    @abstractmethod
    async def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        """Replace a topic's config overrides; brokers are told before this returns."""

    @abstractmethod
    async def alter_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of a broker id or "" (the cluster default); brokers are told first."""

    @abstractmethod
    async def create_acls(self, bindings: list[AclBinding], *, forward: bool = True
                          ) -> list[tuple[ErrorCode, str | None]]:
        """Add ACL bindings; per binding (error, message).  Brokers hold them when this returns."""

    @abstractmethod
    async def delete_acls(self, filters: list[AclBindingFilter], *, forward: bool = True) -> list[list[AclBinding]]:
        """Remove the bindings each filter matches; per filter the removed bindings."""

    # The controller's own operations.  ``forward`` False: only this broker's controller may answer
    # (NOT_CONTROLLER otherwise) -- a request forwarded by another broker is never sent on again.

    @abstractmethod
    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """Move leadership off a stopping broker; the partitions it still leads.  (Asked for another
        broker -- a ControlledShutdown received -- only the active controller answers.)"""

    @abstractmethod
    async def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None, *,
                            timeout_ms: int, forward: bool = True) -> dict[tuple[str, int], ElectionOutcome]:
        """ElectLeaders: per partition (None: every partition) the error, message and elected leader."""

    @abstractmethod
    async def alter_partition_reassignments(self, targets: dict[tuple[str, int], list[int] | None], *,
                                            allow_replication_factor_change: bool = True, timeout_ms: int = 0,
                                            forward: bool = True,
                                            ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments: per partition (error, message)."""

    @abstractmethod
    async def list_partition_reassignments(self, partitions: list[tuple[str, int]] | None, *, timeout_ms: int = 0,
                                           forward: bool = True) -> dict[tuple[str, int], ReassignmentState]:
        """ListPartitionReassignments: the ongoing reassignments among ``partitions`` (None: all)."""


    async def alter_partition(self, broker_id: int, broker_epoch: int, changes: dict, *,
                              forward: bool = True) -> dict[tuple[str, int], IsrResult]:
        """AlterPartition (56) from a partition leader: ``changes`` maps (topic, partition) to the
        controller's ``IsrChange``; per partition the outcome.  Only a cluster has other leaders."""
        raise KafkaError(ErrorCode.NOT_CONTROLLER, "This broker is not the active controller")


class LocalControllerClient(ControllerClient):
    """The controller in this process."""

    def __init__(self, controller: KafkaController):
        self._controller = controller

    @property
    def controller_id(self) -> int | None:
        return self._controller.broker_id if self._controller.active else None

    async def create_topics(self, topics, *, validate_only=False, wait_for_brokers=True, timeout_ms=None):
        return await self._controller.create_topics(topics, validate_only=validate_only,
                                                    wait_for_brokers=wait_for_brokers, timeout_ms=timeout_ms)

    async def delete_topics(self, names, *, wait_for_brokers=True, timeout_ms=None):
        return await self._controller.delete_topics(names, wait_for_brokers=wait_for_brokers, timeout_ms=timeout_ms)

    async def create_partitions(self, name, count, assignments, *, validate_only=False, wait_for_brokers=True,
                                timeout_ms=None):
        await self._controller.create_partitions(name, count, assignments, validate_only=validate_only,
                                                 wait_for_brokers=wait_for_brokers, timeout_ms=timeout_ms)

    async def alter_topic_configs(self, name, configs, *, validate_only=False):
        await self._controller.alter_topic_configs(name, configs, validate_only=validate_only)

    async def alter_broker_configs(self, entity, configs):
        await self._controller.alter_broker_configs(entity, configs)

    async def create_acls(self, bindings, *, forward=True):
        return await self._controller.create_acls(bindings)

    async def delete_acls(self, filters, *, forward=True):
        return await self._controller.delete_acls(filters)

    async def controlled_shutdown(self, broker_id, broker_epoch):
        return await self._controller.controlled_shutdown(broker_id, broker_epoch)

    async def elect_leaders(self, election_type, partitions, *, timeout_ms, forward=True):
        from .election import ElectionType

        return await self._controller.elect_leaders(ElectionType(election_type), partitions)

    async def alter_partition_reassignments(self, targets, *, allow_replication_factor_change=True, timeout_ms=0,
                                            forward=True):
        return await self._controller.alter_partition_reassignments(
            targets, allow_replication_factor_change=allow_replication_factor_change)

    async def list_partition_reassignments(self, partitions, *, timeout_ms=0, forward=True):
        return self._controller.list_partition_reassignments(partitions)

    async def alter_partition(self, broker_id, broker_epoch, changes, *, forward=True):
        controller = self._controller
        errors = await controller.alter_partition(broker_id, broker_epoch, changes)
        results = {}
        for (name, index), error in errors.items():
            topic = controller.topics.get(name)
            record = topic.partitions.get(index) if topic is not None else None
            if error != ErrorCode.NONE or record is None:
                results[(name, index)] = IsrResult(error)
            else:
                results[(name, index)] = IsrResult(error, record.leader, record.leader_epoch, tuple(record.isr),
                                                   record.partition_epoch, record.leader_recovery_state)
        return results


class NoControllerClient(ControllerClient):
    """No controller is reachable from this broker: every operation is NOT_CONTROLLER."""

    @property
    def controller_id(self) -> int | None:
        return None

    @staticmethod
    def _refuse():
        raise KafkaError(ErrorCode.NOT_CONTROLLER, "This broker is not the active controller")

    async def create_topics(self, topics, *, validate_only=False, wait_for_brokers=True, timeout_ms=None):
        self._refuse()

    async def delete_topics(self, names, *, wait_for_brokers=True, timeout_ms=None):
        self._refuse()

    async def create_partitions(self, name, count, assignments, *, validate_only=False, wait_for_brokers=True,
                                timeout_ms=None):
        self._refuse()

    async def alter_topic_configs(self, name, configs, *, validate_only=False):
        self._refuse()

    async def alter_broker_configs(self, entity, configs):
        self._refuse()

    async def create_acls(self, bindings, *, forward=True):
        self._refuse()

    async def delete_acls(self, filters, *, forward=True):
        self._refuse()

    async def controlled_shutdown(self, broker_id, broker_epoch):
        self._refuse()

    async def elect_leaders(self, election_type, partitions, *, timeout_ms, forward=True):
        self._refuse()

    async def alter_partition_reassignments(self, targets, *, allow_replication_factor_change=True, timeout_ms=0,
                                            forward=True):
        self._refuse()

    async def list_partition_reassignments(self, partitions, *, timeout_ms=0, forward=True):
        self._refuse()


__all__ = ["ControllerClient", "LocalControllerClient", "NoControllerClient", "forwarded", "forwarding_client_id",
           "FORWARDED_SUFFIX"]

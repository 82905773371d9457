"""ClusterControllerClient: how a broker of a ZooKeeper cluster asks for cluster changes.

Two kinds of operations, as in Kafka's ZooKeeper mode:

* **through ZooKeeper** -- topic creation, deletion, new partitions, topic
  and broker configs.  The broker that received the request validates and
  plans it (``admin_rules``, against the live brokers of its metadata
  cache and the topics in ZooKeeper) and writes it (``ZkAdmin``: Kafka's
  ``AdminZkClient``); the controller's watches do the rest.  The broker then
  waits -- at most the request's timeout -- until its own metadata shows the
  change (Kafka's delayed CreateTopics / DeleteTopics / CreatePartitions),
  so a client's next request to it finds the topic.  Any broker may take
  these requests;
* **to the controller** -- ControlledShutdown (v3, with this broker's epoch),
  ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments:
  called directly when this broker is the active controller, otherwise sent
  over the network to the controller's control plane (its inter-broker
  listener without one; authenticated as the controller's channels are on a
  SASL one), found through ``/controller`` and its
  ``/brokers/ids`` registration, and the answer passed back.  Without a
  controller: NOT_CONTROLLER, which clients retry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.task import deferLater
from twisted.logger import Logger

from twisted_kafka.client import KafkaClientProtocol, KafkaConnectionError, connect
from twisted_kafka.client.listener_credentials import ListenerCredentials
from twisted_kafka.config import ConfigError
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.security.acl import AclBinding, AclBindingFilter
from twisted_kafka.zk.admin import ZkAdmin

from .admin_rules import (
    check_topic_config_change,
    created_topic_result,
    plan_partitions,
    plan_topic,
    refused_deletions,
    unknown_deletion,
    unknown_topic,
)
from .client import ControllerClient, LocalControllerClient, forwarding_client_id
from .interface import ElectionOutcome, IsrResult, NewTopic, ReassignmentState, TopicResult
from .topic_names import collision_key

CONTROLLED_SHUTDOWN_VERSION = 3
ELECT_LEADERS_VERSION = 2
ALTER_REASSIGNMENTS_VERSION = 1
LIST_REASSIGNMENTS_VERSION = 0
ALTER_PARTITION_VERSION = 1
ACLS_VERSION = 1
#: How long AlterConfigs waits for this broker to apply a config it wrote to ZooKeeper.
CONFIG_WAIT_MS = 10_000


class ControllerLink:
    """One connection to the active controller, re-made when the controller moves."""

    log = Logger(namespace="twisted_kafka.controller.ControllerLink")

    def __init__(self, *, reactor, admin: ZkAdmin, listener_name: str, client_id: str, timeout: float,
                 config=None):
        self.reactor = reactor
        # for the listener's ssl.* keys (SSL / SASL_SSL) and SASL credentials (SASL_PLAINTEXT / SASL_SSL)
        self.config = config
        self.admin = admin
        self.listener_name = listener_name
        self.client_id = client_id
        self.timeout = timeout
        self._client: KafkaClientProtocol | None = None
        self._controller_id: int | None = None

    async def request(self, controller_id: int, body, version: int):
        client = await self._connected(controller_id)
        try:
            return await client.request(body, version)
        except KafkaConnectionError as exc:
            self.close()
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"lost the connection to controller {controller_id}: "
                                                       f"{exc}") from None

    async def _connected(self, controller_id: int) -> KafkaClientProtocol:
        if self._client is not None and self._client.is_open and self._controller_id == controller_id:
            return self._client
        self.close()
        broker = await self.admin.broker(controller_id)
        if broker is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"controller {controller_id} is not registered")
        endpoint = next((e for e in broker.endpoints if e.listener_name == self.listener_name), None)
        if endpoint is None:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"controller {controller_id} has no listener "
                                                       f"{self.listener_name}")
        try:
            tls = sasl = None
            if self.config is not None:
                credentials = ListenerCredentials(self.config, self.listener_name)
                tls = credentials.tls(endpoint.security_protocol)
                sasl = credentials.sasl(endpoint.security_protocol)
            client = await connect(self.reactor, endpoint.host, endpoint.port, client_id=self.client_id,
                                   timeout=self.timeout, security_protocol=endpoint.security_protocol,
                                   name=f"controller {controller_id}", tls=tls, sasl=sasl)
        except (KafkaConnectionError, ConfigError, ValueError) as exc:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, f"cannot reach controller {controller_id}: {exc}") from None
        self._client, self._controller_id = client, controller_id
        return client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None
        self._controller_id = None


class ClusterControllerClient(ControllerClient):
    log = Logger(namespace="twisted_kafka.controller.ClusterControllerClient")

    def __init__(self, *, config, broker_id: int, admin: ZkAdmin, view, local: LocalControllerClient,
                 known_controller: Callable[[], int | None], reactor):
        """``view``: this broker's ``LocalClusterView``; ``local``: the controller in this process (used
        while it is the active one); ``known_controller``: ``/controller`` as this broker last saw it."""
        self.config = config
        self.broker_id = broker_id
        self.admin = admin
        self.view = view
        self.local = local
        self._known_controller = known_controller
        self.reactor = reactor
        listener = config["control.plane.listener.name"] or config["inter.broker.listener.name"] \
            or config["security.inter.broker.protocol"]
        self.link = ControllerLink(reactor=reactor, admin=admin, listener_name=listener,
                                   client_id=forwarding_client_id(broker_id),
                                   timeout=config["controller.socket.timeout.ms"] / 1000.0, config=config)

    @property
    def controller_id(self) -> int | None:
        return self._known_controller()

    def close(self) -> None:
        self.link.close()

    # -- through ZooKeeper ------------------------------------------------------------------

    async def create_topics(self, topics: list[NewTopic], *, validate_only: bool = False,
                            wait_for_brokers: bool = True, timeout_ms: int | None = None) -> list[TopicResult]:
        existing = set(await self.admin.topic_names())
        collisions = {collision_key(name): name for name in existing}
        live = self.view.live_brokers()
        results: list[TopicResult] = []
        created: dict[str, int] = {}
        for spec in topics:
            try:
                plan = plan_topic(spec, existing=existing, collisions=collisions, live_brokers=live,
                                  config=self.config)
                if not validate_only:
                    await self.admin.create_topic(plan.name, plan.topic_id, plan.assignment, plan.configs)
            except KafkaError as exc:
                results.append(TopicResult(spec.name, exc.code, exc.message))
                continue
            existing.add(plan.name)
            collisions[collision_key(plan.name)] = plan.name
            created[plan.name] = len(plan.assignment)
            results.append(created_topic_result(plan, validate_only=validate_only))
        if validate_only or not created:
            return results
        self.log.info("Created topic(s) {topics} in ZooKeeper", topics=", ".join(created))
        if wait_for_brokers:
            def known() -> bool:
                return all(self.view.partition_count(name) == count for name, count in created.items())
            if not await self.view.wait_until(known, timeout_ms):
                for result in results:
                    if result.error == ErrorCode.NONE and self.view.partition_count(result.name) != created.get(
                            result.name):
                        result.error = ErrorCode.REQUEST_TIMED_OUT
                        result.message = (f"Topic '{result.name}' was created, but its metadata did not reach "
                                          f"this broker within {timeout_ms} ms")
        return results

    async def delete_topics(self, names: list[str], *, wait_for_brokers: bool = True,
                            timeout_ms: int | None = None) -> dict[str, TopicResult]:
        refused = refused_deletions(self.config, names)
        if refused is not None:
            return refused
        results: dict[str, TopicResult] = {}
        doomed: list[str] = []
        for name in names:
            if name in results:
                continue
            found = await self.admin.read_topic(name)
            if found is None:
                results[name] = unknown_deletion(name)
                continue
            assignment, _ = found
            await self.admin.request_deletion(name)
            doomed.append(name)
            replication = len(assignment.partitions.get(0, ())) if assignment.partitions else 0
            results[name] = TopicResult(name, topic_id=assignment.topic_id, num_partitions=len(assignment.partitions),
                                        replication_factor=replication)
        if doomed and wait_for_brokers and not await self.view.wait_until(
                lambda: not any(self.view.has_topic(n) for n in doomed), timeout_ms):
            for name in doomed:
                if self.view.has_topic(name):
                    results[name].error = ErrorCode.REQUEST_TIMED_OUT
                    results[name].message = (f"Topic '{name}' is being deleted, but this broker still knew "
                                             f"it after {timeout_ms} ms")
        return results

    async def create_partitions(self, name: str, count: int, assignments: list[list[int]] | None, *,
                                validate_only: bool = False, wait_for_brokers: bool = True,
                                timeout_ms: int | None = None) -> None:
        while True:
            found = await self.admin.read_topic(name)
            if found is None:
                raise unknown_topic(name)
            if await self.admin.queued_for_deletion(name):
                raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION, f"The topic '{name}' is queued for deletion.")
            assignment, version = found
            replication = len(assignment.partitions.get(0, ()))
            new = plan_partitions(name, len(assignment.partitions), replication, count, assignments,
                                  self.view.live_brokers())
            if validate_only:
                return
            if await self.admin.add_partitions(name, new, version):
                break
        self.log.info("Topic {topic} grows to {count} partitions in ZooKeeper", topic=name, count=count)
        if wait_for_brokers and not await self.view.wait_until(
                lambda: self.view.partition_count(name) >= count, timeout_ms):
            raise KafkaError(ErrorCode.REQUEST_TIMED_OUT,
                             f"The partitions of '{name}' were created, but their metadata did not reach this "
                             f"broker within {timeout_ms} ms")

    async def alter_topic_configs(self, name: str, configs: dict[str, str], *, validate_only: bool = False) -> None:
        check_topic_config_change(name, await self.admin.read_topic(name) is not None, configs)
        if validate_only:
            return
        await self.admin.change_topic_config(name, configs)
        # Answered once this broker has them (a DescribeConfigs that follows sees them).
        await self.view.wait_until(lambda: self.view.topic_overrides(name) == dict(configs), CONFIG_WAIT_MS)

    async def alter_broker_configs(self, entity: str, configs: dict[str, str]) -> None:
        await self.admin.change_broker_config(entity, configs)
        await self.view.wait_until(lambda: self.view.dynamic_layer(entity) == dict(configs), CONFIG_WAIT_MS)

    # -- to the controller --------------------------------------------------------------------

    def _local_active(self) -> bool:
        return self.local.controller_id == self.broker_id

    def _controller(self, forward: bool = True) -> int:
        controller = self.controller_id
        if controller is None or not forward:
            raise KafkaError(ErrorCode.NOT_CONTROLLER, "This broker is not the active controller"
                             if controller is not None else "There is no controller")
        return controller

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> list[tuple[str, int]]:
        """This broker's own shutdown: Kafka's ``KafkaServer.controlledShutdown`` round, to the controller
        wherever it is; a moving controller (NOT_CONTROLLER, a lost connection) is found again and asked
        again, at most ``controlled.shutdown.max.retries`` times ``controlled.shutdown.retry.backoff.ms``
        apart.  For another broker (its ControlledShutdown received here), only the active controller
        answers: it is never passed on."""
        if broker_id != self.broker_id:
            if not self._local_active():
                raise KafkaError(ErrorCode.NOT_CONTROLLER, "This broker is not the active controller")
            return await self.local.controlled_shutdown(broker_id, broker_epoch)
        attempts = max(1, self.config["controlled.shutdown.max.retries"])
        backoff = self.config["controlled.shutdown.retry.backoff.ms"] / 1000.0
        for attempt in range(attempts):
            try:
                if self._local_active():
                    return await self.local.controlled_shutdown(broker_id, broker_epoch)
                controller = self._controller()
                response = await self.link.request(controller, m.ControlledShutdownRequest(
                    broker_id=broker_id, broker_epoch=broker_epoch), CONTROLLED_SHUTDOWN_VERSION)
                if response.error_code:
                    raise KafkaError(ErrorCode(response.error_code), "refused by the controller")
                return [(p.topic_name, p.partition_index) for p in response.remaining_partitions]
            except KafkaError as exc:
                if exc.code != ErrorCode.NOT_CONTROLLER or attempt + 1 >= attempts:
                    raise
                self.log.info("Controlled shutdown: {error}; asking again in {backoff} s", error=exc.message,
                              backoff=backoff)
                await deferLater(self.reactor, backoff, lambda: None)
        raise KafkaError(ErrorCode.NOT_CONTROLLER, "There is no controller")

    async def create_acls(self, bindings: list[AclBinding], *, forward: bool = True
                          ) -> list[tuple[ErrorCode, str | None]]:
        """ACLs are the controller's to write: here, or forwarded to it as a CreateAcls request
        (one already forwarded is never sent on again)."""
        if self._local_active():
            return await self.local.create_acls(bindings)
        R = m.CreateAclsRequest
        response = await self.link.request(self._controller(forward), R(creations=[R.AclCreation(
            resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
            resource_pattern_type=b.pattern.pattern_type, principal=b.entry.principal, host=b.entry.host,
            operation=b.entry.operation, permission_type=b.entry.permission) for b in bindings]), ACLS_VERSION)
        return [(ErrorCode(r.error_code), r.error_message) for r in response.results]

    async def delete_acls(self, filters: list[AclBindingFilter], *, forward: bool = True) -> list[list[AclBinding]]:
        if self._local_active():
            return await self.local.delete_acls(filters)
        R = m.DeleteAclsRequest
        response = await self.link.request(self._controller(forward), R(filters=[R.DeleteAclsFilter(
            resource_type_filter=f.resource_type, resource_name_filter=f.name, pattern_type_filter=f.pattern_type,
            principal_filter=f.principal, host_filter=f.host, operation=f.operation,
            permission_type=f.permission) for f in filters]), ACLS_VERSION)
        results = []
        for result in response.filter_results:
            if result.error_code:
                raise KafkaError(ErrorCode(result.error_code), result.error_message)
            results.append([AclBinding.of(a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host,
                                          a.operation, a.permission_type) for a in result.matching_acls])
        return results

    async def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None, *,
                            timeout_ms: int, forward: bool = True) -> dict[tuple[str, int], ElectionOutcome]:
        if self._local_active():
            return await self.local.elect_leaders(election_type, partitions, timeout_ms=timeout_ms)
        controller = self._controller(forward)
        R = m.ElectLeadersRequest
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, index in partitions:
                by_topic.setdefault(topic, []).append(index)
            topics = [R.TopicPartitions(topic=t, partitions=sorted(p)) for t, p in by_topic.items()]
        response = await self.link.request(controller, R(
            election_type=election_type, topic_partitions=topics, timeout_ms=timeout_ms), ELECT_LEADERS_VERSION)
        if response.error_code:
            raise KafkaError(ErrorCode(response.error_code), None)
        return {(r.topic, p.partition_id): ElectionOutcome(ErrorCode(p.error_code), p.error_message)
                for r in response.replica_election_results for p in r.partition_result}

    async def alter_partition_reassignments(self, targets, *, allow_replication_factor_change=True, timeout_ms=0,
                                            forward=True):
        if self._local_active():
            return await self.local.alter_partition_reassignments(
                targets, allow_replication_factor_change=allow_replication_factor_change)
        controller = self._controller(forward)
        R = m.AlterPartitionReassignmentsRequest
        by_topic: dict[str, list[Any]] = {}
        for (topic, index), replicas in targets.items():
            by_topic.setdefault(topic, []).append(R.ReassignableTopic.ReassignablePartition(
                partition_index=index, replicas=replicas))
        response = await self.link.request(controller, R(
            timeout_ms=timeout_ms, allow_replication_factor_change=allow_replication_factor_change,
            topics=[R.ReassignableTopic(name=t, partitions=p) for t, p in by_topic.items()]),
            ALTER_REASSIGNMENTS_VERSION)
        if response.error_code:
            raise KafkaError(ErrorCode(response.error_code), response.error_message)
        return {(t.name, p.partition_index): (ErrorCode(p.error_code), p.error_message)
                for t in response.responses for p in t.partitions}

    async def alter_partition(self, broker_id, broker_epoch, changes, *, forward=True):
        """A leader's ISR change (AlterPartition), to the controller wherever it is."""
        if self._local_active():
            return await self.local.alter_partition(broker_id, broker_epoch, changes)
        controller = self._controller(forward)
        response = await self.link.request(controller, _alter_partition_request(broker_id, broker_epoch, changes),
                                           ALTER_PARTITION_VERSION)
        if response.error_code:
            raise KafkaError(ErrorCode(response.error_code), "refused by the controller")
        return {(t.topic_name, p.partition_index): IsrResult(ErrorCode(p.error_code), p.leader_id, p.leader_epoch,
                                                             tuple(p.isr), p.partition_epoch, p.leader_recovery_state)
                for t in response.topics for p in t.partitions}

    async def list_partition_reassignments(self, partitions, *, timeout_ms=0, forward=True):
        if self._local_active():
            return await self.local.list_partition_reassignments(partitions)
        controller = self._controller(forward)
        R = m.ListPartitionReassignmentsRequest
        topics = None
        if partitions is not None:
            by_topic: dict[str, list[int]] = {}
            for topic, index in partitions:
                by_topic.setdefault(topic, []).append(index)
            topics = [R.ListPartitionReassignmentsTopics(name=t, partition_indexes=sorted(p))
                      for t, p in by_topic.items()]
        response = await self.link.request(controller, R(timeout_ms=timeout_ms, topics=topics),
                                           LIST_REASSIGNMENTS_VERSION)
        if response.error_code:
            raise KafkaError(ErrorCode(response.error_code), response.error_message)
        return {(t.name, p.partition_index): ReassignmentState(tuple(p.replicas), tuple(p.adding_replicas),
                                                               tuple(p.removing_replicas))
                for t in response.topics for p in t.partitions}


__all__ = ["ClusterControllerClient", "ControllerLink"]


def _alter_partition_request(broker_id: int, broker_epoch: int, changes) -> m.AlterPartitionRequest:
    R = m.AlterPartitionRequest
    by_topic: dict[str, list] = {}
    for (topic, index), change in changes.items():
        by_topic.setdefault(topic, []).append(R.TopicData.PartitionData(
            partition_index=index, leader_epoch=change.leader_epoch, new_isr=list(change.isr),
            leader_recovery_state=change.leader_recovery_state, partition_epoch=change.partition_epoch))
    return R(broker_id=broker_id, broker_epoch=broker_epoch,
             topics=[R.TopicData(topic_name=t, partitions=p) for t, p in by_topic.items()])


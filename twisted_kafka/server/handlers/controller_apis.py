"""The controller's APIs: LeaderAndIsr (4), StopReplica (5), UpdateMetadata (6)
on the broker side, and ControlledShutdown (7) on the controller side.

These arrive on the control plane (when one is configured; the data plane
then does not serve them), from the controller — this broker's own, on a
single node.  Nothing of a LeaderAndIsr, UpdateMetadata or StopReplica is
applied unless the ``ControllerRequestGuard`` accepts it: from the known
controller, not older than its epoch in force, for this broker id, cluster
id and broker epoch.  Each accepted request is applied to the
ReplicaManager, the MetadataCache, the ConfigRepository or the dynamic broker
config and answered with per-partition errors, exactly as a broker in a
cluster would answer another broker's controller.  UpdateMetadata also
carries the topic config overrides and dynamic broker configs the controller
stores (tagged fields of this project's UpdateMetadata schema): they arrive
before the LeaderAndIsr that creates a topic's logs, and the cluster's ACLs,
which this broker's authorizer holds from then on.

Authorization: each is a ``ControllerApiHandler``.  With an authorizer the
sender needs CLUSTER_ACTION on the cluster -- or the broker's own
inter-broker principal, so the UpdateMetadata carrying a broker's first ACL
set is not refused for want of it -- before anything of the request is read;
LeaderAndIsr, UpdateMetadata and StopReplica must then prove they come from
the active controller with this broker's broker epoch, which nobody else can
know, and ControlledShutdown names the stopping broker's epoch, which the
controller checks.  A refusal of who the sender is closes the connection
after its answer (see ``server/controller_requests.py``).
"""

from __future__ import annotations

from twisted.internet.defer import gatherResults

from twisted_kafka.controller.client import ControllerClient
from twisted_kafka.controller.interface import INTERNAL_TOPICS, LEADER_DURING_DELETE
from twisted_kafka.network.listeners import EndPoint
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.security.acl import AclBinding

from ..authorization import Authorization
from ..config_repository import ConfigRepository
from ..controller_requests import ControllerApiHandler, ControllerRequestGuard
from ..dynamic_config import DynamicBrokerConfig
from ..metadata_cache import BrokerRegistration, MetadataCache, PartitionState
from ..replica_manager import PartitionStateChange, ReplicaManager

_SECURITY_PROTOCOLS = {0: "PLAINTEXT", 1: "SSL", 2: "SASL_PLAINTEXT", 3: "SASL_SSL"}


def _topic_partition_states(body, ungrouped_until: int, version: int):
    """(topic name, topic id or None, partition state) for both request layouts."""
    if version <= ungrouped_until:
        for state in body.ungrouped_partition_states:
            yield state.topic_name, None, state
    else:
        for topic in body.topic_states:
            topic_id = getattr(topic, "topic_id", None)
            for state in topic.partition_states:
                yield topic.topic_name, topic_id, state


class LeaderAndIsrHandler(ControllerApiHandler):
    api_key = ApiKey.LEADER_AND_ISR

    def __init__(self, replica_manager: ReplicaManager, guard: ControllerRequestGuard):
        self.replicas = replica_manager
        self.guard = guard

    async def serve(self, request):
        body = request.body
        replicas = self.replicas
        await self.guard.verify(request.body)
        changes = [PartitionStateChange(topic, topic_id, state.partition_index, state.leader, state.leader_epoch,
                                        getattr(state, "partition_epoch", 0), list(state.replicas), list(state.isr))
                   for topic, topic_id, state in _topic_partition_states(body, 1, request.api_version)]
        errors = replicas.become_leader_or_follower(changes)
        return self._response(request, errors, {c.topic: c.topic_id for c in changes})

    def _response(self, request, errors: dict, topic_ids: dict, top_error: ErrorCode = ErrorCode.NONE):
        R = m.LeaderAndIsrResponse
        if request.api_version < 5:
            return R(error_code=top_error, partition_errors=[
                R.LeaderAndIsrPartitionError(topic_name=topic, partition_index=index, error_code=error)
                for (topic, index), error in errors.items()])
        by_topic: dict = {}
        for (topic, index), error in errors.items():
            by_topic.setdefault(topic, []).append((index, error))
        return R(error_code=top_error, topics=[
            R.LeaderAndIsrTopicError(topic_id=topic_ids[topic], partition_errors=[
                R.LeaderAndIsrTopicError.LeaderAndIsrPartitionError(partition_index=i, error_code=e)
                for i, e in entries])
            for topic, entries in by_topic.items()])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        body = request.body
        states = list(_topic_partition_states(body, 1, request.api_version))
        return self._response(request, {(t, s.partition_index): error for t, _, s in states},
                              {t: tid for t, tid, _ in states}, error)


class UpdateMetadataHandler(ControllerApiHandler):
    api_key = ApiKey.UPDATE_METADATA

    def __init__(self, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
                 config_repository: ConfigRepository, dynamic_config: DynamicBrokerConfig,
                 guard: ControllerRequestGuard, acls: Authorization | None = None):
        self.replicas = replica_manager
        self.guard = guard
        self.acls = acls
        self.cache = metadata_cache
        self.configs = config_repository
        self.dynamic_config = dynamic_config

    async def serve(self, request):
        body = request.body
        await self.guard.verify(request.body)
        cache = self.cache
        brokers = []
        for broker in body.live_brokers:
            if request.api_version == 0:
                endpoints = {"PLAINTEXT": EndPoint("PLAINTEXT", broker.v0_host, broker.v0_port, "PLAINTEXT")}
            else:
                endpoints = {}
                for ep in broker.endpoints:
                    protocol = _SECURITY_PROTOCOLS.get(ep.security_protocol, "PLAINTEXT")
                    name = ep.listener if request.api_version >= 3 else protocol
                    endpoints[name] = EndPoint(name, ep.host, ep.port, protocol)
            brokers.append(BrokerRegistration(broker.id, endpoints, getattr(broker, "rack", None)))
        cache.update_brokers(brokers, body.controller_id)
        live, deleted, topic_ids = [], [], {}
        for topic, topic_id, state in _topic_partition_states(body, 4, request.api_version):
            if topic_id is not None:
                topic_ids[topic] = topic_id
            if state.leader == LEADER_DURING_DELETE:
                deleted.append(topic)
            else:
                live.append(PartitionState(topic, state.partition_index, state.leader, state.leader_epoch,
                                           tuple(state.replicas), tuple(state.isr),
                                           tuple(getattr(state, "offline_replicas", ()) or ()),
                                           state.zk_version))
        cache.remove_topics(set(deleted))
        for topic in set(deleted):
            self.configs.remove_topic(topic)
        cache.update_partitions(live, topic_ids, INTERNAL_TOPICS)   # internal by name, as Kafka's Topic.isInternal
        if request.api_version >= 6:
            self._apply_configs(body)
        cache.changed()
        return m.UpdateMetadataResponse(error_code=ErrorCode.NONE)

    def _apply_configs(self, body) -> None:
        changed = []
        for topic in body.topic_states:
            if topic.topic_configs is not None:
                overrides = {c.name: c.value for c in topic.topic_configs if c.value is not None}
                if self.configs.set_topic_overrides(topic.topic_name, overrides):
                    changed.append(topic.topic_name)
        if body.dynamic_broker_configs is not None:
            self.dynamic_config.apply({entry.entity: {c.name: c.value for c in entry.configs if c.value is not None}
                                       for entry in body.dynamic_broker_configs})
        for topic in changed:
            self.replicas.update_topic_config(topic, self.configs.topic_overrides(topic))
        if body.acls is not None and self.acls is not None:
            self.acls.replace_acls(AclBinding.of(a.resource_type, a.resource_name, a.pattern_type, a.principal,
                                                 a.host, a.operation, a.permission_type) for a in body.acls)

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.UpdateMetadataResponse(error_code=error)


class StopReplicaHandler(ControllerApiHandler):
    api_key = ApiKey.STOP_REPLICA

    def __init__(self, replica_manager: ReplicaManager, guard: ControllerRequestGuard):
        self.replicas = replica_manager
        self.guard = guard

    def _partitions(self, request):
        body = request.body
        version = request.api_version
        if version == 0:
            return [(p.topic_name, p.partition_index, body.delete_partitions) for p in body.ungrouped_partitions]
        if version <= 2:
            return [(t.name, i, body.delete_partitions) for t in body.topics for i in t.partition_indexes]
        return [(t.topic_name, p.partition_index, p.delete_partition)
                for t in body.topic_states for p in t.partition_states]

    async def serve(self, request):
        replicas = self.replicas
        await self.guard.verify(request.body)
        errors = []
        deletions = []
        for topic, index, delete in self._partitions(request):
            try:
                d = replicas.stop_replica(topic, index, delete=delete)
                if d is not None:
                    deletions.append(d)
                errors.append((topic, index, ErrorCode.NONE))
            except KafkaError as exc:
                errors.append((topic, index, exc.code))
        if deletions:
            # The logs are renamed away at once; removal of their files happens in the
            # background after file.delete.delay.ms, as in Kafka: don't hold the controller.
            gatherResults(deletions, consumeErrors=True).addErrback(lambda f: None)
        R = m.StopReplicaResponse
        return R(error_code=ErrorCode.NONE, partition_errors=[
            R.StopReplicaPartitionError(topic_name=t, partition_index=i, error_code=e) for t, i, e in errors])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        R = m.StopReplicaResponse
        return R(error_code=error, partition_errors=[
            R.StopReplicaPartitionError(topic_name=t, partition_index=i, error_code=error)
            for t, i, _ in self._partitions(request)])


class ControlledShutdownHandler(ControllerApiHandler):
    """Served by the controller's broker: another broker asks to stop."""

    api_key = ApiKey.CONTROLLED_SHUTDOWN

    def __init__(self, controller: ControllerClient, guard: ControllerRequestGuard):
        self.controller = controller
        self.guard = guard

    async def serve(self, request):
        remaining = await self.controller.controlled_shutdown(request.body.broker_id,
                                                              getattr(request.body, "broker_epoch", -1))
        R = m.ControlledShutdownResponse
        return R(error_code=ErrorCode.NONE, remaining_partitions=[
            R.RemainingPartition(topic_name=t, partition_index=i) for t, i in remaining])

    def error_response(self, request, error: ErrorCode, message: str | None = None):
        return m.ControlledShutdownResponse(error_code=error, remaining_partitions=[])

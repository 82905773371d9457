"""ControllerBrokerRequestBatch: the controller's requests to brokers (Kafka's class of that name).

What the controller decided reaches brokers in three requests, built here
from the ``ControllerContext`` and sent through the
``ControllerChannelManager`` to each broker's control plane:

* LeaderAndIsr -- to the replicas of changed partitions: their role, and
  (``is_new``) that their logs are to be created;
* UpdateMetadata -- to every live broker: partition states (a deleted
  topic's with ``LEADER_DURING_DELETE``), the live brokers, and in this
  project's tagged fields the topic config overrides, the dynamic broker
  configs and the ACLs brokers would read from ZooKeeper;
* StopReplica -- to replicas that stop (and, when deleting, remove their logs).

Each call is one batch: one request per receiving broker, sent at once.
Every request carries the controller's id and epoch, the receiver's broker
epoch (KIP-380), id and cluster id (this project's tagged fields
1002/1003), so a broker refuses one meant for another.  Each broker's
channel is a FIFO: what is sent first arrives first.  The outcome is a
``Sent``, which whoever needs the brokers' confirmation waits on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from twisted.internet.defer import Deferred, gatherResults
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.waiting import fired_within

from .channel_manager import ControllerChannelManager
from .context import LOG_NAMESPACE, ControllerContext
from .interface import LEADER_DURING_DELETE
from .metadata_store import TopicRecord

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}

LEADER_AND_ISR_VERSION = 7
UPDATE_METADATA_VERSION = 8
STOP_REPLICA_VERSION = 4


def in_time(timeout_ms: int | None) -> str:
    """" within N ms" for a message about a wait that had a limit."""
    return f" within {timeout_ms} ms" if timeout_ms and timeout_ms > 0 else ""


class ControllerBrokerRequestBatch:
    log = Logger(namespace=LOG_NAMESPACE)

    def __init__(self, *, config, broker_id: int, cluster_id: str, context: ControllerContext,
                 channels: ControllerChannelManager):
        self.config = config
        self.broker_id = broker_id
        self.cluster_id = cluster_id  # sent with every request, so a broker of another cluster refuses it
        self._context = context
        self._channels = channels

    def confirmed_within(self, d: Deferred, timeout_ms: int | None) -> Deferred[bool]:
        """Whether the brokers confirmed a change (``d``) within ``timeout_ms`` (None or <= 0: no
        limit).  ``d`` is never cancelled: the brokers still apply the change, only the caller
        stops waiting."""
        d.addErrback(self._unconfirmed)
        return fired_within(self._channels.reactor, d, timeout_ms / 1000.0 if timeout_ms else None)

    def _unconfirmed(self, failure: Failure) -> Failure:
        self.log.failure("Brokers did not confirm a controller change", failure)
        return failure

    def _partition_state(self, cls, topic: TopicRecord, index: int, *, is_new: bool = False, deleting: bool = False):
        record = topic.partitions[index]
        fields = dict(partition_index=index, controller_epoch=self._context.epoch,
                      leader=LEADER_DURING_DELETE if deleting else record.leader,
                      leader_epoch=record.leader_epoch, isr=list(record.isr), replicas=list(record.replicas))
        if cls is m.LeaderAndIsrRequest.LeaderAndIsrTopicState.LeaderAndIsrPartitionState:
            fields.update(partition_epoch=record.partition_epoch, adding_replicas=list(record.adding_replicas),
                          removing_replicas=list(record.removing_replicas), is_new=is_new,
                          leader_recovery_state=record.leader_recovery_state)
        else:
            fields.update(zk_version=record.partition_epoch,
                          offline_replicas=[b for b in record.replicas if b not in self._context.live_brokers])
        return cls(**fields)

    def send_leader_and_isr(self, partitions: list[tuple[TopicRecord, int]], *, is_new: bool,
                            only: Iterable[int] | None = None) -> Sent:
        """LeaderAndIsr to every live replica of ``partitions`` (of ``only`` those brokers, if given)."""
        live_brokers = self._context.live_brokers
        per_broker: dict[int, dict[str, list[int]]] = {}
        topics = {t.name: t for t, _ in partitions}
        wanted = None if only is None else set(only)
        for topic, index in partitions:
            for replica in topic.partitions[index].replicas:
                if replica in live_brokers and (wanted is None or replica in wanted):
                    per_broker.setdefault(replica, {}).setdefault(topic.name, []).append(index)
        R = m.LeaderAndIsrRequest
        sent = Sent()
        for broker_id, by_topic in per_broker.items():
            leaders = {topics[name].partitions[i].leader for name, idx in by_topic.items() for i in idx}
            live_leaders = []
            for leader in sorted(leaders):
                broker = live_brokers.get(leader)
                if broker is not None:
                    ep = broker.endpoint(self._inter_broker_listener())
                    if ep is not None:
                        live_leaders.append(R.LeaderAndIsrLiveLeader(broker_id=leader, host_name=ep.host,
                                                                     port=ep.port))
            request = R(controller_id=self.broker_id, is_k_raft_controller=False, controller_epoch=self._context.epoch,
                        broker_epoch=live_brokers[broker_id].epoch, broker_id=broker_id,
                        cluster_id=self.cluster_id, request_type=0,
                        topic_states=[R.LeaderAndIsrTopicState(
                            topic_name=name, topic_id=topics[name].topic_id,
                            partition_states=[self._partition_state(
                                R.LeaderAndIsrTopicState.LeaderAndIsrPartitionState, topics[name], i, is_new=is_new)
                                for i in sorted(idx)])
                            for name, idx in by_topic.items()],
                        live_leaders=live_leaders)
            sent.add(broker_id, self._channels.send(
                broker_id, ApiKey.LEADER_AND_ISR, LEADER_AND_ISR_VERSION, request).addCallback(
                self._check_response, "LeaderAndIsr", broker_id))
        return sent

    @staticmethod
    def _configs(values: Mapping[str, str]) -> list:
        C = m.UpdateMetadataRequest.UpdateMetadataTopicState.UpdateMetadataConfig
        return [C(name=name, value=value) for name, value in sorted(values.items())]

    def _dynamic_broker_configs_for(self, broker_id: int) -> list:
        """The cluster default and ``broker_id``'s own dynamic configs (an empty list: none)."""
        B = m.UpdateMetadataRequest.UpdateMetadataBrokerConfigs
        return [B(entity=entity, configs=[B.UpdateMetadataConfig(name=k, value=v)
                                          for k, v in sorted(self._context.broker_configs.get(entity, {}).items())])
                for entity in ("", str(broker_id))]

    def _acl_list(self) -> list:
        A = m.UpdateMetadataRequest.UpdateMetadataAcl
        return [A(resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type,
                  principal=e.principal, host=e.host, operation=e.operation, permission_type=e.permission)
                for p, entries in sorted(self._context.acls.items()) for e in sorted(entries)]

    def send_topic_configs(self, brokers: Iterable[int], topics: list[TopicRecord]) -> Sent:
        """UpdateMetadata carrying only ``topics``' config overrides (no partition states)."""
        return self.send_update_metadata(brokers, [], topic_configs=topics)

    def send_update_metadata(self, brokers: Iterable[int], partitions: list[tuple[TopicRecord, int]], *,
                             deleting: bool = False, topic_configs: Iterable[TopicRecord] = (),
                             dynamic_broker_configs: bool = False, acls: bool = False) -> Sent:
        """UpdateMetadata to ``brokers``: the states of ``partitions``, plus the config overrides of
        ``topic_configs``, (``dynamic_broker_configs``) each receiver's dynamic broker configs and
        (``acls``) every ACL."""
        live_brokers = self._context.live_brokers
        U = m.UpdateMetadataRequest
        by_topic: dict[str, tuple[TopicRecord, list[int]]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic.name, (topic, []))[1].append(index)
        topic_configs = list(topic_configs)
        for topic in topic_configs:
            by_topic.setdefault(topic.name, (topic, []))
        live = [U.UpdateMetadataBroker(
            id=b.broker_id, rack=b.rack,
            endpoints=[U.UpdateMetadataBroker.UpdateMetadataEndpoint(
                port=ep.port, host=ep.host, listener=ep.listener_name,
                security_protocol=SECURITY_PROTOCOL_IDS[ep.security_protocol]) for ep in b.endpoints])
            for b in sorted(live_brokers.values(), key=lambda b: b.broker_id)]
        sent = Sent()
        with_configs = {t.name for t in topic_configs}
        acl_list = self._acl_list() if acls else None
        for broker_id in list(brokers):
            if broker_id not in live_brokers:
                continue
            request = U(controller_id=self.broker_id, is_k_raft_controller=False, controller_epoch=self._context.epoch,
                        broker_epoch=live_brokers[broker_id].epoch, broker_id=broker_id,
                        cluster_id=self.cluster_id,
                        topic_states=[U.UpdateMetadataTopicState(
                            topic_name=name, topic_id=topic.topic_id,
                            partition_states=[self._partition_state(
                                U.UpdateMetadataTopicState.UpdateMetadataPartitionState, topic, i, deleting=deleting)
                                for i in sorted(indexes)],
                            topic_configs=self._configs(topic.configs) if name in with_configs else None)
                            for name, (topic, indexes) in by_topic.items()],
                        dynamic_broker_configs=(self._dynamic_broker_configs_for(broker_id)
                                                if dynamic_broker_configs else None),
                        acls=acl_list, live_brokers=live)
            sent.add(broker_id, self._channels.send(
                broker_id, ApiKey.UPDATE_METADATA, UPDATE_METADATA_VERSION, request).addCallback(
                self._check_response, "UpdateMetadata", broker_id))
        return sent

    def send_stop_replica(self, partitions: list[tuple[TopicRecord, int]], *, delete: bool,
                          only: Iterable[int] | None = None) -> Sent:
        """StopReplica to the live replicas of ``partitions`` (to ``only`` those brokers, if given);
        with ``delete`` they remove their logs."""
        live_brokers = self._context.live_brokers
        S = m.StopReplicaRequest
        per_broker: dict[int, dict[str, list[tuple[int, int]]]] = {}
        wanted = None if only is None else set(only)
        for topic, index in partitions:
            record = topic.partitions[index]
            # ``only`` may name brokers no longer among the replicas (a reassignment removed them).
            for replica in (record.replicas if wanted is None else sorted(wanted)):
                if replica in live_brokers:
                    per_broker.setdefault(replica, {}).setdefault(topic.name, []).append((index, record.leader_epoch))
        sent = Sent()
        for broker_id, by_topic in per_broker.items():
            request = S(controller_id=self.broker_id, is_k_raft_controller=False, controller_epoch=self._context.epoch,
                        broker_epoch=live_brokers[broker_id].epoch, broker_id=broker_id,
                        cluster_id=self.cluster_id,
                        topic_states=[S.StopReplicaTopicState(
                            topic_name=name,
                            partition_states=[S.StopReplicaTopicState.StopReplicaPartitionState(
                                partition_index=i, leader_epoch=LEADER_DURING_DELETE if delete else epoch,
                                delete_partition=delete) for i, epoch in sorted(entries)])
                            for name, entries in by_topic.items()])
            sent.add(broker_id, self._channels.send(
                broker_id, ApiKey.STOP_REPLICA, STOP_REPLICA_VERSION, request).addCallback(
                self._check_response, "StopReplica", broker_id))
        return sent

    def _inter_broker_listener(self) -> str:
        return self.config["inter.broker.listener.name"] or self.config["security.inter.broker.protocol"]

    def _check_response(self, response, name: str, broker_id: int):
        if response.error_code:
            self.log.warn("{name} to broker {broker_id} failed: {error}", name=name, broker_id=broker_id,
                          error=ErrorCode(response.error_code).name)
        return response


class Sent:
    """Requests sent to brokers: each broker's outcome, kept until someone asks.

    A change is announced whether or not anybody waits for the brokers to
    confirm it; a channel that closes (the controller resigned, the broker
    died) fails its requests, and such an outcome is only reported to those
    who asked (``response``, ``all``) -- never left as an unhandled failure.
    """

    def __init__(self) -> None:
        self._pending: list[tuple[int, Callable[[], Deferred]]] = []

    def add(self, broker_id: int, d: Deferred) -> None:
        outcome: list = []
        waiters: list[Deferred] = []

        def done(result):
            outcome.append(result)
            for waiter in waiters:
                if isinstance(result, Failure):
                    waiter.errback(result)
                else:
                    waiter.callback(result)
            waiters.clear()
            return None      # consumed here; reported to whoever asks

        def response() -> Deferred:
            waiter: Deferred = Deferred()
            if outcome:
                if isinstance(outcome[0], Failure):
                    waiter.errback(outcome[0])
                else:
                    waiter.callback(outcome[0])
            else:
                waiters.append(waiter)
            return waiter

        d.addBoth(done)
        self._pending.append((broker_id, response))

    @property
    def brokers(self) -> list[int]:
        return [b for b, _ in self._pending]

    def response(self, broker_id: int) -> Deferred:
        """The response of ``broker_id`` (the first one sent to it)."""
        for b, response in self._pending:
            if b == broker_id:
                return response()
        raise KeyError(broker_id)

    def all(self) -> Deferred:
        """Fires when every broker answered (fails if one could not be reached before its channel closed)."""
        return gatherResults([response() for _, response in self._pending], consumeErrors=True)

    @classmethod
    def combine(cls, *sents: Sent) -> Sent:
        combined = cls()
        for sent in sents:
            combined._pending.extend(sent._pending)
        return combined


__all__ = ["ControllerBrokerRequestBatch", "Sent", "in_time", "SECURITY_PROTOCOL_IDS", "LEADER_AND_ISR_VERSION",
           "UPDATE_METADATA_VERSION", "STOP_REPLICA_VERSION"]

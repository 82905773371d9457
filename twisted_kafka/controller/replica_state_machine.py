"""ReplicaStateMachine: replicas come online and go offline with their brokers (Kafka's ``ReplicaStateMachine``).

Kafka's replica states follow the broker that hosts the replica:

* online -- its broker registered (started, or came back with a new epoch):
  the other brokers learn that its replicas are no longer offline, it
  learns everything (partition states, topic and broker configs, ACLs) and
  gets LeaderAndIsr for the replicas it hosts (``replicas_online``);
* offline -- its broker is gone (``replicas_offline``, Kafka's
  ``onReplicasBecomeOffline``): the partitions it led elect another leader,
  and it leaves every ISR; or its broker is stopping (``controlled_shutdown``,
  Kafka's ``doControlledShutdown``): the partitions it leads move to another
  ISR member, it leaves the ISR of those it follows, which it stops
  (StopReplica, keeping the logs).

Deleting replicas (Kafka's ReplicaDeletionStarted / Successful) is the
``TopicDeletionManager``'s.
"""

from __future__ import annotations

from functools import partial

from twisted.logger import Logger

from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from . import election
from .broker_request_batch import ControllerBrokerRequestBatch
from .context import LOG_NAMESPACE, ControllerContext, TopicPartition
from .metadata_store import PartitionRecord, TopicRecord
from .partition_state_machine import PartitionStateMachine, Step


class ReplicaStateMachine:
    log = Logger(namespace=LOG_NAMESPACE)

    def __init__(self, *, context: ControllerContext, requests: ControllerBrokerRequestBatch,
                 partitions: PartitionStateMachine):
        self._context = context
        self._requests = requests
        self._partitions = partitions

    def replicas_online(self, started: list[int]) -> None:
        """Brokers ``started`` registered: the other brokers learn their replicas are online, they learn
        everything, and their replicas their role (deleted topics excepted)."""
        context = self._context
        others = [b for b in context.live_brokers if b not in started]
        deleting = set(context.deleting)
        hosted = [(t, i) for t, i in context.online_partitions(exclude=deleting)
                  if any(b in started for b in t.partitions[i].replicas)]
        if others:
            # Their replicas come online: the partitions they host are no longer offline anywhere.
            self._requests.send_update_metadata(others, hosted)
        self._requests.send_update_metadata(started, context.online_partitions(exclude=deleting),
                                            topic_configs=list(context.topics.values()),
                                            dynamic_broker_configs=True, acls=True)
        self._requests.send_leader_and_isr(hosted, is_new=False, only=started)

    async def replicas_offline(self, failed: list[int]) -> None:
        """Kafka's ``onBrokerFailure``: new leaders for what the failed brokers led, and out of the ISRs."""
        context = self._context
        changes: dict[TopicPartition, PartitionRecord] = {}
        affected: list[TopicPartition] = []
        electable = context.electable_brokers()
        for topic in context.topics.values():
            if topic.name in context.deleting:
                continue
            unclean = self._partitions.unclean_allowed(topic.name)
            for index, record in topic.partitions.items():
                if not record.has_state or not any(b in failed for b in record.replicas):
                    continue
                affected.append((topic.name, index))
                steps: list[Step] = []
                if record.leader in failed:
                    steps.append(partial(election.offline, live=electable, unclean=unclean))
                steps += [partial(election.without_replica, replica=b) for b in failed]
                updated = election.compose(record, *steps)
                if updated is not None:
                    changes[(topic.name, index)] = updated
        await self._partitions.write(changes)
        self._partitions.announce(changes, also_update=[tp for tp in affected if tp not in changes], always=True)

    async def controlled_shutdown(self, broker_id: int) -> list[tuple[str, int]]:
        """Move leadership off a broker that is shutting down; return the partitions it still leads.

        As in Kafka (``doControlledShutdown``): the broker is marked shutting
        down (no longer elected), each partition it leads gets the first other
        live ISR member as leader, each it follows drops it from the ISR and
        stops it (StopReplica without deletion).  Partitions whose only replica
        is the broker cannot move and are not reported as remaining (the
        broker may stop regardless).
        """
        context = self._context
        if broker_id not in context.live_brokers:
            raise KafkaError(ErrorCode.BROKER_NOT_AVAILABLE, f"Broker {broker_id} is not registered")
        context.shutting_down.add(broker_id)
        self.log.info("Broker {broker_id} is shutting down", broker_id=broker_id)
        changes: dict[TopicPartition, PartitionRecord] = {}
        followed: list[tuple[TopicRecord, int]] = []
        for topic in context.topics.values():
            if topic.name in context.deleting:
                continue
            for index, record in topic.partitions.items():
                if broker_id not in record.replicas or len(record.replicas) <= 1 or not record.has_state:
                    continue
                if record.leader == broker_id:
                    elected = election.controlled_shutdown(record, context.live_brokers, context.shutting_down)
                    if elected is not None:
                        changes[(topic.name, index)] = elected
                else:
                    followed.append((topic, index))
                    shrunk = election.without_replica(record, broker_id)
                    if shrunk is not None:
                        changes[(topic.name, index)] = shrunk
        if followed:
            self._requests.send_stop_replica(followed, delete=False, only=[broker_id])
        await self._partitions.write(changes)
        self._partitions.announce(changes)
        return [(topic.name, index) for topic in context.topics.values() if topic.name not in context.deleting
                for index, record in topic.partitions.items()
                if record.leader == broker_id and len(record.replicas) > 1]


__all__ = ["ReplicaStateMachine"]

"""PartitionStateMachine: partitions get a leader and an ISR (Kafka's ``PartitionStateMachine``).

Kafka's partition states, as this controller's records show them: a
partition without a state yet is *new* (``has_state`` false); one with a
live leader is *online*; one whose leader is not alive (or none, -1) is
*offline*.  The transitions, each written to the store before the
``ControllerContext`` changes and brokers are told:

* new -> online: the first assigned replica that is alive becomes leader,
  the live replicas the ISR (``election.initial_state``); the replicas get
  LeaderAndIsr with ``is_new`` and create their logs;
* offline -> online: a leader from the live ISR, or -- where the topic
  allows unclean elections -- any live replica (``election.offline``);
* online -> online: an ElectLeaders request (preferred or unclean), the
  automatic preferred-leader rebalance, or a leader's AlterPartition
  changing the ISR (KIP-497).

``trigger_online_partition_state_change`` is Kafka's method of that name:
run on failover and whenever brokers come or go, it moves every new and
offline partition it can online, and takes dead replicas out of ISRs.
The election algorithms themselves are pure functions in ``election.py``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import replace
from functools import partial

from twisted.logger import Logger

from twisted_kafka.protocol.errors import ErrorCode

from . import election
from .broker_request_batch import ControllerBrokerRequestBatch, Sent
from .context import LOG_NAMESPACE, ControllerContext, TopicPartition
from .election import ElectionType
from .interface import ElectionOutcome, IsrChange
from .metadata_store import NO_LEADER, RECOVERED, RECOVERING, ClusterMetadataStore, PartitionRecord, TopicRecord

#: One step of a partition's state change (``election.compose``).
Step = Callable[[PartitionRecord], "PartitionRecord | None"]


def _is_true(value) -> bool:
    return value is True or str(value).strip().lower() == "true"


class PartitionStateMachine:
    log = Logger(namespace=LOG_NAMESPACE)

    def __init__(self, *, config, context: ControllerContext, store: ClusterMetadataStore,
                 persist: Callable[[Awaitable], Awaitable[None]], requests: ControllerBrokerRequestBatch):
        self.config = config
        self._store = store
        self._context = context
        self._persist = persist
        self._requests = requests
        #: True: the ISR is kept to the assigned replicas that are alive (``election.expand_isr`` /
        #: ``shrink_isr``), for a controller without replicating brokers (its unit tests).  A cluster's
        #: controller turns it off: leaders report their ISR with AlterPartition (``alter_partition``).
        self.isr_follows_liveness = True

    # -- writing and announcing a change ------------------------------------------------------

    async def write(self, changes: Mapping[TopicPartition, PartitionRecord]) -> None:
        """Persist partition records (one write per topic), then make them the controller's view."""
        by_topic: dict[str, dict[int, PartitionRecord]] = {}
        for (name, index), record in changes.items():
            by_topic.setdefault(name, {})[index] = record
        for name, records in by_topic.items():
            await self._persist(self._store.set_partitions(name, records))
            self._context.set_partitions(name, records)

    def announce(self, changes: Mapping[TopicPartition, PartitionRecord],
                 also_update: Iterable[TopicPartition] = (), *, always: bool = False) -> Sent:
        """LeaderAndIsr to the live replicas of changed partitions, UpdateMetadata for them (and for
        ``also_update``) to every live broker; with ``always`` UpdateMetadata goes even when nothing
        changed, so brokers learn the live brokers."""
        topics = self._context.topics
        partitions = [(topics[n], i) for n, i in changes]
        update = partitions + [(topics[n], i) for n, i in also_update if n in topics]
        if not update and not always:
            return Sent()
        sends = []
        if partitions:
            sends.append(self._requests.send_leader_and_isr(partitions, is_new=False))
        sends.append(self._requests.send_update_metadata(self._context.live_brokers, update))
        return Sent.combine(*sends)

    def announce_new_partitions(self, topics: list[TopicRecord], partitions: list[tuple[TopicRecord, int]]) -> Sent:
        """Tell every broker about new partitions (of new ``topics``, whose configs go first)."""
        # Per broker the channel is a FIFO: the configs arrive before LeaderAndIsr
        # creates the logs, and the partition states last.
        live = self._context.live_brokers
        sends = []
        if topics:
            sends.append(self._requests.send_topic_configs(live, topics))
        sends.append(self._requests.send_leader_and_isr(partitions, is_new=True))
        sends.append(self._requests.send_update_metadata(live, partitions))
        return Sent.combine(*sends)

    # -- new -> online, offline -> online ----------------------------------------------------------

    def new_partition(self, replicas: list[int]) -> PartitionRecord:
        """A partition created by this controller: led by its first live replica, its live replicas in sync."""
        live = self._context.live_brokers
        return PartitionRecord(replicas=tuple(replicas), leader=self._context.first_live(replicas), leader_epoch=0,
                               isr=tuple(b for b in replicas if b in live))

    def unclean_allowed(self, topic: str) -> bool:
        """``unclean.leader.election.enable`` for ``topic``: its override, else the dynamic cluster default,
        else the broker configuration."""
        record = self._context.topics.get(topic)
        if record is not None and "unclean.leader.election.enable" in record.configs:
            return _is_true(record.configs["unclean.leader.election.enable"])
        default = self._context.broker_configs.get("", {})
        if "unclean.leader.election.enable" in default:
            return _is_true(default["unclean.leader.election.enable"])
        return bool(self.config["unclean.leader.election.enable"])

    async def trigger_online_partition_state_change(self, topics: Mapping[str, TopicRecord]) -> None:
        """Kafka's ``triggerOnlinePartitionStateChange``: partitions without a state get one, partitions
        without a live leader get one from the ISR (or, if the topic allows it, uncleanly); then live
        replicas on dead brokers leave the ISR, and (``isr_follows_liveness``) live ones rejoin it
        (``election.expand_isr``)."""
        context = self._context
        electable = context.electable_brokers()
        created: dict[str, dict[int, PartitionRecord]] = {}
        changes: dict[TopicPartition, PartitionRecord] = {}
        for topic in topics.values():
            if topic.name in context.deleting:
                continue
            for index, record in topic.partitions.items():
                if not record.has_state:
                    first = election.initial_state(record.replicas, electable)
                    if first is None:
                        self.log.warn("No replica of {topic}-{partition} is alive ({replicas}): it stays offline",
                                      topic=topic.name, partition=index, replicas=list(record.replicas))
                        continue
                    created.setdefault(topic.name, {})[index] = replace(
                        first, replicas=record.replicas, adding_replicas=record.adding_replicas,
                        removing_replicas=record.removing_replicas)
                    continue
                steps: list[Step] = []
                if record.leader == NO_LEADER or record.leader not in context.live_brokers:
                    steps.append(partial(election.offline, live=electable, unclean=self.unclean_allowed(topic.name)))
                    # No replica could take over from a dead leader: the partition is offline.
                    steps.append(partial(election.without_dead_leader, live=context.live_brokers))
                # Replicas on brokers that are not alive leave the ISR (Kafka's OfflineReplica transition, which
                # a new controller applies to the failures it did not see happen).
                steps.append(partial(election.shrink_isr, live=context.live_brokers))
                if self.isr_follows_liveness:
                    steps.append(partial(election.expand_isr, live=electable))
                updated = election.compose(record, *steps)
                if updated is not None:
                    changes[(topic.name, index)] = updated
        if created:
            for name, states in created.items():
                await self._persist(self._store.set_partitions(name, states))
                context.set_partitions(name, states)
            new_topics = [context.topics[name] for name in created
                          if all(i in created[name] for i in context.topics[name].partitions)]
            self.announce_new_partitions(new_topics,
                                         [(context.topics[n], i) for n, s in created.items() for i in s])
            self.log.info("Partitions given a leader: {partitions}",
                          partitions=", ".join(f"{n}-{i}" for n, s in created.items() for i in sorted(s)))
        await self.write(changes)
        self.announce(changes)

    # -- online -> online: elections ----------------------------------------------------------------

    async def elect_leaders(self, election_type: ElectionType,
                            partitions: Iterable[TopicPartition] | None) -> dict[TopicPartition, ElectionOutcome]:
        """ElectLeaders (KIP-460): a preferred or unclean election for each partition (None: all).

        Per partition, as Kafka's ``processReplicaLeaderElection``: unknown
        ones UNKNOWN_TOPIC_OR_PARTITION, topics being deleted
        INVALID_TOPIC_EXCEPTION, those that already have the leader asked for
        (the preferred replica; any live leader for an unclean election)
        ELECTION_NOT_NEEDED, failed elections PREFERRED_LEADER_NOT_AVAILABLE /
        ELIGIBLE_LEADERS_NOT_AVAILABLE, and the new leader otherwise.
        """
        context = self._context
        if partitions is None:
            partitions = context.all_partitions()
        results: dict[TopicPartition, ElectionOutcome] = {}
        changes: dict[TopicPartition, PartitionRecord] = {}
        electable = context.electable_brokers()
        for name, index in partitions:
            record = context.partition(name, index)
            if record is None or not record.has_state:
                results[(name, index)] = ElectionOutcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                        "The partition does not exist.")
                continue
            if name in context.deleting:
                results[(name, index)] = ElectionOutcome(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                                        "The topic is being deleted")
                continue
            if election_type == ElectionType.PREFERRED:
                if record.leader == record.replicas[0]:
                    results[(name, index)] = ElectionOutcome(ErrorCode.ELECTION_NOT_NEEDED)
                    continue
                elected = election.preferred(record, electable)
                failure = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
                strategy = "PreferredReplicaPartitionLeaderElectionStrategy"
            else:
                if record.leader != NO_LEADER and record.leader in context.live_brokers:
                    results[(name, index)] = ElectionOutcome(ErrorCode.ELECTION_NOT_NEEDED)
                    continue
                elected = election.offline(record, electable, unclean=True)
                failure = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
                strategy = "OfflinePartitionLeaderElectionStrategy(true)"
            if elected is None:
                results[(name, index)] = ElectionOutcome(
                    failure, f"Failed to elect leader for partition {name}-{index} under strategy {strategy}")
                continue
            changes[(name, index)] = elected
            results[(name, index)] = ElectionOutcome(ErrorCode.NONE, None, elected.leader)
        await self.write(changes)
        self.announce(changes)
        if changes:
            self.log.info("{kind} leader election: {partitions}", kind=election_type.name.capitalize(),
                          partitions=", ".join(f"{t}-{p} -> {r.leader}" for (t, p), r in sorted(changes.items())))
        return results

    async def check_leader_balance(self) -> None:
        """Kafka's ``checkAndTriggerAutoLeaderRebalance``: for each preferred broker whose share of
        partitions led by someone else exceeds ``leader.imbalance.per.broker.percentage``, a preferred
        election for those whose preferred replica may lead."""
        context = self._context
        threshold = self.config["leader.imbalance.per.broker.percentage"] / 100.0
        by_preferred: dict[int, list[TopicPartition]] = {}
        for topic in context.topics.values():
            if topic.name in context.deleting:
                continue
            for index, record in topic.partitions.items():
                if record.replicas and record.has_state:
                    by_preferred.setdefault(record.replicas[0], []).append((topic.name, index))
        electable = context.electable_brokers()
        candidates: list[TopicPartition] = []
        for broker_id, owned in sorted(by_preferred.items()):
            elsewhere = [tp for tp in owned if context.topics[tp[0]].partitions[tp[1]].leader != broker_id]
            if len(elsewhere) / len(owned) > threshold:
                candidates += [tp for tp in elsewhere
                               if election.preferred(context.topics[tp[0]].partitions[tp[1]], electable) is not None]
        if candidates:
            self.log.info("Leader imbalance above leader.imbalance.per.broker.percentage: preferred election for "
                          "{count} partition(s)", count=len(candidates))
            await self.elect_leaders(ElectionType.PREFERRED, candidates)

    # -- online -> online: a leader's ISR (AlterPartition, API 56) --------------------------------------

    async def alter_partition(self, broker_id: int, changes: Mapping[TopicPartition, IsrChange],
                              ) -> tuple[dict[TopicPartition, ErrorCode], list[TopicPartition]]:
        """A leader's new ISR (Kafka's ``tryProcessAlterPartition``): per partition the error, NONE when
        written (or already so); and the partitions written.

        Per partition: UNKNOWN_TOPIC_OR_PARTITION; NOT_CONTROLLER when the
        leader is ahead (a newer controller exists); FENCED_LEADER_EPOCH
        behind; INVALID_UPDATE_VERSION for an older partition epoch;
        INVALID_REQUEST for a RECOVERING leader with more than itself in the
        ISR, or going back to RECOVERING; INELIGIBLE_REPLICA for a replica
        that is not alive (KIP-841).
        """
        context = self._context
        results: dict[TopicPartition, ErrorCode] = {}
        accepted: dict[TopicPartition, PartitionRecord] = {}
        for (name, index), change in changes.items():
            record = context.partition(name, index)
            if record is None or not record.has_state:
                results[(name, index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif change.partition_epoch > record.partition_epoch or change.leader_epoch > record.leader_epoch:
                results[(name, index)] = ErrorCode.NOT_CONTROLLER
            elif change.leader_epoch < record.leader_epoch:
                results[(name, index)] = ErrorCode.FENCED_LEADER_EPOCH
            elif (broker_id == record.leader and tuple(change.isr) == record.isr
                  and change.leader_recovery_state == record.leader_recovery_state):
                results[(name, index)] = ErrorCode.NONE            # already so
            elif change.partition_epoch < record.partition_epoch:
                results[(name, index)] = ErrorCode.INVALID_UPDATE_VERSION
            elif change.leader_recovery_state == RECOVERING and (
                    len(change.isr) > 1 or record.leader_recovery_state == RECOVERED):
                # a recovering leader is alone in the ISR, and nothing goes back to recovering
                results[(name, index)] = ErrorCode.INVALID_REQUEST
            elif any(b not in context.live_brokers for b in change.isr):
                results[(name, index)] = ErrorCode.INELIGIBLE_REPLICA
            else:
                accepted[(name, index)] = election.next_epoch(record, isr=tuple(change.isr),
                                                              leader_recovery_state=change.leader_recovery_state)
                results[(name, index)] = ErrorCode.NONE
        await self.write(accepted)
        if accepted:
            self._requests.send_update_metadata(context.live_brokers,
                                                [(context.topics[n], i) for n, i in accepted])
        return results, list(accepted)


__all__ = ["PartitionStateMachine", "Step"]

"""ReplicaManager: the partitions this broker hosts, and every read and write of them.

It applies the controller's decisions (LeaderAndIsr: become leader or
follower, creating the log; StopReplica: stop, and delete if asked) and
serves the data path: appends for Produce, fetching for Fetch
(``fetch_messages``, Kafka's ``fetchMessages``: one read, and a wait in the
fetch purgatory when there is not enough yet), offset lookups for
ListOffsets, log start moves for DeleteRecords.  Each goes to the partition's ``UnifiedLog``, which
decides what runs on the reactor and what in the I/O thread pool.  Whether
a controller request may be applied at all is decided before it gets here
(``ControllerRequestGuard``); a partition's leader epoch is never moved
backwards.

Other parts of the broker learn about leadership through a narrow listener
interface (``LeadershipListener``): the group coordinator loads the groups
of a ``__consumer_offsets`` partition when this broker becomes its leader
and unloads them when it stops leading it.  The replica manager calls the
listeners; it knows nothing about what they do.

Replication (a partition with more than one replica): on becoming a
follower the partition is handed to the ``ReplicaFetcherManager``, which
fetches from the leader and appends through ``append_as_follower``; on
becoming leader it is taken from it.  As leader, every follower's fetch
(``follower_fetched``) moves its position and maybe the high watermark,
which completes acks=all produces waiting in the produce purgatory and
wakes consumers' fetches; the ``IsrManager`` hears of each fetch, to add
caught-up followers to the ISR.  In a cluster (``replication`` given) the
replica manager builds both, as Kafka's builds its fetcher manager, and
they are its child services.

As a service, the replica manager serves the controller's requests from
the moment it is built (the controller tells it its partitions while the
broker starts); starting it starts its children (the ISR manager's shrink
check, Kafka's isr-expiration task); stopping it, when the broker begins
to drain its requests, stops following and changing ISRs and shuts both
purgatories, so every waiting request is answered while its connection is
still open.

Waits are Kafka's delayed operations in the broker's one purgatory
(``twisted_kafka.purgatory``): a ``DelayedFetch`` in the fetch purgatory
and a ``DelayedProduce`` in the produce purgatory, each watching its
partitions; every change to a partition -- an append, a high watermark
move, an ISR or leadership change -- checks its watchers.  Stopping the
service shuts both purgatories: every waiting fetch answers with what there
is, every waiting produce NOT_LEADER_OR_FOLLOWER.

Clients may not write to internal topics (INVALID_TOPIC_EXCEPTION, as in
Kafka); only the broker's own coordinators append to them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from twisted.application.service import MultiService, Service
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger

from twisted_kafka.controller.client import ControllerClient
from twisted_kafka.controller.interface import INTERNAL_TOPICS
from twisted_kafka.log import AppendOrigin, FetchIsolation, LogConfig, LogStore
from twisted_kafka.metrics import MetricsRegistry
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.records.file_region import FileRegion
from twisted_kafka.purgatory import Purgatory

from .broker_epoch import BrokerEpoch
from .broker_topic_metrics import BrokerTopicStats
from .delayed_fetch import DelayedFetch
from .delayed_produce import DelayedProduce
from .isr_manager import IsrManager
from .metadata_cache import MetadataCache
from .partition import Partition
from .replica_fetcher_manager import ReplicaFetcherManager


@dataclass(frozen=True)
class PartitionStateChange:
    """One partition's entry of a LeaderAndIsr request."""

    topic: str
    topic_id: uuid.UUID
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]


@dataclass(frozen=True, slots=True)
class Replication:
    """What a cluster member's replica manager needs to replicate: the configuration (``replica.*``),
    the leaders' endpoints (the metadata cache, for its fetchers), and the controller and broker epoch
    its ISR changes go to."""

    config: Any
    metadata_cache: MetadataCache
    controller: ControllerClient
    broker_epoch: BrokerEpoch


@dataclass(frozen=True, slots=True)
class FetchParams:
    """What a Fetch asks as a whole (Kafka's ``FetchParams``)."""

    replica_id: int                 # the fetching follower's broker id; -1 for a consumer
    max_wait_ms: int                # 0: answer at once
    min_bytes: int
    max_bytes: int                  # for the whole response (already capped by fetch.max.bytes)
    isolation: FetchIsolation
    #: Records may be answered as ``FileRegion``s (a plaintext connection sends them with sendfile).
    file_regions: bool = False

    @property
    def is_follower(self) -> bool:
        return self.replica_id >= 0


@dataclass(frozen=True, slots=True)
class PartitionFetch:
    """One partition a Fetch reads (Kafka's ``FetchRequest.PartitionData``)."""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1  # KIP-320 fencing; -1: not checked


class FetchTarget(Protocol):
    """What ``fetch_messages`` reads of a partition to fetch: a ``PartitionFetch``, or a fetch session's
    ``CachedPartition`` (server/fetch_session.py) named by topic name."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def fetch_offset(self) -> int: ...
    @property
    def max_bytes(self) -> int: ...
    @property
    def current_leader_epoch(self) -> int: ...


@dataclass(slots=True)
class FetchPartitionResult:
    """What one partition of a Fetch answers (Kafka's ``FetchPartitionData``); offsets -1 when unknown."""

    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: Any = b""              # never null: an empty record set when there is nothing
    # read_committed: the (producer id, first offset) of each transaction aborted in what was read
    aborted_transactions: list[tuple[int, int]] = field(default_factory=list)


def _close_regions(results: list[FetchPartitionResult]) -> None:
    """Unpin the segment files of answers that will not be sent (``file_regions`` reads)."""
    for result in results:
        records = result.records
        for chunk in records if isinstance(records, list) else ():
            if isinstance(chunk, FileRegion):
                chunk.close()


class LeadershipListener(Protocol):
    """Told when this broker starts or stops leading a partition (the group coordinator is one)."""

    def on_leader(self, partition: Partition) -> None:
        """This broker became the partition's leader (a new leader epoch)."""

    def on_follower(self, partition: Partition) -> None:
        """This broker follows the partition now (another broker leads it)."""

    def on_stopped(self, topic: str, index: int, deleted: bool) -> None:
        """This broker no longer hosts the partition; ``deleted``: its topic was deleted."""


class ReplicaManager(MultiService):
    name = "replica-manager"
    log = Logger(namespace="twisted_kafka.server.ReplicaManager")

    def __init__(self, *, broker_id: int, log_manager: LogStore, reactor, topic_overrides,
                 metrics: MetricsRegistry | None = None, replication: Replication | None = None):
        """``topic_overrides(topic)``: a topic's config overrides (from the controller's store);
        ``metrics``: where the ISR manager's meters are registered (the gauges: broker_metrics.py);
        ``replication``: in a cluster, what the fetchers and the ISR manager need."""
        super().__init__()
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.reactor = reactor
        self.topic_overrides = topic_overrides
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.fetch_purgatory = Purgatory(reactor, "Fetch")
        self.produce_purgatory = Purgatory(reactor, "Produce")
        self._listeners: list[LeadershipListener] = []
        #: A cluster member's followers' fetchers and leaders' ISR changes (None on a single node).
        self.fetchers: ReplicaFetcherManager | None = None
        self.isr_manager: IsrManager | None = None
        if replication is not None:
            self.isr_manager = IsrManager(broker_id=broker_id, broker_epoch=replication.broker_epoch,
                                          config=replication.config, reactor=reactor,
                                          controller=replication.controller, replica_manager=self, metrics=metrics)
            self.fetchers = ReplicaFetcherManager(broker_id=broker_id, config=replication.config, reactor=reactor,
                                                  metadata_cache=replication.metadata_cache, replica_manager=self)
            self.isr_manager.setServiceParent(self)
            self.fetchers.setServiceParent(self)
        #: Kafka's BrokerTopicMetrics, recorded here (appends) and by the Fetch handler (broker_topic_metrics.py).
        self.topic_stats = BrokerTopicStats()

    def stopService(self) -> None:
        """Stop following and changing ISRs, then answer every waiting produce and fetch.

        The fetchers' loops are not waited for: one may be connecting to a
        leader that is gone, which ends only at ``replica.socket.timeout.ms``,
        and the drain that follows must not wait for that.
        """
        Service.stopService(self)
        for child in reversed(list(self)):
            child.stopService()
        self.produce_purgatory.shutdown()
        self.fetch_purgatory.shutdown()

    def add_leadership_listener(self, listener: LeadershipListener) -> None:
        self._listeners.append(listener)

    def _notify(self, method: str, *args) -> None:
        for listener in self._listeners:
            try:
                getattr(listener, method)(*args)
            except Exception:
                self.log.failure("Leadership listener {listener} failed in {method}", listener=listener,
                                 method=method)

    # -- controller requests ---------------------------------------------------------

    def become_leader_or_follower(self, changes: list[PartitionStateChange]) -> dict[tuple[str, int], ErrorCode]:
        """Apply LeaderAndIsr partition states; the error per partition (NONE when applied).

        A partition whose log cannot be created or opened (out of descriptors,
        a full disk) fails alone with KAFKA_STORAGE_ERROR, as Kafka answers
        for a partition in an offline log dir; the controller's next
        LeaderAndIsr (a restart, say) tries it again.  Failures are reported
        in one line per request, not one per partition: thousands of
        partitions failing for one reason must not flood the log.
        """
        errors: dict[tuple[str, int], ErrorCode] = {}
        failed: dict[ErrorCode, list[tuple[str, str]]] = {}    # error -> (partition, message)
        for change in changes:
            key = (change.topic, change.partition)
            name = f"{change.topic}-{change.partition}"
            try:
                errors[key] = self._apply(change)
            except KafkaError as exc:
                failed.setdefault(exc.code, []).append((name, exc.message or ""))
                errors[key] = exc.code
            except OSError as exc:
                failed.setdefault(ErrorCode.KAFKA_STORAGE_ERROR, []).append((name, str(exc)))
                errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
            except Exception:
                self.log.failure("Cannot apply LeaderAndIsr for {topic}-{partition}", topic=change.topic,
                                 partition=change.partition)
                errors[key] = ErrorCode.KAFKA_STORAGE_ERROR
        for error, entries in failed.items():
            names = ", ".join(name for name, _ in entries[:5])
            if len(entries) > 5:
                names += f" and {len(entries) - 5} more"
            self.log.warn("Cannot apply LeaderAndIsr for {count} partition(s) ({names}): {error}; the first "
                          "because {reason}", count=len(entries), names=names, error=error.name,
                          reason=entries[0][1])
        return errors

    def _apply(self, change: PartitionStateChange) -> ErrorCode:
        key = (change.topic, change.partition)
        partition = self.partitions.get(key)
        if partition is not None:
            if change.topic_id != partition.topic_id:
                return ErrorCode.INCONSISTENT_TOPIC_ID
            if change.leader_epoch < partition.leader_epoch:
                return ErrorCode.STALE_CONTROLLER_EPOCH
            if change.leader_epoch == partition.leader_epoch and change.partition_epoch <= partition.partition_epoch:
                return ErrorCode.NONE  # a repeat of what was already applied
        else:
            log = self.log_manager.create_log(change.topic, change.partition, change.topic_id,
                                              self.topic_overrides(change.topic))
            partition = Partition(change.topic, change.partition, change.topic_id, log, self.broker_id,
                                  clock=self.reactor)
            self.partitions[key] = partition
        if change.leader == self.broker_id:
            if self.fetchers is not None:
                self.fetchers.remove_partition(partition)
            partition.make_leader(change.leader_epoch, change.partition_epoch, change.replicas, change.isr)
            self._notify("on_leader", partition)
        else:
            partition.make_follower(change.leader, change.leader_epoch, change.partition_epoch, change.replicas,
                                    change.isr)
            if self.fetchers is not None:
                self.fetchers.add_partition(partition)
            self._notify("on_follower", partition)
        self._partition_changed(key)
        return ErrorCode.NONE

    def stop_replica(self, topic: str, partition: int, *, delete: bool) -> Deferred | None:
        """Stop hosting a partition; with ``delete`` its log is removed too."""
        hosted = self.partitions.pop((topic, partition), None)
        if hosted is not None and self.fetchers is not None:
            self.fetchers.remove_partition(hosted)
        if hosted is not None:
            hosted.stop()
        self._partition_changed((topic, partition))
        if hosted is not None:
            self._notify("on_stopped", topic, partition, delete)
        if delete and self.log_manager.get_log(topic, partition) is not None:
            return self.log_manager.delete_log(topic, partition)
        return None

    def _partition_changed(self, key: tuple[str, int]) -> None:
        """Leadership moved or the partition went away: waits on it answer now (with the error)."""
        self.fetch_purgatory.check_and_complete(key)
        self.produce_purgatory.check_and_complete(key)

    def update_topic_config(self, topic: str, overrides) -> None:
        """A topic's overrides changed: its logs take the new effective configuration."""
        self.log_manager.update_topic_config(topic, overrides)

    # -- data path ------------------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition:
        partition = self.partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        return partition

    def log_start_offset(self, topic: str, index: int) -> int:
        """The log start offset of a hosted partition, -1 for one this broker does not host
        (what a failed Produce partition answers, as in Kafka)."""
        partition = self.partitions.get((topic, index))
        return -1 if partition is None else partition.log_start_offset

    def leader_partition(self, topic: str, index: int) -> Partition:
        partition = self.partition(topic, index)
        if not partition.is_leader:
            raise KafkaError(ErrorCode.NOT_LEADER_OR_FOLLOWER,
                             f"This broker is not the leader of {topic}-{index}")
        return partition

    def append(self, partition: Partition, records, produce_version: int | None, acks: int = 1, *,
               origin: AppendOrigin = AppendOrigin.CLIENT, timeout_ms: int = 30000) -> Deferred:
        """Append records as leader; fires with the LogAppendInfo once durable as configured.

        acks=all needs ``min.insync.replicas`` in-sync replicas (Kafka checks before appending),
        and waits -- at most ``timeout_ms`` -- until every in-sync replica has the records.
        Clients (``origin`` CLIENT) may not write to internal topics; coordinators do.
        """
        stats = self.topic_stats.topic(partition.topic)
        stats.produce_started()
        if origin is AppendOrigin.CLIENT and partition.topic in INTERNAL_TOPICS:
            raise KafkaError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Cannot append to internal topic {partition.topic}")
        if acks == -1 and len(partition.isr) < partition.log.config.min_insync_replicas:
            error = KafkaError(ErrorCode.NOT_ENOUGH_REPLICAS,
                               f"The size of the current ISR {partition.isr} is insufficient to satisfy the "
                               f"min.isr requirement of {partition.log.config.min_insync_replicas} for partition "
                               f"{partition.topic}-{partition.index}")
            stats.produce_failed(error, len(records))
            raise error
        d = partition.log.append_as_leader(records, partition.leader_epoch, produce_version=produce_version,
                                           origin=origin)
        d.addCallbacks(stats.appended, stats.append_failed, errbackArgs=(len(records),))
        d.addCallback(self._appended, partition)
        if acks == -1 and partition.followers:
            d.addCallback(self._wait_for_isr, partition, timeout_ms)
        return d

    def _appended(self, info, partition: Partition):
        if info.num_records:
            key = (partition.topic, partition.index)
            partition.follower_fetchable_bytes += info.valid_bytes
            if partition.followers:
                self.fetch_purgatory.check_and_complete(key)     # followers' fetches read it now
                if partition.maybe_increase_high_watermark():     # an ISR of the leader alone
                    self._high_watermark_moved(partition, info.valid_bytes)
            else:
                partition.consumer_fetchable_bytes += info.valid_bytes
                self.fetch_purgatory.check_and_complete(key)
        return info

    def _wait_for_isr(self, info, partition: Partition, timeout_ms: int):
        if info.num_records == 0:
            return info
        delayed = DelayedProduce(partition, info.last_offset + 1, info, timeout_ms)
        self.produce_purgatory.try_complete_else_watch(delayed, [delayed.key])
        return delayed.deferred

    def _high_watermark_moved(self, partition: Partition, nbytes: int) -> None:
        """The high watermark moved ``nbytes`` (an estimate) further: consumers' fetches may read more,
        acks=all appends may be covered."""
        key = (partition.topic, partition.index)
        partition.consumer_fetchable_bytes += nbytes
        self.fetch_purgatory.check_and_complete(key)
        self.produce_purgatory.check_and_complete(key)

    # -- replication ----------------------------------------------------------------------

    def follower_fetched(self, partition: Partition, replica_id: int, fetch_offset: int,
                         now_ms: int | None = None) -> None:
        """Leader: follower ``replica_id`` fetched from ``fetch_offset`` (its log end) at ``now_ms``."""
        if now_ms is None:
            now_ms = int(self.reactor.seconds() * 1000)
        if partition.update_follower(replica_id, fetch_offset, now_ms):
            self._high_watermark_moved(partition, 1)
        if self.isr_manager is not None:
            self.isr_manager.follower_fetched(partition, replica_id)

    def isr_changed(self, partition: Partition) -> None:
        """Leader: the controller accepted a new ISR (the high watermark may move, waits may end)."""
        key = (partition.topic, partition.index)
        if partition.maybe_increase_high_watermark():
            partition.consumer_fetchable_bytes += 1
            self.fetch_purgatory.check_and_complete(key)
        self.produce_purgatory.check_and_complete(key)

    def append_as_follower(self, partition: Partition, records, leader_high_watermark: int):
        """Follower: append the leader's batches as they are and take its high watermark."""
        log = partition.log
        info = log.append_as_follower(records) if records else None
        if info is not None:
            self.topic_stats.topic(partition.topic).replicated(info.valid_bytes)
        log.maybe_increment_high_watermark(leader_high_watermark)      # clamped to what it has
        return info

    def read(self, partition: Partition, fetch_offset: int, max_bytes: int, *,
             isolation: FetchIsolation = FetchIsolation.LOG_END, max_offset: int | None = None,
             min_one_message: bool, file_regions: bool = False) -> Deferred:
        """Read a hosted partition up to the bound of ``isolation`` (and ``max_offset``)."""
        return partition.log.read(fetch_offset, max_bytes, isolation=isolation, max_offset=max_offset,
                                  min_one_message=min_one_message, file_regions=file_regions)

    # -- fetching ----------------------------------------------------------------------------

    async def fetch_messages(self, params: FetchParams, fetches: Sequence[FetchTarget], *,
                             on_wait: Callable[[], None] | None = None) -> list[FetchPartitionResult]:
        """Fetch (Kafka's ``fetchMessages``): one result per entry of ``fetches``, in order.

        The partitions are read once, in order, within KIP-74's limits: each
        up to its ``max_bytes`` and to what is left of ``params.max_bytes``;
        only the first partition that returns data may exceed them, by its
        whole first batch, so a consumer always makes progress.  The answer
        is given at once when there is no partition to read (no append could
        ever wake such a fetch), ``max_wait_ms`` is 0, a partition failed, or
        ``min_bytes`` were found; otherwise ``on_wait`` is called (the handler
        gives its slot back) and the fetch waits in the fetch purgatory as a
        ``DelayedFetch``, which reads again when it completes.

        A follower's fetch (``params.replica_id``) tells the leader where its
        log ends (each partition's fetch offset, ``follower_fetched``) before
        its partition is read, so the high watermark in its answer counts it.
        """
        results, total, partitions, failed = await self._read_for_fetch(params, fetches)
        if not fetches or params.max_wait_ms <= 0 or failed or total >= params.min_bytes:
            return results
        _close_regions(results)    # read again when the wait ends: nothing stays pinned meanwhile
        del results
        if on_wait is not None:
            on_wait()
        delayed = DelayedFetch(max_wait_ms=params.max_wait_ms, min_bytes=params.min_bytes,
                               follower=params.is_follower, partitions=partitions, accumulated=total,
                               read=lambda: ensureDeferred(self._answer_fetch(params, fetches)))
        self.fetch_purgatory.try_complete_else_watch(delayed, delayed.keys)
        return await delayed.result

    async def _answer_fetch(self, params: FetchParams, fetches: Sequence[FetchTarget]
                            ) -> list[FetchPartitionResult]:
        # The follower's fetch state was taken when the fetch came (Kafka's DelayedFetch reads again
        # without updating it).
        results, _, _, _ = await self._read_for_fetch(params, fetches, follower_state=False)
        return results

    async def _read_for_fetch(self, params: FetchParams, fetches: Sequence[FetchTarget], *,
                              follower_state: bool = True):
        """One pass over ``fetches``: (results, bytes read, the partitions read, whether any failed).
        ``follower_state``: a follower's fetch offsets update what the leader knows of it."""
        remaining = params.max_bytes
        follower = params.replica_id if params.is_follower and follower_state else None
        total = 0
        failed = False
        results: list[FetchPartitionResult] = []
        partitions: list[Partition] = []
        isolation = params.isolation
        # An offset at the end of what the fetch may read answers no records without reading (an idle
        # partition: most of a follower's, round after round); a transactional read still goes to the log
        # for its aborted transactions.
        quick = isolation is not FetchIsolation.TXN_COMMITTED
        now_ms = int(self.reactor.seconds() * 1000)
        log_end = isolation is FetchIsolation.LOG_END
        hosted = self.partitions
        for fetch in fetches:
            result = None
            try:
                partition = hosted.get((fetch.topic, fetch.partition))
                if partition is None or not partition.is_leader:
                    partition = self.leader_partition(fetch.topic, fetch.partition)    # raises its error
                partitions.append(partition)
                epoch = fetch.current_leader_epoch
                if epoch >= 0 and epoch != partition.leader_epoch:
                    partition.check_leader_epoch(epoch)
                offset = fetch.fetch_offset
                if follower is not None:
                    self.follower_fetched(partition, follower, offset, now_ms)
                high_watermark = partition.high_watermark
                log_start = partition.log_start_offset
                result = FetchPartitionResult(ErrorCode.NONE, high_watermark, partition.last_stable_offset, log_start)
                if quick and log_start <= offset:
                    log = partition.log
                    end = log.log_end_offset
                    if (end if log_end else high_watermark) <= offset <= end and not log.deleted:
                        results.append(result)
                        continue
                limit = min(fetch.max_bytes, remaining)
                if limit > 0 or total == 0:
                    info = await self._read_partition(partition, fetch.fetch_offset, max(limit, 0),
                                                      isolation=params.isolation, min_one_message=total == 0,
                                                      file_regions=params.file_regions)
                    if info.size:
                        result.records = info.records
                        total += info.size
                        remaining -= info.size
                    if info.aborted_transactions:
                        result.aborted_transactions = [(a.producer_id, a.first_offset)
                                                       for a in info.aborted_transactions]
            except KafkaError as exc:
                if result is None:
                    result = FetchPartitionResult(exc.code)
                else:
                    result.error = exc.code     # a failed read: the partition's offsets are still told
                failed = True
            results.append(result)
        return results, total, partitions, failed

    async def _read_partition(self, partition: Partition, fetch_offset: int, max_bytes: int, **kwargs):
        """Read one partition; a failure other than a KafkaError (the log was deleted and closed while
        a read waited for the disk, an I/O error) fails only this partition."""
        try:
            return await self.read(partition, fetch_offset, max_bytes, **kwargs)
        except KafkaError:
            raise
        except Exception as exc:
            if partition.log.deleted:
                raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"{partition.topic}-{partition.index} was deleted") from None
            self.log.failure("Reading {topic}-{partition} at offset {offset} failed", topic=partition.topic,
                             partition=partition.index, offset=fetch_offset)
            self.topic_stats.topic(partition.topic).fetch_failed()
            raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"read failed: {exc}") from None

    def fetch_offset_for_timestamp(self, partition: Partition, timestamp: int) -> Deferred:
        """ListOffsets by time (KIP-79): fires with the ``TimestampAndOffset`` of the first
        record whose timestamp is at least ``timestamp``, or None."""
        return partition.log.fetch_offset_by_timestamp(timestamp)

    def fetch_offset_of_max_timestamp(self, partition: Partition) -> Deferred:
        """ListOffsets MAX_TIMESTAMP (KIP-734): fires with the ``TimestampAndOffset`` of the
        first record with the largest timestamp, or None."""
        return partition.log.fetch_offset_of_max_timestamp()

    def delete_records(self, partition: Partition, offset: int) -> int:
        """DeleteRecords on the leader: move the log start to ``offset`` (-1: the high
        watermark); returns the new log start offset (the "low watermark").

        As Kafka's ``Partition.deleteRecordsOnLeader``: POLICY_VIOLATION unless
        ``cleanup.policy`` includes ``delete``; OFFSET_OUT_OF_RANGE for another
        negative offset or one above the high watermark.  Not durable until
        ``checkpoint_log_start_offsets``.
        """
        log = partition.log
        if not log.config.delete_enabled:
            raise KafkaError(ErrorCode.POLICY_VIOLATION,
                             f"Records of partition {partition.topic}-{partition.index} can not be deleted due "
                             f"to the configured policy")
        if offset < 0 and offset != -1:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"The offset {offset} for partition {partition.topic}-{partition.index} is not valid")
        return log.delete_records_before(offset)

    def checkpoint_log_start_offsets(self) -> Deferred:
        """Write every log's start offset to disk (after DeleteRecords, so a restart
        does not bring deleted records back)."""
        return self.log_manager.checkpoint_log_start_offsets()

    def log_config(self, topic: str) -> LogConfig:
        return self.log_manager.log_config(topic)

"""The groups of the offsets partitions this broker leads (Kafka's ``GroupMetadataManager``).

It owns the in-memory groups and knows which ``__consumer_offsets``
partitions are loaded here: a partition being replayed is *loading*
(requests for its groups get COORDINATOR_LOAD_IN_PROGRESS), a loaded one is
*owned* (this broker coordinates its groups); any other partition's groups
are NOT_COORDINATOR.  Each load and unload carries the partition's leader
epoch, and one older than the last seen is ignored, so a late resignation
cannot unload a partition that was elected again since.

Writes go through the ``CoordinatorWriter`` and the in-memory state follows
the log: a commit is staged as pending, becomes the group's offset once its
batch is durable, and is dropped if the write fails.  A group's metadata
(generation, members, assignments) is written at the end of each rebalance.
Deleted groups and expired or deleted offsets are written as tombstones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from time import monotonic

from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.protocol.errors import ErrorCode, KafkaError

from .config import OffsetConfig
from .group import CommitRecord, GroupMetadata, OffsetAndMetadata, TopicPartition
from .loader import LoadedPartition
from .member import MemberMetadata
from .records import (
    NO_TIMESTAMP,
    GroupMetadataValue,
    MemberValue,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from .results import OffsetFetchResult
from .state import GroupState
from .topic import partition_for
from .writer import CoordinatorWriter

log = Logger(namespace="twisted_kafka.coordinator.group.GroupMetadataManager")


def utf16_length(value: str) -> int:
    """Java's ``String.length()``: UTF-16 code units."""
    return len(value.encode("utf-16-le", "surrogatepass")) // 2


def store_group_error(error: ErrorCode) -> ErrorCode:
    """What a failed write of a group's metadata means to its members (Kafka's mapping)."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error is ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


def offset_commit_error(error: ErrorCode) -> ErrorCode:
    """What a failed write of offsets means to the committer (Kafka's ``maybeConvertOffsetCommitError``)."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE):
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return error


def _error_of(failure: Failure) -> ErrorCode:
    value = failure.value
    if isinstance(value, KafkaError):
        return value.code
    log.failure("Write to the offsets topic failed", failure)
    return ErrorCode.UNKNOWN_SERVER_ERROR


class GroupMetadataManager:
    def __init__(self, *, config: OffsetConfig, writer: CoordinatorWriter, clock):
        self.config = config
        self.writer = writer
        self.clock = clock
        self.num_partitions = config.topic_num_partitions
        self.groups: dict[str, GroupMetadata] = {}
        self.loading_partitions: set[int] = set()
        self.owned_partitions: set[int] = set()
        self._epochs: dict[int, int] = {}
        #: ``(group, partition) -> bool``: a transactional commit waits for its marker (``txn_offsets``).
        self.pending_transactional_offset: Callable[[str, TopicPartition], bool] = lambda group, tp: False

    def now_ms(self) -> int:
        return int(self.clock.seconds() * 1000)

    # -- ownership -----------------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return partition_for(group_id, self.num_partitions)

    def is_partition_owned(self, partition: int) -> bool:
        return partition in self.owned_partitions

    def is_partition_loading(self, partition: int) -> bool:
        return partition in self.loading_partitions

    def is_group_local(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.owned_partitions

    def is_group_loading(self, group_id: str) -> bool:
        return self.partition_for(group_id) in self.loading_partitions

    @property
    def is_loading(self) -> bool:
        return bool(self.loading_partitions)

    def group_not_exists(self, group_id: str) -> bool:
        """The group's partition is ours and the group is unknown or Dead."""
        if not self.is_group_local(group_id):
            return False
        group = self.groups.get(group_id)
        return group is None or group.is_state(GroupState.DEAD)

    def _update_epoch(self, partition: int, epoch: int | None) -> bool:
        """Record ``epoch`` for ``partition``; False if an epoch newer than it was seen already."""
        current = self._epochs.get(partition)
        if epoch is None:
            return True
        if current is None or epoch > current:
            self._epochs[partition] = epoch
            return True
        return epoch == current

    # -- groups --------------------------------------------------------------------------------

    def get_group(self, group_id: str) -> GroupMetadata | None:
        return self.groups.get(group_id)

    def get_or_maybe_create_group(self, group_id: str, create: bool) -> GroupMetadata | None:
        group = self.groups.get(group_id)
        if group is None and create:
            group = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, self.now_ms)
        return group

    def add_group(self, group: GroupMetadata) -> GroupMetadata:
        return self.groups.setdefault(group.group_id, group)

    @property
    def current_groups(self) -> list[GroupMetadata]:
        return list(self.groups.values())

    # -- writes -------------------------------------------------------------------------------

    def store_group(self, group: GroupMetadata, assignment: dict[str, bytes]) -> Deferred:
        """Write the group's metadata with ``assignment``; fires with an ErrorCode (NONE when durable)."""
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "", generation=group.generation_id, protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=(group.current_state_timestamp if group.current_state_timestamp is not None
                                     else NO_TIMESTAMP),
            members=[_member_value(group, member, assignment) for member in group.members.values()])
        record = (encode_group_metadata_key(group.group_id), encode_group_metadata_value(value))
        d = self.writer.append(self.partition_for(group.group_id), [record], self.now_ms())
        generation = group.generation_id

        def failed(failure: Failure) -> ErrorCode:
            error = _error_of(failure)
            log.debug("Writing the metadata of group {group} (generation {generation}) failed: {error}",
                      group=group.group_id, generation=generation, error=error.name)
            return store_group_error(error)

        d.addCallbacks(lambda _: ErrorCode.NONE, failed)
        return d

    def store_offsets(self, group: GroupMetadata, offsets: dict[TopicPartition, OffsetAndMetadata]) -> Deferred:
        """Write commits; fires with ``{partition: ErrorCode}`` once the write is durable (or failed).
        Commits whose metadata is over ``offset.metadata.max.bytes`` fail alone with
        OFFSET_METADATA_TOO_LARGE; the others are written."""
        limit = self.config.max_metadata_size
        valid = {tp: value for tp, value in offsets.items() if utf16_length(value.metadata) <= limit}
        if not valid:
            return succeed({tp: ErrorCode.OFFSET_METADATA_TOO_LARGE for tp in offsets})
        records = [(encode_offset_commit_key(group.group_id, topic, partition),
                    encode_offset_commit_value(value))
                   for (topic, partition), value in valid.items()]
        group.prepare_offset_commit(valid)
        d = self.writer.append(self.partition_for(group.group_id), records, self.now_ms())

        def written(batch_offset: int) -> ErrorCode:
            if not group.is_state(GroupState.DEAD):
                for tp, value in valid.items():
                    group.on_offset_commit_append(tp, CommitRecord(batch_offset, value))
            return ErrorCode.NONE

        def failed(failure: Failure) -> ErrorCode:
            error = _error_of(failure)
            if not group.is_state(GroupState.DEAD):
                for tp, value in valid.items():
                    group.fail_pending_offset_write(tp, value)
            log.debug("Offset commit of group {group} failed when writing to the log: {error}",
                      group=group.group_id, error=error.name)
            return offset_commit_error(error)

        d.addCallbacks(written, failed)
        d.addCallback(lambda error: {tp: (error if tp in valid else ErrorCode.OFFSET_METADATA_TOO_LARGE)
                                     for tp in offsets})
        return d

    # -- reads --------------------------------------------------------------------------------

    def get_offsets(self, group_id: str, require_stable: bool,
                    partitions: list[TopicPartition] | None) -> dict[TopicPartition, OffsetFetchResult]:
        group = self.groups.get(group_id)
        if group is None or group.is_state(GroupState.DEAD):
            # A group known only by a transaction's pending offsets (after a load) has none stable yet.
            return {tp: OffsetFetchResult(error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
                    if require_stable and self.pending_transactional_offset(group_id, tp) else OffsetFetchResult()
                    for tp in partitions or ()}
        wanted = partitions if partitions is not None else list(group.offsets)
        result = {}
        for tp in wanted:
            if require_stable and (group.has_pending_offset_commits_for(tp)
                                   or self.pending_transactional_offset(group_id, tp)):
                result[tp] = OffsetFetchResult(error=ErrorCode.UNSTABLE_OFFSET_COMMIT)
                continue
            value = group.offset(tp)
            result[tp] = (OffsetFetchResult() if value is None
                          else OffsetFetchResult(value.offset, value.leader_epoch, value.metadata))
        return result

    # -- loading and unloading ------------------------------------------------------------------

    def load_partition(self, partition: int, epoch: int, read: Callable[[], Deferred],
                       on_group_loaded: Callable[[GroupMetadata], None]) -> Deferred | None:
        """Replay ``partition`` (``read()`` fires with its ``LoadedPartition``) and take its groups;
        None when there is nothing to do (an older epoch, or already owned or loading)."""
        if not self._update_epoch(partition, epoch):
            log.info("Not loading {topic} partition {partition} for epoch {epoch}: a newer epoch was seen",
                     topic="__consumer_offsets", partition=partition, epoch=epoch)
            return None
        if partition in self.owned_partitions or partition in self.loading_partitions:
            return None
        self.loading_partitions.add(partition)
        began = monotonic()
        d = read()

        def loaded(result: LoadedPartition) -> None:
            if partition not in self.loading_partitions:
                return          # unloaded while loading
            self._take(partition, result, on_group_loaded)
            log.info("Loaded offsets and group metadata of __consumer_offsets-{partition} (epoch {epoch}): "
                     "{groups} group(s), {records} record(s) in {ms:.1f} ms", partition=partition, epoch=epoch,
                     groups=sum(1 for g in self.groups if self.partition_for(g) == partition),
                     records=result.records, ms=(monotonic() - began) * 1000)

        def failed(failure: Failure) -> None:
            log.failure("Loading __consumer_offsets-{partition} failed", failure, partition=partition)

        def done(_) -> None:
            if partition in self.loading_partitions:
                self.loading_partitions.discard(partition)
                self.owned_partitions.add(partition)

        d.addCallbacks(loaded, failed)
        d.addBoth(done)
        return d

    def _take(self, partition: int, result: LoadedPartition, on_group_loaded: Callable[[GroupMetadata], None]) -> None:
        for group_id, value in result.groups.items():
            group = _group_from_value(group_id, value, self.now_ms)
            group.initialize_offsets(result.offsets.get(group_id, {}))
            current = self.add_group(group)
            if current is group:
                on_group_loaded(group)
        for group_id, offsets in result.offsets.items():
            if group_id in result.groups:
                continue
            group = GroupMetadata(group_id, GroupState.EMPTY, self.now_ms)
            group.initialize_offsets(offsets)
            current = self.add_group(group)
            if current is group:
                on_group_loaded(group)

    def unload_all(self, on_group_unloaded: Callable[[GroupMetadata], None]) -> int:
        """The coordinator stops: every group is unloaded (a load in progress is dropped when it
        ends) and no partition is owned any more; returns how many groups there were."""
        groups = list(self.groups.values())
        self.owned_partitions.clear()
        self.loading_partitions.clear()
        for group in groups:
            on_group_unloaded(group)
        self.groups.clear()
        return len(groups)

    def remove_groups_for_partition(self, partition: int, epoch: int | None,
                                    on_group_unloaded: Callable[[GroupMetadata], None]) -> None:
        if not self._update_epoch(partition, epoch):
            log.info("Not unloading __consumer_offsets-{partition} for epoch {epoch}: a newer epoch was seen",
                     partition=partition, epoch=epoch)
            return
        self.owned_partitions.discard(partition)
        self.loading_partitions.discard(partition)
        removed = 0
        for group in list(self.groups.values()):
            if self.partition_for(group.group_id) == partition:
                on_group_unloaded(group)
                del self.groups[group.group_id]
                removed += 1
        if removed:
            log.info("Unloaded {n} group(s) of __consumer_offsets-{partition}", n=removed, partition=partition)

    # -- cleanup ---------------------------------------------------------------------------------

    def cleanup_group_metadata(
            self, groups: Iterable[GroupMetadata],
            selector: Callable[[GroupMetadata], dict[TopicPartition, OffsetAndMetadata]]) -> tuple[int, Deferred]:
        """Remove what ``selector`` picks from each group, write the tombstones, and drop groups left
        Empty without offsets (with a group tombstone unless the group only ever stored offsets).
        Returns the number of offsets removed and a Deferred firing once the tombstones are written."""
        removed_total = 0
        writes = []
        now = self.now_ms()
        for group in groups:
            removed = selector(group)
            if group.is_state(GroupState.EMPTY) and not group.has_offsets:
                log.info("Group {group} transitioned to Dead in generation {generation}", group=group.group_id,
                         generation=group.generation_id)
                group.transition_to(GroupState.DEAD)
            tombstones: list[tuple[bytes, bytes | None]] = [
                (encode_offset_commit_key(group.group_id, topic, index), None) for topic, index in removed]
            if group.is_state(GroupState.DEAD) and self.groups.get(group.group_id) is group:
                del self.groups[group.group_id]
                if group.generation_id > 0:
                    tombstones.append((encode_group_metadata_key(group.group_id), None))
            removed_total += len(removed)
            if tombstones and self.is_group_local(group.group_id):
                d = self.writer.append(self.partition_for(group.group_id), tombstones, now)
                d.addErrback(_tombstones_failed, group.group_id)
                writes.append(d)
        if not writes:
            return removed_total, succeed(None)
        done: Deferred = Deferred()
        remaining = [len(writes)]

        def one_done(_):
            remaining[0] -= 1
            if remaining[0] == 0:
                done.callback(None)

        for d in writes:
            d.addBoth(one_done)
        return removed_total, done

    def cleanup_expired_offsets(self) -> int:
        now = self.now_ms()
        removed, _ = self.cleanup_group_metadata(
            self.current_groups, lambda g: g.remove_expired_offsets(now, self.config.retention_ms))
        if removed:
            log.info("Removed {n} expired offset(s)", n=removed)
        return removed


def _tombstones_failed(failure: Failure, group_id: str) -> None:
    log.warn("Writing tombstones for group {group} failed: {error}", group=group_id, error=failure.getErrorMessage())


def _member_value(group: GroupMetadata, member: MemberMetadata, assignment: dict[str, bytes]) -> MemberValue:
    if group.protocol_name is None:
        raise RuntimeError(f"group {group.group_id} has members but no protocol")
    return MemberValue(member_id=member.member_id, client_id=member.client_id, client_host=member.client_host,
                       session_timeout=member.session_timeout_ms, rebalance_timeout=member.rebalance_timeout_ms,
                       subscription=member.metadata(group.protocol_name),
                       assignment=assignment.get(member.member_id, b""), group_instance_id=member.group_instance_id)


def _group_from_value(group_id: str, value: GroupMetadataValue, now_ms: Callable[[], int]) -> GroupMetadata:
    """A group as its last metadata record left it: Stable with those members, or Empty."""
    group = GroupMetadata(group_id, GroupState.STABLE if value.members else GroupState.EMPTY, now_ms)
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.leader_id = value.leader
    group.current_state_timestamp = (value.current_state_timestamp
                                     if value.current_state_timestamp != NO_TIMESTAMP else None)
    for m in value.members:
        member = MemberMetadata(
            member_id=m.member_id, group_instance_id=m.group_instance_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout,
            session_timeout_ms=m.session_timeout, protocol_type=value.protocol_type,
            supported_protocols=[(value.protocol or "", m.subscription)], assignment=m.assignment)
        group.add(member)
    group.subscribed_topics = group.compute_subscribed_topics()
    return group

"""Offsets committed in a transaction (TxnOffsetCommit; Kafka's ``pendingTransactionalOffsetCommits``).

A transactional producer commits a consumer group's offsets as part of its
transaction (``send_offsets_to_transaction``).  The commit is written to the
group's ``__consumer_offsets`` partition in a transactional batch carrying
the producer's id and epoch, and stays *pending*: OffsetFetch does not show
it (with ``require_stable``, KIP-447, the partition answers
UNSTABLE_OFFSET_COMMIT).  The transaction's marker in that partition decides
it (``complete``): COMMIT makes the offsets the group's committed offsets
(unless a later commit is there already), ABORT drops them.  The loader
replays the same rule from the log after a restart (``loader.replay``), and
the commits still waiting for their marker at the end of the load are
pending again (``on_loaded``).

KIP-447: from TxnOffsetCommit v3 the producer sends its consumer's
generation and member id, checked against the group as OffsetCommit's are,
so a zombie that lost its partitions in a rebalance cannot commit; in a
group of the consumer protocol (KIP-848) the generation is the member epoch.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.protocol.errors import ErrorCode

from .group import CommitRecord, GroupMetadata, OffsetAndMetadata, TopicPartition
from .loader import LoadedPartition
from .manager import _error_of, offset_commit_error, utf16_length
from .records import encode_offset_commit_key, encode_offset_commit_value
from .state import GroupState

log = Logger(namespace="twisted_kafka.coordinator.group.TransactionalOffsets")

NO_MEMBER_ID = ""


class TransactionalOffsets:
    def __init__(self, coordinator):
        self.coordinator = coordinator
        self.manager = coordinator.manager
        #: producer id -> group -> partition -> the commit written (with its batch offset)
        self.pending: dict[int, dict[str, dict[TopicPartition, CommitRecord]]] = {}

    def has_pending(self, group_id: str, tp: TopicPartition) -> bool:
        return any(tp in by_group.get(group_id, ()) for by_group in self.pending.values())

    def commit(self, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
               group_instance_id: str | None, generation_id: int,
               offsets: dict[TopicPartition, OffsetAndMetadata]) -> Deferred:
        """Fires with ``{partition: ErrorCode}`` once the transactional commit is in the log."""
        error = self.coordinator._validate_group_status(group_id, "txn-offset-commit")
        if error is not None:
            return succeed(dict.fromkeys(offsets, error))
        group = self.manager.get_group(group_id)
        if group is None:
            group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.manager.now_ms))
        error = self._validate(group, member_id, group_instance_id, generation_id)
        if error is not None:
            return succeed(dict.fromkeys(offsets, error))
        limit = self.manager.config.max_metadata_size
        valid = {tp: value for tp, value in offsets.items() if utf16_length(value.metadata) <= limit}
        if not valid:
            return succeed(dict.fromkeys(offsets, ErrorCode.OFFSET_METADATA_TOO_LARGE))
        records = [(encode_offset_commit_key(group_id, topic, partition), encode_offset_commit_value(value))
                   for (topic, partition), value in valid.items()]
        d = self.manager.writer.append(self.manager.partition_for(group_id), records, self.manager.now_ms(),
                                       producer_id=producer_id, producer_epoch=producer_epoch)

        def written(batch_offset: int) -> ErrorCode:
            staged = self.pending.setdefault(producer_id, {}).setdefault(group_id, {})
            for tp, value in valid.items():
                staged[tp] = CommitRecord(batch_offset, value)
            return ErrorCode.NONE

        def failed(failure: Failure) -> ErrorCode:
            error = _error_of(failure)
            log.debug("Transactional offset commit of group {group} failed: {error}", group=group_id,
                      error=error.name)
            if error is ErrorCode.INVALID_PRODUCER_EPOCH:
                return error
            return offset_commit_error(error)

        d.addCallbacks(written, failed)
        d.addCallback(lambda error: {tp: (error if tp in valid else ErrorCode.OFFSET_METADATA_TOO_LARGE)
                                     for tp in offsets})
        return d

    def _validate(self, group: GroupMetadata, member_id: str, group_instance_id: str | None,
                  generation_id: int) -> ErrorCode | None:
        """Kafka's ``doTxnCommitOffsets`` checks."""
        if self.coordinator.consumer.is_consumer_group(group.group_id):
            return self._validate_consumer_group(group.group_id, member_id, generation_id)
        if group.is_state(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group_instance_id is not None:
            current = group.current_static_member_id(group_instance_id)
            if current is not None and current != member_id:
                return ErrorCode.FENCED_INSTANCE_ID
        if member_id != NO_MEMBER_ID and not group.has(member_id):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id >= 0 and generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return None

    def _validate_consumer_group(self, group_id: str, member_id: str, member_epoch: int) -> ErrorCode | None:
        """A group of the consumer protocol (KIP-848; Kafka's ``ConsumerGroup.validateOffsetCommit`` for a
        transactional commit): the generation field carries the member epoch, which must be the member's
        current one (STALE_MEMBER_EPOCH; ILLEGAL_GENERATION for a classic member of the group); without a
        member (epoch -1) only while the group has no members."""
        group = self.coordinator.consumer.get(group_id)
        if group is None or (member_epoch < 0 and not group.members):
            return None
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member_epoch != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION if member.classic is not None else ErrorCode.STALE_MEMBER_EPOCH
        return None

    def complete(self, producer_id: int, offsets_partitions: set[int], commit: bool) -> int:
        """The transaction's marker is in ``offsets_partitions``: apply (COMMIT) or drop its commits
        of the groups there; the number of offsets decided."""
        by_group = self.pending.get(producer_id)
        if not by_group:
            return 0
        decided = 0
        for group_id in [g for g in by_group if self.manager.partition_for(g) in offsets_partitions]:
            staged = by_group.pop(group_id)
            decided += len(staged)
            if not commit:
                continue
            group = self.manager.get_group(group_id)
            if group is None:
                group = self.manager.add_group(GroupMetadata(group_id, GroupState.EMPTY, self.manager.now_ms))
            if group.is_state(GroupState.DEAD):
                continue
            for tp, record in staged.items():
                current = group.offsets.get(tp)
                if current is None or current.batch_offset < record.batch_offset:
                    group.offsets[tp] = record
        if not by_group:
            del self.pending[producer_id]
        return decided

    def on_loaded(self, loaded: LoadedPartition, partition: int) -> LoadedPartition:
        """A replayed partition's commits still waiting for their marker are pending again."""
        for producer_id, staged in loaded.pending.items():
            for (group_id, tp), record in staged.items():
                if record is not None:
                    self.pending.setdefault(producer_id, {}).setdefault(group_id, {})[tp] = record
        return loaded

    def on_unloaded(self, partition: int) -> None:
        for producer_id in list(self.pending):
            by_group = self.pending[producer_id]
            for group_id in [g for g in by_group if self.manager.partition_for(g) == partition]:
                del by_group[group_id]
            if not by_group:
                del self.pending[producer_id]


__all__ = ["TransactionalOffsets"]

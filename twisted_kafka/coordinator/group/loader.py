"""Replaying a ``__consumer_offsets`` partition into groups and offsets.

When this broker becomes the leader of an offsets partition it reads the
partition from its log start to its end and keeps the last word on every
key, as Kafka's ``GroupMetadataManager.doLoadGroupsAndOffsets`` does:

* an offset commit record sets the group's offset for that partition; a
  tombstone (null value) removes it;
* a group metadata record sets the group's generation, protocol, leader and
  members (with their subscriptions and assignments); a tombstone removes
  the group (its offsets may still be there: a group used only for commits);
* transactional offset commits (``TxnOffsetCommit``) count only once a
  COMMIT marker of their producer follows, and are dropped at ABORT;
* consumer group records (KIP-848, key versions 3-8) are kept by key, the
  last word on each (``consumer_load`` builds the groups from them);
* records of keys this coordinator does not know (newer coordinators'
  record types: share groups, streams groups) are skipped.

``replay`` is the pure part (batches in, state out); ``read_partition`` is
the I/O: it reads the partition's log through its ``UnifiedLog`` (page
cache on the reactor, the disk in the I/O thread pool) in chunks of
``offsets.load.buffer.size``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from twisted.logger import Logger

from twisted_kafka.log import FetchIsolation, PartitionLog
from twisted_kafka.protocol.exceptions import ProtocolDecodeError
from twisted_kafka.protocol.records.batch import RecordBatchHeader, iter_batch_headers
from twisted_kafka.protocol.records.record import Record, iter_records

from .consumer_records import CONSUMER_KEY_VERSIONS, ConsumerGroupKey, decode_consumer_key
from .group import CommitRecord, OffsetAndMetadata, TopicPartition
from .records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)

log = Logger(namespace="twisted_kafka.coordinator.group.loader")

_CONTROL_COMMIT = 1


@dataclass
class LoadedPartition:
    """What an offsets partition holds: the latest word on each group and each offset."""

    groups: dict[str, GroupMetadataValue] = field(default_factory=dict)
    removed_groups: set[str] = field(default_factory=set)
    offsets: dict[str, dict[TopicPartition, CommitRecord]] = field(default_factory=dict)
    records: int = 0
    skipped: int = 0
    next_offset: int = 0
    # Transactional commits waiting for their producer's marker: producer id -> (group, partition) -> commit.
    pending: dict[int, dict[tuple[str, TopicPartition], CommitRecord | None]] = field(default_factory=dict)
    # Consumer group records (KIP-848): the latest value of each key; tombstones remove the key.
    consumer_records: dict[ConsumerGroupKey, bytes] = field(default_factory=dict)


def _offset_value(value: bytes) -> OffsetAndMetadata:
    return decode_offset_commit_value(value)


def replay(batches: Iterable[tuple[RecordBatchHeader, Iterable[Record]]],
           into: LoadedPartition | None = None) -> LoadedPartition:
    """Apply ``(header, records)`` of consecutive batches to ``into`` (a new result by default)."""
    loaded = into if into is not None else LoadedPartition()
    pending = loaded.pending
    offsets = loaded.offsets
    for header, records in batches:
        loaded.next_offset = header.next_offset
        if header.is_control:
            for record in records:
                if record.key is not None and len(record.key) >= 4:
                    marker = int.from_bytes(record.key[2:4], "big", signed=True)
                    staged = pending.pop(header.producer_id, {})
                    if marker == _CONTROL_COMMIT:
                        for (group, tp), commit in staged.items():
                            _apply_offset(offsets, group, tp, commit)
                break
            continue
        transactional = header.is_transactional
        for record in records:
            loaded.records += 1
            if record.key is None:
                loaded.skipped += 1
                continue
            key = decode_key(record.key)
            if isinstance(key, OffsetCommitKey):
                tp = (key.topic, key.partition)
                commit = (CommitRecord(header.base_offset, _offset_value(record.value))
                          if record.value is not None else None)
                if transactional:
                    pending.setdefault(header.producer_id, {})[(key.group, tp)] = commit
                else:
                    _apply_offset(offsets, key.group, tp, commit)
            elif isinstance(key, GroupMetadataKey):
                if record.value is None:
                    loaded.groups.pop(key.group, None)
                    loaded.removed_groups.add(key.group)
                else:
                    loaded.groups[key.group] = decode_group_metadata_value(record.value)
                    loaded.removed_groups.discard(key.group)
            else:
                assert isinstance(key, UnknownKey)
                if key.version in CONSUMER_KEY_VERSIONS:
                    try:
                        consumer_key = decode_consumer_key(key.version, record.key, 2)
                    except ProtocolDecodeError as exc:
                        log.warn("Skipping a malformed consumer group record key at offset {offset}: {error}",
                                 offset=header.base_offset, error=exc)
                        loaded.skipped += 1
                        continue
                    if record.value is None:
                        loaded.consumer_records.pop(consumer_key, None)
                    else:
                        loaded.consumer_records[consumer_key] = bytes(record.value)
                else:
                    loaded.skipped += 1
    return loaded


def _apply_offset(offsets: dict[str, dict[TopicPartition, CommitRecord]], group: str, tp: TopicPartition,
                  commit: CommitRecord | None) -> None:
    if commit is None:
        by_group = offsets.get(group)
        if by_group is not None:
            by_group.pop(tp, None)
            if not by_group:
                del offsets[group]
    else:
        offsets.setdefault(group, {})[tp] = commit


def batches_of(chunks: Iterable) -> Iterator[tuple[RecordBatchHeader, Iterator[Record]]]:
    """The batches of read chunks (each holding whole batches), with their records."""
    for chunk in chunks:
        buf = bytes(chunk)
        for pos, header in iter_batch_headers(buf, allow_partial_tail=True):
            yield header, iter_records(buf, pos, header)


async def read_partition(partition_log: PartitionLog, load_buffer_size: int) -> LoadedPartition:
    """Replay a partition's whole log (from its start to the end it had when the load began)."""
    loaded = LoadedPartition()
    offset = partition_log.log_start_offset
    end = partition_log.log_end_offset
    while offset < end:
        info = await partition_log.read(offset, load_buffer_size, isolation=FetchIsolation.LOG_END, max_offset=end,
                                        min_one_message=True)
        if not info.records:
            break
        loaded.next_offset = offset
        replay(batches_of(info.records), loaded)
        if loaded.next_offset <= offset:
            break
        offset = loaded.next_offset
    return loaded

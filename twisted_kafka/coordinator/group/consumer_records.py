"""The records of consumer groups (KIP-848) in ``__consumer_offsets``, in Kafka's formats.

Kafka's ``group-coordinator`` message definitions, each key prefixed by its
INT16 version (which says the record type) and each value by its INT16
version 0 (flexible: compact strings and arrays, tagged fields)::

    key 3  ConsumerGroupMetadataKey(GroupId)
           ConsumerGroupMetadataValue(Epoch int32)
    key 4  ConsumerGroupPartitionMetadataKey(GroupId)
           ConsumerGroupPartitionMetadataValue(Topics [TopicId uuid, TopicName string, NumPartitions int32,
                                                       PartitionMetadata [Partition int32, Racks [string]]])
    key 5  ConsumerGroupMemberMetadataKey(GroupId, MemberId)
           ConsumerGroupMemberMetadataValue(InstanceId string?, RackId string?, ClientId string,
               ClientHost string, SubscribedTopicNames [string], SubscribedTopicRegex string?,
               RebalanceTimeoutMs int32, ServerAssignor string?, tag 0: ClassicMemberMetadata)
    key 6  ConsumerGroupTargetAssignmentMetadataKey(GroupId)
           ConsumerGroupTargetAssignmentMetadataValue(AssignmentEpoch int32)
    key 7  ConsumerGroupTargetAssignmentMemberKey(GroupId, MemberId)
           ConsumerGroupTargetAssignmentMemberValue(TopicPartitions [TopicId uuid, Partitions [int32]])
    key 8  ConsumerGroupCurrentMemberAssignmentKey(GroupId, MemberId)
           ConsumerGroupCurrentMemberAssignmentValue(MemberEpoch int32, PreviousMemberEpoch int32, State int8,
               AssignedPartitions [..], PartitionsPendingRevocation [..])

Keys are not flexible (plain strings).  A null value is a tombstone.  A
member leaving writes tombstones for its current assignment, its target
assignment and its metadata, in that order, as Kafka does; the group's
deletion writes tombstones for the target metadata, the partition metadata
and the group metadata.  A member using the classic protocol inside a
consumer group (online migration) carries its session timeout and offered
protocols in the member metadata's tagged field 0 (``ClassicMemberMetadata``);
other tagged fields are skipped when read.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from twisted_kafka.protocol.exceptions import ProtocolDecodeError
from twisted_kafka.protocol.primitives import (
    EMPTY_TAGGED_FIELDS,
    INT8,
    INT16,
    INT32,
    decode_compact_array,
    decode_compact_bytes,
    decode_compact_string,
    decode_int8,
    decode_int16,
    decode_int32,
    decode_string,
    decode_tagged_fields,
    decode_uuid,
    encode_compact_array,
    encode_compact_bytes,
    encode_compact_nullable_string,
    encode_compact_string,
    encode_string,
    encode_tagged_fields,
    encode_uuid,
)

from .consumer_member import Assignment, ClassicMember, ConsumerMember, MemberState, normalized

GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT = range(3, 9)
CONSUMER_KEY_VERSIONS = frozenset(range(3, 9))
_VALUE_VERSION = 0


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """A consumer group record's key: its type (the key version), group and member (or None)."""

    kind: int
    group: str
    member: str | None = None


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


# -- keys -----------------------------------------------------------------------------------------


def encode_key(kind: int, group: str, member: str | None = None) -> bytes:
    out = INT16.pack(kind) + encode_string(group)
    if kind in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT):
        out += encode_string(member or "")
    return out


def decode_consumer_key(kind: int, buf, pos: int) -> ConsumerGroupKey:
    group, pos = decode_string(buf, pos)
    member = None
    if kind in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT):
        member, pos = decode_string(buf, pos)
    if pos != len(buf):
        raise ProtocolDecodeError(f"{len(buf) - pos} bytes left over after a consumer group key")
    return ConsumerGroupKey(kind, group, member)


# -- values ---------------------------------------------------------------------------------------


def _value(*parts: bytes) -> bytes:
    return INT16.pack(_VALUE_VERSION) + b"".join(parts) + EMPTY_TAGGED_FIELDS


def _encode_partitions(assignment: Assignment) -> bytes:
    return encode_compact_array(sorted(assignment.items(), key=lambda item: item[0].bytes), lambda item: (
        encode_uuid(item[0]) + encode_compact_array(sorted(item[1]), INT32.pack) + EMPTY_TAGGED_FIELDS))


def _decode_partitions(buf, pos: int):
    def one(buf, pos):
        topic, pos = decode_uuid(buf, pos)
        parts, pos = decode_compact_array(buf, pos, decode_int32)
        _, pos = decode_tagged_fields(buf, pos)
        return (topic, frozenset(parts or ())), pos

    items, pos = decode_compact_array(buf, pos, one)
    return normalized(dict(items or ())), pos


def _start(buf) -> int:
    version, pos = decode_int16(buf, 0)
    if version != _VALUE_VERSION:
        raise ProtocolDecodeError(f"unknown consumer group value version {version}")
    return pos


def _end(buf, pos: int) -> None:
    _, pos = decode_tagged_fields(buf, pos)
    if pos != len(buf):
        raise ProtocolDecodeError(f"{len(buf) - pos} bytes left over after a consumer group value")


def encode_epoch_value(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue and ConsumerGroupTargetAssignmentMetadataValue: one int32."""
    return _value(INT32.pack(epoch))


def decode_epoch_value(buf) -> int:
    epoch, pos = decode_int32(buf, _start(buf))
    _end(buf, pos)
    return epoch


def encode_partition_metadata_value(topics: list[TopicMetadata]) -> bytes:
    return _value(encode_compact_array(sorted(topics, key=lambda t: t.name), lambda t: (
        encode_uuid(t.topic_id) + encode_compact_string(t.name) + INT32.pack(t.num_partitions)
        + encode_compact_array([], INT32.pack) + EMPTY_TAGGED_FIELDS)))


def decode_partition_metadata_value(buf) -> list[TopicMetadata]:
    def partition(buf, pos):
        index, pos = decode_int32(buf, pos)
        _, pos = decode_compact_array(buf, pos, decode_compact_string)
        _, pos = decode_tagged_fields(buf, pos)
        return index, pos

    def topic(buf, pos):
        topic_id, pos = decode_uuid(buf, pos)
        name, pos = decode_compact_string(buf, pos)
        count, pos = decode_int32(buf, pos)
        _, pos = decode_compact_array(buf, pos, partition)
        _, pos = decode_tagged_fields(buf, pos)
        return TopicMetadata(topic_id, name, count), pos

    topics, pos = decode_compact_array(buf, _start(buf), topic)
    _end(buf, pos)
    return list(topics or ())


def _encode_classic(classic: ClassicMember) -> bytes:
    return (INT32.pack(classic.session_timeout_ms)
            + encode_compact_array(list(classic.protocols), lambda p: (
                encode_compact_string(p[0]) + encode_compact_bytes(p[1]) + EMPTY_TAGGED_FIELDS))
            + EMPTY_TAGGED_FIELDS)


def _decode_classic(buf) -> ClassicMember:
    session, pos = decode_int32(buf, 0)

    def protocol(buf, pos):
        name, pos = decode_compact_string(buf, pos)
        metadata, pos = decode_compact_bytes(buf, pos)
        _, pos = decode_tagged_fields(buf, pos)
        return (name, bytes(metadata)), pos

    protocols, pos = decode_compact_array(buf, pos, protocol)
    _, pos = decode_tagged_fields(buf, pos)
    return ClassicMember(session, tuple(protocols or ()))


def encode_member_metadata_value(member: ConsumerMember) -> bytes:
    body = b"".join((
        encode_compact_nullable_string(member.instance_id), encode_compact_nullable_string(member.rack_id),
        encode_compact_string(member.client_id), encode_compact_string(member.client_host),
        encode_compact_array(list(member.subscribed_topic_names), encode_compact_string),
        encode_compact_nullable_string(member.subscribed_topic_regex), INT32.pack(member.rebalance_timeout_ms),
        encode_compact_nullable_string(member.server_assignor)))
    tags = {0: _encode_classic(member.classic)} if member.classic is not None else None
    return INT16.pack(_VALUE_VERSION) + body + encode_tagged_fields(tags)


def decode_member_metadata_value(member_id: str, buf) -> ConsumerMember:
    pos = _start(buf)
    instance_id, pos = decode_compact_string(buf, pos, nullable=True)
    rack_id, pos = decode_compact_string(buf, pos, nullable=True)
    client_id, pos = decode_compact_string(buf, pos)
    client_host, pos = decode_compact_string(buf, pos)
    names, pos = decode_compact_array(buf, pos, decode_compact_string)
    regex, pos = decode_compact_string(buf, pos, nullable=True)
    rebalance_timeout, pos = decode_int32(buf, pos)
    assignor, pos = decode_compact_string(buf, pos, nullable=True)
    tags, pos = decode_tagged_fields(buf, pos)
    if pos != len(buf):
        raise ProtocolDecodeError(f"{len(buf) - pos} bytes left over after a consumer group member value")
    return ConsumerMember(member_id=member_id, instance_id=instance_id, rack_id=rack_id, client_id=client_id,
                          client_host=client_host, subscribed_topic_names=tuple(names or ()),
                          subscribed_topic_regex=regex, rebalance_timeout_ms=rebalance_timeout,
                          server_assignor=assignor, classic=_decode_classic(tags[0]) if 0 in tags else None)


def encode_target_member_value(assignment: Assignment) -> bytes:
    return _value(_encode_partitions(assignment))


def decode_target_member_value(buf) -> Assignment:
    assignment, pos = _decode_partitions(buf, _start(buf))
    _end(buf, pos)
    return assignment


def encode_current_assignment_value(member: ConsumerMember) -> bytes:
    return _value(INT32.pack(member.member_epoch), INT32.pack(member.previous_member_epoch),
                  INT8.pack(int(member.state)), _encode_partitions(member.assigned),
                  _encode_partitions(member.pending_revocation))


def decode_current_assignment_value(buf) -> CurrentAssignment:
    pos = _start(buf)
    epoch, pos = decode_int32(buf, pos)
    previous, pos = decode_int32(buf, pos)
    state, pos = decode_int8(buf, pos)
    assigned, pos = _decode_partitions(buf, pos)
    pending, pos = _decode_partitions(buf, pos)
    _end(buf, pos)
    try:
        member_state = MemberState(state)
    except ValueError:
        member_state = MemberState.UNKNOWN
    return CurrentAssignment(epoch, previous, member_state, assigned, pending)

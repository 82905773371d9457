"""The records of ``__consumer_offsets``: Kafka's own key and value schemas.

Every record the group coordinator writes is a key and a value, each
prefixed by an INT16 schema version (Kafka's
``MessageUtil.toVersionPrefixedBytes``), so a partition written here reads
in Kafka's tools and the other way round.  The schemas are Kafka's message
definitions ``OffsetCommitKey``, ``OffsetCommitValue``, ``GroupMetadataKey``
and ``GroupMetadataValue`` (``group-coordinator/src/main/resources/common/
message``):

* key version 0 or 1: an offset commit -- group, topic, partition;
* key version 2: a group's metadata -- group;
* any other key version is a record some newer coordinator wrote (KIP-848
  consumer groups, share groups): loaders skip it.

``OffsetCommitValue`` (versions 0-4; 4 is flexible)::

    offset            int64
    leaderEpoch       int32   v3+ (-1: none)
    metadata          string
    commitTimestamp   int64
    expireTimestamp   int64   v1 only (-1: none)

``GroupMetadataValue`` (versions 0-4; 4 is flexible)::

    protocolType           string
    generation             int32
    protocol               nullable string
    leader                 nullable string
    currentStateTimestamp  int64   v2+ (-1: unknown)
    members                [memberId string, groupInstanceId nullable string (v3+),
                            clientId string, clientHost string,
                            rebalanceTimeout int32 (v1+), sessionTimeout int32,
                            subscription bytes, assignment bytes]

Written versions are those of a Kafka 2.3+ broker: key 1 for offsets (the
highest key version), key 2 for groups, value 3 for offsets (1 when the
commit carries an explicit expiry, OffsetCommit v2-v4's retention time) and
3 for groups -- the highest non-flexible ones.  Reading takes every version.
A null value is a tombstone: the offset (or the group) was deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from twisted_kafka.protocol.exceptions import ProtocolDecodeError
from twisted_kafka.protocol.primitives import (
    INT16,
    INT32,
    INT64,
    decode_array,
    decode_bytes,
    decode_compact_array,
    decode_compact_bytes,
    decode_compact_string,
    decode_int16,
    decode_int32,
    decode_int64,
    decode_string,
    decode_tagged_fields,
    encode_array,
    encode_bytes,
    encode_nullable_string,
    encode_string,
)

__all__ = [
    "OffsetCommitKey", "GroupMetadataKey", "UnknownKey", "OffsetCommitValue", "GroupMetadataValue",
    "MemberValue", "encode_offset_commit_key", "encode_group_metadata_key", "decode_key",
    "encode_offset_commit_value", "decode_offset_commit_value", "encode_group_metadata_value",
    "decode_group_metadata_value", "NO_TIMESTAMP", "NO_LEADER_EPOCH",
]

NO_TIMESTAMP = -1
NO_LEADER_EPOCH = -1

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3
_HIGHEST_VALUE_VERSION = 4
_FIRST_FLEXIBLE = 4


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class UnknownKey:
    """A key of a schema this coordinator does not read (a newer coordinator's record)."""

    version: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    metadata: str
    commit_timestamp: int
    leader_epoch: int = NO_LEADER_EPOCH
    expire_timestamp: int = NO_TIMESTAMP


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    client_id: str
    client_host: str
    session_timeout: int
    rebalance_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = NO_TIMESTAMP
    members: list[MemberValue] = field(default_factory=list)


def _require_end(buf, pos: int, what: str) -> None:
    if pos != len(buf):
        raise ProtocolDecodeError(f"{len(buf) - pos} bytes left over after a {what}")


# -- keys ---------------------------------------------------------------------------------------


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return (INT16.pack(OFFSET_COMMIT_KEY_VERSION) + encode_string(group) + encode_string(topic)
            + INT32.pack(partition))


def encode_group_metadata_key(group: str) -> bytes:
    return INT16.pack(GROUP_METADATA_KEY_VERSION) + encode_string(group)


def decode_key(buf) -> OffsetCommitKey | GroupMetadataKey | UnknownKey:
    """The key of a record of ``__consumer_offsets``; raises ``ProtocolDecodeError`` if malformed."""
    version, pos = decode_int16(buf, 0)
    if version in (0, 1):
        group, pos = decode_string(buf, pos)
        topic, pos = decode_string(buf, pos)
        partition, pos = decode_int32(buf, pos)
        _require_end(buf, pos, "offset commit key")
        return OffsetCommitKey(group, topic, partition)
    if version == GROUP_METADATA_KEY_VERSION:
        group, pos = decode_string(buf, pos)
        _require_end(buf, pos, "group metadata key")
        return GroupMetadataKey(group)
    return UnknownKey(version)


# -- offset commit values ---------------------------------------------------------------------------


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    if value.expire_timestamp != NO_TIMESTAMP:
        return (INT16.pack(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY) + INT64.pack(value.offset)
                + encode_string(value.metadata) + INT64.pack(value.commit_timestamp)
                + INT64.pack(value.expire_timestamp))
    return (INT16.pack(OFFSET_COMMIT_VALUE_VERSION) + INT64.pack(value.offset) + INT32.pack(value.leader_epoch)
            + encode_string(value.metadata) + INT64.pack(value.commit_timestamp))


def decode_offset_commit_value(buf) -> OffsetCommitValue:
    version, pos = decode_int16(buf, 0)
    if not 0 <= version <= _HIGHEST_VALUE_VERSION:
        raise ProtocolDecodeError(f"unknown offset commit value version {version}")
    flexible = version >= _FIRST_FLEXIBLE
    offset, pos = decode_int64(buf, pos)
    leader_epoch = NO_LEADER_EPOCH
    if version >= 3:
        leader_epoch, pos = decode_int32(buf, pos)
    metadata, pos = (decode_compact_string if flexible else decode_string)(buf, pos)
    commit_timestamp, pos = decode_int64(buf, pos)
    expire_timestamp = NO_TIMESTAMP
    if version == 1:
        expire_timestamp, pos = decode_int64(buf, pos)
    if flexible:
        _, pos = decode_tagged_fields(buf, pos)
    _require_end(buf, pos, "offset commit value")
    return OffsetCommitValue(offset, metadata, commit_timestamp, leader_epoch, expire_timestamp)


# -- group metadata values ---------------------------------------------------------------------------


def _encode_member(member: MemberValue) -> bytes:
    return b"".join((
        encode_string(member.member_id), encode_nullable_string(member.group_instance_id),
        encode_string(member.client_id), encode_string(member.client_host),
        INT32.pack(member.rebalance_timeout), INT32.pack(member.session_timeout),
        encode_bytes(member.subscription), encode_bytes(member.assignment)))


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    return b"".join((
        INT16.pack(GROUP_METADATA_VALUE_VERSION), encode_string(value.protocol_type), INT32.pack(value.generation),
        encode_nullable_string(value.protocol), encode_nullable_string(value.leader),
        INT64.pack(value.current_state_timestamp), encode_array(value.members, _encode_member)))


def _member_decoder(version: int):
    flexible = version >= _FIRST_FLEXIBLE
    read_string = decode_compact_string if flexible else decode_string
    read_bytes = decode_compact_bytes if flexible else decode_bytes

    def decode(buf, pos: int):
        member_id, pos = read_string(buf, pos)
        instance_id = None
        if version >= 3:
            instance_id, pos = read_string(buf, pos, nullable=True)
        client_id, pos = read_string(buf, pos)
        client_host, pos = read_string(buf, pos)
        rebalance_timeout = -1
        if version >= 1:
            rebalance_timeout, pos = decode_int32(buf, pos)
        session_timeout, pos = decode_int32(buf, pos)
        subscription, pos = read_bytes(buf, pos)
        assignment, pos = read_bytes(buf, pos)
        if flexible:
            _, pos = decode_tagged_fields(buf, pos)
        if version == 0:
            rebalance_timeout = session_timeout    # v0 predates a separate rebalance timeout (KIP-62)
        return MemberValue(member_id, client_id, client_host, session_timeout, rebalance_timeout,
                           bytes(subscription), bytes(assignment), instance_id), pos

    return decode


def decode_group_metadata_value(buf) -> GroupMetadataValue:
    version, pos = decode_int16(buf, 0)
    if not 0 <= version <= _HIGHEST_VALUE_VERSION:
        raise ProtocolDecodeError(f"unknown group metadata value version {version}")
    flexible = version >= _FIRST_FLEXIBLE
    read_string = decode_compact_string if flexible else decode_string
    protocol_type, pos = read_string(buf, pos)
    generation, pos = decode_int32(buf, pos)
    protocol, pos = read_string(buf, pos, nullable=True)
    leader, pos = read_string(buf, pos, nullable=True)
    timestamp = NO_TIMESTAMP
    if version >= 2:
        timestamp, pos = decode_int64(buf, pos)
    members, pos = (decode_compact_array if flexible else decode_array)(buf, pos, _member_decoder(version))
    if flexible:
        _, pos = decode_tagged_fields(buf, pos)
    _require_end(buf, pos, "group metadata value")
    return GroupMetadataValue(protocol_type, generation, protocol, leader, timestamp, list(members or ()))

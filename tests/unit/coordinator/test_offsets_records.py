"""``__consumer_offsets`` records in Kafka's format, the group -> partition mapping, and replay."""

from __future__ import annotations

import struct

import pytest

from twisted_kafka.coordinator.group.group import CommitRecord, OffsetAndMetadata
from twisted_kafka.coordinator.group.loader import batches_of, replay
from twisted_kafka.coordinator.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberValue,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from twisted_kafka.coordinator.group.topic import java_string_hash, partition_for
from twisted_kafka.protocol.exceptions import ProtocolDecodeError
from twisted_kafka.protocol.records.builder import build_batch, control_record


def _s(value: str) -> bytes:
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def test_java_string_hash_and_partition():
    # Values of Java's String.hashCode.
    assert java_string_hash("") == 0
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2 ** 31      # hashes to Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0              # Utils.abs(MIN_VALUE) == 0
    assert java_string_hash("é€😀") == _java_reference("é€😀")      # UTF-16 units, surrogates included
    assert partition_for("hello", 50) == 99162322 % 50


def _java_reference(value: str) -> int:
    h = 0
    for unit in struct.unpack(f">{len(value.encode('utf-16-be')) // 2}H", value.encode("utf-16-be")):
        h = (h * 31 + unit) % 2 ** 32
    return h - 2 ** 32 if h >= 2 ** 31 else h


def test_offset_commit_key_is_kafkas_version_1():
    key = encode_offset_commit_key("g", "topic", 7)
    assert key == struct.pack(">h", 1) + _s("g") + _s("topic") + struct.pack(">i", 7)
    assert decode_key(key) == OffsetCommitKey("g", "topic", 7)
    assert decode_key(struct.pack(">h", 0) + _s("g") + _s("t") + struct.pack(">i", 1)) == OffsetCommitKey("g", "t", 1)


def test_group_metadata_key_is_version_2_and_other_versions_are_unknown():
    assert encode_group_metadata_key("grp") == struct.pack(">h", 2) + _s("grp")
    assert decode_key(encode_group_metadata_key("grp")) == GroupMetadataKey("grp")
    assert decode_key(struct.pack(">h", 3) + b"whatever") == UnknownKey(3)     # KIP-848 records
    with pytest.raises(ProtocolDecodeError):
        decode_key(struct.pack(">h", 1) + _s("g"))


def test_offset_commit_value_versions():
    value = OffsetCommitValue(offset=42, metadata="meta", commit_timestamp=1000, leader_epoch=5)
    raw = encode_offset_commit_value(value)
    assert raw == struct.pack(">hqi", 3, 42, 5) + _s("meta") + struct.pack(">q", 1000)
    assert decode_offset_commit_value(raw) == value
    expiring = OffsetCommitValue(42, "m", 1000, expire_timestamp=2000)
    raw = encode_offset_commit_value(expiring)
    assert raw[:2] == b"\x00\x01"          # version 1 carries the explicit expiry
    assert decode_offset_commit_value(raw) == OffsetCommitValue(42, "m", 1000, -1, 2000)
    v0 = struct.pack(">hq", 0, 9) + _s("x") + struct.pack(">q", 77)
    assert decode_offset_commit_value(v0) == OffsetCommitValue(9, "x", 77)
    v2 = struct.pack(">hq", 2, 9) + _s("x") + struct.pack(">q", 77)
    assert decode_offset_commit_value(v2) == OffsetCommitValue(9, "x", 77)
    # v4 is flexible: compact string and tagged fields.
    v4 = struct.pack(">hqi", 4, 9, 3) + bytes([2]) + b"x" + struct.pack(">q", 77) + b"\x00"
    assert decode_offset_commit_value(v4) == OffsetCommitValue(9, "x", 77, 3)
    with pytest.raises(ProtocolDecodeError):
        decode_offset_commit_value(struct.pack(">hq", 5, 1))


def test_group_metadata_value_roundtrip_and_old_versions():
    members = [MemberValue("m-1", "client", "/127.0.0.1", 10000, 30000, b"sub", b"assign", "instance-1"),
               MemberValue("m-2", "client", "/127.0.0.2", 10000, 60000, b"sub2", b"", None)]
    value = GroupMetadataValue("consumer", 3, "range", "m-1", 123456, members)
    raw = encode_group_metadata_value(value)
    assert raw[:2] == b"\x00\x03"
    assert decode_group_metadata_value(raw) == value
    empty = GroupMetadataValue("consumer", 4, None, None, 99, [])
    assert decode_group_metadata_value(encode_group_metadata_value(empty)) == empty
    # v0: no currentStateTimestamp, no rebalance timeout (it is the session timeout), no instance id.
    v0 = (struct.pack(">h", 0) + _s("consumer") + struct.pack(">i", 1) + _s("range") + _s("m")
          + struct.pack(">i", 1) + _s("m") + _s("c") + _s("/h") + struct.pack(">i", 6000)
          + struct.pack(">i", 3) + b"sub" + struct.pack(">i", 0))
    assert decode_group_metadata_value(v0) == GroupMetadataValue(
        "consumer", 1, "range", "m", -1, [MemberValue("m", "c", "/h", 6000, 6000, b"sub", b"", None)])


def test_replay_keeps_the_last_word_and_honours_tombstones_and_transactions():
    batches = [
        build_batch([(encode_offset_commit_key("g", "t", 0), encode_offset_commit_value(
            OffsetCommitValue(10, "a", 1))), (encode_group_metadata_key("g"), encode_group_metadata_value(
                GroupMetadataValue("consumer", 1, "range", "m", 5, [])))], base_offset=0),
        build_batch([(encode_offset_commit_key("g", "t", 0), encode_offset_commit_value(
            OffsetCommitValue(20, "b", 2)))], base_offset=2),
        build_batch([(encode_offset_commit_key("g", "t", 1), encode_offset_commit_value(
            OffsetCommitValue(5, "", 2))), (encode_offset_commit_key("gone", "t", 0), encode_offset_commit_value(
                OffsetCommitValue(1, "", 2)))], base_offset=3),
        build_batch([(encode_offset_commit_key("g", "t", 1), None), (encode_offset_commit_key("gone", "t", 0), None),
                     (encode_group_metadata_key("gone"), None)], base_offset=5),
        # a transactional commit, committed by its marker; another, aborted
        build_batch([(encode_offset_commit_key("tx", "t", 0), encode_offset_commit_value(
            OffsetCommitValue(7, "", 3)))], base_offset=8, producer_id=11, producer_epoch=0, transactional=True),
        build_batch([(encode_offset_commit_key("tx", "t", 1), encode_offset_commit_value(
            OffsetCommitValue(8, "", 3)))], base_offset=9, producer_id=12, producer_epoch=0, transactional=True),
        build_batch([control_record(1)], base_offset=10, producer_id=11, producer_epoch=0, transactional=True,
                    control=True),
        build_batch([control_record(0)], base_offset=11, producer_id=12, producer_epoch=0, transactional=True,
                    control=True),
        build_batch([(struct.pack(">h", 11) + b"new-coordinator-record", b"v")], base_offset=12),
    ]
    loaded = replay(batches_of(batches))
    assert loaded.offsets == {
        "g": {("t", 0): CommitRecord(2, OffsetAndMetadata(20, "b", 2))},
        "tx": {("t", 0): CommitRecord(8, OffsetAndMetadata(7, "", 3))},
    }
    assert set(loaded.groups) == {"g"} and loaded.removed_groups == {"gone"}
    assert loaded.skipped == 1 and loaded.next_offset == 13

"""The records of ``__transaction_state``: Kafka's ``TransactionLogKey`` and ``TransactionLogValue``.

Each record is one transactional id's state after a transition, key and
value each prefixed by an INT16 schema version (Kafka's
``MessageUtil.toVersionPrefixedBytes``), so a partition written here reads
in Kafka and the other way round:

* key, version 0: ``transactional_id`` STRING;
* value, version 0 (what Kafka writes unless transaction version 2 is on):
  ``producer_id`` INT64, ``producer_epoch`` INT16, ``transaction_timeout_ms``
  INT32, ``transaction_status`` INT8, ``transaction_partitions`` nullable
  ARRAY of {``topic`` STRING, ``partition_ids`` ARRAY of INT32},
  ``transaction_last_update_timestamp_ms`` INT64,
  ``transaction_start_timestamp_ms`` INT64;
* value, version 1 (KIP-890, read only): flexible -- compact strings and
  arrays, with tagged fields ``previous_producer_id`` (tag 0),
  ``next_producer_id`` (tag 1), ``client_transaction_version`` (tag 2) and a
  tagged-field section after each struct.

The partitions are null while the transaction is Empty, as Kafka writes
them; a null value (a tombstone) removes an expired transactional id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from twisted_kafka.protocol.exceptions import ProtocolDecodeError
from twisted_kafka.protocol.primitives import (
    INT16,
    INT32,
    INT64,
    decode_array,
    decode_compact_array,
    decode_compact_string,
    decode_int8,
    decode_int16,
    decode_int32,
    decode_int64,
    decode_string,
    decode_tagged_fields,
    encode_array,
    encode_string,
)

KEY_VERSION = 0
VALUE_VERSION = 0
_HIGHEST_VALUE_VERSION = 1

#: Tags of version 1's tagged fields.
_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1


@dataclass
class TransactionLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: int
    transaction_partitions: dict[str, list[int]] | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    unknown_tags: dict[int, bytes] = field(default_factory=dict)


def encode_key(transactional_id: str) -> bytes:
    return INT16.pack(KEY_VERSION) + encode_string(transactional_id)


def decode_key(buf) -> str | None:
    """The transactional id of a key; None for a key version this coordinator does not know."""
    version, pos = decode_int16(buf, 0)
    if version != KEY_VERSION:
        return None
    transactional_id, pos = decode_string(buf, pos)
    if pos != len(buf):
        raise ProtocolDecodeError(f"{len(buf) - pos} bytes left over after a transaction log key")
    return transactional_id


def _encode_partitions(item: tuple[str, list[int]]) -> bytes:
    topic, ids = item
    return encode_string(topic) + encode_array(ids, INT32.pack)


def encode_value(value: TransactionLogValue) -> bytes:
    partitions = value.transaction_partitions
    return b"".join((
        INT16.pack(VALUE_VERSION), INT64.pack(value.producer_id), INT16.pack(value.producer_epoch),
        INT32.pack(value.transaction_timeout_ms), bytes([value.transaction_status & 0xFF]),
        encode_array(None if partitions is None else sorted(partitions.items()), _encode_partitions),
        INT64.pack(value.transaction_last_update_timestamp_ms), INT64.pack(value.transaction_start_timestamp_ms)))


def _decode_partitions_v0(buf, pos: int):
    topic, pos = decode_string(buf, pos)
    ids, pos = decode_array(buf, pos, decode_int32)
    return (topic, ids), pos


def _decode_partitions_v1(buf, pos: int):
    topic, pos = decode_compact_string(buf, pos)
    ids, pos = decode_compact_array(buf, pos, decode_int32)
    _, pos = decode_tagged_fields(buf, pos)
    return (topic, ids), pos


def decode_value(buf) -> TransactionLogValue:
    """A value of version 0 or 1; raises ``ProtocolDecodeError`` if malformed or of a later version."""
    version, pos = decode_int16(buf, 0)
    if not 0 <= version <= _HIGHEST_VALUE_VERSION:
        raise ProtocolDecodeError(f"unknown transaction log value version {version}")
    flexible = version >= 1
    producer_id, pos = decode_int64(buf, pos)
    producer_epoch, pos = decode_int16(buf, pos)
    timeout_ms, pos = decode_int32(buf, pos)
    status, pos = decode_int8(buf, pos)
    if flexible:
        items, pos = decode_compact_array(buf, pos, _decode_partitions_v1, nullable=True)
    else:
        items, pos = decode_array(buf, pos, _decode_partitions_v0, nullable=True)
    last_update, pos = decode_int64(buf, pos)
    start, pos = decode_int64(buf, pos)
    value = TransactionLogValue(producer_id, producer_epoch, timeout_ms, status,
                                None if items is None else {topic: list(ids) for topic, ids in items},
                                last_update, start)
    if flexible:
        tags, pos = decode_tagged_fields(buf, pos)
        if _TAG_PREVIOUS_PRODUCER_ID in tags:
            value.previous_producer_id, _ = decode_int64(tags.pop(_TAG_PREVIOUS_PRODUCER_ID), 0)
        if _TAG_NEXT_PRODUCER_ID in tags:
            value.next_producer_id, _ = decode_int64(tags.pop(_TAG_NEXT_PRODUCER_ID), 0)
        value.unknown_tags = {tag: bytes(raw) for tag, raw in tags.items()}
    if pos != len(buf):
        raise ProtocolDecodeError(f"{len(buf) - pos} bytes left over after a transaction log value")
    return value


__all__ = ["KEY_VERSION", "VALUE_VERSION", "TransactionLogValue", "decode_key", "decode_value", "encode_key",
           "encode_value"]

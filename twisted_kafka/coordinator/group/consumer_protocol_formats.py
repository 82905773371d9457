"""The classic consumer protocol's byte formats, as a consumer group reads and writes them.

Classic members (JoinGroup/SyncGroup) of a group that uses the consumer
rebalance protocol (KIP-848's online migration), and DescribeGroups of a
consumer group, speak Kafka's ``ConsumerProtocolSubscription`` and
``ConsumerProtocolAssignment`` (``clients/src/main/resources/common/message``):

* Subscription v0: topics [string], user data (nullable bytes); v1 adds the
  owned partitions [topic string, partitions [int32]]; v2 the generation
  (int32); v3 the rack (nullable string).
* Assignment v0: assigned partitions [topic string, partitions [int32]],
  user data (nullable bytes).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from twisted_kafka.protocol.exceptions import ProtocolDecodeError
from twisted_kafka.protocol.primitives import decode_array, decode_bytes, decode_int16, decode_int32, decode_string


@dataclass(frozen=True, slots=True)
class Subscription:
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]] = field(default_factory=dict)
    rack: str | None = None


def decode_subscription(buf: bytes) -> Subscription:
    """Raises ``ProtocolDecodeError`` for bytes that are not a consumer subscription."""
    try:
        version, pos = decode_int16(buf, 0)
        topics, pos = decode_array(buf, pos, decode_string)
        owned: dict[str, frozenset[int]] = {}
        rack = None
        if pos < len(buf):
            _, pos = decode_bytes(buf, pos, nullable=True)
        if version >= 1 and pos < len(buf):
            def topic_partitions(buf, pos):
                name, pos = decode_string(buf, pos)
                parts, pos = decode_array(buf, pos, decode_int32)
                return (name, frozenset(parts or ())), pos
            items, pos = decode_array(buf, pos, topic_partitions)
            owned = dict(items or ())
        if version >= 2 and pos < len(buf):
            _, pos = decode_int32(buf, pos)
        if version >= 3 and pos < len(buf):
            rack, pos = decode_string(buf, pos, nullable=True)
        return Subscription(tuple(topics or ()), owned, rack)
    except (struct.error, IndexError) as exc:
        raise ProtocolDecodeError(f"not a consumer subscription: {exc}") from None


def encode_subscription(topics) -> bytes:
    """Subscription v0 of ``topics`` (no user data)."""
    out = [struct.pack(">hi", 0, len(topics))]
    for name in topics:
        raw = name.encode()
        out.append(struct.pack(">h", len(raw)) + raw)
    out.append(struct.pack(">i", -1))
    return b"".join(out)


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    """Assignment v0 of ``{topic: partitions}`` (no user data)."""
    out = [struct.pack(">hi", 0, len(partitions))]
    for name, parts in sorted(partitions.items()):
        raw = name.encode()
        out.append(struct.pack(">h", len(raw)) + raw + struct.pack(f">i{len(parts)}i", len(parts), *sorted(parts)))
    out.append(struct.pack(">i", -1))
    return b"".join(out)

"""MetadataResponse (api key 3, v0-v13) assembled from per-topic fragments.

Metadata is the most frequent request after produce/fetch (every client
refreshes it periodically, librdkafka every few seconds) and its answer grows
with the number of topics. Topic entries only change when the topic does, so a
metadata cache can keep each topic's encoded entry per response version
(:func:`encode_topic_fragment`) and answer a request by :func:`assemble`-ing
the small head (brokers, cluster id, controller) with the cached fragments --
a 100-topic response then costs a list build, no per-topic encoding.

Fragments are encoded with kafka-python's compiled encoder for the topic struct,
so they are byte-for-byte what its full MetadataResponse encoder writes (a test
checks that for every version).

Versions: v1 adds rack, controller_id, is_internal; v2 cluster_id; v3
throttle_time_ms; v5 offline_replicas; v7 leader_epoch; v8-v10
cluster_authorized_operations; v8+ topic_authorized_operations; v9 flexible;
v10 topic_id; v12 nullable topic name; v13 top-level error_code.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

from kafka.protocol.schemas.fields.codecs import EncodeBufferPool

from . import primitives as p
from .header import RequestHeader, encode_response_header
from .messages import MetadataResponse

__all__ = ["MIN_VERSION", "MAX_VERSION", "TopicMetadata", "encode_topic_fragment", "assemble",
           "authorized_operations_int"]

MIN_VERSION = 0
MAX_VERSION = 13

_TOPIC_STRUCT = MetadataResponse._struct.fields["topics"].array_of
#: kafka-python's data class for one topic entry: build topics with it
#: (``TopicMetadata(error_code=0, name="t", partitions=[...], version=v)``).
TopicMetadata = _TOPIC_STRUCT.data_class

_I32 = struct.Struct(">i").pack
_NOT_REQUESTED = -2147483648  # authorized operations not requested (INT32_MIN)

_topic_encoders: dict[int, Any] = {}


def _check_version(version: int) -> bool:
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"MetadataResponse v{version} is outside v{MIN_VERSION}-v{MAX_VERSION}")
    return version >= 9


def encode_topic_fragment(version: int, topic) -> bytes:
    """One topic entry of a MetadataResponse at ``version``, as kafka-python encodes it.

    ``topic`` is a :data:`TopicMetadata` object or a dict of its fields
    (error_code, name, topic_id, is_internal, partitions,
    authorized_operations); partitions may be objects or tuples in wire order.
    """
    flexible = _check_version(version)
    if isinstance(topic, dict):
        topic = TopicMetadata(**topic)
    encoder = _topic_encoders.get(version)
    if encoder is None:
        encoder = _topic_encoders[version] = _TOPIC_STRUCT.compiled_encode_into(
            version, compact=flexible, tagged=flexible)
    with EncodeBufferPool.acquire() as out:
        encoder(topic, out)
        return bytes(memoryview(out.buf)[:out.pos])


def authorized_operations_int(operations) -> int:
    """Authorized operations as the wire's INT32 bit field: ``None`` means "not
    requested" (INT32_MIN); an ``int`` is taken as is; a set of bit numbers is folded."""
    if operations is None:
        return _NOT_REQUESTED
    if isinstance(operations, int):
        return operations
    value = 0
    for bit in operations:
        value |= 1 << bit
    return value - (1 << 32) if value & 0x80000000 else value


def _broker_fields(broker) -> tuple:
    if isinstance(broker, tuple):
        return broker if len(broker) == 4 else (*broker, None)
    return broker.node_id, broker.host, broker.port, getattr(broker, "rack", None)


def _encode_brokers(version: int, flexible: bool, brokers: Sequence) -> bytes:
    parts = [p.encode_unsigned_varint(len(brokers) + 1) if flexible else _I32(len(brokers))]
    for broker in brokers:
        node_id, host, port, rack = _broker_fields(broker)
        parts.append(_I32(node_id))
        parts.append(p.encode_compact_string(host) if flexible else p.encode_string(host))
        parts.append(_I32(port))
        if version >= 1:
            parts.append(p.encode_compact_nullable_string(rack) if flexible else p.encode_nullable_string(rack))
        if flexible:
            parts.append(b"\x00")
    return b"".join(parts)


def assemble(header: RequestHeader | None, version: int, throttle_time_ms: int = 0,
             brokers: Sequence = (), cluster_id: str | None = None, controller_id: int = -1,
             topic_fragments: Iterable[bytes] = (), cluster_authorized_operations=None,
             error_code: int = 0) -> list[bytes]:
    """A framed MetadataResponse: ``[size + response header + head, *topic_fragments, tail]``.

    ``brokers`` are ``(node_id, host, port, rack)`` tuples or objects with those
    attributes; ``topic_fragments`` come from :func:`encode_topic_fragment` at the
    same ``version``. With ``header=None`` the body alone is returned (no size,
    no response header), which is what a test compares against kafka-python.
    """
    flexible = _check_version(version)
    fragments = topic_fragments if isinstance(topic_fragments, list) else list(topic_fragments)
    head = []
    if version >= 3:
        head.append(_I32(throttle_time_ms))
    head.append(_encode_brokers(version, flexible, brokers))
    if version >= 2:
        head.append(p.encode_compact_nullable_string(cluster_id) if flexible
                    else p.encode_nullable_string(cluster_id))
    if version >= 1:
        head.append(_I32(controller_id))
    head.append(p.encode_unsigned_varint(len(fragments) + 1) if flexible else _I32(len(fragments)))
    tail = []
    if 8 <= version <= 10:
        tail.append(_I32(authorized_operations_int(cluster_authorized_operations)))
    if version >= 13:
        tail.append(p.INT16.pack(error_code))
    if flexible:
        tail.append(p.EMPTY_TAGGED_FIELDS)
    head_bytes = b"".join(head)
    tail_bytes = b"".join(tail)
    if header is not None:
        response_header = encode_response_header(header.correlation_id, flexible)
        size = len(response_header) + len(head_bytes) + len(tail_bytes)
        for fragment in fragments:
            size += len(fragment)
        head_bytes = _I32(size) + response_header + head_bytes
    return [head_bytes, *fragments, tail_bytes]

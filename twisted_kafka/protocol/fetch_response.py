"""FetchResponse (api key 1) encoding, v4-v18, with record data passed through uncopied.

A fetch answer is mostly record bytes read from log segments, often megabytes.
Encoding it through a generic message encoder would copy every byte into an
encode buffer (and then again into ``bytes``). This encoder instead produces a
list of chunks for ``transport.writeSequence``: small ``bytes`` for the fields
between record sets, and each partition's ``records`` exactly as given --
``bytes``, a ``memoryview`` (e.g. over an mmap'd segment) or a list of such
chunks (several batches) -- never joined or sliced.

Layout (Kafka's protocol guide), by version:

* v4: throttle_time_ms; per partition: index, error_code, high_watermark,
  last_stable_offset, aborted_transactions (nullable), records;
* v5: + log_start_offset; v7: + top-level error_code, session_id;
* v11: + preferred_read_replica;
* v12: flexible (compact strings/arrays/bytes, tagged fields), partition tags
  0 diverging_epoch, 1 current_leader, 2 snapshot_id;
* v13: topics identified by topic_id (UUID) instead of name;
* v16: top-level tag 0 node_endpoints; v17, v18: no response changes.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import cast

from . import primitives as p

__all__ = [
    "MIN_VERSION", "MAX_VERSION",
    "FetchResponseData", "FetchableTopicResponse", "PartitionData", "NodeEndpoint",
    "encode_fetch_response_body",
]

MIN_VERSION = 4
MAX_VERSION = 18

_I32 = struct.Struct(">i").pack
_I16_I32 = struct.Struct(">hi").pack
_PART_V4 = struct.Struct(">ihqq").pack
_PART_V5 = struct.Struct(">ihqqq").pack
_ABORTED = struct.Struct(">qq").pack
_EPOCH_END = struct.Struct(">iq").pack      # diverging_epoch: epoch, end_offset
_LEADER = struct.Struct(">ii").pack         # current_leader: leader_id, leader_epoch
_SNAPSHOT = struct.Struct(">qi").pack       # snapshot_id: end_offset, epoch
_NULL_I32 = b"\xff\xff\xff\xff"
_ERROR_CODE = attrgetter("error_code")
_uvarint = p.encode_unsigned_varint


@dataclass(slots=True)
class PartitionData:
    """One partition of a fetch answer (field names as in Kafka's schema).

    ``aborted_transactions`` is ``None`` or a list of ``(producer_id,
    first_offset)``; ``diverging_epoch`` is ``(epoch, end_offset)``,
    ``current_leader`` ``(leader_id, leader_epoch)`` and ``snapshot_id``
    ``(end_offset, epoch)`` -- each written (v12+) only when not ``None``.
    ``records`` is ``None``, a bytes-like object, or a list of bytes-like chunks.
    """

    partition_index: int
    error_code: int = 0
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    aborted_transactions: list[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    records: object = None
    diverging_epoch: tuple[int, int] | None = None
    current_leader: tuple[int, int] | None = None
    snapshot_id: tuple[int, int] | None = None


@dataclass(slots=True)
class FetchableTopicResponse:
    """The partitions answered for one topic: by ``topic`` name up to v12, by ``topic_id`` from v13."""

    topic: str | None = None
    topic_id: uuid.UUID | None = None
    partitions: list[PartitionData] = field(default_factory=list)


@dataclass(slots=True)
class NodeEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(slots=True)
class FetchResponseData:
    """A whole fetch answer; give it to ``codec.encode_response`` (which calls
    :meth:`encode_chunks`) or call :func:`encode_fetch_response_body` directly."""

    responses: list[FetchableTopicResponse] = field(default_factory=list)
    throttle_time_ms: int = 0
    error_code: int = 0
    session_id: int = 0
    node_endpoints: list[NodeEndpoint] | None = None

    def encode_chunks(self, version: int) -> list:
        return encode_fetch_response_body(self, version)

    def error_codes(self) -> Iterator[int]:
        """Every error code the response carries (the top level's, each partition's): Kafka's errorCounts."""
        yield self.error_code
        for topic in self.responses:
            yield from map(_ERROR_CODE, topic.partitions)


def _nbytes(chunk) -> int:
    return chunk.nbytes if isinstance(chunk, memoryview) else len(chunk)


def _tag_struct(tag: int, payload: bytes) -> bytes:
    # A struct-valued tag: tag, size, the struct's fields, its own (empty) tag buffer.
    return _uvarint(tag) + _uvarint(len(payload) + 1) + payload + b"\x00"


def _node_endpoints(endpoints: Sequence[NodeEndpoint]) -> bytes:
    parts = [_uvarint(len(endpoints) + 1)]
    for node in endpoints:
        parts.append(_I32(node.node_id))
        parts.append(p.encode_compact_string(node.host))
        parts.append(_I32(node.port))
        parts.append(p.encode_compact_nullable_string(node.rack))
        parts.append(b"\x00")
    value = b"".join(parts)
    return b"\x01" + _uvarint(0) + _uvarint(len(value)) + value


def encode_fetch_response_body(data: FetchResponseData, version: int) -> list:
    """The FetchResponse body at ``version`` as a list of chunks (no size, no header).

    Chunks this function creates are ``bytes``; record chunks are the caller's
    objects, unchanged (``memoryview`` ones count by ``nbytes`` in the size).
    """
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"FetchResponse v{version} is outside v{MIN_VERSION}-v{MAX_VERSION}")
    flexible = version >= 12
    by_id = version >= 13
    chunks: list = []
    parts: list[bytes] = [_I32(data.throttle_time_ms)]
    append = parts.append
    if version >= 7:
        append(_I16_I32(data.error_code, data.session_id))
    topics = data.responses
    append(_uvarint(len(topics) + 1) if flexible else _I32(len(topics)))
    part_head = _PART_V5 if version >= 5 else None
    for topic in topics:
        if by_id:
            append(p.encode_uuid(topic.topic_id))
        elif flexible:      # answered by name up to v12: the encoders refuse a None name
            append(p.encode_compact_string(cast(str, topic.topic)))
        else:
            append(p.encode_string(cast(str, topic.topic)))
        partitions = topic.partitions
        append(_uvarint(len(partitions) + 1) if flexible else _I32(len(partitions)))
        for part in partitions:
            if part_head is not None:
                append(part_head(part.partition_index, part.error_code, part.high_watermark,
                                 part.last_stable_offset, part.log_start_offset))
            else:
                append(_PART_V4(part.partition_index, part.error_code, part.high_watermark,
                                part.last_stable_offset))
            aborted = part.aborted_transactions
            if aborted is None:
                append(b"\x00" if flexible else _NULL_I32)
            else:
                append(_uvarint(len(aborted) + 1) if flexible else _I32(len(aborted)))
                for producer_id, first_offset in aborted:
                    append(_ABORTED(producer_id, first_offset))
                    if flexible:
                        append(b"\x00")
            if version >= 11:
                append(_I32(part.preferred_read_replica))
            records = part.records
            if records is None:
                append(b"\x00" if flexible else _NULL_I32)
            else:
                pieces = records if isinstance(records, list) else (records,)
                size = 0
                for piece in pieces:
                    size += _nbytes(piece)
                append(_uvarint(size + 1) if flexible else _I32(size))
                if size:
                    chunks.append(b"".join(parts))
                    parts.clear()
                    chunks.extend(piece for piece in pieces if _nbytes(piece))
            if flexible:
                tags = []
                if part.diverging_epoch is not None:
                    tags.append(_tag_struct(0, _EPOCH_END(*part.diverging_epoch)))
                if part.current_leader is not None:
                    tags.append(_tag_struct(1, _LEADER(*part.current_leader)))
                if part.snapshot_id is not None:
                    tags.append(_tag_struct(2, _SNAPSHOT(*part.snapshot_id)))
                if tags:
                    append(_uvarint(len(tags)))
                    parts.extend(tags)
                else:
                    append(b"\x00")
        if flexible:
            append(b"\x00")
    if flexible:
        if version >= 16 and data.node_endpoints:
            append(_node_endpoints(data.node_endpoints))
        else:
            append(b"\x00")
    if parts:
        chunks.append(b"".join(parts))
    return chunks

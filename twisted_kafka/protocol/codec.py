"""Request decoding and response encoding: the codec's entry points.

Bodies are decoded with kafka-python's compiled per-(message, version)
decoders, which return the end position; this module adds what a server needs
on top of a client library's decoder:

* **one exception type.** Anything that goes wrong while decoding client bytes
  becomes :class:`ProtocolDecodeError` carrying api_key/api_version/
  correlation_id (the network layer closes the connection on it), never a
  ``struct.error``/``IndexError``/``UnicodeDecodeError`` escaping to a handler;
* **length.** kafka-python's slicing silently truncates strings and bytes at
  the end of a buffer (``bytes(data[pos:pos+n])``), so the end position is
  checked against the frame and a short body is rejected. Bytes *after* a
  complete body are ignored by default, because Kafka's own parser ignores
  them and a real client depends on it: librdkafka 2.16 sends its
  all-topics MetadataRequest v9+ with a 4-byte array-count placeholder of
  which only the first byte is the (null) compact array, leaving 3 bytes
  after the body (src/rdkafka_request.c, ``rd_kafka_MetadataRequest0``: the
  count is never finalized on that path). ``strict=True`` rejects them;
* **nullability.** The compiled decoders read a -1 length as ``None`` for any
  field; a null where the schema does not allow one is rejected here, so
  handlers can rely on the schema's types;
* **bounded work.** The generated varint loops are capped at 5 bytes, and a
  tagged-field section is read in place instead of copying the rest of the
  frame for every struct that carries tags (which made a crafted 100 MB
  request cost quadratic time). Both are small rewrites of the generated
  source lines, verified by unit tests against the pinned kafka-python.

Responses are encoded into kafka-python's thread-local encode buffer with the
4-byte size and the response header in front, and returned as a list of
``bytes`` ready for ``transport.writeSequence``. Bodies that know how to encode
themselves as chunks (``fetch_response.FetchResponseData``, the assembled
metadata response) are passed through without copying their payload.
"""

from __future__ import annotations

import functools
import re
import struct
from collections.abc import Callable, Iterable
from typing import Any

from kafka.protocol.schemas.fields.codecs import Bytes, EncodeBufferPool, String
from kafka.protocol.schemas.fields.codegen import CodegenContext

from . import primitives as p
from .errors import ErrorCode
from .exceptions import ProtocolDecodeError
from .header import RequestHeader, encode_response_header, parse_request_header
from .messages import ApiMessage, ApiVersionsResponse
from .registry import REGISTRY, ApiKey

__all__ = [
    "decode_request_body", "decode_request",
    "encode_response", "encode_request", "decode_response",
    "api_versions_response", "encode_api_versions_response",
    "api_versions_error_response", "encode_api_versions_error",
    "frame_size",
]

_pack_size = struct.Struct(">i").pack
_pack_size_into = struct.Struct(">i").pack_into


# --- hardened compiled decoders ------------------------------------------------------

class _TagReader:
    """File-like view over the frame for kafka-python's tagged-field decoder.

    Replaces ``BytesIO(bytes(data[pos:]))`` in the generated code: reads in
    place, and raises on a tag value that runs past the frame instead of
    returning fewer bytes.
    """

    __slots__ = ("_data", "_start", "_pos", "_end")

    def __init__(self, data, pos: int):
        self._data = data
        self._start = self._pos = pos
        self._end = len(data)

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = self._end - self._pos
        end = self._pos + size
        if end > self._end:
            raise ProtocolDecodeError(f"tagged field value runs past the end of the request at offset {self._pos}")
        chunk = bytes(self._data[self._pos:end])
        self._pos = end
        return chunk

    def tell(self) -> int:
        return self._pos - self._start


def _varint_too_long(pos: int):
    raise ProtocolDecodeError(f"varint ending before offset {pos} is longer than 5 bytes")


_TAG_COPY = re.compile(r"^(?P<var>_bio\d+) = _BytesIO\(bytes\(data\[pos:\]\)\)$")
_VARINT_SHIFT = re.compile(r"^(?P<lead>\s*)(?P<var>_sh\d+) \+= 7$")


class _HardenedContext(CodegenContext):
    """kafka-python's code generator context, with two line rewrites (see module doc)."""

    def __init__(self):
        super().__init__()
        self.globs["_TagReader"] = _TagReader
        self.globs["_varint_too_long"] = _varint_too_long
        self.tag_rewrites = 0
        self.varint_guards = 0

    def emit(self, indent, line):
        match = _TAG_COPY.match(line)
        if match:
            self.tag_rewrites += 1
            line = f"{match['var']} = _TagReader(data, pos)"
        super().emit(indent, line)
        match = _VARINT_SHIFT.match(line)
        if match:
            self.varint_guards += 1
            super().emit(indent, f"{match['lead']}if {match['var']} > 28: _varint_too_long(pos)")


def _compile_decoder(message_class: type[ApiMessage], version: int):
    """Generate the decoder for one (message, version); returns (function, context)."""
    flexible = message_class.flexible_version_q(version)
    struct_field = message_class._struct
    ctx = _HardenedContext()
    ctx.lines.append("def _decode(data, pos):")
    # The top-level struct's data class is a weakref proxy; code generation needs
    # the class itself (kafka-python's own compiled_decode_from does the same swap).
    saved = struct_field._data_class
    struct_field._data_class = message_class
    try:
        struct_field.emit_decode_from(ctx, "obj", "    ", version=version, compact=flexible, tagged=flexible)
    finally:
        struct_field._data_class = saved
    ctx.emit("    ", "return obj, pos")
    namespace = ctx.globs
    exec(compile(ctx.source(), f"<twisted_kafka:{message_class.__name__}_v{version}>", "exec"), namespace)
    return namespace["_decode"], ctx


def _is_string_or_bytes(codec) -> bool:
    # Only strings and bytes/records read a -1 length as None. (UUIDs and bit
    # fields also decode to None, from legitimate values: the zero UUID and
    # "not requested" authorized operations.)
    return isinstance(codec, String) or codec is Bytes


def _null_error(where: str, version: int) -> ProtocolDecodeError:
    return ProtocolDecodeError(f"null {where}, which is not nullable at version {version}")


def _build_null_check(struct_field, version: int, path: str):
    """A function raising on ``None`` where the schema does not allow null at
    ``version`` (recursing into structs), or ``None`` if there is nothing to check.

    Built once per (message, version) as a list of small closures, so a decode
    pays a few attribute reads, not a schema walk.
    """
    steps: list[Callable[[Any], None]] = []
    for field in struct_field.untagged_fields(version):
        name, where = field.name, f"{path}{field.name}"
        nullable = field.nullable_for_version_q(version)
        if field.is_struct_array():
            item_check = _build_null_check(field.array_of, version, f"{where}[].")
            if not (nullable and item_check is None):
                steps.append(_struct_array_check(name, where, nullable, item_check, version))
        elif field.is_array():
            of_strings = _is_string_or_bytes(getattr(field.array_of, "_type", None))
            if not (nullable and not of_strings):
                steps.append(_array_check(name, where, nullable, of_strings, version))
        elif field.is_struct():
            inner = _build_null_check(field, version, f"{where}.")
            if inner is not None:
                steps.append(_struct_check(name, inner))
        elif not nullable and _is_string_or_bytes(getattr(field, "_type", None)):
            steps.append(_value_check(name, where, version))
    if not steps:
        return None

    def check(obj):
        for step in steps:
            step(obj)
    return check


def _struct_check(name, inner):
    def step(obj):
        value = getattr(obj, name)
        if value is not None:
            inner(value)
    return step


def _value_check(name, where, version):
    def step(obj):
        if getattr(obj, name) is None:
            raise _null_error(where, version)
    return step


def _array_check(name, where, nullable, of_strings, version):
    def step(obj):
        items = getattr(obj, name)
        if items is None:
            if not nullable:
                raise _null_error(where, version)
        elif of_strings and None in items:
            raise ProtocolDecodeError(f"null element in {where}")
    return step


def _struct_array_check(name, where, nullable, item_check, version):
    def step(obj):
        items = getattr(obj, name)
        if items is None:
            if not nullable:
                raise _null_error(where, version)
        elif item_check is not None:
            for item in items:
                item_check(item)
    return step


class _Codec:
    """Compiled decoder, null check and encoder for one (message class, version)."""

    __slots__ = ("decode", "null_check", "encode", "name", "version")

    def __init__(self, message_class: type[ApiMessage], version: int):
        self.name = message_class.__name__
        self.version = version
        self.decode = _compile_decoder(message_class, version)[0]
        self.null_check = _build_null_check(message_class._struct, version, "")
        flexible = message_class.flexible_version_q(version)
        self.encode = message_class._struct.compiled_encode_into(version, compact=flexible, tagged=flexible)


_REQUEST_CODECS: dict[tuple[int, int], _Codec] = {}
_RESPONSE_CODECS: dict[tuple[int, int], _Codec] = {}


def _codec_for(api_key: int, version: int, request: bool, correlation_id: int | None = None) -> _Codec:
    cache = _REQUEST_CODECS if request else _RESPONSE_CODECS
    codec = cache.get((api_key, version))
    if codec is not None:
        return codec
    spec = REGISTRY.get(api_key)
    if spec is None:
        raise ProtocolDecodeError("unknown api key", api_key=api_key, api_version=version,
                                  correlation_id=correlation_id)
    message_class = spec.request_class if request else spec.response_class
    if not 0 <= version <= message_class.max_version:
        raise ProtocolDecodeError(f"{spec.name} has no v{version} message layout",
                                  api_key=api_key, api_version=version, correlation_id=correlation_id)
    codec = cache[(api_key, version)] = _Codec(message_class, version)
    return codec


def _decode_body(codec: _Codec, data, pos: int, api_key: int, version: int, correlation_id: int | None,
                 strict: bool):
    view = data if isinstance(data, memoryview) else memoryview(data)
    try:
        obj, end = codec.decode(view, pos)
        if end != len(view):
            if end > len(view):
                raise ProtocolDecodeError(f"truncated {codec.name} v{version} body: needs at least "
                                          f"{end - pos} bytes, has {len(view) - pos}")
            if strict:
                raise ProtocolDecodeError(f"{len(view) - end} unexpected trailing byte(s) after "
                                          f"{codec.name} v{version} body")
        if codec.null_check is not None:
            codec.null_check(obj)
    except ProtocolDecodeError as exc:
        raise ProtocolDecodeError(exc.reason, api_key=api_key, api_version=version,
                                  correlation_id=correlation_id) from None
    except Exception as exc:  # any failure inside generated code means malformed input
        raise ProtocolDecodeError(f"malformed {codec.name} v{version} body ({type(exc).__name__}: {exc})",
                                  api_key=api_key, api_version=version,
                                  correlation_id=correlation_id) from None
    return obj


# --- requests ---------------------------------------------------------------------------

def decode_request_body(header: RequestHeader, frame, *, strict: bool = False) -> ApiMessage:
    """Decode the request body that follows ``header`` in ``frame``.

    ``frame`` is the whole request as parsed by :func:`parse_request_header`
    (without the 4-byte size). Any version the message classes can represent
    is decoded; whether it is *advertised* is the caller's check
    (``ApiSpec.is_advertised``). Returns a kafka-python message object
    (``obj.version`` is the version). Raises :class:`ProtocolDecodeError` for
    a truncated or malformed body, and with ``strict`` also for bytes left
    after it (ignored otherwise, as Kafka does; see the module docstring).
    """
    key, version = header.api_key, header.api_version
    codec = _REQUEST_CODECS.get((key, version)) or _codec_for(key, version, True, header.correlation_id)
    return _decode_body(codec, frame, header.header_size, key, version, header.correlation_id, strict)


def decode_request(frame, *, strict: bool = False) -> tuple[RequestHeader, ApiMessage]:
    """Header and body of one request frame (convenience for tests and tools)."""
    header = parse_request_header(frame)
    return header, decode_request_body(header, frame, strict=strict)


def encode_request(request: ApiMessage, version: int, correlation_id: int,
                   client_id: str | None = "twisted_kafka") -> list[bytes]:
    """A framed request (size, header v0/v1/v2 per the registry, body) -- the
    controller's client side, e.g. LeaderAndIsr to a broker's control plane."""
    key = type(request).API_KEY
    spec = REGISTRY[key]
    codec = _REQUEST_CODECS.get((key, version)) or _codec_for(key, version, True)
    header_version = spec.request_header_version(version)
    head = struct.pack(">hhi", key, version, correlation_id)
    if header_version >= 1:
        head += p.encode_nullable_string(client_id)
    if header_version == 2:
        head += p.EMPTY_TAGGED_FIELDS
    return [_encode_framed(codec, request, head)]


def decode_response(api_key: int, version: int, frame, *, strict: bool = False) -> tuple[int, ApiMessage]:
    """``(correlation_id, message)`` from a response frame (without the size prefix).

    ApiVersions responses with a non-zero error code are read as v0 bodies, as
    KIP-511 brokers send them.
    """
    spec = REGISTRY.get(api_key)
    if spec is None:
        raise ProtocolDecodeError("unknown api key", api_key=api_key, api_version=version)
    view = frame if isinstance(frame, memoryview) else memoryview(frame)
    correlation_id, pos = p.decode_int32(view, 0)
    if spec.response_header_version(version) == 1:
        try:
            _, pos = p.decode_tagged_fields(view, pos)
        except ProtocolDecodeError as exc:
            raise ProtocolDecodeError(exc.reason, api_key=api_key, api_version=version,
                                      correlation_id=correlation_id) from None
    if api_key == ApiKey.API_VERSIONS and len(view) >= pos + 2 and p.INT16.unpack_from(view, pos)[0] != 0:
        version = 0
    codec = _codec_for(api_key, version, False, correlation_id)
    return correlation_id, _decode_body(codec, view, pos, api_key, version, correlation_id, strict)


# --- responses ------------------------------------------------------------------------

def frame_size(chunks: Iterable) -> int:
    """Total bytes of a chunk list (memoryviews count in bytes, not items)."""
    return sum(c.nbytes if isinstance(c, memoryview) else len(c) for c in chunks)


def _encode_framed(codec: _Codec, body: ApiMessage, head: bytes) -> bytes:
    with EncodeBufferPool.acquire() as out:
        start = 4 + len(head)
        out.ensure(start)
        out.buf[4:start] = head
        out.pos = start
        try:
            codec.encode(body, out)
        except Exception as exc:
            exc.add_note(f"while encoding {codec.name} v{codec.version}")
            raise
        _pack_size_into(out.buf, 0, out.pos - 4)
        return bytes(memoryview(out.buf)[:out.pos])


def encode_response(header: RequestHeader, body, version: int | None = None) -> list:
    """The framed response to ``header``: ``[size + response header + ..., ...]``.

    ``body`` is a kafka-python response object of the request's API, or an
    object with ``encode_chunks(version) -> list`` (e.g.
    :class:`~twisted_kafka.protocol.fetch_response.FetchResponseData`), whose
    chunks are passed through uncopied. The body is encoded at ``version``
    (default: the request's version); the response header is v1 for flexible
    versions and v0 otherwise, and always v0 for ApiVersions.
    """
    if version is None:
        version = header.api_version
    spec = REGISTRY[header.api_key]
    head = encode_response_header(header.correlation_id, spec.response_header_version(version) == 1)
    encode_chunks = getattr(body, "encode_chunks", None)
    if encode_chunks is not None:
        chunks = encode_chunks(version)
        return [_pack_size(len(head) + frame_size(chunks)) + head, *chunks]
    body_key = getattr(type(body), "API_KEY", None)
    if body_key != header.api_key:
        raise TypeError(f"cannot answer api key {header.api_key} with {type(body).__name__}")
    codec = _RESPONSE_CODECS.get((header.api_key, version)) or _codec_for(header.api_key, version, False)
    return [_encode_framed(codec, body, head)]


def api_versions_response(served_keys: Iterable[int], version: int = 0,
                          throttle_time_ms: int = 0) -> ApiVersionsResponse:
    """The ApiVersions answer advertising ``served_keys`` (the registry is its only source)."""
    entries = REGISTRY.api_versions_entries(served_keys)
    response = ApiVersionsResponse(
        version=version, error_code=ErrorCode.NONE,
        api_keys=[ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi, version=version)
                  for k, lo, hi in entries],
        throttle_time_ms=throttle_time_ms)
    if version >= 3:
        _set_features(response, {int(k) for k, _, _ in entries})
    return response


#: ``group.version`` (KIP-848): 1 when the consumer rebalance protocol is served.  Kafka's
#: ApiVersions lists it among the supported features (range 0-1) and, once finalized, the
#: finalized ones; this broker finalizes it by its own configuration
#: (``group.coordinator.rebalance.protocols``), which ConsumerGroupHeartbeat's presence shows.
GROUP_VERSION_FEATURE = "group.version"


def _set_features(response: ApiVersionsResponse, served: set[int]) -> None:
    level = 1 if ApiKey.CONSUMER_GROUP_HEARTBEAT in served else 0
    # Before v4 a feature whose minimum is 0 is left out of the supported ones, as Kafka does.
    response.supported_features = [ApiVersionsResponse.SupportedFeatureKey(
        name=GROUP_VERSION_FEATURE, min_version=0, max_version=1, version=response.version)
    ] if response.version >= 4 else []
    response.finalized_features_epoch = 0
    response.finalized_features = [ApiVersionsResponse.FinalizedFeatureKey(
        name=GROUP_VERSION_FEATURE, max_version_level=level, min_version_level=level, version=response.version)
    ] if level else []


@functools.lru_cache(maxsize=64)
def _api_versions_body(version: int, served_keys: tuple[int, ...]) -> bytes:
    frame = encode_response(RequestHeader(ApiKey.API_VERSIONS, version, 0),
                            api_versions_response(served_keys, version), version)
    return frame[0][8:]  # size and correlation id (header v0) stripped


def encode_api_versions_response(header: RequestHeader, served_keys: Iterable[int]) -> list[bytes]:
    """The framed ApiVersions answer for an advertised version, from a cache.

    Every connection starts with ApiVersions and the answer only depends on the
    version and the served keys, so its body is encoded once (kafka-python's
    tagged-field encoding of the v3+ table costs ~40 us). Unsupported versions
    get :func:`encode_api_versions_error` instead.
    """
    body = _api_versions_body(header.api_version, tuple(sorted(set(served_keys))))
    return [_pack_size(4 + len(body)) + _pack_size(header.correlation_id) + body]


def api_versions_error_response(header: RequestHeader | None = None) -> ApiVersionsResponse:
    """KIP-511's answer to an ApiVersions version the broker does not support:
    a v0-format body with UNSUPPORTED_VERSION listing ApiVersions' own range,
    so the client retries with a version both sides share. Encode it with
    ``encode_response(header, body, version=0)``."""
    spec = REGISTRY[ApiKey.API_VERSIONS]
    return ApiVersionsResponse(
        version=0, error_code=ErrorCode.UNSUPPORTED_VERSION,
        api_keys=[ApiVersionsResponse.ApiVersion(
            api_key=int(spec.api_key), min_version=spec.min_version, max_version=spec.max_version, version=0)])


def encode_api_versions_error(header: RequestHeader) -> list[bytes]:
    """Framed KIP-511 error response to an unsupported ApiVersions request."""
    return encode_response(header, api_versions_error_response(header), version=0)


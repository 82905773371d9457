"""Request header parsing (v0/v1/v2) and response header encoding (v0/v1).

The header is parsed by hand rather than with kafka-python because the network
layer needs it before (and sometimes instead of) the body: to route the
request, to check the version against the advertised range, to answer an
unsupported ApiVersions (KIP-511), or to log an unknown API key. It must
therefore work for API keys and versions no schema describes.

Header versions (Kafka's protocol guide):

* v0: api_key INT16, api_version INT16, correlation_id INT32 (only
  ControlledShutdown v0 uses it);
* v1: v0 + client_id NULLABLE_STRING (INT16 length, not compact);
* v2: v1 + tagged fields (KIP-482), for flexible API versions. The client id
  stays a non-compact string so that any broker can read it.

Which version applies comes from the registry (``ApiSpec.request_header_version``).
An unknown API key is read as v1: enough to log the client id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from . import primitives as p
from .exceptions import ProtocolDecodeError
from .registry import REGISTRY

_HEAD = p.INT16.size * 2 + p.INT32.size   # api_key, api_version, correlation_id
_unpack_head = struct.Struct(">hhi").unpack_from
_pack_int32 = p.INT32.pack


@dataclass(slots=True)
class RequestHeader:
    """A parsed request header.

    ``header_size`` is the offset of the request body in the frame (the frame
    being the bytes after the 4-byte size prefix). ``tagged_fields`` holds the
    raw values of any header tags (none are defined today), keyed by tag.
    """

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    tagged_fields: dict[int, bytes] = field(default_factory=dict)
    header_size: int = 0
    header_version: int = 1


def parse_request_header(frame) -> RequestHeader:
    """Parse the request header at the start of ``frame`` (bytes, bytearray or memoryview).

    Raises :class:`ProtocolDecodeError` for a frame too short for a header or a
    malformed client id / tag buffer; the error carries whatever of api_key,
    api_version and correlation_id could be read.
    """
    if len(frame) < _HEAD:
        raise ProtocolDecodeError(f"request of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _unpack_head(frame, 0)
    spec = REGISTRY.get(api_key)
    header_version = 1 if spec is None else spec.request_header_version(api_version)
    header = RequestHeader(api_key, api_version, correlation_id, header_version=header_version)
    if header_version == 0:
        header.header_size = _HEAD
        return header
    try:
        client_id, pos = p.decode_string(frame, _HEAD, nullable=True)
        header.client_id = client_id
        if header_version == 2:
            header.tagged_fields, pos = p.decode_tagged_fields(frame, pos)
            if header.tagged_fields and not isinstance(frame, bytes):
                header.tagged_fields = {tag: bytes(value) for tag, value in header.tagged_fields.items()}
    except ProtocolDecodeError as exc:
        raise ProtocolDecodeError(
            f"malformed request header v{header_version}: {exc.reason}",
            api_key=api_key, api_version=api_version, correlation_id=correlation_id) from None
    header.header_size = pos
    return header


_EMPTY_TAGS = p.EMPTY_TAGGED_FIELDS


def encode_response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v0 (correlation id) or, when ``flexible``, v1 (+ empty tags).

    Callers choose ``flexible`` with ``ApiSpec.response_header_version(v) == 1``,
    which is never true for ApiVersions.
    """
    if flexible:
        return _pack_int32(correlation_id) + _EMPTY_TAGS
    return _pack_int32(correlation_id)


def response_header_for(header: RequestHeader, version: int | None = None) -> bytes:
    """The response header matching a request (its correlation id; v0 or v1 per the registry)."""
    spec = REGISTRY.get(header.api_key)
    if version is None:
        version = header.api_version
    flexible = spec is not None and spec.response_header_version(version) == 1
    return encode_response_header(header.correlation_id, flexible)


__all__ = ["RequestHeader", "parse_request_header", "encode_response_header", "response_header_for"]

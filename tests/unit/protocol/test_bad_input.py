"""Bad request bytes raise ProtocolDecodeError -- and nothing else -- with what was read."""

from __future__ import annotations

import contextlib
import random
import re
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from twisted_kafka.protocol import codec
from twisted_kafka.protocol import primitives as p
from twisted_kafka.protocol.codec import decode_request, decode_request_body
from twisted_kafka.protocol.exceptions import ProtocolDecodeError
from twisted_kafka.protocol.header import parse_request_header
from twisted_kafka.protocol.messages import ProduceRequest
from twisted_kafka.protocol.registry import REGISTRY

from .schema_values import random_values
from .test_client_requests import client_request_frame

SAMPLES = [(0, 3), (0, 9), (1, 4), (1, 11), (1, 12), (2, 7), (3, 4), (3, 12), (8, 9), (9, 8), (10, 6), (11, 5),
           (11, 7), (14, 5), (18, 3), (19, 7), (22, 4), (32, 4), (36, 2), (4, 7), (6, 8)]


def sample_frame(api_key: int, version: int, seed: int = 0) -> bytes:
    spec = REGISTRY[api_key]
    rng = random.Random(f"bad-{api_key}-{version}-{seed}")
    values = random_values(rng, spec.request_class._struct, version)
    frame, _ = client_request_frame(api_key, version, values, correlation_id=4242, client_id="bad-input")
    return frame


def _id(case):
    return f"{REGISTRY[case[0]].name}-v{case[1]}"


@pytest.mark.parametrize("case", SAMPLES, ids=_id)
def test_every_truncation_raises_with_what_the_header_said(case):
    api_key, version = case
    for seed in range(3):
        frame = sample_frame(api_key, version, seed)
        decode_request(frame)  # the whole frame is fine
        for cut in range(len(frame)):
            with pytest.raises(ProtocolDecodeError) as info:
                decode_request(frame[:cut])
            if cut >= 8:
                assert (info.value.api_key, info.value.api_version, info.value.correlation_id) == (
                    api_key, version, 4242), (cut, info.value)
            else:
                assert info.value.api_key is None


@pytest.mark.parametrize("case", SAMPLES, ids=_id)
def test_trailing_bytes_are_ignored_like_kafka_or_rejected_when_strict(case):
    frame = sample_frame(*case)
    assert decode_request(frame + b"\x01\x02")[1] == decode_request(frame)[1]
    with pytest.raises(ProtocolDecodeError, match="2 unexpected trailing byte") as info:
        decode_request(frame + b"\x01\x02", strict=True)
    assert info.value.api_key == case[0]


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(SAMPLES), st.integers(0, 2 ** 32),
       st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(0, 255)), min_size=1, max_size=6))
def test_mutated_requests_decode_or_raise_protocol_decode_error(case, seed, edits):
    frame = bytearray(sample_frame(case[0], case[1], seed % 3))
    for where, byte in edits:
        frame[where % len(frame)] = byte
    try:
        header, body = decode_request(bytes(frame))
    except ProtocolDecodeError:
        return
    assert header.header_size <= len(frame)


@settings(max_examples=400)
@given(st.sampled_from(sorted(REGISTRY.keys())), st.integers(-1, 20), st.binary(max_size=120))
def test_garbage_bodies_decode_or_raise_protocol_decode_error(api_key, version, garbage):
    frame = struct.pack(">hhi", api_key, version, 7) + b"\x00\x01c"
    if REGISTRY[api_key].is_flexible(version):
        frame += b"\x00"
    frame += garbage
    try:
        decode_request(frame)
    except ProtocolDecodeError as exc:
        assert (exc.api_key, exc.api_version, exc.correlation_id) == (api_key, version, 7)


@settings(max_examples=300)
@given(st.binary(max_size=200))
def test_random_bytes_decode_or_raise_protocol_decode_error(frame):
    with contextlib.suppress(ProtocolDecodeError):
        decode_request(frame)


def test_unknown_api_key_and_unknown_version_have_no_layout():
    frame = struct.pack(">hhi", 9999, 0, 3) + b"\xff\xff"
    header = parse_request_header(frame)
    with pytest.raises(ProtocolDecodeError, match="unknown api key") as info:
        decode_request_body(header, frame)
    assert (info.value.api_key, info.value.correlation_id) == (9999, 3)
    frame = struct.pack(">hhi", 18, 99, 3) + b"\xff\xff\x00" + b"\x00\x00"
    header = parse_request_header(frame)
    with pytest.raises(ProtocolDecodeError, match="no v99 message layout"):
        decode_request_body(header, frame)


def _produce_frame(version, name_bytes, records=b"r"):
    flexible = version >= 9
    head = struct.pack(">hhi", 0, version, 1) + b"\x00\x01c" + (b"\x00" if flexible else b"")
    if flexible:
        body = b"\x00" + struct.pack(">hi", 1, 100) + b"\x02" + name_bytes + b"\x02" + struct.pack(">i", 0)
        body += p.encode_compact_nullable_bytes(records) + b"\x00" + b"\x00" + b"\x00"
    else:
        body = b"\xff\xff" + struct.pack(">hi", 1, 100) + struct.pack(">i", 1) + name_bytes + struct.pack(">i", 1)
        body += struct.pack(">i", 0) + p.encode_nullable_bytes(records)
    return head + body


def test_null_in_a_non_nullable_field_is_rejected():
    decode_request(_produce_frame(3, p.encode_string("t")))
    with pytest.raises(ProtocolDecodeError, match=r"null topic_data\[\]\.name") as info:
        decode_request(_produce_frame(3, b"\xff\xff"))
    assert info.value.api_key == 0
    with pytest.raises(ProtocolDecodeError, match=r"null topic_data\[\]\.name"):
        decode_request(_produce_frame(9, b"\x00"))
    # records are nullable: a null record set is accepted
    request = decode_request(_produce_frame(3, p.encode_string("t"), None))[1]
    assert request.topic_data[0].partition_data[0].records is None


def test_null_element_in_a_string_array_is_rejected():
    # Metadata v0: topics is []string (kafka-python: structs of one name field)
    frame = struct.pack(">hhi", 3, 0, 1) + b"\x00\x01c" + struct.pack(">i", 2) + p.encode_string("a") + b"\xff\xff"
    with pytest.raises(ProtocolDecodeError, match=r"null topics\[\]\.name"):
        decode_request(frame)


def test_overlong_varint_in_a_body_is_rejected_after_five_bytes():
    """A compact string length made of a megabyte of continuation bytes: without the 5-byte cap
    the generated loop reads all of it, building ever larger integers (quadratic time).  With
    it, decoding stops at the sixth byte of the varint: the offset in the error says where."""
    header = struct.pack(">hhi", 0, 9, 1) + b"\x00\x01c\x00"          # Produce v9, client id "c", no tags
    frame = header + b"\xff" * (1 << 20) + b"\x01"
    with pytest.raises(ProtocolDecodeError, match="longer than 5 bytes") as info:
        decode_request(frame)
    stopped_at = int(re.search(r"before offset (\d+)", info.value.reason)[1])
    assert len(header) < stopped_at <= len(header) + 6, stopped_at


def _produce_v9_with_tags(partitions: int, tag_value: bytes = b"tagvalue", last_records: bytes | None = None) -> bytes:
    """A Produce v9 request whose every partition carries an unknown tag (17)."""
    tags = p.encode_tagged_fields({17: tag_value})
    entries = [struct.pack(">i", i) + b"\x00" + tags for i in range(partitions)]
    if last_records is not None:
        entries.append(struct.pack(">i", partitions) + p.encode_compact_nullable_bytes(last_records) + b"\x00")
    topic = p.encode_compact_string("t") + p.encode_unsigned_varint(len(entries) + 1) + b"".join(entries) + b"\x00"
    header = struct.pack(">hhi", 0, 9, 1) + p.encode_nullable_string("c") + b"\x00"
    return header + b"\x00" + struct.pack(">hi", 1, 100) + b"\x02" + topic + b"\x00"


def test_unknown_tags_are_kept_and_read_in_place():
    frame = _produce_v9_with_tags(3)
    _, request = decode_request(frame)
    for partition in request.topic_data[0].partition_data:
        assert partition.unknown_tags == {"_17": b"tagvalue"}


def test_tagged_field_running_past_the_frame_is_rejected():
    frame = _produce_v9_with_tags(1, b"tagvalue")
    broken = frame.replace(b"\x11\x08tagvalue", b"\x11\x7ftagvalue")
    decode_request(frame)
    assert broken != frame
    with pytest.raises(ProtocolDecodeError):
        decode_request(broken)


def test_tagged_structs_do_not_copy_the_rest_of_the_frame(monkeypatch):
    """kafka-python's generated decoder read each struct's tags from
    ``BytesIO(bytes(data[pos:]))``: with 4000 tagged partitions ahead of 8 MiB of
    records that is 32 GB of copying.  Here every struct's tags are read in place,
    by a ``_TagReader`` over the caller's frame itself (it copies only the tag
    values it returns), so decoding is one pass."""
    frame = _produce_v9_with_tags(4000, last_records=b"x" * (8 << 20))
    read_from = []
    init = codec._TagReader.__init__

    def recording_init(self, data, pos):
        init(self, data, pos)
        read_from.append(self._data)

    monkeypatch.setattr(codec._TagReader, "__init__", recording_init)
    _, request = decode_request(frame)
    assert len(request.topic_data[0].partition_data) == 4001
    assert len(read_from) == 4000, "the tags of every partition that has some are read through a _TagReader"
    assert all(isinstance(data, memoryview) and data.obj is frame for data in read_from), \
        "a _TagReader reads the frame it was given, not a copy of it"


def test_generated_decoders_carry_the_hardening_rewrites():
    """The rewrites match kafka-python 3.0.12's generated source lines; if an
    upgrade changes them, this fails instead of silently losing the guards."""
    _, ctx = codec._compile_decoder(ProduceRequest, 9)
    source = ctx.source()
    assert ctx.tag_rewrites == 3 and "bytes(data[pos:])" not in source
    assert ctx.varint_guards >= 5
    shifts = re.findall(r"(_sh\d+) \+= 7", source)
    assert shifts and all(f"if {var} > 28: _varint_too_long(pos)" in source for var in shifts)


def test_cuts_of_every_advertised_request_are_rejected():
    rng = random.Random(5)
    for spec in REGISTRY:
        for version in range(spec.min_version, spec.max_version + 1):
            values = random_values(rng, spec.request_class._struct, version)
            frame = client_request_frame(spec.api_key, version, values, 1, "c")[0]
            for cut in sorted({c for c in (len(frame) - 1, len(frame) // 2, 11, 15) if c < len(frame)}):
                try:
                    decode_request(frame[:cut])
                except ProtocolDecodeError:
                    continue
                raise AssertionError(f"{spec.name} v{version} accepted a frame cut at {cut}")


def test_array_elements_are_never_zero_width():
    """Every element of every array in every advertised request layout takes at
    least one byte, so an element count is bounded by the frame size (a huge count
    cannot make the decoder loop or allocate without consuming input)."""
    def check(struct_field, version, flexible, path):
        for field in struct_field.untagged_fields(version):
            if field.is_struct_array():
                inner = field.array_of
                # a flexible struct always ends in its tag buffer (>= 1 byte)
                assert inner.untagged_fields(version) or flexible, f"{path}{field.name}"
                check(inner, version, flexible, f"{path}{field.name}.")
            elif field.is_struct():
                check(field, version, flexible, f"{path}{field.name}.")

    for spec in REGISTRY:
        for version in range(spec.min_version, spec.max_version + 1):
            check(spec.request_class._struct, version, spec.is_flexible(version), f"{spec.name} v{version}: ")

"""Random message contents driven by kafka-python's schema, for cross-client tests.

Given a message class and a version, :func:`random_values` draws a value for
every field present at that version (nested structs as dicts), and the other
helpers turn those values into a kafka-python object, into aiokafka's
positional struct arguments, and compare a decoded message (from either
library) against them, field by field. Tagged fields keep their defaults: the
tests here are about the untagged layout that aiokafka and the wire share.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from aiokafka.protocol import types as ak
from kafka.protocol.schemas.fields.codecs import (
    UUID,
    BitField,
    Boolean,
    Bytes,
    Float64,
    Int8,
    Int16,
    Int32,
    Int64,
    String,
    UnsignedInt16,
)

_TEXT = "abcxyz-_.09é中"
_INT_RANGES = {
    Int8: (-2 ** 7, 2 ** 7 - 1), Int16: (-2 ** 15, 2 ** 15 - 1), Int32: (-2 ** 31, 2 ** 31 - 1),
    Int64: (-2 ** 63, 2 ** 63 - 1), UnsignedInt16: (0, 2 ** 16 - 1),
}


def _fields(struct_field, version):
    return struct_field.untagged_fields(version)


def _simple_value(rng: random.Random, field, version, element: bool = False):
    codec = field._type
    # Array elements inherit the array's nullableVersions in kafka-python's
    # parse, but elements themselves are never null.
    nullable = field.nullable_for_version_q(version) and not element
    if nullable and rng.random() < 0.25 and (isinstance(codec, String) or codec is Bytes):
        return None
    if codec in _INT_RANGES:
        low, high = _INT_RANGES[codec]
        return rng.choice([low, high, 0, -1, 1, rng.randint(low, high)])
    if codec is Boolean:
        return rng.random() < 0.5
    if codec is Float64:
        return rng.choice([0.0, 1.5, -2.25, 1e300])
    if isinstance(codec, String):
        return "".join(rng.choice(_TEXT) for _ in range(rng.randint(0, 12)))
    if codec is Bytes:
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))
    if codec is UUID:
        return uuid.UUID(int=rng.getrandbits(128) | 1)
    if codec is BitField:
        return None if rng.random() < 0.3 else {rng.randint(0, 30) for _ in range(rng.randint(1, 4))}
    raise AssertionError(f"no generator for {codec!r}")


def random_values(rng: random.Random, struct_field, version: int, depth: int = 0) -> dict[str, Any]:
    """Values for every untagged field of ``struct_field`` at ``version``."""
    values = {}
    for field in _fields(struct_field, version):
        nullable = field.nullable_for_version_q(version)
        if field.is_struct_array():
            if nullable and rng.random() < 0.2:
                values[field.name] = None
            else:
                count = rng.randint(0, 2 if depth < 2 else 1)
                values[field.name] = [random_values(rng, field.array_of, version, depth + 1) for _ in range(count)]
        elif field.is_array():
            if nullable and rng.random() < 0.2:
                values[field.name] = None
            else:
                values[field.name] = [_simple_value(rng, field.array_of, version, element=True)
                                      for _ in range(rng.randint(0, 3))]
        elif field.is_struct():
            values[field.name] = (None if nullable and rng.random() < 0.3
                                  else random_values(rng, field, version, depth + 1))
        else:
            values[field.name] = _simple_value(rng, field, version)
    return values


def build_object(data_class, struct_field, version: int, values: dict):
    """A kafka-python object (``data_class``) holding ``values``."""
    kwargs = {}
    for field in _fields(struct_field, version):
        value = values[field.name]
        if value is not None and field.is_struct_array():
            inner = field.array_of
            value = [build_object(inner.data_class, inner, version, item) for item in value]
        elif value is not None and field.is_struct():
            value = build_object(field.data_class, field, version, value)
        kwargs[field.name] = value
    return data_class(version=version, **kwargs)


def _bitfield_int(value):
    # kafka-python models authorized operations as a set of bits (None for
    # "not requested", INT32_MIN on the wire); aiokafka as the signed INT32.
    raw = BitField.to_32_bit_field({31} if value is None else value)
    return raw - (1 << 32) if raw & 0x80000000 else raw


def _is_schema(ak_type) -> bool:
    return isinstance(ak_type, ak.Schema)


def _to_ak(ak_type, field, version: int, value):
    """One kafka-python field value as aiokafka's type ``ak_type`` holds it."""
    if value is None:
        return None
    if field.is_struct_array():
        inner = field.array_of
        if _is_schema(ak_type.array_of):
            return [to_positional(ak_type.array_of, inner, version, item) for item in value]
        # aiokafka writes a one-field struct as the bare field (e.g. Array(String)).
        (only,) = _fields(inner, version)
        return [_to_ak(ak_type.array_of, only, version, item[only.name]) for item in value]
    if field.is_struct():
        return to_positional(ak_type, field, version, value)
    if field.is_array():
        return list(value)
    if getattr(field, "_type", None) is BitField:
        return _bitfield_int(value)
    return value


def _positional(schema, fields: list, index: int, version: int, values: dict):
    args = []
    for ak_type in schema.fields:
        if ak_type is ak.TaggedFields:
            args.append({})
        elif _is_schema(ak_type) and not fields[index].is_struct():
            # aiokafka groups consecutive fields into an inline Schema (same bytes on the wire).
            nested, index = _positional(ak_type, fields, index, version, values)
            args.append(tuple(nested))
        else:
            field = fields[index]
            index += 1
            args.append(_to_ak(ak_type, field, version, values[field.name]))
    return args, index


def to_positional(schema, struct_field, version: int, values: dict) -> tuple:
    """aiokafka positional arguments for ``schema`` (an aiokafka ``Schema``)."""
    fields = _fields(struct_field, version)
    args, used = _positional(schema, fields, 0, version, values)
    assert used == len(fields), f"aiokafka schema lacks fields {[f.name for f in fields[used:]]}"
    return tuple(args)


def assert_object_matches(obj, struct_field, version: int, values: dict, path: str = "") -> None:
    """``obj`` (kafka-python, decoded) holds exactly ``values``."""
    for field in _fields(struct_field, version):
        expected = values[field.name]
        actual = getattr(obj, field.name)
        where = f"{path}{field.name}"
        if expected is None or not (field.is_struct_array() or field.is_struct()):
            if isinstance(actual, (memoryview, bytearray)):
                actual = bytes(actual)
            assert actual == expected, f"{where}: {actual!r} != {expected!r}"
        elif field.is_struct_array():
            assert actual is not None and len(actual) == len(expected), f"{where}: {actual!r} vs {expected!r}"
            for i, (item, want) in enumerate(zip(actual, expected, strict=True)):
                assert_object_matches(item, field.array_of, version, want, f"{where}[{i}].")
        else:
            assert_object_matches(actual, field, version, expected, f"{where}.")


def assert_positional_matches(decoded, schema, struct_field, version: int, values: dict, path: str = "") -> None:
    """An aiokafka-decoded struct (or tuple) holds ``values``, compared by wire position."""
    expected = to_positional(schema, struct_field, version, values)
    actual = tuple(decoded.__dict__[name] for name in schema.names) if hasattr(decoded, "__dict__") else decoded
    _assert_same(actual, expected, schema, path)


def _assert_same(actual, expected, ak_type, where):
    if _is_schema(ak_type):
        assert len(actual) == len(expected), f"{where}: {actual!r} vs {expected!r}"
        for name, sub_type, got, want in zip(ak_type.names, ak_type.fields, actual, expected, strict=True):
            _assert_same(got, want, sub_type, f"{where}.{name}")
    elif isinstance(ak_type, ak.Array) and expected is not None:
        assert actual is not None and len(actual) == len(expected), f"{where}: {actual!r} vs {expected!r}"
        for i, (got, want) in enumerate(zip(actual, expected, strict=True)):
            _assert_same(got, want, ak_type.array_of, f"{where}[{i}]")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"

"""The error codes a response carries, counted: Kafka's ``AbstractResponse.errorCounts``.

Kafka's broker marks ``ErrorsPerSec`` (``RequestChannel.updateErrorMetrics``)
once per error code in every response it sends, NONE included: a Produce
response counts each partition's code, a Metadata response each topic's and
each partition's, a CreateTopics response each topic's.  Each response class
there lists its own; here one walk covers them all: every ``error_code``
field the response has at its version, at any depth (the top level, each
topic, each partition), is one count.  Other codes (CreateTopics'
``topic_config_error_code``) are not, as in Kafka.

Only the structs that can hold an ``error_code`` are visited (decided once
per struct and version), and an array of structs with nothing below their
code (the partitions) is counted in one C-level pass, so the count costs a
fraction of encoding the response (``make bench-codec``).  The hand-encoded
FetchResponseData says its codes itself (``error_codes``); responses sent
already encoded (ApiVersions, Metadata) carry theirs in ``Encoded``.
"""

from __future__ import annotations

from collections import Counter
from operator import attrgetter
from typing import Any

__all__ = ["error_counts"]

ERROR_CODE = "error_code"

# (id(struct definition), version) -> (the struct, its error_code slot or None, the struct /
# struct-array fields holding one at some depth).  A slot is (attribute name, index among the
# version's untagged fields -- how a struct given as a tuple is read -- or None if tagged).
_Slot = tuple[str, "int | None"]
_PLANS: dict[tuple[int, int], tuple[Any, _Slot | None, tuple[tuple[_Slot, bool, Any, Any], ...]]] = {}
_HOLDS: dict[int, tuple[Any, bool]] = {}


def error_counts(response: Any, version: int) -> Counter[int]:
    """``{error code: how many times the response carries it}`` for a response message at ``version``."""
    counts: Counter[int] = Counter()
    struct = getattr(type(response), "_struct", None)
    if struct is not None:
        _walk_struct(struct, response, version, counts)
    elif hasattr(response, "error_codes"):
        counts.update(response.error_codes())   # the hand-encoded responses (FetchResponseData)
    return counts


def _fields(struct) -> list:
    return list(struct.fields.values() if isinstance(struct.fields, dict) else struct.fields)


def _holds_codes(struct) -> bool:
    """Whether a struct has an error_code field at some depth, at any version."""
    held = _HOLDS.get(id(struct))
    if held is None or held[0] is not struct:
        holds = any(field.name == ERROR_CODE or ((field.is_struct() or field.is_struct_array())
                                                 and _holds_codes(field)) for field in _fields(struct))
        held = _HOLDS[id(struct)] = (struct, holds)
    return held[1]


def _plan(struct, version: int):
    plan = _PLANS.get((id(struct), version))
    if plan is None or plan[0] is not struct:
        untagged = [field.name for field in struct.untagged_fields(version)]

        def slot(name: str) -> _Slot:
            return name, (untagged.index(name) if name in untagged else None)

        present = [field for field in _fields(struct) if field.for_version_q(version)]
        code = next((slot(field.name) for field in present if field.name == ERROR_CODE), None)
        nested = tuple((slot(field.name), field.is_struct_array(), field, _leaf_getter(field, version))
                       for field in present
                       if (field.is_struct() or field.is_struct_array()) and _holds_codes(field))
        plan = _PLANS[(id(struct), version)] = (struct, code, nested)
    return plan[1], plan[2]


def _leaf_getter(struct, version: int):
    """For an array of structs with an error_code and nothing below (partitions): its getter."""
    if not struct.is_struct_array():
        return None
    code, nested = _plan(struct, version)
    return attrgetter(code[0]) if code is not None and not nested else None


def _value(item, slot: _Slot):
    name, index = slot
    if isinstance(item, tuple):          # a struct given in wire order, as the encoder accepts it
        return item[index] if index is not None and index < len(item) else None
    if isinstance(item, dict):
        return item.get(name)
    return getattr(item, name, None)


def _walk_struct(struct, item, version: int, counts: Counter[int]) -> None:
    if item is None:
        return
    code_slot, nested = _plan(struct, version)
    if code_slot is not None:
        code = _value(item, code_slot)
        if code is not None:
            counts[int(code)] += 1
    for slot, is_array, field, leaf_getter in nested:
        value = _value(item, slot)
        if not value:
            continue
        if not is_array:
            _walk_struct(field, value, version, counts)
        elif leaf_getter is not None and not isinstance(value[0], (tuple, dict)):
            counts.update(map(leaf_getter, value))      # the partitions: counted in C
        else:
            for element in value:
                _walk_struct(field, element, version, counts)

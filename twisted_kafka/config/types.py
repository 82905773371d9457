"""Kafka's configuration value types and its string-to-value rules.

A ``server.properties`` written for Apache Kafka must mean the same thing
here, so coercion follows ``ConfigDef.parseType`` rather than Python's
friendlier parsers: values are trimmed the way Java's ``String.trim`` does;
``int("1_000")`` or ``float("nan")`` would accept what Java rejects; INT is a
signed 32-bit and LONG a signed 64-bit number; a LIST splits on commas with
surrounding whitespace and keeps empty items (``"a,,b"`` has three), and an
empty string is the empty list.
"""

from __future__ import annotations

import enum
import math
import re
from typing import Any

from .errors import HIDDEN

__all__ = ["Type", "Password", "parse_value", "format_value", "java_trim"]


class Type(enum.Enum):
    """Kafka's ``ConfigDef.Type``; the value is the name Kafka's docs show."""

    BOOLEAN = "boolean"
    SHORT = "short"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"
    PASSWORD = "password"
    CLASS = "class"


class Password:
    """A secret value: usable through ``.value``, never shown.

    Its ``str``/``repr`` are ``[hidden]`` (Kafka's ``Password.toString``), so
    logging a config, formatting an exception or rendering docs cannot leak
    it by accident.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    @property
    def value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return HIDDEN

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Password):
            return self._value == other._value
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("Password", self._value))


# Bounds of Java's short, int and long.
_RANGES = {
    Type.SHORT: (-(2**15), 2**15 - 1, "16-bit"),
    Type.INT: (-(2**31), 2**31 - 1, "32-bit"),
    Type.LONG: (-(2**63), 2**63 - 1, "64-bit"),
}

# Integer.parseInt/Long.parseLong: an optional sign, then decimal digits.
_INTEGER = re.compile(r"[+-]?\d+")
# Double.parseDouble, after trim: NaN, Infinity, decimal or hexadecimal
# floating-point literals with an optional f/F/d/D suffix. Case matters.
_DOUBLE = re.compile(
    r"""[+-]?(?:
        NaN | Infinity
      | (?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?
      | 0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+[fFdD]?
    )""",
    re.VERBOSE,
)
# Java's \s, used by ConfigDef's COMMA_WITH_WHITESPACE split.
_LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")
# A qualified class name: dotted identifiers (Java allows '$' for nested ones).
_CLASS_NAME = re.compile(r"[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*")
# String.trim removes every code point up to and including U+0020.
_JAVA_WHITESPACE = "".join(chr(c) for c in range(0x21))


def java_trim(text: str) -> str:
    """Java's ``String.trim``: strip control characters and spaces only."""
    return text.strip(_JAVA_WHITESPACE)


class CoercionError(ValueError):
    """A value does not fit its type; the message is the reason."""


def parse_value(value: Any, type_: Type) -> Any:
    """Convert ``value`` (normally a string) to ``type_``'s Python value.

    Strings are parsed as Kafka parses them; already-typed values (an int
    for INT, a list for LIST, ...) are accepted and range-checked so code and
    tests can build configurations without formatting numbers first. None
    stays None (a nullable key that is unset). Raises ``CoercionError``
    whose message is the reason, phrased for "Invalid value X for
    configuration K: <reason>".
    """
    if value is None:
        return None
    if isinstance(value, str):
        return _parse_string(java_trim(value), type_)
    return _accept_typed(value, type_)


def _parse_string(text: str, type_: Type) -> Any:
    if type_ is Type.BOOLEAN:
        lowered = text.lower()
        if lowered == "true":
            return True
        if lowered == "false":
            return False
        raise CoercionError("expected true or false")
    if type_ in _RANGES:
        if not _INTEGER.fullmatch(text):
            raise CoercionError(f"not a number of type {type_.name}")
        return _check_range(int(text), type_)
    if type_ is Type.DOUBLE:
        return _parse_double(text)
    if type_ is Type.STRING:
        return text
    if type_ is Type.PASSWORD:
        return Password(text)
    if type_ is Type.LIST:
        if not text:
            return []
        return _LIST_SEPARATOR.split(text)
    if type_ is Type.CLASS:
        if not _CLASS_NAME.fullmatch(text):
            raise CoercionError("not a qualified class name")
        return text
    raise AssertionError(f"unknown type {type_!r}")


def _check_range(number: int, type_: Type) -> int:
    low, high, width = _RANGES[type_]
    if not low <= number <= high:
        raise CoercionError(
            f"not a number of type {type_.name}: outside the {width} range "
            f"[{low}, {high}]"
        )
    return number


def _parse_double(text: str) -> float:
    if not _DOUBLE.fullmatch(text):
        raise CoercionError("not a number of type DOUBLE")
    body = text.rstrip("fFdD")  # the suffix only names the literal's type
    sign = -1.0 if body.startswith("-") else 1.0
    unsigned = body.lstrip("+-")
    if unsigned == "NaN":
        return math.nan
    if unsigned == "Infinity":
        return sign * math.inf
    if unsigned[:2] in ("0x", "0X"):
        return sign * float.fromhex(unsigned)
    return sign * float(unsigned)


def _accept_typed(value: Any, type_: Type) -> Any:
    if type_ is Type.BOOLEAN:
        if isinstance(value, bool):
            return value
        raise CoercionError("expected true or false")
    if type_ in _RANGES:
        if isinstance(value, int) and not isinstance(value, bool):
            return _check_range(value, type_)
        raise CoercionError(f"expected an integer of type {type_.name}")
    if type_ is Type.DOUBLE:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise CoercionError("expected a number of type DOUBLE")
    if type_ is Type.PASSWORD:
        if isinstance(value, Password):
            return value
        raise CoercionError("expected a string")
    if type_ is Type.LIST:
        if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
            return list(value)
        raise CoercionError("expected a comma-separated list")
    if type_ is Type.CLASS:
        if isinstance(value, type):
            return f"{value.__module__}.{value.__qualname__}"
        raise CoercionError("expected a class or a qualified class name")
    raise CoercionError("expected a string")


def format_value(value: Any, type_: Type | None = None) -> str | None:
    """A typed value as Kafka shows it (``ConfigDef.convertToString``).

    This is the text DescribeConfigs returns and the docs print: booleans
    lower-case, lists comma-joined, doubles in Java's ``Double.toString``
    form, passwords ``[hidden]``, None stays None.
    """
    if value is None:
        return None
    if isinstance(value, Password) or type_ is Type.PASSWORD:
        return HIDDEN
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) or type_ is Type.DOUBLE:
        return java_double_str(float(value))
    if isinstance(value, (list, tuple)):
        return ",".join(str(item) for item in value)
    return str(value)


def java_double_str(number: float) -> str:
    """Java's ``Double.toString``: ``0.5``, ``1.0E7``, ``1.7976931348623157E308``.

    Plain notation for magnitudes in [1e-3, 1e7), otherwise computerized
    scientific notation; always at least one digit after the point. The
    digits are the shortest that round-trip, which is what ``repr`` gives
    and what Java has produced since JDK 19.
    """
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "-0.0" if math.copysign(1.0, number) < 0 else "0.0"
    sign = "-" if number < 0 else ""
    magnitude = abs(number)
    digits, exp10 = _shortest_digits(magnitude)
    if 1e-3 <= magnitude < 1e7:
        point = exp10 + 1  # digits before the decimal point
        if point <= 0:
            text = "0." + "0" * (-point) + digits
        elif point >= len(digits):
            text = digits + "0" * (point - len(digits)) + ".0"
        else:
            text = digits[:point] + "." + digits[point:]
        return sign + text
    fraction = digits[1:] or "0"
    return f"{sign}{digits[0]}.{fraction}E{exp10}"


def _shortest_digits(magnitude: float) -> tuple[str, int]:
    """The shortest round-tripping significant digits and the decimal exponent."""
    text = repr(magnitude)
    mantissa, _, exp = text.partition("e")
    exp10 = int(exp) if exp else 0
    whole, _, frac = mantissa.partition(".")
    if frac == "0":
        frac = ""
    digits = (whole + frac).lstrip("0")
    leading_zeros = len(whole + frac) - len((whole + frac).lstrip("0"))
    exp10 += len(whole) - 1 - leading_zeros
    return digits.rstrip("0") or "0", exp10

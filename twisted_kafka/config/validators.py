"""Value validators, after Kafka's ``ConfigDef.Range``/``ValidString``/``ValidList``.

A validator is any callable taking the typed value and raising
``ValueError`` whose message is the reason; ``ConfigDef`` turns that into a
``ConfigError`` naming the key. The built-in ones also describe themselves
(``str(validator)``) in Kafka's notation, which ``docs/configuration.md``
shows as "Valid values". A plain function works too; wrap it with
``custom(fn, description)`` to give the docs something to print.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "Validator",
    "at_least",
    "between",
    "one_of",
    "valid_list",
    "non_empty_string",
    "metadata_version",
    "custom",
    "describe",
]


class Validator(ABC):
    """Base of the built-in validators: callable, and printable for docs."""

    description = ""

    @abstractmethod
    def __call__(self, value: Any) -> None:
        """Raise ValueError naming what is wrong with ``value``."""

    def __str__(self) -> str:
        return self.description

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.description}>"


class _Range(Validator):
    def __init__(self, low: float | None, high: float | None) -> None:
        self.low = low
        self.high = high
        if low is None and high is None:
            self.description = "[...]"
        elif low is None:
            self.description = f"[...,{high}]"
        elif high is None:
            self.description = f"[{low},...]"
        else:
            self.description = f"[{low},...,{high}]"

    def __call__(self, value: Any) -> None:
        if value is None:
            raise ValueError("value must be non-null")
        if self.low is not None and value < self.low:
            raise ValueError(f"value must be at least {self.low}")
        if self.high is not None and value > self.high:
            raise ValueError(f"value must be no more than {self.high}")


def at_least(low: float) -> Validator:
    """Numbers ``>= low`` (Kafka's ``Range.atLeast``)."""
    return _Range(low, None)


def between(low: float, high: float) -> Validator:
    """Numbers in ``[low, high]`` (Kafka's ``Range.between``)."""
    return _Range(low, high)


class _OneOf(Validator):
    def __init__(self, options: Iterable[str], case_insensitive: bool) -> None:
        self.options = tuple(options)
        self.case_insensitive = case_insensitive
        self._allowed = {self._fold(o) for o in self.options}
        listed = ", ".join(self.options)
        self.description = (
            f"(case insensitive) [{listed}]" if case_insensitive else f"[{listed}]"
        )

    def _fold(self, text: str) -> str:
        return text.upper() if self.case_insensitive else text

    def __call__(self, value: Any) -> None:
        if value is None or self._fold(value) not in self._allowed:
            qualifier = " (case insensitive)" if self.case_insensitive else ""
            raise ValueError(f"must be one of{qualifier}: {', '.join(self.options)}")


def one_of(*options: str, case_insensitive: bool = False) -> Validator:
    """A string from ``options`` (Kafka's ``ValidString`` and
    ``CaseInsensitiveValidString``)."""
    return _OneOf(options, case_insensitive)


class _ValidList(Validator):
    def __init__(self, options: Iterable[str]) -> None:
        self.options = tuple(options)
        self.description = f"[{', '.join(self.options)}]"

    def __call__(self, value: Any) -> None:
        for item in value or ():
            if item not in self.options:
                raise ValueError(
                    f"list item {item!r} must be one of: {', '.join(self.options)}"
                )


def valid_list(*options: str) -> Validator:
    """A list whose every item is one of ``options`` (Kafka's ``ValidList``;
    as in Kafka 3.x the empty list passes)."""
    return _ValidList(options)


class _NonEmptyString(Validator):
    description = "non-empty string"

    def __call__(self, value: Any) -> None:
        if not value:
            raise ValueError("must be a non-empty string")


def non_empty_string() -> Validator:
    """A string with at least one character (Kafka's ``NonEmptyString``)."""
    return _NonEmptyString()


#: Kafka releases a ``MetadataVersion`` string may name (Kafka 3.9's list, release part only).
KAFKA_RELEASES = ("0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "1.0", "1.1",
                  *(f"2.{minor}" for minor in range(9)), *(f"3.{minor}" for minor in range(10)))


class _MetadataVersion(Validator):
    description = f"[{', '.join(KAFKA_RELEASES)}], each optionally with -IV<n>"

    def __call__(self, value: Any) -> None:
        # As Kafka's MetadataVersion.fromVersionString: "0.x" versions keep three
        # segments, later ones two, so 0.8.2.1 is 0.8.2 and 2.8.1 is 2.8.
        text = str(value)
        segments = text.split(".")
        kept = 3 if text.startswith("0.") else 2
        release, _, iv = ".".join(segments[:kept]).partition("-")
        if release not in KAFKA_RELEASES or (iv and not (iv.startswith("IV") and iv[2:].isdigit())):
            raise ValueError(f"Version {text} is not a valid version")


def metadata_version() -> Validator:
    """A Kafka version as ``message.format.version`` takes it (Kafka's
    ``MetadataVersionValidator``): a release such as 2.8 or 0.10.2, or an
    inter-broker protocol version such as 3.0-IV1."""
    return _MetadataVersion()


class _Custom(Validator):
    def __init__(self, function: Callable[[Any], None], description: str) -> None:
        self.function = function
        self.description = description

    def __call__(self, value: Any) -> None:
        self.function(value)


def custom(function: Callable[[Any], None], description: str) -> Validator:
    """A plain check function, with the text the docs should show for it."""
    return _Custom(function, description)


def describe(validator: Callable[[Any], None] | None) -> str:
    """What the docs print under "Valid values" for ``validator``."""
    if validator is None:
        return ""
    if isinstance(validator, Validator):
        return str(validator)
    return getattr(validator, "description", "") or ""

"""Typed key definitions: ``ConfigKey`` and the ``ConfigDef`` that holds them.

One ``ConfigKey`` carries everything the broker, the docs and (later)
DescribeConfigs need to know about a key: Kafka's name, type, default,
validator and importance, a one-line doc, the docs group, whether it may be
set per listener (``listener.name.<l>.<key>``) or per listener and SASL
mechanism (``listener.name.<l>.<mechanism>.<key>``), and whether Kafka lets
it change at runtime. Keeping it in one record means the docs cannot drift
from what the parser accepts.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError
from .types import CoercionError, Type, parse_value

__all__ = [
    "Importance",
    "UpdateMode",
    "NO_DEFAULT",
    "ConfigKey",
    "ConfigDef",
]


class Importance(enum.Enum):
    """Kafka's ``ConfigDef.Importance``."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class UpdateMode(enum.Enum):
    """Whether Kafka accepts a dynamic (AlterConfigs) update of a broker key,
    and at which level: the "Update Mode" column of Kafka's docs."""

    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


class _NoDefault:
    """Marks a key that must be given: Kafka's ``ConfigDef.NO_DEFAULT_VALUE``."""

    _instance: _NoDefault | None = None

    def __new__(cls) -> _NoDefault:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self):
        return (_NoDefault, ())


NO_DEFAULT: Any = _NoDefault()

Validator = Callable[[Any], None]


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key.

    ``default`` may be given as Kafka writes it (a string such as
    ``"TLSv1.2,TLSv1.3"``) or already typed; it is parsed and validated when
    the key is defined, as Kafka does, so a wrong default fails at import
    rather than at some broker's startup. None means "unset" (a nullable
    key); ``NO_DEFAULT`` means the key is required.
    """

    name: str
    type: Type
    default: Any
    validator: Validator | None
    importance: Importance
    doc: str
    group: str
    listener_override: bool = False
    per_mechanism: bool = False
    update_mode: UpdateMode = UpdateMode.READ_ONLY
    #: The default as Kafka's docs print it, when that is not simply the
    #: formatted default (e.g. a value that depends on the JVM).
    default_doc: str | None = field(default=None, compare=False)
    #: A key of twisted_kafka's own, which Apache Kafka does not have (a Kafka
    #: broker would report it as unknown).
    extension: bool = False

    def __post_init__(self) -> None:
        if self.default is not NO_DEFAULT and self.default is not None:
            object.__setattr__(self, "default", self.parse(self.default))

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    @property
    def sensitive(self) -> bool:
        """Values of this key must never be shown (Kafka: PASSWORD type)."""
        return self.type is Type.PASSWORD

    def parse(self, raw: Any, as_key: str | None = None) -> Any:
        """Coerce and validate ``raw``; errors name ``as_key`` (default: this
        key), so a ``listener.name.x.<key>`` value is reported under the
        name the operator wrote."""
        key = as_key or self.name
        try:
            value = parse_value(raw, self.type)
        except CoercionError as exc:
            raise ConfigError(key, str(exc), raw, secret=self.sensitive) from None
        if self.validator is not None and value is not None:
            try:
                self.validator(value)
            except ConfigError:
                raise
            except (ValueError, TypeError) as exc:
                raise ConfigError(key, str(exc), raw, secret=self.sensitive) from None
        return value

    def copy_value(self, value: Any) -> Any:
        """A value safe to hand out: lists are copied so callers cannot
        change the configuration they were given."""
        return list(value) if isinstance(value, list) else value

    def __repr__(self) -> str:
        default = "NO_DEFAULT" if self.required else repr(self.default)
        return f"ConfigKey({self.name!r}, {self.type.name}, default={default})"


class ConfigDef(Mapping[str, ConfigKey]):
    """An ordered, read-only set of ``ConfigKey`` by name.

    ``parse`` turns a mapping of raw values into typed values for every
    defined key, defaults applied; keys it does not define are left to the
    caller (``KafkaConfig`` warns about them).
    """

    def __init__(self, keys: Iterable[ConfigKey] = ()) -> None:
        self._keys: dict[str, ConfigKey] = {}
        for key in keys:
            self.define(key)

    def define(self, key: ConfigKey) -> ConfigDef:
        if key.name in self._keys:
            raise ValueError(f"configuration {key.name} is defined twice")
        self._keys[key.name] = key
        return self

    def __getitem__(self, name: str) -> ConfigKey:
        return self._keys[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def groups(self) -> list[str]:
        """Docs groups in the order keys first use them."""
        seen: dict[str, None] = {}
        for key in self._keys.values():
            seen.setdefault(key.group, None)
        return list(seen)

    def defaults(self) -> dict[str, Any]:
        """Every key's default (None for nullable, absent for required)."""
        return {n: k.default for n, k in self._keys.items() if not k.required}

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name, key in self._keys.items():
            if name in props:
                values[name] = key.parse(props[name])
            elif key.required:
                raise ConfigError(
                    name,
                    "missing required configuration which has no default value",
                    message=(
                        f"Missing required configuration {name} "
                        "which has no default value"
                    ),
                )
            else:
                values[name] = key.default
        return values

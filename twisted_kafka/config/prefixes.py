"""Per-listener key names: ``listener.name.<listener>.[<mechanism>.]<key>``.

Kafka lets many security and connection keys be set per listener, and a few
SASL keys per listener *and* mechanism. It looks them up with the listener
name and the mechanism in lower case, so ``listener.name.SSL.ssl.client.auth``
is silently never read by Kafka; here such a key is reported instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from .definition import ConfigDef

__all__ = ["LISTENER_PREFIX", "ListenerKey", "split_listener_key", "listener_key_name"]

LISTENER_PREFIX = "listener.name."


@dataclass(frozen=True)
class ListenerKey:
    """A parsed per-listener key name (listener and mechanism lower-case)."""

    listener: str
    key: str
    mechanism: str | None = None

    @property
    def name(self) -> str:
        return listener_key_name(self.listener, self.key, self.mechanism)


class NotAListenerKey(ValueError):
    """The name has the listener prefix but is not a valid per-listener key;
    the message says why."""


def listener_key_name(listener: str, key: str, mechanism: str | None = None) -> str:
    """The property name Kafka reads for ``key`` on ``listener``."""
    parts = [LISTENER_PREFIX + listener.lower()]
    if mechanism is not None:
        parts.append(mechanism.lower())
    parts.append(key)
    return ".".join(parts)


def split_listener_key(name: str, definition: ConfigDef) -> ListenerKey | None:
    """Parse ``name``: None if it lacks the ``listener.name.`` prefix; raises
    ``NotAListenerKey`` if it has the prefix but names no overridable key."""
    if not name.startswith(LISTENER_PREFIX):
        return None
    listener, _, tail = name[len(LISTENER_PREFIX):].partition(".")
    if not listener or not tail:
        raise NotAListenerKey("no listener name or key after 'listener.name.'")
    base = definition.get(tail)
    if base is not None:
        if not base.listener_override:
            raise NotAListenerKey(f"{tail} cannot be set per listener")
        parsed = ListenerKey(listener, tail)
    else:
        mechanism, _, key = tail.partition(".")
        base = definition.get(key)
        if base is None or not base.per_mechanism:
            raise NotAListenerKey(f"{tail} is not a key that can be set per listener")
        if mechanism != mechanism.lower():
            raise NotAListenerKey(
                f"the SASL mechanism must be written in lower case ({mechanism.lower()})"
            )
        parsed = ListenerKey(listener, key, mechanism)
    if listener != listener.lower():
        raise NotAListenerKey(
            "listener names in this prefix must be written in lower case "
            f"(listener.name.{listener.lower()}.)"
        )
    return parsed

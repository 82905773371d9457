"""The exception types of the configuration subsystem.

Startup must fail with a message an operator can act on: which key, and why.
Callers that only want to report the problem print the exception; callers
that want to react to it (AlterConfigs answering INVALID_CONFIG, a test
asserting the key) read ``key`` and ``reason``.  ``ConfigError`` is a value
Kafka would refuse; ``StartupError`` a valid setting the environment refuses
(a port in use, a log directory that is a file).
"""

from __future__ import annotations

from typing import Any

#: What a secret looks like wherever it would otherwise be shown.
HIDDEN = "[hidden]"


class ConfigError(ValueError):
    """A configuration value (or file) the broker cannot accept.

    ``key`` is the configuration name (or, for file and override syntax
    problems, what was being read), ``reason`` says what is wrong. ``value``
    is the offending raw value, or None when it is unknown or a secret: a
    password value is never kept here, so neither ``str()`` nor a traceback
    can leak it.
    """

    def __init__(
        self,
        key: str,
        reason: str,
        value: Any = None,
        *,
        secret: bool = False,
        message: str | None = None,
    ) -> None:
        self.key = key
        self.reason = reason
        self.value = None if secret else value
        if message is None:
            if secret:
                shown = HIDDEN
            elif value is None:
                shown = None
            else:
                shown = repr(value) if isinstance(value, str) else repr(str(value))
            if shown is None:
                message = f"Invalid configuration {key}: {reason}"
            else:
                message = f"Invalid value {shown} for configuration {key}: {reason}"
        super().__init__(message)

    def __reduce__(self):  # keep the attributes across pickling (trial, xdist)
        return (_rebuild, (self.key, self.reason, self.value, str(self)))


def _rebuild(key: str, reason: str, value: Any, message: str) -> ConfigError:
    return ConfigError(key, reason, value, message=message)


class StartupError(Exception):
    """The broker cannot start because of one setting: its key, its value, and why.

    For what the environment refuses (a listener's port in use, a log
    directory that cannot be created or loaded); a value Kafka itself would
    refuse is a ``ConfigError``.  ``str()`` is ``<key>: <value>: <reason>``.
    """

    def __init__(self, key: str, value: Any, reason: str) -> None:
        super().__init__(key, value, reason)
        self.key = key
        self.value = value
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.key}: {self.value}: {self.reason}"

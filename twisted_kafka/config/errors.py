"""The one exception type of the configuration subsystem.

Startup must fail with a message an operator can act on: which key, and why.
Callers that only want to report the problem print the exception; callers
that want to react to it (AlterConfigs answering INVALID_CONFIG, a test
asserting the key) read ``key`` and ``reason``.
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

"""Waiting for a condition, never for a fixed time.

A test that needs the broker to have done something (closed a connection,
freed a slot, written a line) polls for the evidence.  The timeout only bounds
how long a broken broker is waited for; a slow machine makes the wait longer,
never the test wrong.  This is the one place in the test support that sleeps:
between two checks of a condition.

    wait_until(lambda: not client.is_open(), timeout=10, what="the idle connection to be closed")
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["WaitTimeout", "wait_until", "POLL_INTERVAL"]

T = TypeVar("T")

#: Seconds between two checks of a condition.
POLL_INTERVAL = 0.02


class WaitTimeout(AssertionError):
    """A condition did not hold within its timeout (an assertion failure of the test)."""


def wait_until(predicate: Callable[[], T], timeout: float = 10.0, what: str = "condition",
               interval: float = POLL_INTERVAL) -> T:
    """Call ``predicate`` until it returns a true value, and return that value.

    Raises :class:`WaitTimeout` (naming ``what`` and the last value) if it
    has not within ``timeout`` seconds.  Exceptions from ``predicate``
    propagate at once.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise WaitTimeout(f"timed out after {timeout}s waiting for {what} (last value {value!r})")
        time.sleep(interval)     # between two checks of the condition

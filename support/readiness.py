"""Waiting for one descriptor to become readable or writable, at any descriptor number.

``select.select`` refuses descriptors at or above ``FD_SETSIZE`` (1024), and the test
session raises its open-file limit far above that (``tests/conftest.py``), so a worker
that has run many brokers can hand out such descriptors.  ``poll`` has no such bound.
"""

from __future__ import annotations

import select


def ready_within(fd, events: int, seconds: float) -> bool:
    """Whether ``fd`` (a descriptor or an object with ``fileno()``) is ready for ``events``
    (``select.POLLIN``/``POLLOUT``) within ``seconds``."""
    poller = select.poll()
    poller.register(fd, events)
    return bool(poller.poll(max(0.0, seconds) * 1000))


def readable_within(fd, seconds: float) -> bool:
    """Whether ``fd`` has data or an end of stream within ``seconds``."""
    return ready_within(fd, select.POLLIN, seconds)

"""Trial test cases on the real reactor against the module's real ZooKeeper (``zookeeper`` fixture),
each test in a chroot of its own."""

from __future__ import annotations

import pytest
from twisted.internet import reactor
from twisted.trial import unittest

from twisted_kafka.zk.client import ZkClient


class ZkTestCase(unittest.TestCase):
    timeout = 60

    @pytest.fixture(autouse=True)
    def _zookeeper(self, zookeeper, zk_chroot):
        self.zookeeper = zookeeper
        self.chroot = zk_chroot

    def connect(self, *, session_timeout_ms: int = 6000, chroot: str | None = None) -> ZkClient:
        """A ZkClient in this test's chroot (closed at the end of the test)."""
        client = ZkClient.connect(self.zookeeper.connect_string(chroot if chroot is not None else self.chroot),
                                  session_timeout_ms=session_timeout_ms, connection_timeout_ms=10_000,
                                  reactor=reactor)
        self.addCleanup(client.close)
        return client


async def nth_call(calls: list, n: int, timeout: float = 10.0):
    """``calls[n - 1]`` once ``calls`` holds n entries (checked on the reactor every 10 ms)."""
    from twisted.internet.task import deferLater

    for _ in range(int(timeout * 100)):
        if len(calls) >= n:
            return calls[n - 1]
        await deferLater(reactor, 0.01, lambda: None)
    raise AssertionError(f"only {len(calls)} call(s), waiting for {n}: {calls}")


async def last_call_is(calls: list, expected, timeout: float = 10.0) -> None:
    """Wait until the latest entry of ``calls`` is ``expected`` (a watch delivers the current value,
    so intermediate values may come first)."""
    from twisted.internet.task import deferLater

    for _ in range(int(timeout * 100)):
        if calls and calls[-1] == expected:
            return
        await deferLater(reactor, 0.01, lambda: None)
    raise AssertionError(f"the latest call is not {expected!r}: {calls}")

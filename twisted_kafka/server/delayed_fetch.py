"""DelayedFetch: a long-poll fetch waiting for ``min_bytes`` or ``max_wait_ms`` (Kafka's ``DelayedFetch``).

A consumer asks for at least ``min_bytes`` and is willing to wait up to
``max_wait_ms``.  When ``ReplicaManager.fetch_messages`` finds less on its
first read, the fetch waits in the fetch purgatory (``twisted_kafka.purgatory``)
watching each partition it reads, and completes -- then reads again and
answers with what is there -- when

* the bytes that became readable on its partitions since it started
  waiting, added to what the first read found, reach ``min_bytes``: the
  replica manager checks the partition's watchers on every append and high
  watermark move, so this happens within the same reactor turn as the
  produce that satisfied it;
* one of its partitions changed here (a LeaderAndIsr applied, a
  StopReplica): the answer carries that partition's error at once;
* ``max_wait_ms`` passed, or the broker shut the purgatory (it is draining):
  the answer is what there is.

What counts as readable differs by who fetches: a follower reads to the log
end, so every append counts at once; a consumer reads to the high
watermark, so a replicated partition's append counts only when the high
watermark passes it (``Partition.fetchable_bytes``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from twisted.internet.defer import Deferred

from twisted_kafka.purgatory import DelayedOperation

from .partition import Partition


class DelayedFetch(DelayedOperation):
    """One waiting fetch; ``result`` fires with what ``read`` answers once it completes."""

    def __init__(self, *, max_wait_ms: int, min_bytes: int, follower: bool, partitions: Iterable[Partition],
                 accumulated: int, read: Callable[[], Deferred]):
        super().__init__(max_wait_ms)
        self.min_bytes = min_bytes
        self.follower = follower
        self.accumulated = accumulated          # what the first read found
        unique = {(p.topic, p.index): p for p in partitions}
        # Each partition with what it was when the wait began: its state and how much was readable.
        self._watched = [(p, p.state_version, p.fetchable_bytes(follower)) for p in unique.values()]
        self._read = read
        self.result: Deferred = Deferred()

    @property
    def keys(self) -> list[tuple[str, int]]:
        """What it watches in the fetch purgatory: its partitions."""
        return [(p.topic, p.index) for p, _, _ in self._watched]

    def try_complete(self) -> bool:
        total = self.accumulated
        for partition, version, readable in self._watched:
            if partition.state_version != version:
                return self.force_complete()
            total += partition.fetchable_bytes(self.follower) - readable
        if total >= self.min_bytes:
            return self.force_complete()
        return False

    def on_complete(self) -> None:
        self._read().chainDeferred(self.result)


__all__ = ["DelayedFetch"]

"""The fetch purgatory: long-poll fetches waiting for ``min_bytes`` or ``max_wait_ms``.

A consumer asks for at least ``min_bytes`` and is willing to wait up to
``max_wait_ms``.  Kafka parks such a fetch in a purgatory keyed by the
partitions it reads; every append to one of them re-checks it, and a timer
completes it when the wait is over.  Here a waiting fetch is a Deferred:
appends add the bytes they wrote to the fetch's tally, and the fetch completes
as soon as the tally reaches ``min_bytes`` — within the same reactor turn as
the produce that satisfied it — or when its timer fires, whichever is first.

A replicated partition's appends are not readable by consumers until the
high watermark passes them: they wake only followers' fetches (``replica``),
and consumers' fetches wake when the high watermark moves.
"""

from __future__ import annotations

from collections import defaultdict

from twisted.internet.defer import Deferred


class DelayedFetch:
    __slots__ = ("partitions", "min_bytes", "accumulated", "deferred", "timer", "replica")

    def __init__(self, partitions: frozenset, min_bytes: int, accumulated: int, replica: bool = False):
        self.partitions = partitions
        self.replica = replica
        self.min_bytes = min_bytes
        self.accumulated = accumulated
        self.deferred: Deferred = Deferred()
        self.timer = None


class FetchPurgatory:
    def __init__(self, reactor):
        self.reactor = reactor
        self._watchers: dict[tuple[str, int], set[DelayedFetch]] = defaultdict(set)
        # Every waiting fetch, whatever it watches: complete_all() finds them all here (a fetch that
        # watches no partition is in no watcher set).
        self._waiting: set[DelayedFetch] = set()

    def wait(self, partitions, min_bytes: int, accumulated: int, max_wait_ms: int, *,
             replica: bool = False) -> Deferred:
        """A Deferred that fires (with None) once enough bytes were appended or the wait expired;
        ``replica``: a follower's fetch (it reads up to the log end, not the high watermark)."""
        fetch = DelayedFetch(frozenset(partitions), min_bytes, accumulated, replica)
        self._waiting.add(fetch)
        for tp in fetch.partitions:
            self._watchers[tp].add(fetch)
        fetch.timer = self.reactor.callLater(max_wait_ms / 1000.0, self._complete, fetch)
        return fetch.deferred

    def appended(self, topic: str, partition: int, nbytes: int, *, followers_only: bool = False) -> None:
        """Records were appended to (topic, partition): wake fetches that now have enough
        (``followers_only``: the high watermark did not move, consumers cannot read them yet)."""
        watchers = self._watchers.get((topic, partition))
        if not watchers:
            return
        for fetch in list(watchers):
            if followers_only and not fetch.replica:
                continue
            fetch.accumulated += nbytes
            if fetch.accumulated >= fetch.min_bytes:
                self._complete(fetch)

    def high_watermark_moved(self, topic: str, partition: int, nbytes: int) -> None:
        """The high watermark moved ``nbytes`` (an estimate) further: consumers' fetches may read more."""
        for fetch in list(self._watchers.get((topic, partition), ())):
            if not fetch.replica:
                fetch.accumulated += nbytes
                if fetch.accumulated >= fetch.min_bytes:
                    self._complete(fetch)

    def partition_changed(self, topic: str, partition: int) -> None:
        """Leadership moved or the partition went away: waiting fetches answer now (with the error)."""
        for fetch in list(self._watchers.get((topic, partition), ())):
            self._complete(fetch)

    def _complete(self, fetch: DelayedFetch) -> None:
        if fetch.deferred.called:
            return
        if fetch.timer is not None and fetch.timer.active():
            fetch.timer.cancel()
        self._waiting.discard(fetch)
        for tp in fetch.partitions:
            watchers = self._watchers.get(tp)
            if watchers is not None:
                watchers.discard(fetch)
                if not watchers:
                    del self._watchers[tp]
        fetch.deferred.callback(None)

    def complete_all(self) -> None:
        """Shutdown: answer every waiting fetch now."""
        for fetch in list(self._waiting):
            self._complete(fetch)

    @property
    def size(self) -> int:
        return len(self._waiting)

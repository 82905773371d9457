"""Incremental fetch sessions (KIP-227) on the leader: Kafka's ``FetchSessionCache`` and ``FetchManager``.

A fetcher that reads the same partitions round after round need not name
them all each time.  A full fetch with ``session_epoch`` 0 asks the broker
to remember its partitions (fetch offset, limits, leader epoch) in a
session and answers its id; the fetcher then sends *incremental* fetches
``(session_id, epoch 1, 2, ...)`` naming only the partitions it adds or
whose fetch state changed, and the ones it drops in
``forgotten_topics_data``.  The broker reads every partition of the session
and answers only those with records, an error, or a changed high
watermark, last stable offset or log start offset.  With many idle
partitions both the request and the response shrink to a few bytes.

The request's ``(session_id, session_epoch)``:

* ``(0, -1)``: a sessionless full fetch (librdkafka always sends this).
* ``(0, 0)``: a full fetch that creates a session when a cache slot is
  free or can be freed (the answer's ``session_id``, 0 when none was made).
* ``(id, 0)`` / ``(id, -1)``: close session ``id``, then as above.
* ``(id, n > 0)``: incremental; FETCH_SESSION_ID_NOT_FOUND when the session
  is unknown (evicted, or another broker's), INVALID_FETCH_SESSION_EPOCH
  when ``n`` is not the epoch the session expects next.  Either way the
  fetcher falls back to a full fetch.  A session left without partitions is
  closed and the fetch answered sessionless (``session_id`` 0).

The cache holds ``max.incremental.fetch.session.cache.slots`` sessions.
When it is full a new session may take the slot of (Kafka's rule, in
order): the least recently used session if it has been idle longer than
``MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`` (Kafka's constant, 2
minutes, not a config key); otherwise the session of least value if the
new one is worth more -- value orders by privileged (a follower's session)
then partition count, and only sessions older than the eviction time, or
a consumer's when a follower asks, may be taken.  So followers keep their
sessions against any number of consumers.

Sessions are keyed by (topic, partition), the topic as the request names
it: its name up to v12, its id from v13 (a session made by one kind used
by the other: FETCH_SESSION_TOPIC_ID_ERROR, as in Kafka).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from twisted_kafka.metrics import Meter, MetricName, MetricsRegistry
from twisted_kafka.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS = 120_000
_MAX_EPOCH = 2**31 - 1

Key = tuple[Any, int]


def next_epoch(epoch: int) -> int:
    """The epoch following ``epoch`` (Kafka's ``FetchMetadata.nextEpoch``): wraps to 1, never to 0."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass(slots=True)
class CachedPartition:
    """One partition of a fetch: what the fetcher asks, and what the last answer told it (Kafka's
    ``CachedPartition``; -1: nothing answered yet, so the first answer always carries it)."""

    topic: Any                          # the name (Fetch up to v12) or the id (v13+)
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    log_start_offset: int = -1          # the fetcher's own (a follower's), as sent
    high_watermark: int = -1
    last_stable_offset: int = -1
    leader_log_start_offset: int = -1

    @property
    def key(self) -> Key:
        return (self.topic, self.partition)

    def update_request(self, other: CachedPartition) -> None:
        self.fetch_offset = other.fetch_offset
        self.max_bytes = other.max_bytes
        self.current_leader_epoch = other.current_leader_epoch
        self.log_start_offset = other.log_start_offset

    def must_respond(self, entry: Any) -> bool:
        """Whether the answer ``entry`` (a ``FetchPartitionResult``) goes into an incremental response; its
        offsets are remembered as told."""
        respond = bool(entry.error) or _has_records(entry.records)
        if entry.high_watermark != self.high_watermark:
            self.high_watermark = entry.high_watermark
            respond = True
        if entry.last_stable_offset != self.last_stable_offset:
            self.last_stable_offset = entry.last_stable_offset
            respond = True
        if entry.log_start_offset != self.leader_log_start_offset:
            self.leader_log_start_offset = entry.log_start_offset
            respond = True
        return respond

    def remember(self, entry: Any) -> None:
        self.high_watermark = entry.high_watermark
        self.last_stable_offset = entry.last_stable_offset
        self.leader_log_start_offset = entry.log_start_offset


def _has_records(records: Any) -> bool:
    if isinstance(records, list):
        return any(len(chunk) for chunk in records)
    return bool(records)


class FetchSession:
    """One session: its partitions in the order they are read (those that returned records move to the
    end, so a response size limit does not starve the rest), the epoch it expects next."""

    __slots__ = ("id", "privileged", "partitions", "created_ms", "last_used_ms", "epoch", "topic_ids")

    def __init__(self, session_id: int, privileged: bool, partitions: dict[Key, CachedPartition], now_ms: int,
                 topic_ids: bool = False):
        self.topic_ids = topic_ids      # made by a Fetch v13+, which names topics by id
        self.id = session_id
        self.privileged = privileged
        self.partitions = partitions
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        self.epoch = next_epoch(INITIAL_EPOCH)

    def __len__(self) -> int:
        return len(self.partitions)

    def update(self, fetches: Sequence[CachedPartition], forgotten: Iterable[Key]) -> None:
        """An incremental request: ``fetches`` added or changed, ``forgotten`` removed."""
        partitions = self.partitions
        for fetch in fetches:
            cached = partitions.get(fetch.key)
            if cached is None:
                partitions[fetch.key] = fetch
            else:
                cached.update_request(fetch)
        for key in forgotten:
            partitions.pop(key, None)


class FetchSessionCache:
    """The broker's sessions, at most ``max_entries`` (``max.incremental.fetch.session.cache.slots``).

    ``clock`` (the reactor) gives the time of use and eviction."""

    def __init__(self, max_entries: int, clock, *,
                 eviction_ms: int = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS):
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.clock = clock
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0
        self.evictions_meter: Meter | None = None     # IncrementalFetchSessionEvictionsPerSec, once registered

    def now_ms(self) -> int:
        return int(self.clock.seconds() * 1000)

    def __len__(self) -> int:
        return len(self.sessions)

    @property
    def num_partitions(self) -> int:
        """Kafka's NumIncrementalFetchPartitionsCached."""
        return sum(len(s) for s in self.sessions.values())

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def remove(self, session_id: int) -> FetchSession | None:
        return self.sessions.pop(session_id, None)

    def touch(self, session: FetchSession) -> None:
        session.last_used_ms = self.now_ms()

    def maybe_create(self, privileged: bool, partitions: dict[Key, CachedPartition], topic_ids: bool = False) -> int:
        """A new session of ``partitions``: its id, or 0 when there is no slot for it."""
        now = self.now_ms()
        if len(self.sessions) >= self.max_entries and not self._try_evict(privileged, len(partitions), now):
            return INVALID_SESSION_ID
        session_id = INVALID_SESSION_ID
        while session_id == INVALID_SESSION_ID or session_id in self.sessions:
            session_id = secrets.randbelow(_MAX_EPOCH) + 1
        self.sessions[session_id] = FetchSession(session_id, privileged, partitions, now, topic_ids)
        return session_id

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now - stalest.last_used_ms > self.eviction_ms:
            self._evict(stalest)
            return True
        # No stale session: the least valuable one that may be taken, if the new session is worth more.
        # A session becomes takable by anyone once it was used more than eviction_ms after its creation;
        # a consumer's session is always takable by a follower.
        eviction_ms = self.eviction_ms
        candidates = [s for s in self.sessions.values() if s.last_used_ms - s.created_ms > eviction_ms
                      or (privileged and not s.privileged)]
        if not candidates:
            return False
        least = min(candidates, key=lambda s: (s.privileged, len(s), s.id))
        if (privileged, size, 0) < (least.privileged, len(least), least.id):
            return False
        self._evict(least)
        return True

    def _evict(self, session: FetchSession) -> None:
        del self.sessions[session.id]
        self.evictions += 1
        if self.evictions_meter is not None:
            self.evictions_meter.mark()

    def register_metrics(self, metrics: MetricsRegistry) -> None:
        """Kafka's ``kafka.server:type=FetchSessionCache`` metrics."""
        def name(metric: str) -> MetricName:
            return MetricName("kafka.server", "FetchSessionCache", metric)
        metrics.gauge(name("NumIncrementalFetchSessions"), lambda: len(self.sessions))
        metrics.gauge(name("NumIncrementalFetchPartitionsCached"), lambda: self.num_partitions)
        self.evictions_meter = metrics.meter(name("IncrementalFetchSessionEvictionsPerSec"))


class FetchContext:
    """What one Fetch reads and answers: ``partitions`` (read in order), and ``respond`` picks the
    entries the answer carries and names the session.  ``error``: the whole fetch is refused with it."""

    error: ErrorCode = ErrorCode.NONE
    partitions: Sequence[CachedPartition] = ()

    def respond(self, entries: list[Any]) -> tuple[int, list[tuple[CachedPartition, Any]]]:
        """``entries``: one ``FetchPartitionResult`` per partition of ``partitions``, in order.  Returns the
        answer's session id and the (partition, entry) pairs it carries."""
        return INVALID_SESSION_ID, list(zip(self.partitions, entries, strict=True))


class SessionErrorContext(FetchContext):
    def __init__(self, error: ErrorCode):
        self.error = error


class SessionlessFetchContext(FetchContext):
    def __init__(self, partitions: Sequence[CachedPartition]):
        self.partitions = partitions


class FullFetchContext(FetchContext):
    """A full fetch that creates a session of its partitions when it is answered."""

    def __init__(self, cache: FetchSessionCache, partitions: Sequence[CachedPartition], privileged: bool,
                 topic_ids: bool):
        self.topic_ids = topic_ids
        self.cache = cache
        self.partitions = partitions
        self.privileged = privileged

    def respond(self, entries):
        pairs = list(zip(self.partitions, entries, strict=True))
        cached: dict[Key, CachedPartition] = {}
        for partition, entry in pairs:
            partition.remember(entry)
            cached[partition.key] = partition
        return self.cache.maybe_create(self.privileged, cached, self.topic_ids), pairs


class IncrementalFetchContext(FetchContext):
    def __init__(self, session: FetchSession):
        self.session = session
        self.partitions = list(session.partitions.values())

    def respond(self, entries):
        session = self.session
        carried = []
        moved = []
        for partition, entry in zip(self.partitions, entries, strict=True):
            if partition.must_respond(entry):
                carried.append((partition, entry))
                if _has_records(entry.records):
                    moved.append(partition.key)
        partitions = session.partitions
        for key in moved:
            cached = partitions.pop(key, None)
            if cached is not None:
                partitions[key] = cached
        return session.id, carried


class FetchManager:
    """Kafka's ``FetchManager.newContext``: the context of one Fetch from its session fields."""

    def __init__(self, cache: FetchSessionCache):
        self.cache = cache

    def new_context(self, version: int, session_id: int, epoch: int, fetches: Sequence[CachedPartition],
                    forgotten: Iterable[Key], *, privileged: bool, topic_ids: bool = False) -> FetchContext:
        if version < 7:
            return SessionlessFetchContext(fetches)
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.cache.remove(session_id)       # a full fetch closes the session it names
            if epoch == FINAL_EPOCH:
                return SessionlessFetchContext(fetches)
            return FullFetchContext(self.cache, fetches, privileged, topic_ids)
        session = self.cache.get(session_id)
        if session is None:
            return SessionErrorContext(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return SessionErrorContext(ErrorCode.INVALID_FETCH_SESSION_EPOCH)
        if session.topic_ids != topic_ids:
            return SessionErrorContext(ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR)
        session.update(fetches, forgotten)
        if not session.partitions:
            self.cache.remove(session.id)
            return SessionlessFetchContext(fetches)
        self.cache.touch(session)
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(session)


__all__ = [
    "CachedPartition", "FetchContext", "FetchManager", "FetchSession", "FetchSessionCache", "FINAL_EPOCH",
    "INITIAL_EPOCH", "INVALID_SESSION_ID", "MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS", "next_epoch",
]

"""Incremental fetch sessions (KIP-227): the cache's slots and eviction on a Clock, and the Fetch handler's
incremental requests and responses."""

from __future__ import annotations

from twisted.internet.task import Clock

from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode
from twisted_kafka.protocol.registry import ApiKey
from twisted_kafka.server.fetch_session import (
    MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS,
    CachedPartition,
    FetchManager,
    FetchSessionCache,
    next_epoch,
)
from twisted_kafka.server.replica_manager import FetchPartitionResult

from .test_fetch import fetch, partitions, values

F = m.FetchRequest
EVICTION_S = MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS / 1000


def sessions(node) -> FetchSessionCache:
    return node.apis._handlers[ApiKey.FETCH].sessions.cache


def parts(n: int, topic: str = "t") -> dict:
    return {(topic, i): CachedPartition(topic, i, 0, 1024) for i in range(n)}


def test_epochs_wrap_to_one_never_to_zero():
    assert [next_epoch(e) for e in (0, 1, 2**31 - 1, -1)] == [1, 2, 1, -1]


def test_a_full_cache_refuses_a_session_of_equal_value_and_takes_a_stale_ones_slot():
    clock = Clock()
    cache = FetchSessionCache(2, clock)
    first = cache.maybe_create(False, parts(3))
    clock.advance(1)
    second = cache.maybe_create(False, parts(3))
    assert first and second and first != second and len(cache) == 2
    assert cache.maybe_create(False, parts(3)) == 0          # no stale session, none worth less
    assert cache.maybe_create(False, parts(2)) == 0
    assert (len(cache), cache.evictions) == (2, 0)
    cache.touch(cache.get(first))                             # used: the second becomes the stalest
    clock.advance(EVICTION_S + 0.001)
    cache.touch(cache.get(first))
    third = cache.maybe_create(False, parts(1))
    assert third and cache.get(second) is None and cache.get(first) is not None
    assert (len(cache), cache.evictions, cache.num_partitions) == (2, 1, 4)


def test_a_follower_takes_a_consumers_slot_but_not_another_followers():
    clock = Clock()
    cache = FetchSessionCache(2, clock)
    follower = cache.maybe_create(True, parts(1))
    consumer = cache.maybe_create(False, parts(500))
    assert cache.maybe_create(False, parts(1000)) == 0        # consumers cannot take a young session
    new_follower = cache.maybe_create(True, parts(1))
    assert new_follower and cache.get(consumer) is None and cache.get(follower) is not None
    assert cache.maybe_create(True, parts(1000)) == 0         # two young followers' sessions: kept


def test_a_session_older_than_the_eviction_time_may_be_taken_by_a_larger_one():
    clock = Clock()
    cache = FetchSessionCache(1, clock)
    old = cache.maybe_create(True, parts(10))
    clock.advance(EVICTION_S + 1)
    cache.touch(cache.get(old))                # in use, so not stale, but older than the eviction time
    assert cache.maybe_create(False, parts(5)) == 0           # worth less (consumer)
    assert cache.maybe_create(True, parts(9)) == 0            # worth less (fewer partitions)
    taker = cache.maybe_create(True, parts(11))
    assert taker and cache.get(old) is None and cache.evictions == 1


def test_no_slots_no_sessions():
    cache = FetchSessionCache(0, Clock())
    manager = FetchManager(cache)
    context = manager.new_context(12, 0, 0, list(parts(2).values()), [], privileged=False)
    session_id, carried = context.respond([_entry() for _ in range(2)])
    assert (session_id, len(carried), len(cache)) == (0, 2, 0)


def _entry(hw=0, records=b"", error=ErrorCode.NONE):
    return FetchPartitionResult(error=error, high_watermark=hw, last_stable_offset=hw, log_start_offset=0,
                                records=records)


def test_the_context_rules():
    cache = FetchSessionCache(10, Clock())
    manager = FetchManager(cache)
    assert manager.new_context(12, 0, -1, list(parts(1).values()), [], privileged=False).respond([_entry()])[0] == 0
    context = manager.new_context(12, 0, 0, list(parts(2).values()), [], privileged=False)
    session_id, _ = context.respond([_entry(), _entry()])
    assert session_id and cache.get(session_id).epoch == 1
    assert manager.new_context(12, 12345, 1, [], [], privileged=False).error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert manager.new_context(12, session_id, 2, [], [], privileged=False).error == \
        ErrorCode.INVALID_FETCH_SESSION_EPOCH
    assert manager.new_context(13, session_id, 1, [], [], privileged=False, topic_ids=True).error == \
        ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
    incremental = manager.new_context(12, session_id, 1, [], [], privileged=False)
    assert incremental.error == ErrorCode.NONE and cache.get(session_id).epoch == 2
    # Only partitions with news: records, a new high watermark, an error.
    _, carried = incremental.respond([_entry(hw=5), _entry()])
    assert [p.partition for p, _ in carried] == [0]
    _, carried = manager.new_context(12, session_id, 2, [], [], privileged=False).respond(
        [_entry(hw=5, records=b"x"), _entry(error=ErrorCode.NOT_LEADER_OR_FOLLOWER)])
    assert [p.partition for p, _ in carried] == [0, 1]
    assert list(cache.get(session_id).partitions) == [("t", 1), ("t", 0)]   # the one with records went last
    # Forgetting every partition closes the session; a full fetch naming a session closes it.
    emptied = manager.new_context(12, session_id, 3, [], [("t", 0), ("t", 1)], privileged=False)
    assert emptied.respond([])[0] == 0 and cache.get(session_id) is None
    other, _ = manager.new_context(12, 0, 0, list(parts(1).values()), [], privileged=False).respond([_entry()])
    assert manager.new_context(12, other, -1, [], [], privileged=False).respond([])[0] == 0
    assert len(cache) == 0


# -- through the Fetch handler ------------------------------------------------------------------------


def test_an_incremental_fetch_names_and_answers_only_what_changed(node):
    node.create_topic("t", 3)
    node.produce("t", 0, b"a")
    full = node.call(fetch({"t": {0: 0, 1: 0, 2: 0}}, session_epoch=0), 12)
    session_id = full.session_id
    assert session_id != 0 and len(partitions(full)) == 3
    assert values(partitions(full)[("t", 0)]) == [(0, b"a")]

    # Partition 0 moves to offset 1, nothing is new: an empty answer, though all three were read.
    idle = node.call(fetch({"t": {0: 1}}, session_id=session_id, session_epoch=1), 12)
    assert (idle.error_code, idle.session_id, idle.responses) == (ErrorCode.NONE, session_id, [])

    # New records on partition 2 (the session still fetches it at offset 0): only it is answered.
    node.produce("t", 2, b"b")
    got = node.call(fetch({}, session_id=session_id, session_epoch=2), 12)
    assert list(partitions(got)) == [("t", 2)]
    assert values(partitions(got)[("t", 2)]) == [(0, b"b")] and partitions(got)[("t", 2)].high_watermark == 1

    # Partition 0 is read at its offset 1: a new record there is answered, from offset 1 only.
    node.produce("t", 0, b"c")
    got = node.call(fetch({"t": {2: 1}}, session_id=session_id, session_epoch=3), 12)
    assert list(partitions(got)) == [("t", 0)] and values(partitions(got)[("t", 0)]) == [(1, b"c")]

    # Forgotten: partition 0's new records are not read any more.
    node.produce("t", 0, b"d")
    request = fetch({}, session_id=session_id, session_epoch=4)
    request.forgotten_topics_data = [F.ForgottenTopic(topic="t", partitions=[0])]
    assert node.call(request, 12).responses == []
    assert list(sessions(node).get(session_id).partitions) == [("t", 1), ("t", 2)]

    # A replayed epoch, an unknown session: refused with nothing read; a full fetch starts again.
    replay = node.call(fetch({}, session_id=session_id, session_epoch=4), 12)
    assert (replay.error_code, replay.session_id, replay.responses) == \
        (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    unknown = node.call(fetch({}, session_id=session_id + 1, session_epoch=1), 12)
    assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    again = node.call(fetch({"t": {0: 2}}, session_id=session_id, session_epoch=0), 12)
    assert again.session_id not in (0, session_id) and sessions(node).get(session_id) is None
    assert values(partitions(again)[("t", 0)]) == [(2, b"d")]


def test_a_sessionless_fetch_makes_no_session(node):
    node.create_topic("t")
    body = node.call(fetch({"t": {0: 0}}), 12)                  # session_epoch -1: librdkafka's fetch
    assert body.session_id == 0 and len(sessions(node)) == 0
    body = node.call(fetch({"t": {0: 0}}, session_epoch=0), 6)  # before v7 there are no sessions
    assert len(sessions(node)) == 0


def test_an_incremental_fetch_long_polls_on_every_partition_of_its_session(node):
    node.create_topic("t", 2)
    session_id = node.call(fetch({"t": {0: 0, 1: 0}}, session_epoch=0), 12).session_id
    request, pending = node.pending(fetch({}, session_id=session_id, session_epoch=1, max_wait_ms=500,
                                          min_bytes=1), 12)
    assert not pending.called
    node.produce("t", 1, b"late")
    from .helpers import decode, result_of
    body = decode(request, result_of(pending))
    assert list(partitions(body)) == [("t", 1)] and values(partitions(body)[("t", 1)]) == [(0, b"late")]

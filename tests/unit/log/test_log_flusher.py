"""LogFlusher: waiters are released only by an fsync that covered them."""

from __future__ import annotations

from twisted.internet.defer import Deferred

from twisted_kafka.log.flusher import LogFlusher
from twisted_kafka.protocol.errors import ErrorCode


class FakeLog:
    topic, partition = "t", 0

    def __init__(self):
        self.committed_end_offset = 0
        self.log_end_offset = 0
        self.recovery_point = 0

    def flush(self, up_to, now_ms):          # never called: run_blocking below is fake
        raise AssertionError


def _flusher():
    log = FakeLog()
    rounds = []

    def run_blocking(f, target, now_ms):
        d = Deferred()
        rounds.append((target, d))
        return d

    return log, LogFlusher(log, run_blocking, lambda: 0), rounds


def test_a_round_that_reached_less_than_asked_keeps_later_waiters():
    log, flusher, rounds = _flusher()
    log.committed_end_offset = 5
    fired = []
    flusher.flush(5).addCallback(lambda rp: fired.append(("a", rp)))
    assert [t for t, _ in rounds] == [5]
    log.committed_end_offset = 10                      # committed while the fsync runs
    flusher.flush(10).addCallback(lambda rp: fired.append(("b", rp)))
    log.recovery_point = 5
    rounds[0][1].callback(5)                            # the round covered up to 5 only
    assert fired == [("a", 5)]
    assert [t for t, _ in rounds] == [5, 10]            # a second round for b
    log.recovery_point = 10
    rounds[1][1].callback(10)
    assert fired == [("a", 5), ("b", 10)]
    idle = []
    flusher.when_idle().addCallback(idle.append)
    assert idle == [None]


def test_requests_are_capped_at_the_committed_end_and_coalesced():
    log, flusher, rounds = _flusher()
    log.committed_end_offset = 3
    fired = []
    for _ in range(3):
        flusher.flush(100).addCallback(fired.append)   # e.g. a roll ahead of a pending write
    assert [t for t, _ in rounds] == [3]
    log.recovery_point = 3
    rounds[0][1].callback(3)
    assert fired == [3, 3, 3] and len(rounds) == 1
    assert flusher.flush(2).called                      # already durable: at once


def test_a_failed_fsync_fails_its_waiters_with_storage_error():
    log, flusher, rounds = _flusher()
    log.committed_end_offset = 4
    errors = []
    flusher.flush(4).addErrback(errors.append)
    rounds[0][1].errback(OSError(5, "I/O error"))
    assert errors[0].value.code == ErrorCode.KAFKA_STORAGE_ERROR

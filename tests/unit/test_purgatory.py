"""The one purgatory (``twisted_kafka.purgatory``) on a ``task.Clock``: watching by several keys, expiry
timing, completion exactly once whatever the order of try-complete, expiry and shutdown, and the
shutdown that ends every waiting operation.  Fetch, produce and the group coordinator build on it;
their own tests check what their operations answer."""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from twisted_kafka.purgatory import DelayedOperation, Purgatory


class Op(DelayedOperation):
    """Completes once ``ready`` is set; records every callback in ``events``."""

    def __init__(self, timeout_ms: int, events: list, name: str = "op", *, on_complete=None):
        super().__init__(timeout_ms)
        self.events = events
        self.name = name
        self.ready = False
        self.tries = 0
        self._on_complete = on_complete

    def try_complete(self) -> bool:
        self.tries += 1
        return self.force_complete() if self.ready else False

    def on_complete(self) -> None:
        self.events.append(f"{self.name} complete")
        if self._on_complete is not None:
            self._on_complete(self)

    def on_expiration(self) -> None:
        self.events.append(f"{self.name} expired")


class Dropping(Op):
    def on_shutdown(self) -> None:
        self.events.append(f"{self.name} dropped")
        self.drop()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def purgatory(clock):
    return Purgatory(clock, "Test")


def test_an_operation_whose_condition_holds_completes_at_once_and_never_waits(purgatory, clock):
    events: list = []
    op = Op(1000, events)
    op.ready = True
    assert purgatory.try_complete_else_watch(op, ["k"]) is True
    assert events == ["op complete"] and op.completed
    assert purgatory.size == 0 and purgatory.watched("k") == 0 and clock.getDelayedCalls() == []


def test_a_waiting_operation_is_watched_by_each_of_its_keys_and_completes_from_any(purgatory, clock):
    events: list = []
    op = Op(1000, events)
    assert purgatory.try_complete_else_watch(op, ["a", "b", "c"]) is False
    assert [purgatory.watched(k) for k in "abc"] == [1, 1, 1] and purgatory.size == 1
    assert purgatory.check_and_complete("a") == 0 and op.tries == 2          # asked, not ready
    assert purgatory.check_and_complete("other") == 0 and op.tries == 2      # not asked
    op.ready = True
    assert purgatory.check_and_complete("b") == 1
    assert events == ["op complete"]
    assert [purgatory.watched(k) for k in "abc"] == [0, 0, 0] and purgatory.size == 0
    assert clock.getDelayedCalls() == [], "its timer is cancelled"
    assert purgatory.check_and_complete("c") == 0 and op.tries == 3, "gone from every key"


def test_only_the_operations_watching_a_key_are_asked(purgatory):
    events: list = []
    first, second = Op(1000, events, "first"), Op(1000, events, "second")
    purgatory.try_complete_else_watch(first, ["x"])
    purgatory.try_complete_else_watch(second, ["y"])
    first.ready = second.ready = True
    assert purgatory.check_and_complete("y") == 1
    assert events == ["second complete"] and not first.completed


def test_a_key_named_twice_is_watched_once(purgatory):
    op = Op(1000, [])
    purgatory.try_complete_else_watch(op, ["k", "k"])
    assert purgatory.watched("k") == 1


def test_expiry_comes_at_the_timeout_on_the_clock_and_runs_on_complete_then_on_expiration(purgatory, clock):
    events: list = []
    op = Op(300, events)
    purgatory.try_complete_else_watch(op, ["k"])
    clock.advance(0.299)
    assert events == [] and purgatory.size == 1
    clock.advance(0.001)
    assert events == ["op complete", "op expired"]
    assert op.completed and purgatory.size == 0 and purgatory.watched("k") == 0


def test_a_zero_timeout_expires_on_the_next_turn_not_within_the_call(purgatory, clock):
    events: list = []
    purgatory.try_complete_else_watch(Op(0, events), ["k"])
    assert events == []
    clock.advance(0)
    assert events == ["op complete", "op expired"]


def test_an_operation_watching_no_key_waits_for_its_timer(purgatory, clock):
    events: list = []
    purgatory.try_complete_else_watch(Op(50, events), [])
    assert purgatory.size == 1
    clock.advance(0.05)
    assert events == ["op complete", "op expired"] and purgatory.size == 0


def test_completion_is_exactly_once_when_try_complete_and_expiry_meet(purgatory, clock):
    """Completed by a check at the instant its timer is due: the timer is cancelled, nothing expires."""
    events: list = []
    op = Op(100, events)
    purgatory.try_complete_else_watch(op, ["k"])
    clock.advance(0.1 - 1e-9)
    op.ready = True
    purgatory.check_and_complete("k")
    clock.advance(1)
    assert events == ["op complete"]


def test_after_expiry_no_check_completes_it_again(purgatory, clock):
    events: list = []
    op = Op(100, events)
    purgatory.try_complete_else_watch(op, ["k"])
    clock.advance(0.1)
    op.ready = True
    assert purgatory.check_and_complete("k") == 0
    assert op.force_complete() is False
    assert events == ["op complete", "op expired"]


def test_a_reentrant_completion_from_on_complete_does_nothing(purgatory):
    """``on_complete`` changing state and checking its own key again (the group coordinator does):
    the operation is already ended, so it is neither asked nor completed a second time."""
    events: list = []

    def recheck(op):
        assert op.force_complete() is False
        purgatory.check_and_complete("k")

    op = Op(1000, events, on_complete=recheck)
    purgatory.try_complete_else_watch(op, ["k"])
    op.ready = True
    tries = op.tries
    purgatory.check_and_complete("k")
    assert events == ["op complete"] and op.tries == tries + 1


def test_an_operation_completing_another_during_a_check_leaves_it_ended_once(purgatory):
    events: list = []
    second = Op(1000, events, "second")
    first = Op(1000, events, "first", on_complete=lambda _: second.force_complete())
    purgatory.try_complete_else_watch(first, ["k"])
    purgatory.try_complete_else_watch(second, ["k"])
    first.ready = second.ready = True
    assert purgatory.check_and_complete("k") == 1      # second ended inside first's on_complete
    assert events == ["first complete", "second complete"] and purgatory.size == 0


def test_an_operation_added_during_a_check_is_not_asked_in_that_pass(purgatory):
    """As the group coordinator's next DelayedJoin, started by the previous one's on_complete."""
    events: list = []
    later = Op(1000, events, "later")
    later.ready = True

    def start_next(_):
        later.ready = False
        purgatory.try_complete_else_watch(later, ["k"])
        later.ready = True

    first = Op(1000, events, "first", on_complete=start_next)
    purgatory.try_complete_else_watch(first, ["k"])
    first.ready = True
    purgatory.check_and_complete("k")
    assert events == ["first complete"] and purgatory.watched("k") == 1
    purgatory.check_and_complete("k")
    assert events == ["first complete", "later complete"]


def test_dropping_ends_without_any_callback(purgatory, clock):
    events: list = []
    op = Op(100, events)
    purgatory.try_complete_else_watch(op, ["k"])
    assert op.drop() is True and op.drop() is False
    clock.advance(1)
    assert events == [] and purgatory.size == 0 and clock.getDelayedCalls() == []


def test_an_operation_is_given_to_one_purgatory_once(purgatory, clock):
    op = Op(100, [])
    purgatory.try_complete_else_watch(op, ["k"])
    with pytest.raises(ValueError):
        Purgatory(clock, "Other").try_complete_else_watch(op, ["k"])


def test_shutdown_completes_every_waiting_operation_once_and_cancels_their_timers(purgatory, clock):
    events: list = []
    ops = [Op(1000, events, f"op{i}") for i in range(3)]
    for i, op in enumerate(ops):
        purgatory.try_complete_else_watch(op, [("t", i), "shared"])
    lonely = Op(2**31 - 1, events, "lonely")
    purgatory.try_complete_else_watch(lonely, [])                 # found without any key
    assert purgatory.shutdown() == 4
    assert sorted(events) == ["lonely complete", "op0 complete", "op1 complete", "op2 complete"]
    assert purgatory.size == 0 and purgatory.watched("shared") == 0 and clock.getDelayedCalls() == []
    clock.advance(2**31)
    assert len(events) == 4, "nothing expires afterwards"


def test_shutdown_lets_an_operation_drop_itself_instead(purgatory, clock):
    events: list = []
    purgatory.try_complete_else_watch(Dropping(1000, events, "answered elsewhere"), ["k"])
    purgatory.try_complete_else_watch(Op(1000, events, "answered now"), ["k"])
    purgatory.shutdown()
    assert events == ["answered elsewhere dropped", "answered now complete"]
    assert clock.getDelayedCalls() == []


def test_an_on_shutdown_that_ends_nothing_is_ended_all_the_same(purgatory, clock):
    class Stubborn(Op):
        def on_shutdown(self) -> None:
            self.events.append("asked")

    events: list = []
    op = Stubborn(1000, events)
    purgatory.try_complete_else_watch(op, ["k"])
    purgatory.shutdown()
    assert events == ["asked"] and op.completed and purgatory.size == 0 and clock.getDelayedCalls() == []


def test_a_closed_purgatory_ends_a_new_operation_at_once(purgatory, clock):
    """Nothing is left to wake it: answered now, by its on_shutdown, never parked on a timer."""
    events: list = []
    purgatory.shutdown()
    assert purgatory.closed
    assert purgatory.try_complete_else_watch(Op(60_000, events, "late"), ["k"]) is True
    assert purgatory.try_complete_else_watch(Dropping(60_000, events, "late group op"), ["k"]) is True
    assert events == ["late complete", "late group op dropped"]
    assert purgatory.size == 0 and clock.getDelayedCalls() == []


def test_shutdown_is_idempotent_and_an_expiry_racing_it_answers_once(purgatory, clock):
    events: list = []
    op = Op(100, events)
    purgatory.try_complete_else_watch(op, ["k"])
    clock.advance(0.1)                                        # expired first
    assert purgatory.shutdown() == 0 and purgatory.shutdown() == 0
    assert events == ["op complete", "op expired"]

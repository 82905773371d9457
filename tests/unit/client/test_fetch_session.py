"""The fetcher's side of KIP-227 sessions: what each fetch names, and every way back to a full fetch."""

from __future__ import annotations

from twisted_kafka.client.fetch_session import FetchSessionHandler
from twisted_kafka.protocol.errors import ErrorCode


def test_a_session_sends_changes_and_forgets_and_falls_back_on_every_error():
    handler = FetchSessionHandler()
    first = handler.build({"a": 0, "b": 0})
    assert (first.session_id, first.epoch, first.to_send, first.to_forget) == (0, 0, {"a": 0, "b": 0}, [])
    assert handler.handle_response(ErrorCode.NONE, 42, {"a", "b"})
    second = handler.build({"a": 5, "b": 0, "c": 0})
    assert (second.session_id, second.epoch, second.to_send, second.to_forget) == (42, 1, {"a": 5, "c": 0}, [])
    assert handler.handle_response(ErrorCode.NONE, 42, {"a"})
    third = handler.build({"a": 5})
    assert (third.epoch, third.to_send, third.to_forget) == (2, {}, ["b", "c"])
    # An answer naming a partition outside the fetch is dropped; the next fetch closes the session.
    assert not handler.handle_response(ErrorCode.NONE, 42, {"z"})
    assert (handler.build({"a": 5}).session_id, handler.session_id, handler.epoch) == (42, 42, 0)
    assert handler.handle_response(ErrorCode.NONE, 43, {"a"})
    handler.build({"a": 6})
    assert not handler.handle_response(ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, set())
    assert (handler.session_id, handler.epoch) == (43, 0)        # closed by the next (full) fetch
    handler.build({"a": 6})
    assert handler.handle_response(ErrorCode.NONE, 44, {"a"})
    handler.build({"a": 7})
    assert not handler.handle_response(ErrorCode.FETCH_SESSION_ID_NOT_FOUND, 0, set())
    assert (handler.session_id, handler.epoch) == (0, 0)
    handler.build({"a": 7})
    assert handler.handle_response(ErrorCode.NONE, 0, {"a"})     # no slot on the leader: full fetches
    assert (handler.build({"a": 7}).epoch, handler.session_id) == (0, 0)
    assert handler.handle_response(ErrorCode.NONE, 45, {"a"})
    handler.build({"a": 8})
    handler.handle_error()                                       # no answer: the leader may be at either epoch
    assert (handler.session_id, handler.epoch, handler.session) == (45, 0, {})

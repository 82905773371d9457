"""The fetcher's side of incremental fetch sessions (KIP-227): Kafka's ``FetchSessionHandler``.

One handler per leader connection.  ``build`` turns the partitions the
fetcher wants this round (their fetch state) into what the next Fetch
sends: every partition and ``(0, 0)`` while there is no session (a full
fetch asking for one); inside a session ``(id, epoch)`` and only the
partitions added or whose fetch state changed since the session last heard
of them, plus the ones dropped as ``forgotten``.  ``handle_response``
advances the epoch after an answer, or falls back to a full fetch: a
response error (FETCH_SESSION_ID_NOT_FOUND: start a new session;
INVALID_FETCH_SESSION_EPOCH or any other: close this one and start
again), an answer without a session id (the leader had no slot: the next
fetch tries again), or an incremental answer naming a partition outside
the session.  ``handle_error`` (the connection failed, the answer never
came) makes the next fetch a full one that closes the session, since the
leader may or may not have seen the last epoch.

An incremental answer carries only partitions with news: a partition
absent from it was read at its fetch offset and had nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from twisted_kafka.protocol.errors import ErrorCode

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_MAX_EPOCH = 2**31 - 1


def next_epoch(epoch: int) -> int:
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass(frozen=True, slots=True)
class FetchRequestData:
    """What the next Fetch sends: its session fields, the partitions it names (key -> fetch state, in
    order) and the partitions it forgets."""

    session_id: int
    epoch: int
    to_send: dict[Any, Any]
    to_forget: list[Any]

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


class FetchSessionHandler:
    """``build`` then ``handle_response`` (or ``handle_error``), one fetch at a time.  Keys are any
    hashable partition names; fetch states are values compared with ``==`` (a changed state is sent)."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        #: The partitions and fetch states the leader's session holds (after the last answered fetch).
        self.session: dict[Any, Any] = {}
        self._pending: FetchRequestData | None = None
        self._wanted: dict[Any, Any] = {}
        self.full_fetches = 0
        self.incremental_fetches = 0

    def build(self, wanted: Mapping[Any, Any]) -> FetchRequestData:
        wanted = dict(wanted)
        if self.epoch == INITIAL_EPOCH:
            # A full fetch (closing ``session_id`` if it is set) that asks for a new session.
            data = FetchRequestData(self.session_id, INITIAL_EPOCH, wanted, [])
        else:
            session = self.session
            to_send = {key: state for key, state in wanted.items() if session.get(key) != state}
            to_forget = [key for key in session if key not in wanted]
            data = FetchRequestData(self.session_id, self.epoch, to_send, to_forget)
        self._pending = data
        self._wanted = wanted
        return data

    def handle_response(self, error_code: int, session_id: int, partitions: set[Any]) -> bool:
        """The answer to the last ``build``: its top-level error, session id and the keys of the
        partitions it carries.  False: the answer is to be dropped (an error, or it named a partition
        the fetch did not ask for); the next fetch is a full one."""
        data, self._pending = self._pending, None
        if data is None:
            return False
        if error_code != ErrorCode.NONE:
            if error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self._reset(INVALID_SESSION_ID)
            else:
                self._reset(self.session_id)        # close it with the next full fetch
            return False
        if data.full:
            self.full_fetches += 1
            if not partitions <= data.to_send.keys():
                self._reset(INVALID_SESSION_ID if session_id == INVALID_SESSION_ID else session_id)
                return False
            self.session = self._wanted if session_id != INVALID_SESSION_ID else {}
            self.session_id = session_id
            self.epoch = next_epoch(INITIAL_EPOCH) if session_id != INVALID_SESSION_ID else INITIAL_EPOCH
            return True
        self.incremental_fetches += 1
        if session_id == INVALID_SESSION_ID:
            # The leader closed the session (it emptied): the answer is a sessionless one.
            self._reset(INVALID_SESSION_ID)
            return partitions <= self._wanted.keys()
        if not partitions <= self._wanted.keys():
            self._reset(self.session_id)
            return False
        self.session = self._wanted
        self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """The last fetch got no answer: the leader may have advanced the epoch or not."""
        self._pending = None
        self._reset(self.session_id)

    def _reset(self, close: int) -> None:
        self.session_id = close
        self.epoch = INITIAL_EPOCH
        self.session = {}


__all__ = ["FetchRequestData", "FetchSessionHandler", "INITIAL_EPOCH", "FINAL_EPOCH", "INVALID_SESSION_ID"]

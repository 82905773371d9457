"""Refusing transactional producers while transactions are not built.

A transactional producer starts with FindCoordinator for its transactional
id (key type 1), then InitProducerId with the id.  Both are answered with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and the message "Transactions are not
supported by this broker.", because that is the code every client gives up
on at once at that step (measured against the clients' sources):

* librdkafka (``rd_kafka_txn_handle_FindCoordinator``) treats only
  TRANSACTIONAL_ID_AUTHORIZATION_FAILED and CLUSTER_AUTHORIZATION_FAILED as
  fatal; anything else -- UNSUPPORTED_VERSION, Kafka's answer for a feature
  it has switched off, included -- is queried again every 500 ms until
  ``init_transactions()`` times out (twice ``transaction.timeout.ms`` when
  called without a timeout) with a generic "timed out".  Its fatal error
  carries the response's error message (FindCoordinator v1+);
* kafka-python and the Java client stop on any non-retriable code; aiokafka
  on anything but COORDINATOR_NOT_AVAILABLE, NODE_NOT_READY and
  REQUEST_TIMED_OUT.

COORDINATOR_NOT_AVAILABLE, the earlier answer, is retriable: every client
waited out its whole timeout with nothing in the broker's log.  The code
says "not allowed", which is true of every transactional id on this broker;
the message and the broker's log line say why.

Each refusal is logged with the client id, its address, the transactional
id(s) and the reason.  A client may retry (or an attacker ask in a loop), so
at most ``burst`` lines are written per ``interval`` seconds; the refusals
beyond that are counted and summed up in one line when the interval ends.
"""

from __future__ import annotations

from collections.abc import Sequence

from twisted.logger import Logger

from twisted_kafka.protocol.errors import ErrorCode

__all__ = ["REFUSAL_ERROR", "REFUSAL_MESSAGE", "TransactionRefusals"]

REFUSAL_ERROR = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
REFUSAL_MESSAGE = "Transactions are not supported by this broker."

log = Logger(namespace="twisted_kafka.coordinator.TransactionRefusals")


class TransactionRefusals:
    """Answers and logs the refusal of transactional requests (one per broker, shared by the APIs)."""

    def __init__(self, clock, *, burst: int = 10, interval: float = 60.0):
        self.clock = clock
        self.burst = burst
        self.interval = interval
        self._window_start = float("-inf")
        self._logged = 0
        self._unlogged = 0
        self._summary = None
        self.refusals = 0

    def refused(self, api: str, context, transactional_ids: Sequence[str]) -> None:
        """Record that ``api`` refused ``transactional_ids`` for the client of ``context``."""
        self.refusals += 1
        now = self.clock.seconds()
        if now - self._window_start >= self.interval:
            self._window_start, self._logged = now, 0
        if self._logged >= self.burst:
            self._unlogged += 1
            if self._summary is None:
                self._summary = self.clock.callLater(self._window_start + self.interval - now, self._sum_up)
            return
        self._logged += 1
        first, *rest = transactional_ids
        more = f" (and {len(rest)} more)" if rest else ""
        log.warn("{api} refused for transactional id {tid!r}{more} from client {client_id!r} at {address} on "
                 "{listener}: {reason} ({error})", api=api, tid=first, more=more,
                 client_id=context.client_id or "", address=context.client_address,
                 listener=context.listener_name, reason=REFUSAL_MESSAGE.rstrip("."), error=REFUSAL_ERROR.name)

    def _sum_up(self) -> None:
        self._summary = None
        count, self._unlogged = self._unlogged, 0
        log.warn("{count} more transactional request(s) refused in the last {interval:g}s without a line each: "
                 "{reason}", count=count, interval=self.interval, reason=REFUSAL_MESSAGE.rstrip("."))

"""BrokerChannel: requests from this broker to one other broker, one at a time, in order, until answered.

Kafka sends the requests one broker makes to another from a send thread
with a queue per destination: the controller's ``RequestSendThread``, the
``InterBrokerSendThread`` under the transaction marker channel and the
broker-to-controller channel.  Here that queue is a ``BrokerChannel`` over
one ``twisted_kafka.client`` connection:

* requests are sent one at a time, each once the previous one is answered,
  so they arrive in the order they were given;
* the connection is made when the first request comes, by the owner's
  ``connect`` (which knows where the broker is and how to authenticate); an
  attempt that fails, and a connection that is lost, are retried after
  ``RECONNECT_BACKOFF_SECONDS``, and a request in flight when the
  connection dropped is sent again first on the next one, so requests are
  never reordered.  (They may reach the broker twice; what brokers send
  each other -- the controller's requests with its epoch and full states,
  transaction markers -- is safe to apply twice);
* a request the broker answers with bytes that break the protocol fails
  instead of being resent: the same request would most likely break it
  again, and the queue behind it must not stall;
* ``close`` fails every request not answered yet (``ConnectionError``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.config import ConfigError

from .errors import ConnectionLost, KafkaConnectionError, ProtocolViolationError
from .protocol import KafkaClientProtocol

RECONNECT_BACKOFF_SECONDS = 0.1


@dataclass(frozen=True, slots=True, eq=False)
class _Pending:
    version: int
    request: object
    deferred: Deferred


class BrokerChannel:
    """The queue of requests to one broker; see the module docstring."""

    def __init__(self, *, reactor, broker_id: int, connect: Callable[[], Deferred], owner: str,
                 log: Logger):
        """``connect()``: a Deferred firing with a connected ``KafkaClientProtocol`` to the broker; it may
        fail, or raise ``ConfigError`` (an unusable key store), ``ValueError`` or ``KafkaConnectionError``
        (nowhere to connect yet): the attempt is retried.  ``owner`` names the sender in log lines
        ("Controller"), ``log`` is the owner's logger."""
        self.reactor = reactor
        self.broker_id = broker_id
        self._connect_to = connect
        self.owner = owner
        self.log = log
        self._queue: deque[_Pending] = deque()
        self._inflight: _Pending | None = None
        self._client: KafkaClientProtocol | None = None
        self._connecting: Deferred | None = None
        self._retry_call = None
        self._closed = False

    def send(self, version: int, request) -> Deferred:
        """Queue ``request``; the Deferred fires with the decoded response message.

        It fails only when the channel is closed first, or when the broker's
        answer breaks the protocol (``ProtocolViolationError``); connection
        failures are retried.  Cancelling it takes the request out of the
        queue (one already sent is not sent again; its answer is dropped): a
        caller that learns the broker is gone -- a partition's leadership
        moved -- stops waiting for it.
        """
        entries: list[_Pending] = []
        d: Deferred = Deferred(lambda _: self._cancelled(entries[0]))
        entries.append(_Pending(version, request, d))
        self._queue.append(entries[0])
        self._pump()
        return d

    def _cancelled(self, pending: _Pending) -> None:
        if pending in self._queue:
            self._queue.remove(pending)

    @property
    def pending(self) -> int:
        """Requests not answered yet (in flight or queued)."""
        return len(self._queue) + (self._inflight is not None)

    def close(self) -> None:
        """Stop for good: the connection is closed and every request not yet answered fails."""
        self._closed = True
        if self._retry_call is not None and self._retry_call.active():
            self._retry_call.cancel()
        if self._connecting is not None:
            self._connecting.cancel()
        if self._client is not None:
            self._client.close()
            self._client = None
        pending = list(self._queue)
        self._queue.clear()
        if self._inflight is not None:
            pending.append(self._inflight)
            self._inflight = None
        for entry in pending:
            entry.deferred.errback(ConnectionError(f"channel to broker {self.broker_id} closed"))

    # -- sending ----------------------------------------------------------------------

    def _pump(self) -> None:
        if self._closed or self._inflight is not None or not self._queue:
            return
        if self._client is None:
            self._connect()
            return
        if not self._client.is_open:
            return          # it is going away (a protocol violation): _disconnected reconnects
        pending = self._inflight = self._queue.popleft()
        self._client.request(pending.request, pending.version).addCallbacks(
            self._answered, self._failed, callbackArgs=(pending,), errbackArgs=(pending,))

    def _answered(self, response, pending: _Pending) -> None:
        if pending is not self._inflight:
            return          # the channel was closed meanwhile; the caller has had its error
        self._inflight = None
        pending.deferred.callback(response)
        self._pump()

    def _failed(self, failure: Failure, pending: _Pending) -> None:
        if pending is not self._inflight:
            return
        self._inflight = None
        if pending.deferred.called:
            self._pump()    # cancelled: never sent again
            return
        if failure.check(ConnectionLost) and not failure.check(ProtocolViolationError):
            # Sent again first on the next connection (which _disconnected schedules): order is kept.
            self._queue.appendleft(pending)
            return
        pending.deferred.errback(failure)
        self._pump()

    # -- the connection ---------------------------------------------------------------

    def _retry_pending(self) -> bool:
        return self._retry_call is not None and self._retry_call.active()

    def _connect(self) -> None:
        if self._connecting is not None or self._closed or self._retry_pending():
            return
        try:
            self._connecting = self._connect_to()
        except (ConfigError, ValueError, KafkaConnectionError) as exc:     # retried like a refused connection
            self._connect_failed(Failure(exc))
            return
        self._connecting.addCallbacks(self._connected, self._connect_failed)

    def _connect_failed(self, failure: Failure) -> None:
        self._connecting = None
        if self._closed:
            return          # cancelled by close()
        self.log.warn("{owner} cannot reach broker {broker_id}: {reason}; retrying in {backoff} s",
                      owner=self.owner, broker_id=self.broker_id, reason=failure.getErrorMessage(),
                      backoff=RECONNECT_BACKOFF_SECONDS)
        self._schedule_retry()

    def _connected(self, client: KafkaClientProtocol) -> None:
        self._connecting = None
        if self._closed:
            client.close()
            return
        self._client = client
        client.when_closed().addCallback(self._disconnected, client)
        self._pump()

    def _disconnected(self, reason: ConnectionError, client: KafkaClientProtocol) -> None:
        if client is not self._client:
            return
        self._client = None
        if self._queue:
            self.log.info("{owner} lost its connection to broker {broker_id} with {count} request(s) to send: "
                          "{reason}; reconnecting in {backoff} s", owner=self.owner, broker_id=self.broker_id,
                          count=len(self._queue), reason=reason, backoff=RECONNECT_BACKOFF_SECONDS)
            self._schedule_retry()

    def _schedule_retry(self) -> None:
        if not self._closed and not self._retry_pending():
            self._retry_call = self.reactor.callLater(RECONNECT_BACKOFF_SECONDS, self._pump)


__all__ = ["BrokerChannel", "RECONNECT_BACKOFF_SECONDS"]

"""ConnectionEventLog: the broker's connection events, kept as records of the internal topic ``__connection_events``.

The network layer reports every connection's life on the ``ConnectionEvents``
bus (accepted, rejected by a connection quota, authentication failed,
closed with its reason).  This service subscribes to the bus and writes the
events to ``__connection_events`` (``connection.events.enable``, default
true), so the history outlives the broker's memory: a Spark job
(``bin/twisted-kafka-connection-report``) or any Kafka consumer reads it.

Records, one per event:

* key: ``<listener>/<ip>`` (UTF-8);
* value: a JSON object (UTF-8), ``{"version": 1, "kind": "accepted" |
  "rejected" | "authentication_failed" | "closed", "timestamp": <ms since
  the epoch>, "broker": <broker id>, "listener", "plane": "data" |
  "control", "ip", "port", "connection_id", "principal", "reason"}`` --
  ``reason`` null for an acceptance, the quota's config key for a rejection
  (``max.connections.per.ip``), the authenticator's reason for an
  authentication failure, the ``CloseReason`` for a close (client, idle,
  quota, protocol_error, authentication, produce_error, tls, shutdown, admin,
  controller_refused);
* timestamp: the event's time (CreateTime).

The topic is created when the service starts, unless it exists -- the
broker's first event, its controller's connection to the control plane, is
already waiting -- as the group coordinator creates ``__consumer_offsets``:
through the ``AdminManager`` and the controller, with
``CONNECTION_EVENTS_PARTITIONS`` (1) partition, replication factor
``default.replication.factor`` capped at the brokers alive, and
``cleanup.policy=delete`` (retention by the ``log.retention.*`` defaults).
The broker's startup waits for it (``STARTUP_WAIT_SECONDS`` at most), so a
broker that has logged it started is not creating it any more; a failed
creation is retried every ``CREATE_RETRY_BACKOFF_MS``.  A client's Metadata
request that auto-creates it gets the same topic.  It is internal: clients
may read it but not produce to it.  Each broker writes to partition
``broker id % partitions``, so its events stay in order.

The broker must never wait or fail because of this: a subscriber is called
inside the accept or the close, so an event is only put in a bounded
buffer there.  The buffer is written as one record batch every
``flush_interval_ms`` on the reactor clock, or as soon as it holds
``batch_size`` events, one append at a time (as the coordinators append: on
the partition's leader, with the broker's own origin).  While the topic is
being created or its partition is not available here, events wait in the
buffer; once ``max_buffered`` are waiting, new events are dropped, as are
the events of an append that fails -- counted (``dropped``, and the metric
``twisted_kafka.server:type=ConnectionEventLog,name=EventsDropped``) and
logged once per episode.

The service subscribes when it is built, before the controller connects to
this broker's control plane, so the broker's own first connection is
recorded too; it writes once started (after the controller, which creates
the topic).  Stopping -- after the request drain has answered the
requests, before the controller stops -- writes what is buffered (waiting
at most ``STOP_TIMEOUT_SECONDS`` for the appends; never for a creation of
the topic) and unsubscribes: later events -- connections closed as the
socket server stops -- are not recorded.
"""

from __future__ import annotations

import json
from collections import deque
from json.encoder import encode_basestring_ascii as _quote
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import LoopingCall
from twisted.logger import Logger, LogLevel
from twisted.python.failure import Failure

from twisted_kafka.controller.interface import NewTopic
from twisted_kafka.log import AppendOrigin
from twisted_kafka.metrics import MetricName, MetricsRegistry
from twisted_kafka.network.connection_events import ConnectionEvent, ConnectionEvents
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.records.builder import build_batch
from twisted_kafka.waiting import fired_within

CONNECTION_EVENTS_TOPIC = "__connection_events"
CONNECTION_EVENTS_PARTITIONS = 1
#: The version of the record value's JSON layout.
VALUE_VERSION = 1

BATCH_SIZE = 500                  # events per record batch (about 300 bytes each)
FLUSH_INTERVAL_MS = 500
MAX_BUFFERED = 10_000
CREATE_TIMEOUT_MS = 30_000        # how long a creation waits for the topic to reach the brokers
CREATE_RETRY_BACKOFF_MS = 10_000  # between two creations of the topic
STARTUP_WAIT_SECONDS = 5.0        # how long the broker's startup waits for the topic's creation
STOP_TIMEOUT_SECONDS = 5.0        # how long its shutdown waits for the last appends

log = Logger(namespace="twisted_kafka.server.ConnectionEventLog")


def encode_event(event: ConnectionEvent, broker_id: int) -> tuple[bytes, bytes]:
    """The record key and value of ``event`` (the layout in the module docstring).

    Two events a connection, so the value is formatted directly -- byte for
    byte what ``json.dumps(value, separators=(",", ":"))`` gives (the same C
    string escaper, ASCII only), at a fifth of the cost of building a dict
    and running the encoder on it.
    """
    reason = event.reason
    value = (f'{{"version":{VALUE_VERSION},"kind":{_quote(event.kind.value)},"timestamp":{event.timestamp_ms:d},'
             f'"broker":{broker_id:d},"listener":{_quote(event.listener)},"plane":{_quote(event.plane)},'
             f'"ip":{_quote(event.ip)},"port":{event.port:d},"connection_id":{_quote(event.connection_id)},'
             f'"principal":{_quote(event.principal)},"reason":{"null" if reason is None else _quote(str(reason))}}}')
    return f"{event.listener}/{event.ip}".encode(), value.encode()


def decode_event(value: bytes) -> dict[str, Any]:
    """A record value as a dict (the fields of ``encode_event``)."""
    return json.loads(value)


def connection_events_topic_configs() -> dict[str, str | None]:
    """Deletion by retention, whatever ``log.cleanup.policy`` says; the rest inherits the broker's defaults."""
    return {"cleanup.policy": "delete"}


class ConnectionEventLog(Service):
    def __init__(self, *, events: ConnectionEvents, replica_manager, admin_manager, metadata_cache, reactor,
                 broker_id: int, default_replication_factor: int = 1, create_timeout_ms: int = CREATE_TIMEOUT_MS,
                 metrics: MetricsRegistry | None = None, batch_size: int = BATCH_SIZE,
                 flush_interval_ms: int = FLUSH_INTERVAL_MS, max_buffered: int = MAX_BUFFERED,
                 topic: str = CONNECTION_EVENTS_TOPIC, num_partitions: int = CONNECTION_EVENTS_PARTITIONS):
        self.events = events
        self.replica_manager = replica_manager
        self.admin_manager = admin_manager
        self.metadata_cache = metadata_cache
        self.reactor = reactor
        self.broker_id = broker_id
        self.default_replication_factor = default_replication_factor
        self.create_timeout_ms = create_timeout_ms
        self.batch_size = batch_size
        self.flush_interval_ms = flush_interval_ms
        self.max_buffered = max_buffered
        self.topic = topic
        self.num_partitions = num_partitions
        self.buffer: deque[ConnectionEvent] = deque()
        self.written = 0              # events appended
        self.dropped = 0              # events lost: buffer full, append failed, or left at stop
        self._dropping_since_write = 0
        self._appending: Deferred | None = None
        self._creating: Deferred | None = None
        self._next_create_ms = 0.0
        self._creation_failures = 0
        self._unavailable_logged = False
        self._flush_call = None
        self._loop: LoopingCall | None = None
        self._subscribed = False
        admin_manager.register_internal_topic(topic, self.topic_spec)
        self._subscribe()
        if metrics is not None:
            for name, read in (("EventsWritten", lambda: self.written), ("EventsDropped", lambda: self.dropped),
                               ("EventsBuffered", lambda: len(self.buffer))):
                metrics.gauge(MetricName("twisted_kafka.server", "ConnectionEventLog", name), read)

    @classmethod
    def from_config(cls, config, **kwargs) -> ConnectionEventLog:
        return cls(default_replication_factor=config["default.replication.factor"], **kwargs)

    def _subscribe(self) -> None:
        if not self._subscribed:
            self.events.subscribe(self.on_event)
            self._subscribed = True

    # -- Service ---------------------------------------------------------------------------

    def startService(self) -> Deferred:
        super().startService()
        self._subscribe()
        return ensureDeferred(self._start())

    async def _start(self) -> None:
        """Create the topic unless it exists (waiting ``STARTUP_WAIT_SECONDS`` at most), then write."""
        if not self._topic_exists():
            self._create_topic()
            creating = self._creating
            if creating is not None and not await fired_within(self.reactor, _watch(creating),
                                                               STARTUP_WAIT_SECONDS):
                log.warn("{topic} is not created yet; connection events wait in memory meanwhile",
                         topic=self.topic)
        if not self.running:
            return
        loop = self._loop = LoopingCall(self.flush)
        loop.clock = self.reactor
        loop.start(self.flush_interval_ms / 1000.0, now=True).addErrback(
            lambda f: log.failure("The connection-event writer stopped", f))

    def stopService(self) -> Deferred:
        super().stopService()
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._flush_call is not None and self._flush_call.active():
            self._flush_call.cancel()
        self._flush_call = None
        return ensureDeferred(self._write_remaining())

    async def _write_remaining(self) -> None:
        """Write what is buffered (within ``STOP_TIMEOUT_SECONDS``), then stop listening.

        Only appends are waited for: a creation of the topic still under way
        needs the controller and this broker's control plane, which may no
        longer answer now, so what is buffered then is dropped.
        """
        deadline = self.reactor.seconds() + STOP_TIMEOUT_SECONDS
        while self.buffer or self._appending is not None:
            left = deadline - self.reactor.seconds()
            if self._appending is not None:
                if left <= 0 or not await fired_within(self.reactor, _watch(self._appending), left):
                    break           # still writing: the rest is not waited for
                continue
            waiting = len(self.buffer)
            self.flush(create=False)
            if self._appending is None and len(self.buffer) == waiting:
                break               # no topic, or its partition is not writable here
        self.events.unsubscribe(self.on_event)
        self._subscribed = False
        if self.buffer:
            self._drop(len(self.buffer), "the broker is stopping and the topic is not writable")
            self.buffer.clear()

    # -- the bus ---------------------------------------------------------------------------

    def on_event(self, event: ConnectionEvent) -> None:
        if len(self.buffer) >= self.max_buffered:
            self._drop(1, f"{self.max_buffered} events are waiting to be written")
            return
        self.buffer.append(event)
        if len(self.buffer) >= self.batch_size and self.running and self._flush_call is None:
            self._flush_call = self.reactor.callLater(0, self._flush_soon)

    def _flush_soon(self) -> None:
        self._flush_call = None
        self.flush()

    # -- writing ---------------------------------------------------------------------------

    def topic_spec(self) -> NewTopic:
        alive = max(1, len(self.metadata_cache.brokers))
        factor = max(1, min(self.default_replication_factor, alive))
        return NewTopic(self.topic, self.num_partitions, factor, configs=connection_events_topic_configs())

    def _topic_exists(self) -> bool:
        topic = self.metadata_cache.topics.get(self.topic)
        return topic is not None and bool(topic.partitions)

    def flush(self, *, create: bool = True) -> None:
        """Write the next batch of buffered events, unless one is being written (or the topic created)."""
        if not self.buffer or self._appending is not None or self._creating is not None:
            return
        if not self._topic_exists():
            if create and self.reactor.seconds() * 1000 >= self._next_create_ms:
                self._create_topic()
            return
        topic = self.metadata_cache.topics[self.topic]
        index = self.broker_id % len(topic.partitions)
        try:
            partition = self.replica_manager.leader_partition(self.topic, index)
        except KafkaError as exc:
            if not self._unavailable_logged:
                self._unavailable_logged = True
                log.warn("{topic}-{index} is not writable here ({error}); {n} connection event(s) wait",
                         topic=self.topic, index=index, error=exc.code.name, n=len(self.buffer))
            return
        self._unavailable_logged = False
        taken = [self.buffer.popleft() for _ in range(min(self.batch_size, len(self.buffer)))]
        try:
            batch = build_batch([(*encode_event(e, self.broker_id), None, e.timestamp_ms) for e in taken])
            appended = self.replica_manager.append(partition, batch, None, 1, origin=AppendOrigin.COORDINATOR)
        except Exception as exc:
            self._append_failed(Failure(exc), len(taken))
            return
        self._appending = appended
        appended.addCallbacks(self._appended, self._append_failed, callbackArgs=(len(taken),),
                              errbackArgs=(len(taken),))

    def _appended(self, _info, count: int) -> None:
        self._appending = None
        self.written += count
        if self._dropping_since_write:
            log.info("Writing connection events to {topic} again; {n} event(s) were dropped", topic=self.topic,
                     n=self._dropping_since_write)
            self._dropping_since_write = 0
        if len(self.buffer) >= self.batch_size and self.running:
            self.flush()

    def _append_failed(self, failure: Failure, count: int) -> None:
        self._appending = None
        error = failure.value.code.name if isinstance(failure.value, KafkaError) else repr(failure.value)
        self._drop(count, f"appending to {self.topic} failed: {error}")
        if not isinstance(failure.value, KafkaError):
            log.failure("Appending connection events failed", failure)

    def _drop(self, count: int, why: str) -> None:
        if not self._dropping_since_write:
            log.warn("Dropping connection events: {why} (counted in EventsDropped)", why=why)
        self.dropped += count
        self._dropping_since_write += count

    # -- the topic -------------------------------------------------------------------------

    def _create_topic(self) -> None:
        creating = self._creating = ensureDeferred(self._create())
        creating.addBoth(self._created, creating)

    async def _create(self) -> bool:
        spec = self.topic_spec()
        try:
            (result,) = await self.admin_manager.create_topics([spec], timeout_ms=self.create_timeout_ms)
        except KafkaError as exc:
            self._creation_failed(str(exc))
            return False
        if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            self._creation_failed(f"{result.error.name} {result.message or ''}".strip())
            return False
        if result.error == ErrorCode.NONE:
            log.info("Created {topic} with {n} partition(s), replication factor {factor}", topic=self.topic,
                     n=spec.num_partitions, factor=spec.replication_factor)
        self._creation_failures = 0
        return True

    def _creation_failed(self, error: str) -> None:
        """A warning for the first failure; the retries every ``CREATE_RETRY_BACKOFF_MS`` log at debug level."""
        self._creation_failures += 1
        log.emit(LogLevel.warn if self._creation_failures == 1 else LogLevel.debug,
                 "Cannot create {topic}: {error}; connection events wait in memory (at most {max}) and the "
                 "creation is retried every {backoff} ms", topic=self.topic, error=error, max=self.max_buffered,
                 backoff=CREATE_RETRY_BACKOFF_MS)

    def _created(self, outcome, creating: Deferred) -> None:
        if self._creating is creating:
            self._creating = None
        if isinstance(outcome, Failure):
            log.failure("Creating {topic} failed", outcome, topic=self.topic)
            outcome = False
        # Not again before the backoff, even after a success: the topic should then be known here,
        # and if it is not yet, asking again at once would not make it so.
        self._next_create_ms = self.reactor.seconds() * 1000 + CREATE_RETRY_BACKOFF_MS
        if outcome and self.running:
            self.flush()


def _watch(d: Deferred) -> Deferred:
    """A Deferred that fires (with None) when ``d`` does, leaving ``d``'s result to its owner."""
    watcher: Deferred = Deferred()

    def fire(result):
        if not watcher.called:
            watcher.callback(None)
        return result

    d.addBoth(fire)
    return watcher


__all__ = ["CONNECTION_EVENTS_TOPIC", "ConnectionEventLog", "decode_event", "encode_event"]

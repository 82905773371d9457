"""ConnectionEventLog: connection events become records of ``__connection_events``.

On the harness's single-node broker (real logs, replica manager, controller;
a ``MemoryReactorClock``): the topic is created on first use as an internal
topic, events are written in batches (every ``batch_size`` events or every
``flush_interval_ms``), stopping writes what is buffered, the buffer is
bounded, and neither a missing topic nor a failing append reaches the caller
that emitted the event.  ``connection.events.enable=false`` leaves it out.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.internet.defer import Deferred
from twisted.internet.testing import MemoryReactorClock
from twisted.logger import LogLevel, globalLogPublisher

from twisted_kafka.network.connection_events import ConnectionEvent, ConnectionEventKind, ConnectionEvents
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.protocol.records.batch import iter_batch_headers
from twisted_kafka.protocol.records.record import iter_records
from twisted_kafka.server.connection_event_log import (
    CONNECTION_EVENTS_TOPIC,
    ConnectionEventLog,
    decode_event,
    encode_event,
)

from .helpers import Broker, records, result_of

TOPIC = CONNECTION_EVENTS_TOPIC


def event(node, n: int = 0, kind: ConnectionEventKind = ConnectionEventKind.ACCEPTED, *, ip: str = "127.0.0.1",
          reason: str | None = None) -> ConnectionEvent:
    return ConnectionEvent(kind=kind, timestamp_ms=int(node.reactor.seconds() * 1000), listener="PLAINTEXT",
                           plane="data", ip=ip, port=50000 + n, connection_id=f"127.0.0.1:9092-{ip}:{50000 + n}-{n}",
                           principal="User:ANONYMOUS", reason=reason)


def make_log(node, bus: ConnectionEvents | None = None, **kwargs) -> ConnectionEventLog:
    kwargs.setdefault("flush_interval_ms", 1000)
    return ConnectionEventLog(events=bus or ConnectionEvents(), replica_manager=node.replica_manager,
                              admin_manager=node.admin_manager, metadata_cache=node.metadata_cache,
                              reactor=node.reactor, broker_id=0, **kwargs)


def batches(node) -> list[list]:
    """The records of ``__connection_events``, batch by batch."""
    log = node.log(TOPIC)
    if log is None:
        return []
    out = []
    for chunk in result_of(log.read(0, 1 << 20)).records:
        buf = bytes(chunk)
        out.extend(list(iter_records(buf, pos, header)) for pos, header in iter_batch_headers(buf))
    return out


def ports(node) -> list[list[int]]:
    return [[decode_event(r.value)["port"] for r in batch] for batch in batches(node)]


def test_the_topic_is_created_on_first_use_internal_with_one_partition_and_deletion(node):
    bus = ConnectionEvents()
    writer = make_log(node, bus)
    bus.emit(event(node, 0))
    assert TOPIC not in node.metadata_cache.topics, "nothing is written before the service starts"
    writer.startService()
    topic = node.metadata_cache.topics[TOPIC]
    assert topic.is_internal and len(topic.partitions) == 1
    assert node.config_repository.topic_overrides(TOPIC) == {"cleanup.policy": "delete"}
    assert ports(node) == [[50000]]
    # clients may read it, not write to it
    P = m.ProduceRequest
    produced = node.call(P(acks=1, timeout_ms=1000, transactional_id=None, topic_data=[P.TopicProduceData(
        name=TOPIC, partition_data=[P.TopicProduceData.PartitionProduceData(index=0, records=records(b"x"))])]), 9)
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    # a client's Metadata request that auto-creates it would get the same topic
    assert node.admin_manager.internal_topic_spec(TOPIC).configs == {"cleanup.policy": "delete"}


def test_a_record_per_event_keyed_by_listener_and_ip_with_every_field(node):
    bus = ConnectionEvents()
    writer = make_log(node, bus)
    writer.startService()
    rejected = event(node, 1, ConnectionEventKind.REJECTED, ip="127.0.0.2", reason="max.connections.per.ip")
    node.reactor.advance(0.25)
    closed = event(node, 2, ConnectionEventKind.CLOSED, reason="idle")
    bus.emit(rejected)
    bus.emit(closed)
    node.reactor.advance(1)
    [[first, second]] = batches(node)
    assert first.key == b"PLAINTEXT/127.0.0.2" and second.key == b"PLAINTEXT/127.0.0.1"
    assert (first.timestamp, second.timestamp) == (rejected.timestamp_ms, closed.timestamp_ms)
    assert json.loads(first.value) == {
        "version": 1, "kind": "rejected", "timestamp": rejected.timestamp_ms, "broker": 0, "listener": "PLAINTEXT",
        "plane": "data", "ip": "127.0.0.2", "port": 50001, "connection_id": "127.0.0.1:9092-127.0.0.2:50001-1",
        "principal": "User:ANONYMOUS", "reason": "max.connections.per.ip"}
    assert decode_event(second.value)["kind"] == "closed" and decode_event(second.value)["reason"] == "idle"
    assert encode_event(closed, 0) == (second.key, second.value)


def test_batches_every_interval_or_every_batch_size_events(node):
    bus = ConnectionEvents()
    writer = make_log(node, bus, batch_size=3, flush_interval_ms=1000)
    writer.startService()
    bus.emit(event(node, 0))
    bus.emit(event(node, 1))
    node.reactor.advance(0.999)
    assert batches(node) == [], "below the batch size, the interval is waited for"
    node.reactor.advance(0.001)
    assert ports(node) == [[50000, 50001]]
    for n in range(2, 9):
        bus.emit(event(node, n))
    assert ports(node) == [[50000, 50001]], "never written inside emit()"
    node.reactor.advance(0)
    assert ports(node) == [[50000, 50001], [50002, 50003, 50004], [50005, 50006, 50007]]
    node.reactor.advance(1)
    assert ports(node)[-1] == [50008]
    assert (writer.written, writer.dropped, len(writer.buffer)) == (9, 0, 0)


def test_stop_writes_what_is_buffered_and_stops_listening(node):
    bus = ConnectionEvents()
    writer = make_log(node, bus, flush_interval_ms=60_000)
    writer.startService()
    bus.emit(event(node, 0))
    bus.emit(event(node, 1))
    result_of(writer.stopService())
    assert ports(node) == [[50000, 50001]]
    bus.emit(event(node, 2))
    assert not writer.buffer and writer.written == 2
    node.reactor.advance(120)
    assert ports(node) == [[50000, 50001]]


def test_events_before_start_are_kept_and_the_buffer_is_bounded(node):
    logged = []
    globalLogPublisher.addObserver(logged.append)
    try:
        bus = ConnectionEvents()
        writer = make_log(node, bus, max_buffered=3)
        for n in range(5):
            bus.emit(event(node, n))
        assert (len(writer.buffer), writer.dropped) == (3, 2)
        writer.startService()
    finally:
        globalLogPublisher.removeObserver(logged.append)
    assert ports(node) == [[50000, 50001, 50002]]
    warnings = [e for e in logged if e.get("log_level") == LogLevel.warn and "Dropping" in e.get("log_format", "")]
    assert len(warnings) == 1, "one line per episode, not one per event"


class NoController:
    """An AdminManager whose controller cannot be reached: creating a topic fails."""

    def __init__(self):
        self.attempts = 0

    def register_internal_topic(self, name, spec):
        pass

    async def create_topics(self, topics, **kwargs):
        self.attempts += 1
        raise KafkaError(ErrorCode.NOT_CONTROLLER, "This broker is not the active controller")


def test_without_the_topic_events_wait_bounded_and_are_dropped_at_stop(node):
    logged = []
    globalLogPublisher.addObserver(logged.append)
    bus = ConnectionEvents()
    admin = NoController()
    writer = ConnectionEventLog(events=bus, replica_manager=node.replica_manager, admin_manager=admin,
                                metadata_cache=node.metadata_cache, reactor=node.reactor, broker_id=0,
                                flush_interval_ms=500, max_buffered=4)
    try:
        assert result_of(writer.startService()) is None, "a failed creation does not fail the startup"
        assert admin.attempts == 1, "created at start"
        for n in range(6):
            bus.emit(event(node, n))            # never raises into the network layer
        assert len(writer.buffer) == 4 and writer.dropped == 2
        node.reactor.advance(9.5)
        assert admin.attempts == 1, "asked again only after the backoff"
        node.reactor.advance(1)
        assert admin.attempts == 2
        result_of(writer.stopService())
    finally:
        globalLogPublisher.removeObserver(logged.append)
    assert admin.attempts == 2, "not at stop: the controller may no longer answer"
    assert (writer.written, writer.dropped, len(writer.buffer)) == (0, 6, 0)
    warned = [e["log_format"] for e in logged if e.get("log_level") == LogLevel.warn]
    assert sum("Cannot create" in w for w in warned) == 1, "the retries log at debug level"


class Unanswered(NoController):
    """A controller that never confirms the creation."""

    def create_topics(self, topics, **kwargs):
        self.attempts += 1
        return Deferred()


def test_a_creation_that_hangs_delays_the_startup_boundedly_and_the_shutdown_not_at_all(node):
    bus = ConnectionEvents()
    writer = ConnectionEventLog(events=bus, replica_manager=node.replica_manager, admin_manager=Unanswered(),
                                metadata_cache=node.metadata_cache, reactor=node.reactor, broker_id=0)
    bus.emit(event(node, 0))
    started = writer.startService()
    assert not started.called
    node.reactor.advance(5)
    assert started.called, "the broker starts anyway"
    stopped = writer.stopService()
    assert stopped.called and (writer.dropped, len(writer.buffer)) == (1, 0)


def test_a_failing_append_drops_its_events_and_the_writer_goes_on(tmp_path):
    node = Broker(tmp_path, {"message.max.bytes": "200"})      # no event record fits
    bus = ConnectionEvents()
    writer = make_log(node, bus)
    writer.startService()
    bus.emit(event(node, 0))
    node.reactor.advance(1)
    assert (writer.written, writer.dropped) == (0, 1)
    result_of(node.controller_client.alter_topic_configs(TOPIC, {"cleanup.policy": "delete",
                                                                 "max.message.bytes": "100000"}))
    bus.emit(event(node, 1))
    node.reactor.advance(1)
    assert (writer.written, writer.dropped) == (1, 1) and ports(node) == [[50001]]


def test_the_broker_writes_connection_events_unless_the_key_says_not(tmp_path):
    from tests.unit.network.helpers import make_config
    from twisted_kafka.server.kafka_server import KafkaServer

    enabled = KafkaServer(make_config(log_dirs=str(tmp_path / "a")), reactor=MemoryReactorClock())
    assert isinstance(enabled.connection_event_log, ConnectionEventLog)
    stats = enabled.socket_server.connection_stats   # the admin endpoint's counters are always subscribed
    assert enabled.socket_server.connection_events._subscribers == [stats, enabled.connection_event_log.on_event]

    disabled = KafkaServer(make_config(log_dirs=str(tmp_path / "b"), connection_events_enable="false"),
                           reactor=MemoryReactorClock())
    assert disabled.connection_event_log is None
    assert "ConnectionEventLog" not in [type(child).__name__ for child in disabled]
    assert disabled.socket_server.connection_events._subscribers == [disabled.socket_server.connection_stats]
    assert disabled.admin_manager.internal_topic_spec(TOPIC) is None


_text = st.text(max_size=40)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(list(ConnectionEventKind)), timestamp=st.integers(0, 2**62), broker=st.integers(0, 2**31),
       listener=_text, plane=st.sampled_from(["data", "control"]), ip=_text, port=st.integers(0, 65535),
       connection_id=_text, principal=_text, reason=st.none() | _text)
def test_encoded_value_is_the_json_encoders_output(kind, timestamp, broker, listener, plane, ip, port, connection_id,
                                                  principal, reason):
    """The hand-formatted value is byte for byte ``json.dumps`` of the documented layout, whatever the strings hold."""
    event = ConnectionEvent(kind=kind, timestamp_ms=timestamp, listener=listener, plane=plane, ip=ip, port=port,
                            connection_id=connection_id, principal=principal, reason=reason)
    expected = {"version": 1, "kind": kind.value, "timestamp": timestamp, "broker": broker, "listener": listener,
                "plane": plane, "ip": ip, "port": port, "connection_id": connection_id, "principal": principal,
                "reason": reason}
    key, value = encode_event(event, broker)
    assert value == json.dumps(expected, separators=(",", ":")).encode()
    assert decode_event(value) == expected
    assert key == f"{listener}/{ip}".encode()

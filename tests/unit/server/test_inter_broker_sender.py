"""InterBrokerSender against in-memory brokers on a clock: a request goes to the destination's inter-broker
listener as the controller announced it (looked up at each connection attempt), as this broker, and is
retried over refusals, unknown destinations and lost connections until answered; stopping fails what is
left.  The queue itself (order, resending the request in flight first, the back-off, protocol
violations) is the ``BrokerChannel`` the controller's channels use too: tests/unit/client/test_channel_manager.py.
"""

from __future__ import annotations

import gc

import pytest
from twisted.internet.defer import CancelledError
from twisted.logger import LogLevel, formatEvent, globalLogPublisher

from tests.unit.client.helpers import Brokers, update_metadata
from tests.unit.client.test_protocol import failure_of, result_of
from twisted_kafka.client.broker_channel import RECONNECT_BACKOFF_SECONDS
from twisted_kafka.config import KafkaConfig
from twisted_kafka.network.listeners import EndPoint, parse_listeners
from twisted_kafka.server.inter_broker_sender import InterBrokerSender
from twisted_kafka.server.metadata_cache import BrokerRegistration, MetadataCache

PROPS = {"broker.id": "0", "listeners": "INTERNAL://127.0.0.1:9092,CLIENTS://127.0.0.1:9095",
         "listener.security.protocol.map": "INTERNAL:PLAINTEXT,CLIENTS:PLAINTEXT",
         "inter.broker.listener.name": "INTERNAL", "request.timeout.ms": "1500"}


@pytest.fixture
def log_events():
    events: list = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)
    gc.collect()        # a failed Deferred nobody looked at is reported when collected
    unhandled = [formatEvent(e) for e in events if "Unhandled error in Deferred" in formatEvent(e)]
    assert not unhandled, unhandled


def warnings(events) -> str:
    return "\n".join(formatEvent(e) for e in events if e.get("log_level") >= LogLevel.warn)


def announce(cache: MetadataCache, broker_id: int, port: int) -> None:
    """The controller's UpdateMetadata: ``broker_id`` listens as INTERNAL on ``port``, as CLIENTS elsewhere."""
    cache.update_brokers([BrokerRegistration(broker_id, {
        "INTERNAL": EndPoint("INTERNAL", "127.0.0.1", port, "PLAINTEXT"),
        "CLIENTS": EndPoint("CLIENTS", "127.0.0.1", 19999, "PLAINTEXT")})], controller_id=0)


@pytest.fixture
def brokers():
    b = Brokers()
    for port in (9093, 9094):
        b.listen(port)
    return b


@pytest.fixture
def parts(brokers, log_events):
    config = KafkaConfig.from_props(PROPS)
    cache = MetadataCache(listeners=parse_listeners(config))
    sender = InterBrokerSender(broker_id=0, config=config, reactor=brokers.reactor, metadata_cache=cache)
    sender.startService()
    yield sender, cache
    if sender.running:
        sender.stopService()


def send(sender, epoch: int, broker_id: int = 2):
    return sender.send(broker_id, update_metadata(epoch), 8)


def epochs(brokers) -> list[int]:
    return [event.body.controller_epoch for event in brokers.received]


def test_a_request_goes_to_the_inter_broker_listener_as_this_broker_and_fires_with_the_answer(parts, brokers):
    sender, cache = parts
    announce(cache, 2, 9093)
    d = send(sender, 7)
    assert brokers.attempts() == [("127.0.0.1", 9093, 2)], "request.timeout.ms, in whole seconds"
    brokers.accept()
    assert result_of(d).error_code == 7
    [event] = brokers.received
    assert event.header.client_id == "broker-0-inter-broker"


def test_requests_to_one_broker_share_its_connection_and_keep_their_order(parts, brokers):
    sender, cache = parts
    announce(cache, 2, 9093)
    brokers.auto = False
    ds = [send(sender, epoch) for epoch in (1, 2, 3)]
    broker = brokers.accept()
    for answered in range(3):
        assert epochs(brokers) == [1, 2, 3][:answered + 1], "the next request only after a response"
        broker.answer()
        brokers.flush()
    assert [result_of(d).error_code for d in ds] == [1, 2, 3]
    assert epochs(brokers) == [1, 2, 3] and len(brokers.connections) == 1


def test_a_destination_no_update_metadata_named_yet_is_retried_until_it_is_known(parts, brokers, log_events):
    sender, cache = parts
    d = send(sender, 1)
    assert brokers.attempts() == [] and result_of(d) is None
    assert "broker 2: its INTERNAL listener is not known yet" in warnings(log_events)
    announce(cache, 2, 9093)
    brokers.reactor.advance(RECONNECT_BACKOFF_SECONDS)
    brokers.accept()
    assert result_of(d).error_code == 1


def test_the_address_is_looked_up_at_each_attempt_and_the_request_in_flight_is_sent_again(parts, brokers):
    sender, cache = parts
    announce(cache, 2, 9093)
    brokers.auto = False
    d = send(sender, 5)
    brokers.drop(brokers.accept())                       # broker 2 restarts, on another port
    announce(cache, 2, 9094)
    brokers.reactor.advance(RECONNECT_BACKOFF_SECONDS)
    assert [port for _, port, _ in brokers.attempts()] == [9094]
    brokers.auto = True
    brokers.accept()
    assert result_of(d).error_code == 5 and epochs(brokers) == [5, 5]


def test_a_refused_or_timed_out_connection_is_retried(parts, brokers, log_events):
    sender, cache = parts
    announce(cache, 2, 9093)
    d = send(sender, 1)
    brokers.refuse()
    brokers.reactor.advance(RECONNECT_BACKOFF_SECONDS)
    brokers.reactor.advance(1.5)                          # this attempt is never answered
    assert brokers.attempts() == [] and "no connection within 1.5 s" in warnings(log_events)
    brokers.reactor.advance(RECONNECT_BACKOFF_SECONDS)
    brokers.accept()
    assert result_of(d).error_code == 1


def test_stopping_fails_what_is_unanswered_closes_the_connections_and_refuses_later_requests(parts, brokers):
    sender, cache = parts
    announce(cache, 2, 9093)
    brokers.auto = False
    ds = [send(sender, epoch) for epoch in (1, 2)]
    broker = brokers.accept()
    sender.stopService()
    brokers.flush()
    assert all(failure_of(d).check(ConnectionError) for d in ds)
    assert broker.lost and sender.destinations == {}
    assert failure_of(send(sender, 3)).check(ConnectionError)
    assert brokers.attempts() == []


def test_a_cancelled_request_is_taken_out_of_the_queue_and_never_sent(parts, brokers):
    """The transaction coordinator cancels markers for a broker that died (its partitions moved)."""
    sender, cache = parts
    cancelled = send(sender, 1)                            # broker 2 is not known: queued
    kept = send(sender, 2)
    cancelled.cancel()
    assert failure_of(cancelled).check(CancelledError)
    announce(cache, 2, 9093)
    brokers.reactor.advance(RECONNECT_BACKOFF_SECONDS)
    brokers.accept()
    assert result_of(kept).error_code == 2 and epochs(brokers) == [2]

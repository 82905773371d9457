"""ControllerChannelManager over the client package, against in-memory brokers on a task clock.

What Kafka's controller channel guarantees, and what is checked here: one
request at a time per broker, in order; a request in flight when the
connection drops is sent again first on the next connection; reconnecting
waits ``RECONNECT_BACKOFF_SECONDS``; connection attempts give up after
``controller.socket.timeout.ms``; ``close()`` fails whatever is not answered.
"""

from __future__ import annotations

import pytest
from twisted.logger import LogLevel, formatEvent, globalLogPublisher

from twisted_kafka.client import ProtocolViolationError
from twisted_kafka.controller.channel_manager import RECONNECT_BACKOFF_SECONDS, ControllerChannelManager
from twisted_kafka.protocol.registry import ApiKey

from .helpers import Brokers, update_metadata
from .test_protocol import failure_of, result_of

UPDATE_METADATA = ApiKey.UPDATE_METADATA


@pytest.fixture
def brokers():
    b = Brokers()
    b.listen(9093)
    b.listen(9094)
    return b


@pytest.fixture
def channels(brokers):
    manager = ControllerChannelManager(reactor=brokers.reactor, controller_id=1, timeout_ms=1500)
    manager.add_broker(2, "127.0.0.1", 9093)
    yield manager
    manager.close()


@pytest.fixture
def log_events():
    events: list = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


def warnings(events) -> str:
    return "\n".join(formatEvent(e) for e in events if e.get("log_level") >= LogLevel.warn)


def send(channels, epoch: int, broker_id: int = 2):
    return channels.send(broker_id, UPDATE_METADATA, 8, update_metadata(epoch))


def epochs(brokers) -> list[int]:
    return [event.body.controller_epoch for event in brokers.received]


def test_the_manager_keeps_its_reactor_for_the_controller(channels, brokers):
    assert channels.reactor is brokers.reactor


def test_a_request_connects_to_the_broker_and_fires_with_its_response(channels, brokers):
    d = send(channels, 7)
    assert brokers.attempts() == [("127.0.0.1", 9093, 2)], "controller.socket.timeout.ms, in whole seconds"
    brokers.accept()
    assert result_of(d).error_code == 7
    [event] = brokers.received
    assert event.header.client_id == "controller-1"


def test_requests_to_a_broker_go_one_at_a_time_in_order(channels, brokers):
    brokers.auto = False
    ds = [send(channels, epoch) for epoch in (1, 2, 3)]
    broker = brokers.accept()
    for answered in range(3):
        assert epochs(brokers) == [1, 2, 3][:answered + 1], "the next request only after a response"
        broker.answer()
        brokers.flush()
        assert [result_of(d) is not None for d in ds] == [i <= answered for i in range(3)]
    assert [result_of(d).error_code for d in ds] == [1, 2, 3]


def test_brokers_have_independent_queues(channels, brokers):
    channels.add_broker(3, "127.0.0.1", 9094)
    brokers.auto = False
    ds = [send(channels, 1, broker_id=2), send(channels, 2, broker_id=3)]
    assert [port for _, port, _ in brokers.attempts()] == [9093, 9094]
    brokers.accept()
    brokers.accept()
    assert sorted(epochs(brokers)) == [1, 2]
    channels.close()
    assert all(failure_of(d).check(ConnectionError) for d in ds)


def test_the_request_in_flight_when_the_connection_drops_is_sent_again_first_after_the_backoff(
        channels, brokers, log_events):
    brokers.auto = False
    first, second = send(channels, 1), send(channels, 2)
    broker = brokers.accept()
    assert epochs(brokers) == [1]
    brokers.drop(broker)
    assert result_of(first) is None and result_of(second) is None, "connection failures are retried"
    brokers.reactor.advance(RECONNECT_BACKOFF_SECONDS - 0.001)
    assert brokers.attempts() == [], "not before the backoff"
    brokers.reactor.advance(0.001)
    assert len(brokers.attempts()) == 1
    brokers.auto = True
    brokers.accept()
    assert epochs(brokers) == [1, 1, 2], "the in-flight request first, then the queue, in order"
    assert (result_of(first).error_code, result_of(second).error_code) == (1, 2)


def test_a_send_during_the_backoff_waits_for_it(channels, brokers):
    brokers.auto = False
    ds = [send(channels, 1)]
    brokers.drop(brokers.accept())
    ds.append(send(channels, 2))
    assert brokers.attempts() == []
    brokers.reactor.advance(RECONNECT_BACKOFF_SECONDS)
    assert len(brokers.attempts()) == 1
    brokers.auto = True
    brokers.accept()
    assert [result_of(d).error_code for d in ds] == [1, 2]


def test_a_refused_connection_is_logged_and_retried_after_the_backoff(channels, brokers, log_events):
    d = send(channels, 1)
    brokers.refuse()
    assert "broker 2 at 127.0.0.1:9093" in warnings(log_events)
    assert brokers.attempts() == []
    brokers.reactor.advance(RECONNECT_BACKOFF_SECONDS)
    brokers.accept()
    assert result_of(d).error_code == 1


def test_a_connection_attempt_that_times_out_is_abandoned_and_retried(channels, brokers, log_events):
    d = send(channels, 1)
    brokers.reactor.advance(1.499)
    assert len(brokers.attempts()) == 1
    brokers.reactor.advance(0.001)
    assert brokers.attempts() == [], "abandoned at controller.socket.timeout.ms"
    assert "no connection within 1.5 s" in warnings(log_events)
    brokers.reactor.advance(RECONNECT_BACKOFF_SECONDS)
    brokers.accept()
    assert result_of(d).error_code == 1


def test_an_idle_connection_that_drops_is_reopened_by_the_next_request(channels, brokers):
    send(channels, 1)
    brokers.drop(brokers.accept())
    brokers.reactor.advance(10)
    assert brokers.attempts() == [], "nothing to send, no reconnection"
    d = send(channels, 2)
    brokers.accept()
    assert result_of(d).error_code == 2


def test_a_protocol_violation_fails_the_request_in_flight_and_the_queue_goes_on(channels, brokers, log_events):
    brokers.auto = False
    first, second = send(channels, 1), send(channels, 2)
    broker = brokers.accept()
    broker.transport.write(b"\x00\x00\x00\x02\x00\x00")    # a frame too short for a response header
    brokers.flush()
    error = failure_of(first).value
    assert isinstance(error, ProtocolViolationError) and "broker 2 at 127.0.0.1:9093" in str(error)
    assert "violated the Kafka protocol" in warnings(log_events)
    assert result_of(second) is None
    brokers.auto = True
    brokers.reactor.advance(RECONNECT_BACKOFF_SECONDS)
    brokers.accept()
    assert result_of(second).error_code == 2
    assert epochs(brokers) == [1, 2]


def test_close_fails_every_unanswered_request_and_closes_the_connection(channels, brokers):
    brokers.auto = False
    ds = [send(channels, epoch) for epoch in (1, 2)]
    broker = brokers.accept()
    channels.close()
    for d in ds:
        error = failure_of(d).value
        assert type(error) is ConnectionError and str(error) == "channel to broker 2 closed"
    brokers.flush()
    assert broker.lost
    brokers.reactor.advance(10)
    assert brokers.attempts() == []
    assert channels.channels == {}


def test_close_while_connecting_abandons_the_attempt(channels, brokers):
    d = send(channels, 1)
    channels.close()
    assert failure_of(d).check(ConnectionError)
    assert brokers.attempts() == []
    assert not brokers.reactor.getDelayedCalls()


def test_close_during_the_backoff_cancels_the_retry(channels, brokers):
    d = send(channels, 1)
    brokers.refuse()
    channels.close()
    assert failure_of(d).check(ConnectionError)
    assert not brokers.reactor.getDelayedCalls()


def test_add_broker_keeps_a_channel_to_the_same_address_and_replaces_one_to_another(channels, brokers):
    brokers.auto = False
    channel = channels.channels[2]
    channels.add_broker(2, "127.0.0.1", 9093)
    assert channels.channels[2] is channel
    pending = send(channels, 1)
    channels.add_broker(2, "127.0.0.1", 9094)
    assert channels.channels[2] is not channel
    assert failure_of(pending).check(ConnectionError), "the old channel's requests fail"
    brokers.auto = True
    d = send(channels, 2)
    assert [port for _, port, _ in brokers.attempts()] == [9094]
    brokers.accept()
    assert result_of(d).error_code == 2


def test_remove_broker_closes_its_channel(channels, brokers):
    d = send(channels, 1)
    channels.remove_broker(2)
    assert failure_of(d).check(ConnectionError)
    assert 2 not in channels.channels
    with pytest.raises(KeyError):
        send(channels, 2)


def test_a_request_whose_api_key_does_not_match_its_message_is_refused(channels):
    with pytest.raises(ValueError, match="does not match"):
        channels.send(2, ApiKey.LEADER_AND_ISR, 8, update_metadata(1))

"""The end of the broker's children -- RequestDrain, ReplicaManager, BrokerLifecycleManager, stopped in
reverse as KafkaServer stops them: start enables the data plane; stop is controlled shutdown (each
attempt bounded), then the stop's deadline re-armed, stop accepting, stop processing (the lifecycle
manager), waiting fetches answered (the replica manager's purgatories shut), the group coordinator's
waits answered, and a drain bounded by its timeout, at which the requests still in flight are expired
(the request drain) -- all on the test's clock.

The SocketServer, the handler pools, the group coordinator and the stop
deadline are recording stand-ins (the order of their calls is the point);
the ReplicaManager, its fetch purgatory and a long-polling Fetch are the
real ones of the single-node harness.
"""

from __future__ import annotations

import pytest
from twisted.internet.defer import Deferred, ensureDeferred, maybeDeferred, succeed
from twisted.logger import globalLogPublisher

from twisted_kafka.config import KafkaConfig
from twisted_kafka.controller.client import NoControllerClient
from twisted_kafka.protocol import messages as m
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.server.broker_epoch import BrokerEpoch
from twisted_kafka.server.broker_lifecycle import (
    DRAIN_TIMEOUT_SECONDS,
    STOP_GRACE_SECONDS,
    BrokerLifecycleManager,
    RequestDrain,
)

from .helpers import decode, result_of


class RecordingSocketServer:
    def __init__(self, calls: list):
        self.calls = calls
        self.accepting_stopped: Deferred = succeed(None)
        self.drain: Deferred = Deferred()
        self.inflight = 3

    def enable_request_processing(self, plane=None):
        self.calls.append(f"enable {plane}")

    def stop_accepting(self):
        self.calls.append("stop accepting")
        return self.accepting_stopped

    def stop_processing_requests(self, planes=None):
        # The data plane only: the control plane serves the controller until the connections close.
        self.calls.append("stop processing" if planes == ["data"] else f"stop processing {planes}")

    def drained(self):
        self.calls.append("wait for drain")
        return self.drain

    def inflight_count(self):
        return self.inflight


class RecordingPool:
    def __init__(self, calls: list, server: RecordingSocketServer):
        self.calls = calls
        self.server = server
        self.answers_all = True

    def expire_in_flight(self, error, why):
        self.calls.append(f"expire {error.name} {why}")
        if self.answers_all:
            self.server.inflight = 0
        return []


class RecordingCoordinator:
    def __init__(self, calls: list):
        self.calls = calls

    def shutdown(self):
        self.calls.append("group coordinator shutdown")


class RecordingDeadline:
    def __init__(self, calls: list):
        self.calls = calls

    def arm(self, seconds, phase):
        self.calls.append(f"deadline {seconds:g}s ({phase})")


class ShutdownController(NoControllerClient):
    """Answers ControlledShutdown with the next of ``answers`` (a list of partitions, or an exception)."""

    def __init__(self, calls: list, answers):
        self.calls = calls
        self.answers = list(answers)

    async def controlled_shutdown(self, broker_id, broker_epoch):
        self.calls.append(f"controlled shutdown {broker_id}/{broker_epoch}")
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, Deferred):          # a controller that never answers
            return await answer
        return answer


@pytest.fixture
def logged():
    events = []
    globalLogPublisher.addObserver(events.append)
    yield events
    globalLogPublisher.removeObserver(events.append)


class BrokerEnd:
    """The last three of the broker's children, in its order: started one after another, stopped in
    reverse, each once the one after it has stopped (as ``KafkaServer`` does)."""

    def __init__(self, drain: RequestDrain, replica_manager, lifecycle: BrokerLifecycleManager):
        self.drain = drain
        self.lifecycle = lifecycle
        self.services = [drain, replica_manager, lifecycle]

    @property
    def running(self) -> bool:
        return self.lifecycle.running

    @property
    def handler_pools(self):
        return self.drain.handler_pools

    def controlled_shutdown_bound(self) -> float:
        return self.lifecycle.controlled_shutdown_bound()

    def startService(self) -> None:
        for service in self.services:
            service.startService()

    def stopService(self) -> Deferred:
        return ensureDeferred(self._stop())

    async def _stop(self) -> None:
        for service in reversed(self.services):
            await maybeDeferred(service.stopService)


def lifecycle(node, answers=((),), *, collaborators=False, **props):
    """``collaborators``: with recording handler pools, group coordinator and stop deadline."""
    calls: list[str] = []
    config = KafkaConfig.from_props({"controlled.shutdown.retry.backoff.ms": "5000", **props})
    server = RecordingSocketServer(calls)
    controller = ShutdownController(calls, answers)
    deadline = drain_extra = None
    if collaborators:
        deadline = RecordingDeadline(calls)
        drain_extra = dict(handler_pools=[RecordingPool(calls, server), RecordingPool(calls, server)],
                           coordinators=[RecordingCoordinator(calls)])
    manager = BrokerLifecycleManager(config=config, broker_id=0, broker_epoch=BrokerEpoch(7), socket_server=server,
                                     controller=controller, reactor=node.reactor, stop_deadline=deadline)
    drain = RequestDrain(socket_server=server, reactor=node.reactor, **(drain_extra or {}))
    return BrokerEnd(drain, node.replica_manager, manager), server, calls


def timers(node):
    """The delayed calls that are not the log manager's periodic tasks."""
    return [c for c in node.reactor.getDelayedCalls() if "LogManager" not in repr(c.func)]


def waiting_fetch(node, calls):
    F = m.FetchRequest
    node.create_topic("t")
    request, pending = node.pending(F(replica_id=-1, max_wait_ms=60_000, min_bytes=1, topics=[F.FetchTopic(
        topic="t", partitions=[F.FetchTopic.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1024)])]),
        12)
    pending.addCallback(lambda response: calls.append("fetch answered") or response)
    return request, pending


def test_starting_enables_the_data_plane(node):
    manager, _, calls = lifecycle(node)
    manager.startService()
    assert calls == ["enable data"] and manager.running


def test_stopping_goes_in_kafka_s_order_and_waits_for_the_drain_without_polling(node):
    manager, server, calls = lifecycle(node)
    request, fetch = waiting_fetch(node, calls)
    manager.startService()
    calls.clear()
    before = timers(node)
    stopped = manager.stopService()
    assert calls == ["controlled shutdown 0/7", "stop accepting", "stop processing", "fetch answered",
                     "wait for drain"]
    assert not manager.running and not stopped.called
    # waiting costs one timer (the drain timeout), nothing that wakes up to look
    [timer] = [c for c in timers(node) if c not in before]
    assert timer.getTime() == pytest.approx(node.reactor.seconds() + DRAIN_TIMEOUT_SECONDS)
    assert decode(request, result_of(fetch)).responses[0].partitions[0].error_code == ErrorCode.NONE
    node.reactor.advance(DRAIN_TIMEOUT_SECONDS / 2)
    assert not stopped.called
    server.drain.callback(None)
    assert stopped.called and stopped.result is None
    assert not timer.active()


def test_the_drain_is_bounded_by_its_timeout(node, logged):
    manager, server, calls = lifecycle(node)
    manager.startService()
    stopped = manager.stopService()
    node.reactor.advance(DRAIN_TIMEOUT_SECONDS - 0.001)
    assert not stopped.called
    node.reactor.advance(0.001)
    assert stopped.called
    [warning] = [e for e in logged if e.get("log_format", "").startswith("{count} request(s) still in flight")]
    assert (warning["count"], warning["timeout"]) == (3, DRAIN_TIMEOUT_SECONDS)
    server.drain.callback(None)                       # a late drain changes nothing


def test_the_drain_starts_with_the_deadline_rearmed_and_every_wait_answered(node):
    manager, server, calls = lifecycle(node, collaborators=True)
    request, fetch = waiting_fetch(node, calls)
    manager.startService()
    calls.clear()
    manager.stopService()
    assert calls == ["controlled shutdown 0/7", f"deadline {DRAIN_TIMEOUT_SECONDS + STOP_GRACE_SECONDS:g}s "
                     "(draining requests)", "stop accepting", "stop processing", "fetch answered",
                     "group coordinator shutdown", "wait for drain"]


def test_at_the_drain_timeout_requests_still_in_flight_are_expired(node, logged):
    manager, server, calls = lifecycle(node, collaborators=True)
    manager.startService()
    stopped = manager.stopService()
    calls.clear()
    node.reactor.advance(DRAIN_TIMEOUT_SECONDS - 0.001)
    assert calls == [] and not stopped.called
    node.reactor.advance(0.001)
    assert calls == [f"expire REQUEST_TIMED_OUT after the {DRAIN_TIMEOUT_SECONDS:g}s drain"] * 2
    assert stopped.called
    [warning] = [e for e in logged if e.get("log_format", "").startswith("{count} request(s) still in flight")]
    assert warning["count"] == 3
    assert not [e for e in logged if "never handled" in e.get("log_format", "")]


def test_a_request_read_but_never_handled_is_reported_too(node, logged):
    manager, server, calls = lifecycle(node, collaborators=True)
    for pool in manager.handler_pools:
        pool.answers_all = False                      # queued requests no handler took
    manager.startService()
    stopped = manager.stopService()
    node.reactor.advance(DRAIN_TIMEOUT_SECONDS)
    assert stopped.called
    [line] = [e for e in logged if "never handled" in e.get("log_format", "")]
    assert line["count"] == 3


def test_an_unanswered_controlled_shutdown_attempt_ends_at_controller_socket_timeout_ms(node, logged):
    silent = Deferred()
    manager, server, calls = lifecycle(node, answers=[silent, []], **{"controlled.shutdown.max.retries": "3",
                                                                      "controller.socket.timeout.ms": "2000"})
    manager.startService()
    calls.clear()
    manager.stopService()
    node.reactor.advance(1.999)
    assert calls == ["controlled shutdown 0/7"]
    node.reactor.advance(0.001)                       # the attempt times out; the backoff begins
    node.reactor.advance(5)
    assert calls == ["controlled shutdown 0/7"] * 2 + ["stop accepting", "stop processing", "wait for drain"]
    assert [e for e in logged if "got no answer" in e.get("log_format", "")]
    silent.callback([])                               # a late answer changes nothing


def test_the_controlled_shutdown_bound_counts_every_attempt_and_backoff(node):
    manager, _, _ = lifecycle(node, **{"controlled.shutdown.max.retries": "3", "controller.socket.timeout.ms": "2000"})
    assert manager.controlled_shutdown_bound() == 3 * (2 + 5)
    manager, _, _ = lifecycle(node, **{"controlled.shutdown.enable": "false"})
    assert manager.controlled_shutdown_bound() == 0


def test_stop_accepting_completes_before_requests_stop_being_read(node):
    manager, server, calls = lifecycle(node)
    server.accepting_stopped = Deferred()
    manager.startService()
    calls.clear()
    manager.stopService()
    assert calls == ["controlled shutdown 0/7", "stop accepting"]
    server.accepting_stopped.callback(None)
    assert calls[2:] == ["stop processing", "wait for drain"]


def test_controlled_shutdown_is_retried_after_its_backoff(node):
    manager, server, calls = lifecycle(node, answers=[[("t", 0)], [("t", 0)], []],
                                       **{"controlled.shutdown.max.retries": "3"})
    manager.startService()
    calls.clear()
    manager.stopService()
    assert calls == ["controlled shutdown 0/7"]
    node.reactor.advance(4.999)
    assert calls == ["controlled shutdown 0/7"]
    node.reactor.advance(0.001)
    assert calls == ["controlled shutdown 0/7"] * 2
    node.reactor.advance(5)
    assert calls == ["controlled shutdown 0/7"] * 3 + ["stop accepting", "stop processing", "wait for drain"]


def test_after_the_last_retry_the_broker_stops_anyway(node):
    manager, _, calls = lifecycle(node, answers=[[("t", 0)]] * 2, **{"controlled.shutdown.max.retries": "2"})
    manager.startService()
    calls.clear()
    manager.stopService()
    node.reactor.advance(5)
    assert calls == ["controlled shutdown 0/7"] * 2
    node.reactor.advance(5)                           # Kafka backs off after the last attempt too
    assert calls == ["controlled shutdown 0/7"] * 2 + ["stop accepting", "stop processing", "wait for drain"]


@pytest.mark.parametrize("failure", [KafkaError(ErrorCode.NOT_CONTROLLER, "gone"), ConnectionError("refused")])
def test_a_failed_controlled_shutdown_is_not_retried(node, failure):
    manager, _, calls = lifecycle(node, answers=[failure], **{"controlled.shutdown.max.retries": "3"})
    manager.startService()
    calls.clear()
    manager.stopService()
    assert calls == ["controlled shutdown 0/7", "stop accepting", "stop processing", "wait for drain"]


def test_controlled_shutdown_can_be_disabled(node):
    manager, _, calls = lifecycle(node, answers=[], **{"controlled.shutdown.enable": "false"})
    manager.startService()
    calls.clear()
    manager.stopService()
    assert calls == ["stop accepting", "stop processing", "wait for drain"]


def test_the_single_node_controller_lets_its_broker_stop(node):
    """Through the real LocalControllerClient: a single replica cannot move, so nothing remains."""
    calls: list[str] = []
    server = RecordingSocketServer(calls)
    node.create_topic("t", 2)
    manager = BrokerEnd(RequestDrain(socket_server=server, reactor=node.reactor), node.replica_manager,
                        BrokerLifecycleManager(config=node.config, broker_id=0, broker_epoch=BrokerEpoch(1),
                                               socket_server=server, controller=node.controller_client,
                                               reactor=node.reactor))
    manager.startService()
    stopped = manager.stopService()
    assert calls == ["enable data", "stop accepting", "stop processing", "wait for drain"]
    server.drain.callback(None)
    assert stopped.called

"""The broker's lifecycle at its ends: ``BrokerLifecycleManager`` (the last child service) and
``RequestDrain`` (two before it, with the ``ReplicaManager`` between them).

Starting the lifecycle manager is the end of Kafka's broker startup --
``enableRequestProcessing``: the data plane starts accepting clients, once
the logs are recovered, the handlers run, the control plane is up and the
controller has told this broker which partitions it hosts.  So the first
byte a client sends finds a broker ready to answer.

Stopping is the beginning of Kafka's shutdown.  The broker's children stop
in reverse order, each once the one after it has stopped, so it runs:

1. ``BrokerLifecycleManager`` -- controlled shutdown: ask the controller to
   move leadership elsewhere (``controlled.shutdown.enable``, retried
   ``controlled.shutdown.max.retries`` times
   ``controlled.shutdown.retry.backoff.ms`` apart, each attempt given
   ``controller.socket.timeout.ms`` to be answered); then the stop's
   last-resort bound is re-armed for the drain (``StopDeadline``: from here
   the process exits within the drain timeout plus ``STOP_GRACE_SECONDS``
   whatever a later step does), every listener stops accepting, and the
   data plane stops reading requests -- the control plane goes on serving
   the controller until the connections close: an admin request in flight
   (AlterConfigs, CreateTopics, ACLs) waits for the controller's
   UpdateMetadata to reach this very broker;
2. ``ReplicaManager`` -- the replica fetchers and the ISR checks stop, and
   its purgatories shut: fetches waiting for data and acks=all produces
   waiting for replicas are answered now (``twisted_kafka.purgatory``);
3. ``RequestDrain`` -- the coordinators answer their waiting members (the
   group coordinator stops, as when its partitions' leadership moves away:
   JoinGroup and SyncGroup waiters get NOT_COORDINATOR), then it waits --
   without polling, at most ``DRAIN_TIMEOUT_SECONDS`` -- until every
   request already read has been answered.  A request still pending then
   (waiting on a timeout a client chose, a controller round trip, ...) is
   answered REQUEST_TIMED_OUT, and named in the log, one line each
   (``KafkaRequestHandlerPool.expire_in_flight``): nothing a client sent
   keeps the broker from stopping.

The rest (the connection events, the controller, connections, handlers,
logs) stops in the reverse of the order it started.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from twisted.application.service import Service
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import deferLater
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.controller.client import ControllerClient
from twisted_kafka.network.socket_server import SocketServer
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.waiting import fired_within

from .broker_epoch import BrokerEpoch

if TYPE_CHECKING:
    from .request_handler import KafkaRequestHandlerPool
    from .stop_deadline import StopDeadline

DRAIN_TIMEOUT_SECONDS = 30.0
#: What the broker's stop may take beyond the drain (the controller, the connections closed, the
#: logs flushed and checkpointed) before the last-resort bound ends the process.
STOP_GRACE_SECONDS = 10.0


class Coordinator(Protocol):
    """A coordinator whose members may wait for each other (the group coordinator; the transaction
    coordinator's waits will be next): ``shutdown`` answers every waiting member and stops it."""

    def shutdown(self) -> None: ...


class BrokerLifecycleManager(Service):
    name = "broker-lifecycle"
    log = Logger(namespace="twisted_kafka.server.BrokerLifecycleManager")

    def __init__(self, *, config, broker_id: int, broker_epoch: BrokerEpoch, socket_server: SocketServer,
                 controller: ControllerClient, reactor, stop_deadline: StopDeadline | None = None):
        self.config = config
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.socket_server = socket_server
        self.controller = controller
        self.reactor = reactor
        self.stop_deadline = stop_deadline

    def startService(self) -> None:
        super().startService()
        self.socket_server.enable_request_processing("data")

    def stopService(self) -> Deferred:
        super().stopService()
        return ensureDeferred(self._shutdown())

    def controlled_shutdown_bound(self) -> float:
        """The longest the controlled shutdown may take: every attempt unanswered, and its backoff."""
        if not self.config["controlled.shutdown.enable"]:
            return 0.0
        attempt = self.config["controller.socket.timeout.ms"] / 1000.0
        backoff = self.config["controlled.shutdown.retry.backoff.ms"] / 1000.0
        return self.config["controlled.shutdown.max.retries"] * (attempt + backoff)

    async def _shutdown(self) -> None:
        await self._controlled_shutdown()
        if self.stop_deadline is not None:
            self.stop_deadline.arm(DRAIN_TIMEOUT_SECONDS + STOP_GRACE_SECONDS, "draining requests")
        await self.socket_server.stop_accepting()
        self.socket_server.stop_processing_requests(["data"])

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away (Kafka's controlled shutdown)."""
        if not self.config["controlled.shutdown.enable"]:
            return
        attempt_timeout = self.config["controller.socket.timeout.ms"] / 1000.0
        backoff = self.config["controlled.shutdown.retry.backoff.ms"] / 1000.0
        for _ in range(self.config["controlled.shutdown.max.retries"]):
            asked = ensureDeferred(self.controller.controlled_shutdown(self.broker_id, self.broker_epoch.current))
            outcome: list = []             # the answer or its Failure, once it comes
            asked.addBoth(outcome.append)
            await fired_within(self.reactor, asked, attempt_timeout)
            if not outcome:
                self.log.warn("Controlled shutdown got no answer within {timeout}s (controller.socket.timeout.ms);"
                              " retrying", timeout=attempt_timeout)
                await deferLater(self.reactor, backoff, lambda: None)
                continue
            (remaining,) = outcome
            if isinstance(remaining, Failure):
                if remaining.check(KafkaError):
                    self.log.warn("Controlled shutdown refused: {error}", error=remaining.value)
                else:
                    self.log.warn("Controlled shutdown request failed: {error}", error=remaining.value)
                return
            if not remaining:
                self.log.info("Controlled shutdown succeeded")
                return
            self.log.warn("Controlled shutdown incomplete ({count} partition(s) remain led here); retrying",
                          count=len(remaining))
            await deferLater(self.reactor, backoff, lambda: None)


class RequestDrain(Service):
    """The end of the drain (step 3 of the module docstring): nothing to do at start."""

    name = "request-drain"
    log = Logger(namespace="twisted_kafka.server.RequestDrain")

    def __init__(self, *, socket_server: SocketServer, reactor,
                 handler_pools: Sequence[KafkaRequestHandlerPool] = (), coordinators: Sequence[Coordinator] = ()):
        self.socket_server = socket_server
        self.reactor = reactor
        self.handler_pools = list(handler_pools)
        self.coordinators = list(coordinators)

    def stopService(self) -> Deferred:
        super().stopService()
        return ensureDeferred(self._drain())

    async def _drain(self) -> None:
        for coordinator in self.coordinators:
            coordinator.shutdown()
        if await fired_within(self.reactor, self.socket_server.drained(), DRAIN_TIMEOUT_SECONDS):
            return
        self.log.warn("{count} request(s) still in flight after {timeout}s; answering them REQUEST_TIMED_OUT",
                      count=self.socket_server.inflight_count(), timeout=DRAIN_TIMEOUT_SECONDS)
        for pool in self.handler_pools:
            pool.expire_in_flight(ErrorCode.REQUEST_TIMED_OUT, f"after the {DRAIN_TIMEOUT_SECONDS:g}s drain")
        left = self.socket_server.inflight_count()
        if left:
            self.log.warn("{count} request(s) read but never handled; closing anyway", count=left)


__all__ = ["BrokerLifecycleManager", "RequestDrain", "Coordinator", "DRAIN_TIMEOUT_SECONDS", "STOP_GRACE_SECONDS"]

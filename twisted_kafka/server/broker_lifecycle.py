"""BrokerLifecycleManager: the last child to start and the first to stop.

Starting it is the end of Kafka's broker startup -- ``enableRequestProcessing``:
the data plane starts accepting clients, once the logs are recovered, the
handlers run, the control plane is up and the controller has told this
broker which partitions it hosts.  So the first byte a client sends finds a
broker ready to answer.

Stopping it is the beginning of Kafka's shutdown, in order:

1. controlled shutdown -- ask the controller to move leadership elsewhere
   (``controlled.shutdown.enable``, retried ``controlled.shutdown.max.retries``
   times ``controlled.shutdown.retry.backoff.ms`` apart, each attempt given
   ``controller.socket.timeout.ms`` to be answered);
2. stop accepting connections on every listener;
3. stop reading requests on the data plane -- the control plane goes on
   serving the controller until the connections close: an admin request in
   flight (AlterConfigs, CreateTopics, ACLs) waits for the controller's
   UpdateMetadata to reach this very broker --, stop the replica fetchers,
   and answer now what waits for something that can no longer come: fetches waiting for data,
   acks=all produces waiting for replicas, members waiting in JoinGroup for
   the rest of their group or in SyncGroup for their leader's assignment
   (NOT_COORDINATOR: the group coordinator stops, as when its partition's
   leadership moves away);
4. wait -- without polling, at most ``DRAIN_TIMEOUT_SECONDS`` -- until every
   request already read has been answered.  A request still pending then
   (waiting on a timeout a client chose, a controller round trip, ...) is
   answered REQUEST_TIMED_OUT, and named in the log, one line each
   (``KafkaRequestHandlerPool.expire_in_flight``): nothing a client sent
   keeps the broker from stopping.

The drain begins with the shutdown's last-resort bound re-armed
(``StopDeadline``): from there, the process exits within the drain timeout
plus ``STOP_GRACE_SECONDS`` whatever a later step does.

The rest (controller, connections, handlers, logs) stops in the reverse of
the order it started.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from twisted.application.service import Service
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import deferLater
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.controller.client import ControllerClient
from twisted_kafka.network.socket_server import SocketServer
from twisted_kafka.protocol.errors import ErrorCode, KafkaError
from twisted_kafka.waiting import fired_within

from .replica_manager import ReplicaManager

if TYPE_CHECKING:
    from twisted_kafka.coordinator.group.coordinator import GroupCoordinator

    from .request_handler import KafkaRequestHandlerPool
    from .stop_deadline import StopDeadline

DRAIN_TIMEOUT_SECONDS = 30.0
#: What the broker's stop may take beyond the drain (the controller, the connections closed, the
#: logs flushed and checkpointed) before the last-resort bound ends the process.
STOP_GRACE_SECONDS = 10.0


class BrokerLifecycleManager(Service):
    name = "broker-lifecycle"
    log = Logger(namespace="twisted_kafka.server.BrokerLifecycleManager")

    def __init__(self, *, config, broker_id: int, broker_epoch: int, socket_server: SocketServer,
                 replica_manager: ReplicaManager, controller: ControllerClient, reactor,
                 handler_pools: Sequence[KafkaRequestHandlerPool] = (),
                 group_coordinator: GroupCoordinator | None = None, stop_deadline: StopDeadline | None = None):
        self.config = config
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.socket_server = socket_server
        self.replica_manager = replica_manager
        self.controller = controller
        self.reactor = reactor
        self.handler_pools = list(handler_pools)
        self.group_coordinator = group_coordinator
        self.stop_deadline = stop_deadline

    def startService(self) -> None:
        super().startService()
        if self.replica_manager.isr_manager is not None:
            self.replica_manager.isr_manager.start()
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
        self.replica_manager.shutdown()
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()
        if await fired_within(self.reactor, self.socket_server.drained(), DRAIN_TIMEOUT_SECONDS):
            return
        self.log.warn("{count} request(s) still in flight after {timeout}s; answering them REQUEST_TIMED_OUT",
                      count=self.socket_server.inflight_count(), timeout=DRAIN_TIMEOUT_SECONDS)
        for pool in self.handler_pools:
            pool.expire_in_flight(ErrorCode.REQUEST_TIMED_OUT, f"after the {DRAIN_TIMEOUT_SECONDS:g}s drain")
        left = self.socket_server.inflight_count()
        if left:
            self.log.warn("{count} request(s) read but never handled; closing anyway", count=left)

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away (Kafka's controlled shutdown)."""
        if not self.config["controlled.shutdown.enable"]:
            return
        attempt_timeout = self.config["controller.socket.timeout.ms"] / 1000.0
        backoff = self.config["controlled.shutdown.retry.backoff.ms"] / 1000.0
        for _ in range(self.config["controlled.shutdown.max.retries"]):
            asked = ensureDeferred(self.controller.controlled_shutdown(self.broker_id, self.broker_epoch))
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


__all__ = ["BrokerLifecycleManager", "DRAIN_TIMEOUT_SECONDS", "STOP_GRACE_SECONDS"]

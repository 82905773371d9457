"""BrokerLifecycleManager: the last child to start and the first to stop.

Starting it is the end of Kafka's broker startup -- ``enableRequestProcessing``:
the data plane starts accepting clients, once the logs are recovered, the
handlers run, the control plane is up and the controller has told this
broker which partitions it hosts.  So the first byte a client sends finds a
broker ready to answer.

Stopping it is the beginning of Kafka's shutdown, in order:

1. controlled shutdown -- ask the controller to move leadership elsewhere
   (``controlled.shutdown.enable``, retried ``controlled.shutdown.max.retries``
   times ``controlled.shutdown.retry.backoff.ms`` apart);
2. stop accepting connections on every listener;
3. stop reading requests, stop the replica fetchers, answer waiting
   fetches and acks=all produces now, and wait -- without
   polling, at most ``DRAIN_TIMEOUT_SECONDS`` -- until every request already
   read has been answered.

The rest (controller, connections, handlers, logs) stops in the reverse of
the order it started.
"""

from __future__ import annotations

from twisted.application.service import Service
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.internet.task import deferLater
from twisted.logger import Logger

from twisted_kafka.controller.client import ControllerClient
from twisted_kafka.network.socket_server import SocketServer
from twisted_kafka.protocol.errors import KafkaError
from twisted_kafka.waiting import fired_within

from .replica_manager import ReplicaManager

DRAIN_TIMEOUT_SECONDS = 30.0


class BrokerLifecycleManager(Service):
    name = "broker-lifecycle"
    log = Logger(namespace="twisted_kafka.server.BrokerLifecycleManager")

    def __init__(self, *, config, broker_id: int, broker_epoch: int, socket_server: SocketServer,
                 replica_manager: ReplicaManager, controller: ControllerClient, reactor):
        self.config = config
        self.broker_id = broker_id
        self.broker_epoch = broker_epoch
        self.socket_server = socket_server
        self.replica_manager = replica_manager
        self.controller = controller
        self.reactor = reactor

    def startService(self) -> None:
        super().startService()
        if self.replica_manager.isr_manager is not None:
            self.replica_manager.isr_manager.start()
        self.socket_server.enable_request_processing("data")

    def stopService(self) -> Deferred:
        super().stopService()
        return ensureDeferred(self._shutdown())

    async def _shutdown(self) -> None:
        await self._controlled_shutdown()
        await self.socket_server.stop_accepting()
        self.socket_server.stop_processing_requests()
        self.replica_manager.shutdown()
        if not await fired_within(self.reactor, self.socket_server.drained(), DRAIN_TIMEOUT_SECONDS):
            self.log.warn("{count} request(s) still in flight after {timeout}s; closing anyway",
                          count=self.socket_server.inflight_count(), timeout=DRAIN_TIMEOUT_SECONDS)

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away (Kafka's controlled shutdown)."""
        if not self.config["controlled.shutdown.enable"]:
            return
        for _ in range(self.config["controlled.shutdown.max.retries"]):
            try:
                remaining = await self.controller.controlled_shutdown(self.broker_id, self.broker_epoch)
            except KafkaError as exc:
                self.log.warn("Controlled shutdown refused: {error}", error=exc)
                return
            except Exception as exc:
                self.log.warn("Controlled shutdown request failed: {error}", error=exc)
                return
            if not remaining:
                self.log.info("Controlled shutdown succeeded")
                return
            self.log.warn("Controlled shutdown incomplete ({count} partition(s) remain led here); retrying",
                          count=len(remaining))
            await deferLater(self.reactor, self.config["controlled.shutdown.retry.backoff.ms"] / 1000.0,
                             lambda: None)


__all__ = ["BrokerLifecycleManager", "DRAIN_TIMEOUT_SECONDS"]

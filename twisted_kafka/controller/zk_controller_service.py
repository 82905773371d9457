"""ZkControllerService: in a ZooKeeper cluster, every broker competes to be the controller.

Kafka's ZooKeeper-mode election: the ephemeral ``/controller`` znode names
the active controller.  Each broker watches it; when it is absent, the
broker tries to claim it (``KafkaController.startup`` -> the store's
``increment_controller_epoch``: ``/controller`` created and
``/controller_epoch`` bumped in one transaction).  The winner becomes
active: it loads the state from ZooKeeper and tells every live broker
everything over its control plane; the others learn the controller's id
from the watch (the only sender whose controller requests they accept) and
reach it through their ``ClusterControllerClient``.

While active, the controller's watches turn ZooKeeper changes into
controller events (Kafka's ZNodeChildChangeHandlers):

* ``/brokers/ids`` children -> ``brokers_changed`` (with each registration
  and its epoch);
* ``/brokers/topics`` children -> ``topics_changed``, and each
  ``/brokers/topics/<t>`` -> ``topic_changed`` (new partitions);
* ``/admin/delete_topics`` children -> ``deletions_requested``;
* ``/config/changes`` children -> ``config_changed`` for each new
  notification (older than 15 minutes ones are removed, as Kafka does);
* ``/kafka-acl-changes`` and ``/kafka-acl-extended-changes`` children ->
  ``acls_changed`` (ACLs written to ZooKeeper by another tool).

Each watch delivers the current value, and a burst of changes is handled as
one (a change arriving while one is being handled runs once more after it),
so nothing is missed and nothing is handled from a stale read.

The controller resigns when its session expires (its ``/controller`` went
with it), when ``/controller`` names another broker, or when a write finds
the controller epoch moved on; it then goes back to watching.  Stopping the
service (the broker shuts down) resigns and deletes ``/controller`` if it is
still this session's, so another broker takes over at once.

``startService`` returns once this broker has its metadata from a
controller -- its own or another's -- so the data plane opens on a broker
that knows its partitions (bounded by ``READY_TIMEOUT_SECONDS``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from functools import partial

from twisted.application.service import Service
from twisted.internet.defer import Deferred, ensureDeferred
from twisted.logger import Logger
from twisted.python.failure import Failure

from twisted_kafka.config import StartupError
from twisted_kafka.network.listeners import EndPoint
from twisted_kafka.zk import data as z
from twisted_kafka.zk.client import LOST, NoNodeError, Watch, ZkClient
from twisted_kafka.zk.registration import read_brokers

from .channel_manager import ControllerChannelManager
from .client import LocalControllerClient
from .interface import LiveBroker
from .kafka_controller import KafkaController
from .metadata_store import ControllerMovedError
from .metrics import register_controller_metrics
from .zk_metadata_store import ZkMetadataStore

#: How long startup waits for a controller to tell this broker its metadata before opening anyway.
READY_TIMEOUT_SECONDS = 60.0


class Coalesced:
    """Runs ``fn`` for each trigger, but never twice at once: triggers while it runs make one more run."""

    def __init__(self, fn: Callable[[], Awaitable[None]], log: Logger, what: str):
        self._fn = fn
        self._log = log
        self._what = what
        self._running = False
        self._again = False
        self.stopped = False

    def trigger(self, *_ignored) -> None:
        if self.stopped:
            return
        if self._running:
            self._again = True
            return
        ensureDeferred(self._loop())

    async def _loop(self) -> None:
        self._running = True
        try:
            while not self.stopped:
                self._again = False
                try:
                    await self._fn()
                except Exception:
                    if not self.stopped:
                        self._log.failure("Handling {what} failed", Failure(), what=self._what)
                if not self._again:
                    break
        finally:
            self._running = False


class ZkControllerService(Service):
    name = "controller"
    log = Logger(namespace="twisted_kafka.controller.ZkControllerService")

    def __init__(self, *, config, broker_id: int, cluster_id: str, zk: ZkClient, reactor,
                 ready: Callable[[float], Deferred], on_fatal: Callable[[Failure], None]):
        """``ready(timeout)`` fires once this broker has its metadata from a controller;
        ``on_fatal`` stops the broker (this broker's controller found its own control plane unusable)."""
        self.config = config
        self.broker_id = broker_id
        self.zk = zk
        self.reactor = reactor
        self._ready = ready
        self._on_fatal = on_fatal
        self.store = ZkMetadataStore(zk, broker_id=broker_id)
        self.controller = KafkaController(
            config=config, broker_id=broker_id, cluster_id=cluster_id, store=self.store,
            channels=ControllerChannelManager(reactor=reactor, controller_id=broker_id,
                                              timeout_ms=config["controller.socket.timeout.ms"], config=config))
        self.controller.on_resign = self._resigned
        # The brokers replicate: leaders keep their ISR with AlterPartition.
        self.controller.isr_follows_liveness = False
        self.local = LocalControllerClient(self.controller)
        #: ``/controller`` as last seen: the active controller's broker id, or None.
        self.controller_id: int | None = None
        self._controller_watch: Watch | None = None
        self._watches: list[Watch] = []
        self._topic_watches: dict[str, Watch] = {}
        self._events: list[Coalesced] = []
        self._electing = False
        self._last_change = -1
        control = config["control.plane.listener.name"] or config["inter.broker.listener.name"] \
            or config["security.inter.broker.protocol"]
        self.control_listener: str = control

    # -- the service ------------------------------------------------------------------------

    def register_metrics(self, metrics) -> None:
        """Kafka's ``kafka.controller:type=KafkaController`` gauges (``controller/metrics.py``)."""
        register_controller_metrics(metrics, self.controller)


    def startService(self) -> Deferred:
        super().startService()
        self.zk.add_session_listener(self._session_changed)
        self._controller_watch = self.zk.watch_data(z.CONTROLLER, self._controller_changed)
        d = self._ready(READY_TIMEOUT_SECONDS)
        d.addCallback(self._is_ready)
        return d

    def _is_ready(self, ready: bool) -> None:
        if not ready:
            self.log.warn("No controller told broker {broker_id} its metadata within {timeout} s; opening anyway",
                          broker_id=self.broker_id, timeout=READY_TIMEOUT_SECONDS)

    def stopService(self) -> Deferred:
        super().stopService()
        self.zk.remove_session_listener(self._session_changed)
        if self._controller_watch is not None:
            self._controller_watch.stop()
        was_active = self.controller.active
        self._resign("the broker is shutting down")
        return ensureDeferred(self._release_controllership() if was_active else _nothing())

    async def _release_controllership(self) -> None:
        """Delete ``/controller`` if it is this session's, so the next controller needs no session timeout."""
        with contextlib.suppress(Exception):
            stat = await self.zk.exists(z.CONTROLLER)
            if stat is not None and stat.ephemeralOwner == self.zk.session_id:
                with contextlib.suppress(NoNodeError):
                    await self.zk.delete(z.CONTROLLER, stat.version)

    # -- the election ---------------------------------------------------------------------------

    def _controller_changed(self, data: bytes | None, stat) -> None:
        try:
            controller = z.decode_controller(data)
        except (ValueError, KeyError):
            controller = None
        self.controller_id = controller
        if controller is None:
            if self.running and not self._electing:
                ensureDeferred(self._elect())
        elif controller != self.broker_id and self.controller.active:
            self._resign(f"/controller names broker {controller}")

    async def _elect(self) -> None:
        self._electing = True
        try:
            await self.controller.startup(self._live_brokers)
        except ControllerMovedError:
            self.log.debug("Broker {broker_id} lost the controller election", broker_id=self.broker_id)
            return
        except StartupError:
            self._resign("its own broker refused it")
            self._on_fatal(Failure())
            return
        except Exception:
            self.log.failure("Broker {broker_id} could not become the controller", broker_id=self.broker_id)
            self._resign("its startup failed")
            await self._release_controllership()
            return
        finally:
            self._electing = False
        self.controller_id = self.broker_id
        self.log.info("Broker {broker_id} is the controller (epoch {epoch})", broker_id=self.broker_id,
                      epoch=self.controller.epoch)
        await self._start_watches()

    async def _live_brokers(self) -> list[LiveBroker]:
        return [self._live_broker(info) for info in (await read_brokers(self.zk)).values()]

    def _live_broker(self, info: z.BrokerInfo) -> LiveBroker:
        endpoints = tuple(EndPoint(e.listener_name, e.host, e.port, e.security_protocol) for e in info.endpoints)
        names = [e.listener_name for e in endpoints]
        control = self.control_listener if self.control_listener in names else (
            self.config["inter.broker.listener.name"] if self.config["inter.broker.listener.name"] in names
            else names[0])
        return LiveBroker(broker_id=info.broker_id, epoch=info.epoch, endpoints=endpoints, control_listener=control,
                          rack=info.rack)

    def _session_changed(self, state) -> None:
        if state == LOST and self.controller.active:
            self._resign("its ZooKeeper session expired")

    def _resigned(self) -> None:
        """The controller found the epoch moved on (another controller is active)."""
        self._stop_watches()
        self.log.warn("Broker {broker_id} resigned as controller", broker_id=self.broker_id)

    def _resign(self, reason: str) -> None:
        self._stop_watches()
        if self.controller.active:
            self.log.info("Broker {broker_id} resigns as controller: {reason}", broker_id=self.broker_id,
                          reason=reason)
            self.controller.shutdown()

    # -- the controller's watches ---------------------------------------------------------------

    async def _start_watches(self) -> None:
        zk = self.zk
        changes = await zk.children_or_empty(z.CONFIG_CHANGES)
        self._last_change = max((z.config_change_sequence(c) for c in changes
                                 if c.startswith(z.CONFIG_CHANGE_PREFIX)), default=-1)
        with contextlib.suppress(Exception):
            await self.store.purge_change_notifications()
        brokers = self._event(self._brokers_changed, "a broker change")
        topics = self._event(self._topics_changed, "a topic change")
        deletions = self._event(self.controller.deletions_requested, "a topic deletion request")
        configs = self._event(self._config_changes, "a config change notification")
        acls = self._event(self._acls_changed, "an ACL change notification")
        self._watches = [zk.watch_children(z.BROKER_IDS, brokers.trigger),
                         zk.watch_children(z.TOPICS, topics.trigger),
                         zk.watch_children(z.DELETE_TOPICS, deletions.trigger),
                         zk.watch_children(z.CONFIG_CHANGES, configs.trigger),
                         zk.watch_children(z.ACL_CHANGES, acls.trigger),
                         zk.watch_children(z.EXTENDED_ACL_CHANGES, acls.trigger)]
        self._watch_topics()

    def _event(self, fn: Callable[[], Awaitable[None]], what: str) -> Coalesced:
        event = Coalesced(fn, self.log, what)
        self._events.append(event)
        return event

    def _stop_watches(self) -> None:
        for watch in self._watches + list(self._topic_watches.values()):
            watch.stop()
        for event in self._events:
            event.stopped = True
        self._watches, self._events = [], []
        self._topic_watches.clear()

    async def _brokers_changed(self) -> None:
        if not self.controller.active:
            return
        brokers = {b.broker_id: b for b in await self._live_brokers()}
        await self.controller.brokers_changed(brokers)

    async def _topics_changed(self) -> None:
        if not self.controller.active:
            return
        await self.controller.topics_changed()
        self._watch_topics()

    def _watch_topics(self) -> None:
        """A data watch on each topic's znode (new partitions), kept in step with the controller's topics."""
        if not self.controller.active:
            return
        topics = set(self.controller.topics)
        for name in [n for n in self._topic_watches if n not in topics]:
            self._topic_watches.pop(name).stop()
        for name in sorted(topics - set(self._topic_watches)):
            event = self._event(partial(self.controller.topic_changed, name), f"a change of topic {name}")
            self._topic_watches[name] = self.zk.watch_data(z.topic_path(name), event.trigger)

    async def _acls_changed(self) -> None:
        """ACLs written to ZooKeeper by someone else (Kafka's ``kafka-acls.sh --authorizer-properties
        zookeeper.connect=...``): the controller reloads them and sends brokers the new set (it does
        nothing when the set is the one it wrote itself)."""
        if not self.controller.active:
            return
        await self.controller.acls_changed()

    async def _config_changes(self) -> None:
        if not self.controller.active:
            return
        for child in await self.zk.children_or_empty(z.CONFIG_CHANGES):
            if not child.startswith(z.CONFIG_CHANGE_PREFIX):
                continue
            sequence = z.config_change_sequence(child)
            if sequence <= self._last_change:
                continue
            data, _ = await self.zk.get_or_none(f"{z.CONFIG_CHANGES}/{child}")
            self._last_change = sequence
            if data is None:
                continue
            try:
                entity_type, entity = z.decode_config_change(data)
            except (ValueError, KeyError):
                self.log.warn("Ignoring an unreadable config change notification {name}", name=child)
                continue
            if entity_type == z.BROKER_CONFIG and entity == z.DEFAULT_ENTITY:
                entity = ""
            if entity_type in (z.TOPIC_CONFIG, z.BROKER_CONFIG):
                await self.controller.config_changed(entity_type, entity)


async def _nothing() -> None:
    return None


__all__ = ["ZkControllerService", "Coalesced", "READY_TIMEOUT_SECONDS"]

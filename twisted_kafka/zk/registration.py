"""A broker's identity and presence in ZooKeeper (Kafka's ``KafkaServer`` startup and ``KafkaZkClient``).

Before anything is built (the reactor is not running yet, so these use
kazoo's blocking calls -- ``identify``):

1. the persistent paths Kafka creates at startup (``ZkData.PersistentZkPaths``);
2. the cluster id: ``/cluster/id`` as it is, or created with a new id
   (Kafka's ``createOrGetClusterId``), so every broker of a cluster agrees;
3. a generated broker id when ``broker.id`` is -1 and none is stored: the
   version of ``/brokers/seqid`` after an unconditional write, plus
   ``reserved.broker.max.id`` (Kafka's ``generateBrokerSequenceId``).

Once the listeners are bound, ``BrokerRegistration`` (a child service)
creates the ephemeral ``/brokers/ids/<id>`` with Kafka's registration JSON
(v5: endpoints, listener map, rack); its czxid is the broker epoch
(KIP-380), handed to ``on_epoch`` before anything else happens, so the
broker knows its epoch before a controller can send it a request.  When the
session expires, the registration is gone: on the next session it is
created again, with a new epoch.  A registration left by this broker's
previous process (killed before its session ended) is waited out -- at most
the session timeout -- rather than refused as Kafka does, so a restarted
broker rejoins by itself; one that stays is another live broker with the
same id, and startup fails naming the key.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from time import monotonic

from kazoo.exceptions import NodeExistsError as _KazooNodeExists
from twisted.application.service import Service
from twisted.internet.defer import Deferred, ensureDeferred, gatherResults, succeed
from twisted.internet.task import deferLater
from twisted.logger import Logger

from twisted_kafka.config import StartupError

from . import data as z
from .client import CONNECTED, LOST, NodeExistsError, ZkClient

__all__ = ["identify", "ensure_persistent_paths", "cluster_id", "generate_broker_id", "BrokerRegistration",
           "read_brokers"]


# -- before the reactor runs (blocking) ------------------------------------------------------

def ensure_persistent_paths(kazoo) -> None:
    for path in z.PERSISTENT_PATHS:
        kazoo.ensure_path(path)


def cluster_id(kazoo, proposed: str) -> str:
    """``/cluster/id``'s id, created with ``proposed`` if there is none yet."""
    try:
        kazoo.create(z.CLUSTER_ID, z.encode_cluster_id(proposed), makepath=True)
        return proposed
    except _KazooNodeExists:
        return z.decode_cluster_id(kazoo.get(z.CLUSTER_ID)[0])


def generate_broker_id(kazoo, reserved_broker_max_id: int) -> int:
    kazoo.ensure_path(z.BROKER_SEQUENCE_ID)
    return kazoo.set(z.BROKER_SEQUENCE_ID, b"").version + reserved_broker_max_id


def identify(kazoo, proposed_cluster_id: str) -> str:
    """Persistent paths, then the cluster id (Kafka's order)."""
    ensure_persistent_paths(kazoo)
    return cluster_id(kazoo, proposed_cluster_id)


# -- on the reactor -------------------------------------------------------------------------

async def read_brokers(zk: ZkClient) -> dict[int, z.BrokerInfo]:
    """Every registered broker with its epoch (Kafka's ``getAllBrokerAndEpochsInCluster``)."""
    ids = [i for i in await zk.children_or_empty(z.BROKER_IDS) if i.lstrip("-").isdigit()]
    found = await gatherResults([zk.get_or_none(z.broker_path(int(i))) for i in ids])
    return {int(i): z.decode_broker(int(i), data, stat.czxid)
            for i, (data, stat) in zip(ids, found, strict=True) if data is not None}


class BrokerRegistration(Service):
    """The ephemeral ``/brokers/ids/<id>``; see the module docstring."""

    name = "zookeeper-registration"
    log = Logger(namespace="twisted_kafka.zk.BrokerRegistration")

    def __init__(self, *, zk: ZkClient, broker_id: int, endpoints: Callable[[], Iterable[z.RegisteredEndpoint]],
                 rack: str | None, on_epoch: Callable[[int], None], reactor, session_timeout_ms: int):
        self.zk = zk
        self.broker_id = broker_id
        self._endpoints = endpoints
        self.rack = rack
        self._on_epoch = on_epoch
        self.reactor = reactor
        self.session_timeout_ms = session_timeout_ms
        self.epoch: int | None = None
        self._registering: Deferred | None = None
        self._lost = False

    def startService(self) -> Deferred:
        super().startService()
        self.zk.add_session_listener(self._session_changed)
        return self.register()

    def stopService(self) -> Deferred | None:
        super().stopService()
        self.zk.remove_session_listener(self._session_changed)
        # The registration goes with the session, which closes when the broker has stopped.
        return None

    def registered(self) -> Deferred:
        """Fires once a registration in progress (after a session expiry) is done."""
        if self._registering is None or self._registering.called:
            return succeed(None)
        d: Deferred = Deferred()

        def done(result):
            d.callback(None)
            return result

        self._registering.addBoth(done)
        return d

    def register(self) -> Deferred:
        d = ensureDeferred(self._register())
        self._registering = d
        return d

    async def _register(self) -> None:
        path = z.broker_path(self.broker_id)
        data = z.encode_broker(self.broker_id, self._endpoints(), self.rack)
        deadline = monotonic() + 2 * self.session_timeout_ms / 1000.0 + 5
        while True:
            try:
                _, stat = await self.zk.create(path, data, ephemeral=True, makepath=True, include_data=True)
                break
            except NodeExistsError:
                existing = await self.zk.exists(path)
                if existing is None:
                    continue
                if existing.ephemeralOwner == self.zk.session_id:
                    stat = existing          # ours: the create was retried after a lost connection
                    break
                if monotonic() > deadline:
                    raise StartupError("broker.id", str(self.broker_id),
                                       f"another broker is registered with this id in ZooKeeper ({path}, "
                                       f"session {existing.ephemeralOwner:#x})") from None
                self.log.info("{path} still belongs to a previous session; waiting for it to expire",
                              path=path)
                await deferLater(self.reactor, 0.25, lambda: None)
        self.epoch = stat.czxid
        self._on_epoch(stat.czxid)
        self.log.info("Registered broker {broker_id} at {path} with addresses: {endpoints}, czxid (broker epoch): "
                      "{epoch}", broker_id=self.broker_id, path=path,
                      endpoints=", ".join(e.connection_string for e in self._endpoints()), epoch=stat.czxid)

    def _session_changed(self, state) -> None:
        if state == LOST:
            self._lost = True
        elif state == CONNECTED and self._lost and self.running:
            self._lost = False
            self.log.warn("ZooKeeper session expired: registering broker {broker_id} again", broker_id=self.broker_id)
            self.register().addErrback(self._register_failed)

    def _register_failed(self, failure) -> None:
        self.log.failure("Registering broker {broker_id} again failed", failure, broker_id=self.broker_id)

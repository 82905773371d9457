"""A ZooKeeper cluster of broker processes on loopback, for the cluster tests.

    cluster = Cluster(tmp_path, zookeeper, zk_chroot).start()      # brokers 1, 2, 3
    cluster.wait_consistent(lambda md: "t" in md.topics)           # every broker answers the same
    cluster.broker(cluster.controller_id()).kill()                 # kill -9
    cluster.stop()

Each broker is a ``BrokerProcess`` (etc/server.properties, ports 0, its own
log dir) with ``zookeeper.connect`` naming the test's ZooKeeper chroot, so
every test starts a new cluster.  The brokers are spawned together and
started in parallel.  ``metadata(broker)`` is a Metadata v12 answer reduced
to what must agree across brokers (brokers, controller, cluster id, topics
with ids, leaders, leader epochs, replicas, ISR, offline replicas);
``wait_consistent`` waits until every running broker gives the same one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from kazoo.exceptions import NoNodeError

from support.broker_process import BrokerProcess
from support.raw_client import RawClient
from support.wait import wait_until

__all__ = ["Cluster", "ClusterMetadata", "SESSION_TIMEOUT_MS"]

#: The brokers' ZooKeeper session timeout: a killed broker's registration goes after this long.
SESSION_TIMEOUT_MS = 3000


@dataclass(frozen=True)
class PartitionView:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


@dataclass(frozen=True)
class ClusterMetadata:
    brokers: tuple[tuple[int, str, int], ...]
    controller: int
    cluster_id: str
    topics: dict   # name -> (topic id, {partition: PartitionView})

    @property
    def broker_ids(self) -> list[int]:
        return [b for b, _, _ in self.brokers]

    def partitions(self, topic: str) -> dict[int, PartitionView]:
        return self.topics[topic][1]

    def leaders(self, topic: str) -> dict[int, int]:
        return {p: v.leader for p, v in self.partitions(topic).items()}


class Cluster:
    def __init__(self, tmp_path, zookeeper, chroot: str, *, size: int = 3, overrides: dict | None = None):
        self.zookeeper = zookeeper
        self.chroot = chroot
        self.connect = zookeeper.connect_string(chroot)
        self.brokers: dict[int, BrokerProcess] = {}
        for broker_id in range(1, size + 1):
            self.brokers[broker_id] = BrokerProcess(tmp_path, {
                "broker.id": str(broker_id), "zookeeper.connect": self.connect,
                "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
                "controlled.shutdown.retry.backoff.ms": "200",
                **(overrides or {})})

    def start(self, timeout: float = 60) -> Cluster:
        for broker in self.brokers.values():
            broker.spawn()
        for broker in self.brokers.values():
            broker.wait_started(timeout)
        return self

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    @property
    def running(self) -> list[int]:
        return [b for b, p in self.brokers.items() if p.running]

    def bootstrap(self, *broker_ids: int) -> str:
        return ",".join(self.brokers[b].bootstrap for b in (broker_ids or self.running))

    def stop(self) -> dict[int, int]:
        """SIGTERM every running broker (one after another, as an operator would); their exit statuses."""
        return {b: self.brokers[b].stop() for b in self.running}

    def kill_all(self) -> None:
        for broker in self.brokers.values():
            broker.kill()

    # -- ZooKeeper --------------------------------------------------------------------

    def zk(self):
        return self.zookeeper.client(self.chroot)

    def controller_id(self) -> int | None:
        """The broker id in ``/controller``, or None while there is none (it may go at any moment)."""
        with self.zk() as zk:
            try:
                return json.loads(zk.get("/controller")[0])["brokerid"]
            except NoNodeError:
                return None

    def controller_epoch(self) -> int:
        with self.zk() as zk:
            return int(zk.get("/controller_epoch")[0])

    def broker_epoch(self, broker_id: int) -> int | None:
        with self.zk() as zk:
            stat = zk.exists(f"/brokers/ids/{broker_id}")
            return stat.czxid if stat else None

    def registered(self) -> list[int]:
        with self.zk() as zk:
            return sorted(int(b) for b in zk.get_children("/brokers/ids"))

    def wait_for_controller(self, other_than: int | None = None, timeout: float = 30) -> int:
        return wait_until(lambda: (c := self.controller_id()) is not None and c != other_than and c,
                          timeout, what="a controller")

    # -- Metadata -----------------------------------------------------------------------

    def metadata(self, broker_id: int) -> ClusterMetadata:
        with RawClient(self.brokers[broker_id].data_port) as client:
            md = client.metadata(version=12, topics=None)
        topics = {}
        for topic in md.topics:
            topics[topic.name] = (str(topic.topic_id), {
                p.partition_index: PartitionView(p.leader_id, p.leader_epoch, tuple(p.replica_nodes),
                                                 tuple(p.isr_nodes), tuple(p.offline_replicas))
                for p in topic.partitions})
        return ClusterMetadata(tuple(sorted((b.node_id, b.host, b.port) for b in md.brokers)), md.controller_id,
                               md.cluster_id, topics)

    def wait_consistent(self, check=lambda md: True, timeout: float = 30, what: str = "consistent metadata"
                        ) -> ClusterMetadata:
        """Wait until every running broker answers Metadata identically and ``check(metadata)`` holds."""
        def agreed():
            views = [self.metadata(b) for b in self.running]
            first = views[0]
            if all(v == first for v in views[1:]) and check(first):
                return first
            return None
        return wait_until(agreed, timeout, what=what, interval=0.05)

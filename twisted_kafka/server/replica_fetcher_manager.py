"""ReplicaFetcherManager: which fetcher follows which partition (Kafka's ``AbstractFetcherManager``).

A partition this broker follows is fetched by one ``ReplicaFetcher`` per
(leader, fetcher id), the fetcher id being the partition's hash modulo
``num.replica.fetchers`` -- so one leader's partitions share a few
connections, and a leader change moves the partition to another fetcher.
Fetchers without partitions are stopped.  Leaders are reached on their
replication listener: ``inter.broker.listener.name``, else the listener
named by ``security.inter.broker.protocol``, as registered and announced in
the controller's UpdateMetadata; a SASL one with
``sasl.mechanism.inter.broker.protocol`` and that listener's JAAS credentials.

It is a child service of the ``ReplicaManager``, which builds it in a
cluster.  Fetchers start as partitions are followed (the controller's first
LeaderAndIsr may come before the broker has finished starting); stopping it
-- when the broker drains its requests -- stops every fetcher.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.application.service import Service
from twisted.internet.defer import Deferred, gatherResults
from twisted.logger import Logger

from twisted_kafka.client.listener_credentials import ListenerCredentials

from .metadata_cache import MetadataCache
from .partition import Partition
from .replica_fetcher import ReplicaFetcher

if TYPE_CHECKING:
    from .replica_manager import ReplicaManager


class ReplicaFetcherManager(Service):
    name = "replica-fetcher-manager"
    log = Logger(namespace="twisted_kafka.server.ReplicaFetcherManager")

    def __init__(self, *, broker_id: int, config, reactor, metadata_cache: MetadataCache,
                 replica_manager: ReplicaManager):
        self.broker_id = broker_id
        self.config = config
        self.reactor = reactor
        self.metadata_cache = metadata_cache
        self.replicas = replica_manager
        self.listener_name = config["inter.broker.listener.name"] or config["security.inter.broker.protocol"]
        self.credentials = ListenerCredentials(config, self.listener_name)
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._by_partition: dict[tuple[str, int], ReplicaFetcher] = {}
        self._stopped = False

    def endpoint(self, broker_id: int) -> tuple[str, int, str] | None:
        endpoint = self.metadata_cache.broker_endpoint(broker_id, self.listener_name)
        if endpoint is None:
            return None
        return endpoint.host, endpoint.port, endpoint.security_protocol

    def fetcher_id(self, topic: str, index: int) -> int:
        return (hash(topic) * 31 + index) % max(1, self.config["num.replica.fetchers"])

    def add_partition(self, partition: Partition) -> None:
        """Follow ``partition`` from its leader (again from the top: truncation first)."""
        self.remove_partition(partition)
        if self._stopped or partition.leader_id < 0:
            return
        key = (partition.leader_id, self.fetcher_id(partition.topic, partition.index))
        fetcher = self.fetchers.get(key)
        if fetcher is None:
            fetcher = self.fetchers[key] = ReplicaFetcher(
                source_broker=partition.leader_id, fetcher_id=key[1], broker_id=self.broker_id, config=self.config,
                reactor=self.reactor, endpoint=self.endpoint, replica_manager=self.replicas,
                tls=self.credentials.tls, sasl=self.credentials.sasl)
            fetcher.start()
        fetcher.add_partition(partition)
        self._by_partition[(partition.topic, partition.index)] = fetcher

    def remove_partition(self, partition: Partition) -> None:
        fetcher = self._by_partition.pop((partition.topic, partition.index), None)
        if fetcher is None:
            return
        fetcher.remove_partition(partition)
        if not fetcher.partitions:
            self.fetchers.pop((fetcher.source_broker, fetcher.fetcher_id), None)
            fetcher.stop()

    def stopService(self) -> Deferred:
        """Stop every fetcher; fires when their loops have ended."""
        super().stopService()
        self._stopped = True
        loops = [d for f in self.fetchers.values() if (d := f.stop()) is not None]
        self.fetchers.clear()
        self._by_partition.clear()
        return gatherResults(loops, consumeErrors=True)


__all__ = ["ReplicaFetcherManager"]

"""The controller's durable cluster state: topics, partition assignments, configs.

In Kafka's ZooKeeper mode this state lives in ZooKeeper (``/brokers/topics``,
``/config/topics``, ``/controller_epoch``).  A single node keeps the same
records in one JSON file under the first log directory, written atomically
(temporary file, fsync, rename) so a crash leaves either the old or the new
state, never a torn one.  The records have ZooKeeper's shape — replicas,
leader, leader epoch, ISR, partition epoch (znode version) — so a
ZooKeeper-backed store can replace this one without touching the controller.

Writes go through the I/O thread pool (an fsync can take milliseconds) and
are serialised, so the file's last write is always the latest state.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field

from twisted.internet.defer import DeferredLock
from twisted.internet.threads import deferToThreadPool

STORE_FILE = "cluster-metadata.json"
FORMAT_VERSION = 1


@dataclass
class PartitionRecord:
    replicas: list[int]
    leader: int
    leader_epoch: int
    isr: list[int]
    partition_epoch: int = 0


@dataclass
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, PartitionRecord]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


class MetadataStore:
    def __init__(self, log_dir: str, *, reactor, threadpool):
        self.path = os.path.join(log_dir, STORE_FILE)
        self.reactor = reactor
        self.threadpool = threadpool
        self.controller_epoch = 0
        self.topics: dict[str, TopicRecord] = {}
        self.broker_configs: dict[str, dict[str, str]] = {}  # "<broker id>" or "" (cluster default)
        self._lock = DeferredLock()

    def load(self) -> None:
        """Read the stored state (startup, before the reactor serves anything)."""
        if not os.path.exists(self.path):
            return
        with open(self.path, encoding="utf-8") as fh:
            data = json.load(fh)
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self.path}: unsupported format version {data.get('version')!r}")
        self.controller_epoch = data["controller_epoch"]
        self.broker_configs = {k: dict(v) for k, v in data.get("broker_configs", {}).items()}
        self.topics = {}
        for name, topic in data["topics"].items():
            self.topics[name] = TopicRecord(
                name=name, topic_id=uuid.UUID(topic["topic_id"]),
                partitions={int(index): PartitionRecord(**p) for index, p in topic["partitions"].items()},
                configs=dict(topic.get("configs", {})))

    def _snapshot(self) -> bytes:
        data = {
            "version": FORMAT_VERSION,
            "controller_epoch": self.controller_epoch,
            "broker_configs": self.broker_configs,
            "topics": {
                name: {
                    "topic_id": str(topic.topic_id),
                    "configs": topic.configs,
                    "partitions": {str(index): vars(p) for index, p in sorted(topic.partitions.items())},
                }
                for name, topic in sorted(self.topics.items())
            },
        }
        return json.dumps(data, indent=1, sort_keys=True).encode("utf-8")

    def _write(self, payload: bytes) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "wb") as fh:
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(os.path.dirname(self.path), os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    def save(self):
        """Persist the current state; the Deferred fires once it is durable."""
        payload = self._snapshot()
        return self._lock.run(deferToThreadPool, self.reactor, self.threadpool, self._write, payload)

"""The broker's identity on disk: ``meta.properties`` in every log directory.

Kafka writes ``version``, ``broker.id`` and ``cluster.id`` into each log
directory the first time it starts, and refuses to start when the directories
disagree with each other or with a configured ``broker.id``: pointing a broker
at another broker's data is an operator mistake that must fail loudly, not
serve foreign partitions.  The cluster id a single node generates on first
start is therefore stable across restarts, which clients rely on.

Before reading it the broker takes an exclusive lock on each log directory
(``<dir>/.lock``, as Kafka's ``LogManager.lockLogDirs``), held until the
process exits: a second broker started on the same ``log.dirs`` would
otherwise write the same partitions and leave them unreadable.  It refuses
to start instead, naming the directory and the process holding it (whose
pid is written in the lock file; Kafka's stays empty).
"""

from __future__ import annotations

import base64
import errno
import fcntl
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from twisted_kafka.config import ConfigError, StartupError

META_PROPERTIES = "meta.properties"
LOCK_FILE = ".lock"


class LogDirLocks:
    """Exclusive ``flock`` locks on ``<dir>/.lock`` of every log dir, held until ``release()``
    (or the process's end: the kernel drops them with the descriptors, even after kill -9).
    A directory that cannot be locked raises ``StartupError("log.dirs", <dir>, <reason>)``."""

    def __init__(self, log_dirs: list[str]):
        self._fds: list[int] = []
        try:
            for log_dir in log_dirs:
                self._lock(log_dir)
        except BaseException:
            self.release()
            raise

    def _lock(self, log_dir: str) -> None:
        os.makedirs(log_dir, exist_ok=True)
        path = os.path.join(log_dir, LOCK_FILE)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = _read_holder(fd)
            os.close(fd)
            if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise StartupError("log.dirs", log_dir, f"cannot lock {path}: {e.strerror or e}") from None
            by = f"process {holder}" if holder else "another process"
            raise StartupError("log.dirs", log_dir, f"in use by another broker: {by} holds {path}") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fds.append(fd)

    def release(self) -> None:
        fds, self._fds = self._fds, []
        for fd in fds:
            os.close(fd)          # closing the descriptor drops the lock


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if text.isdigit() else ""


@dataclass(frozen=True)
class BrokerMetadata:
    broker_id: int
    cluster_id: str


def generate_cluster_id() -> str:
    """A random id in the form Kafka uses: 16 random bytes, URL-safe base64, unpadded."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode("ascii")


def _read(path: str) -> dict[str, str]:
    values: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def _write(path: str, metadata: BrokerMetadata) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write("#\n#Written by twisted_kafka\n")
        fh.write(f"version=0\nbroker.id={metadata.broker_id}\ncluster.id={metadata.cluster_id}\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def load_or_create(log_dirs: list[str], configured_broker_id: int, *, reserved_broker_max_id: int,
                   cluster_id: str | None = None, generate_broker_id: Callable[[], int] | None = None,
                   ) -> BrokerMetadata:
    """Read the identity stored in ``log_dirs``, or create one, checking Kafka's consistency rules.

    In a ZooKeeper cluster ``cluster_id`` is ZooKeeper's ``/cluster/id`` (the
    stored one must match it: a broker must not join another cluster with
    its data) and ``generate_broker_id`` draws a new id from ZooKeeper when
    none is configured or stored.
    """
    found: dict[str, dict[str, str]] = {}
    for log_dir in log_dirs:
        path = os.path.join(log_dir, META_PROPERTIES)
        try:
            os.makedirs(log_dir, exist_ok=True)
            if os.path.exists(path):
                found[log_dir] = _read(path)
        except OSError as exc:
            raise StartupError("log.dirs", log_dir, str(exc)) from exc

    cluster_ids = {values["cluster.id"] for values in found.values() if values.get("cluster.id")}
    if len(cluster_ids) > 1:
        raise ConfigError("log.dirs",
                          f"log directories belong to different clusters ({', '.join(sorted(cluster_ids))})",
                          ",".join(log_dirs))
    if cluster_id is not None and cluster_ids and cluster_ids != {cluster_id}:
        # Kafka's InconsistentClusterIdException.
        raise ConfigError("zookeeper.connect",
                          f"the cluster id {cluster_id} in ZooKeeper does not match the cluster id "
                          f"{cluster_ids.pop()} stored in meta.properties under log.dirs: the broker is trying to "
                          f"join the wrong cluster")
    stored_ids = set()
    for log_dir, values in found.items():
        try:
            stored_ids.add(int(values["broker.id"]))
        except (KeyError, ValueError):
            raise ConfigError("log.dirs", f"{os.path.join(log_dir, META_PROPERTIES)} has no valid broker.id",
                              log_dir) from None
    if len(stored_ids) > 1:
        raise ConfigError("log.dirs", f"log directories belong to different brokers ({sorted(stored_ids)})",
                          ",".join(log_dirs))

    stored_id = stored_ids.pop() if stored_ids else None
    if configured_broker_id >= 0 and stored_id is not None and stored_id != configured_broker_id:
        raise ConfigError("broker.id", f"configured broker.id {configured_broker_id} does not match the "
                                       f"broker.id {stored_id} stored in meta.properties under log.dirs",
                          configured_broker_id)
    if configured_broker_id >= 0:
        broker_id = configured_broker_id
    elif stored_id is not None:
        broker_id = stored_id
    elif generate_broker_id is not None:
        # Kafka asks ZooKeeper for a sequence number above reserved.broker.max.id.
        broker_id = generate_broker_id()
    else:
        # A single node takes the first id above reserved.broker.max.id.
        broker_id = reserved_broker_max_id + 1
    if cluster_id is None:
        cluster_id = cluster_ids.pop() if cluster_ids else generate_cluster_id()
    metadata = BrokerMetadata(broker_id, cluster_id)
    for log_dir in log_dirs:
        if log_dir not in found:
            try:
                _write(os.path.join(log_dir, META_PROPERTIES), metadata)
            except OSError as exc:
                raise StartupError("log.dirs", log_dir, str(exc)) from exc
    return metadata

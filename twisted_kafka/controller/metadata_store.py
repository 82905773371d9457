"""The controller's durable cluster state, behind an async interface.

In Kafka's ZooKeeper mode this state lives in ZooKeeper: topic assignments
and topic ids under ``/brokers/topics/<t>``, partition states (leader,
leader epoch, ISR, with the znode version as partition epoch) under
``.../partitions/<p>/state``, topic and broker configs under ``/config``,
and ``/controller_epoch``.  ``ClusterMetadataStore`` is that state as the
controller uses it: every read and write is asynchronous, every write is
durable when its Deferred fires, and the records handed out are immutable --
nobody changes the store except through its methods.  A single node keeps
the records in one JSON file (``JsonFileMetadataStore``); a ZooKeeper-backed
store implements the same methods over the znodes.

The controller keeps its own in-memory view (``ControllerContext``) and
writes through the store first, so a failed write changes nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from twisted.internet.defer import DeferredLock
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger

from twisted_kafka.config import StartupError
from twisted_kafka.log.checkpoints import PRIVATE_MODE, write_atomically
from twisted_kafka.log.inventory import PartitionOnDisk, partitions_on_disk
from twisted_kafka.log.layout import PARTITION_METADATA
from twisted_kafka.security.acl import (
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    entries_from_json,
    entries_json,
)

#: A partition without a leader (Kafka's LeaderAndIsr.NoLeader).
NO_LEADER = -1
#: ``partition_epoch`` of a partition whose state was never written (ZooKeeper: an assignment
#: in ``/brokers/topics/<t>`` whose ``.../partitions/<p>/state`` does not exist yet).
NO_STATE = -1
#: Leader recovery states (KIP-704): an unclean election makes the new leader RECOVERING.
RECOVERED, RECOVERING = 0, 1

STORE_FILE = "cluster-metadata.json"
BACKUP_SUFFIX = ".bak"          # the version the last write replaced
DAMAGED_SUFFIX = ".damaged"     # a main file found damaged, kept for inspection
FORMAT_VERSION = 1
MISSING = "missing"

log = Logger()


class ControllerMovedError(Exception):
    """Another controller took over: a write was refused because the controller epoch moved on
    (ZooKeeper: the conditional check on ``/controller_epoch`` failed), or the controllership
    could not be claimed.  The controller that gets it resigns."""


@dataclass(frozen=True)
class PartitionRecord:
    """A partition's state: ZooKeeper's ``/brokers/topics/<t>/partitions/<p>/state`` plus its assignment.

    ``replicas`` is the full replica set; during a reassignment it holds the
    target replicas and the original ones (Kafka's ReplicaAssignment), with
    ``adding_replicas`` and ``removing_replicas`` naming the difference.
    ``partition_epoch`` is the state znode's version (NO_STATE: not written yet).
    """

    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    partition_epoch: int = 0      # the state znode's version in ZooKeeper mode
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    leader_recovery_state: int = RECOVERED

    @property
    def has_state(self) -> bool:
        return self.partition_epoch != NO_STATE

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.removing_replicas)

    @property
    def origin_replicas(self) -> tuple[int, ...]:
        return tuple(b for b in self.replicas if b not in self.adding_replicas)


@dataclass(frozen=True)
class TopicRecord:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionRecord]
    configs: Mapping[str, str] = field(default_factory=dict)

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0

    def with_partitions(self, changes: Mapping[int, PartitionRecord]) -> TopicRecord:
        return replace(self, partitions=MappingProxyType({**self.partitions, **changes}))

    def with_configs(self, configs: Mapping[str, str]) -> TopicRecord:
        return replace(self, configs=MappingProxyType(dict(configs)))


def topic_record(name: str, topic_id: uuid.UUID, partitions: Mapping[int, PartitionRecord],
                 configs: Mapping[str, str] | None = None) -> TopicRecord:
    """A TopicRecord whose mappings cannot be changed in place."""
    return TopicRecord(name, topic_id, MappingProxyType(dict(partitions)), MappingProxyType(dict(configs or {})))


@dataclass(frozen=True)
class ClusterState:
    """Everything stored, as read at one moment."""

    controller_epoch: int
    topics: Mapping[str, TopicRecord]
    broker_configs: Mapping[str, Mapping[str, str]]   # "<broker id>" or "" (the cluster default)
    #: ACL entries per resource pattern (ZooKeeper: ``/kafka-acl/<Type>/<name>`` and
    #: ``/kafka-acl-extended/prefixed/<Type>/<name>``).
    acls: Mapping[ResourcePattern, frozenset[AccessControlEntry]] = field(default_factory=dict)


def _describe(topics: Mapping[str, TopicRecord]) -> str:
    return ", ".join(f"{name} ({len(t.partitions)} partition(s), id {t.topic_id})" for name, t in topics.items())


def _partition_json(p: PartitionRecord) -> dict:
    value = {"replicas": list(p.replicas), "leader": p.leader, "leader_epoch": p.leader_epoch, "isr": list(p.isr),
             "partition_epoch": p.partition_epoch}
    # Written only when set, so a file without reassignments or unclean elections keeps its shape.
    if p.adding_replicas:
        value["adding_replicas"] = list(p.adding_replicas)
    if p.removing_replicas:
        value["removing_replicas"] = list(p.removing_replicas)
    if p.leader_recovery_state != RECOVERED:
        value["leader_recovery_state"] = p.leader_recovery_state
    return value


class ClusterMetadataStore(ABC):
    """Durable cluster state; see the module docstring."""

    @abstractmethod
    async def load(self) -> ClusterState:
        """Everything stored (startup of a controller)."""

    @abstractmethod
    async def increment_controller_epoch(self) -> int:
        """Become the controller: bump and persist the controller epoch; returns the new epoch.

        In ZooKeeper this is the election itself: ``/controller`` is created
        (ephemeral) and ``/controller_epoch`` bumped in one transaction, and
        ControllerMovedError says another broker won.  Every later write is
        conditional on that epoch (ControllerMovedError once it moved on)."""

    @abstractmethod
    async def create_topics(self, topics: list[TopicRecord]) -> None:
        """Persist new topics (assignments, ids, partition states, configs)."""

    @abstractmethod
    async def delete_topics(self, names: list[str]) -> None:
        """Forget topics."""

    @abstractmethod
    async def set_partitions(self, topic: str, partitions: Mapping[int, PartitionRecord]) -> None:
        """Add partitions to ``topic`` or replace their states and assignments.

        A record's ``partition_epoch`` is the version its state has once written:
        0 creates the state, n replaces the state of version n - 1 (ZooKeeper
        refuses the write if the version differs)."""

    @abstractmethod
    async def set_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        """Replace a topic's config overrides."""

    @abstractmethod
    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        """Replace the dynamic configs of a broker id, or of "" (the cluster default)."""

    @abstractmethod
    async def set_acls(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        """Replace the ACL entries of one resource pattern (none: the pattern is forgotten)."""

    # -- what others changed (a cluster: topics and configs written by any broker's admin) --

    async def topic_names(self) -> set[str]:
        """The names of every stored topic (ZooKeeper: the children of ``/brokers/topics``)."""
        return set((await self.load()).topics)

    async def load_topics(self, names) -> dict[str, TopicRecord]:
        """The stored records of ``names`` (those that exist); partitions whose state was never
        written have ``partition_epoch == NO_STATE``."""
        topics = (await self.load()).topics
        return {name: topics[name] for name in names if name in topics}

    async def topic_configs(self, name: str) -> dict[str, str]:
        topic = (await self.load()).topics.get(name)
        return dict(topic.configs) if topic is not None else {}

    async def broker_configs(self, entity: str) -> dict[str, str]:
        return dict((await self.load()).broker_configs.get(entity, {}))

    async def load_acls(self) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every stored ACL (ZooKeeper: ``/kafka-acl`` and ``/kafka-acl-extended``)."""
        return dict((await self.load()).acls)

    async def topics_queued_for_deletion(self) -> list[str]:
        """Topics an administrator asked to delete (ZooKeeper: ``/admin/delete_topics``); a single node
        deletes at once and never has any."""
        return []

    async def cancel_deletions(self, names) -> None:
        """Forget deletion requests (for topics that do not exist, or with deletion disabled)."""
        return None


class JsonFileMetadataStore(ClusterMetadataStore):
    """The single node's store: one JSON file under the first log directory.

    Written atomically (temporary file, fsync, rename, fsync of the directory)
    so a crash leaves either the old or the new state, never a torn one.
    Writes run in the I/O thread pool (an fsync can take milliseconds) and are
    serialised, so the file's last write is always the latest state.

    Damage from outside is survived too:

    * the file, its backup and a damaged file set aside are readable by the
      broker's user only (mode 0600, made so on load and on every write even
      for files an older version wrote): dynamic broker configs may hold
      passwords, which are stored only encrypted (``password.encoder.secret``)
      but are secrets still;
    * every write keeps the version it replaces as ``cluster-metadata.json.bak``
      (a hard link: no copy, no extra space while writing);
    * a main file that is empty, truncated or not the store's JSON is moved
      aside (``.damaged``) and the previous version is used, with a warning
      naming both files; the last change before the damage may be lost, and
      topics found in the partition directories but not in that version are
      added back;
    * with no usable file at all while partition directories exist, the
      topics are rebuilt from them (``twisted_kafka.log.inventory``): names,
      ids from ``partition.metadata``, partition counts, leader epochs from
      ``leader-epoch-checkpoint``, this broker as the only replica; topic
      configs, dynamic broker configs and ACLs are lost, and the warning says so.
      If the directories disagree about a topic's id the broker refuses to
      start (``StartupError``), naming the file and what to do.
    """

    def __init__(self, log_dir: str, *, reactor, threadpool, space=None, log_dirs: list[str] | None = None,
                 broker_id: int | None = None):
        """``space`` (the log dir's ``LogDirSpace``) lets a write on a full disk use the
        directory's space reserve, so DeleteTopics works when the disk is full;
        ``log_dirs`` and ``broker_id`` are what a rebuild needs (default: ``log_dir``, broker 0)."""
        self.path = os.path.join(log_dir, STORE_FILE)
        self.backup_path = self.path + BACKUP_SUFFIX
        self.space = space
        self.log_dirs = list(log_dirs) if log_dirs else [log_dir]
        self.broker_id = 0 if broker_id is None else broker_id
        self.reactor = reactor
        self.threadpool = threadpool
        self._state = ClusterState(0, MappingProxyType({}), MappingProxyType({}))
        self._loaded = False
        self._keep_backup = False      # the main file on disk is a good version: back it up before replacing it
        self._lock = DeferredLock()

    # -- reading ----------------------------------------------------------------------

    async def load(self) -> ClusterState:
        if not self._loaded:
            state = await deferToThreadPool(self.reactor, self.threadpool, self._read)
            # Another load may have finished first, and a write after it: keep the newer state.
            if not self._loaded:
                self._state = state
                self._loaded = True
        return self._state

    def _read(self) -> ClusterState:
        self._make_private()
        state, problem = self._parse(self.path)
        if state is not None:
            self._keep_backup = True
            return state
        backup, backup_problem = self._parse(self.backup_path)
        on_disk = partitions_on_disk(self.log_dirs)
        if backup is not None:
            self._set_aside()
            added = self._rebuild(self._missing_from(backup, on_disk), problem)
            log.warn("{path} is {problem}: using the previous version {backup} (the last change before the "
                     "damage may be lost){added}", path=self.path, problem=problem, backup=self.backup_path,
                     added=f"; added back from the partition directories: {_describe(added)}" if added else "")
            return replace(backup, topics=MappingProxyType({**backup.topics, **added}))
        if problem == MISSING and backup_problem == MISSING and not on_disk:
            return self._state                   # a new broker
        self._set_aside()
        topics = self._rebuild(on_disk, problem)
        log.warn("{path} is {problem} and there is no usable previous version ({backup}: {backup_problem}): "
                 "rebuilt {n} topic(s) from the partition directories: {topics}; topic configs and dynamic "
                 "broker configs were lost (set them again with AlterConfigs), and so were ACLs (CreateAcls)",
                 path=self.path, problem=problem,
                 backup=self.backup_path, backup_problem=backup_problem, n=len(topics),
                 topics=_describe(topics) or "none")
        return ClusterState(0, MappingProxyType(topics), MappingProxyType({}))

    def _parse(self, path: str) -> tuple[ClusterState | None, str]:
        """(state, "") or (None, what is wrong with the file)."""
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return None, MISSING
        if not raw.strip():
            return None, "empty"
        try:
            data = json.loads(raw)
        except ValueError as e:
            return None, f"not valid JSON ({e})"
        if not isinstance(data, dict):
            return None, "not the store's JSON"
        if data.get("version") != FORMAT_VERSION:
            if isinstance(data.get("version"), int) and data["version"] > FORMAT_VERSION:
                raise StartupError("log.dirs", path,
                                   f"format version {data['version']}, newer than this broker reads "
                                   f"({FORMAT_VERSION}); run the broker version that wrote it")
            return None, f"not the store's JSON (format version {data.get('version')!r})"
        try:
            topics = {}
            for name, topic in data["topics"].items():
                partitions = {int(index): PartitionRecord(tuple(p["replicas"]), p["leader"], p["leader_epoch"],
                                                          tuple(p["isr"]), p.get("partition_epoch", 0),
                                                          tuple(p.get("adding_replicas", ())),
                                                          tuple(p.get("removing_replicas", ())),
                                                          p.get("leader_recovery_state", RECOVERED))
                              for index, p in topic["partitions"].items()}
                topics[name] = topic_record(name, uuid.UUID(topic["topic_id"]), partitions,
                                            topic.get("configs", {}))
            broker_configs = {entity: MappingProxyType(dict(values))
                              for entity, values in data.get("broker_configs", {}).items()}
            acls = {}
            for item in data.get("acls", []):
                pattern = ResourcePattern(ResourceType.from_camel(item["resource_type"]), item["name"],
                                          PatternType.from_camel(item["pattern_type"]))
                acls[pattern] = frozenset(entries_from_json(item))
            return ClusterState(int(data["controller_epoch"]), MappingProxyType(topics),
                                MappingProxyType(broker_configs), MappingProxyType(acls)), ""
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            return None, f"not the store's JSON ({type(e).__name__}: {e})"

    def _make_private(self) -> None:
        """Files of this store an older version wrote world-readable become the broker user's only."""
        for path in (self.path, self.backup_path, self.path + DAMAGED_SUFFIX):
            try:
                if os.stat(path).st_mode & 0o777 != PRIVATE_MODE:
                    os.chmod(path, PRIVATE_MODE)
            except FileNotFoundError:
                continue
            except OSError as e:
                log.warn("cannot make {path} readable by the broker's user only: {e}", path=path, e=e)

    def _set_aside(self) -> None:
        """Keep a damaged main file for inspection as ``.damaged`` (it is never read again)."""
        try:
            os.replace(self.path, self.path + DAMAGED_SUFFIX)
        except FileNotFoundError:
            pass
        except OSError as e:
            log.warn("cannot move the damaged {path} aside: {e}", path=self.path, e=e)

    @staticmethod
    def _missing_from(state: ClusterState, on_disk: list[PartitionOnDisk]) -> list[PartitionOnDisk]:
        return [p for p in on_disk if p.topic not in state.topics]

    def _rebuild(self, on_disk: list[PartitionOnDisk], problem: str) -> dict[str, TopicRecord]:
        """Topic records from the partition directories; StartupError when they disagree."""
        by_topic: dict[str, list[PartitionOnDisk]] = {}
        for p in on_disk:
            by_topic.setdefault(p.topic, []).append(p)
        topics = {}
        for name, parts in sorted(by_topic.items()):
            ids = {p.topic_id for p in parts if p.topic_id is not None}
            if len(ids) > 1:
                which = ", ".join(f"{os.path.join(p.dir, PARTITION_METADATA)}: {p.topic_id}" for p in parts)
                raise StartupError(
                    "log.dirs", self.path, f"it is {problem} and cannot be rebuilt from the partition directories: the "
                    f"partition.metadata files of topic '{name}' name different topic ids ({which}); restore "
                    f"{self.path} from a backup, or move the partition directories that do not belong to the "
                    f"topic out of log.dirs, and start again")
            if ids:
                topic_id = ids.pop()
            else:
                topic_id = uuid.uuid4()
                log.warn("no partition directory of topic {topic} holds a readable partition.metadata: the "
                         "rebuilt topic gets the new id {id}", topic=name, id=topic_id)
            count = max(p.partition for p in parts) + 1
            epochs = {p.partition: max(p.latest_epoch, 0) for p in parts}
            me = (self.broker_id,)
            topics[name] = topic_record(name, topic_id, {
                index: PartitionRecord(replicas=me, leader=self.broker_id, leader_epoch=epochs.get(index, 0),
                                       isr=me)
                for index in range(count)})
        return topics

    # -- writing ----------------------------------------------------------------------

    async def increment_controller_epoch(self) -> int:
        state = await self._update(lambda s: replace(s, controller_epoch=s.controller_epoch + 1))
        return state.controller_epoch

    async def create_topics(self, topics: list[TopicRecord]) -> None:
        await self._update(lambda s: replace(s, topics=MappingProxyType(
            {**s.topics, **{t.name: t for t in topics}})))

    async def delete_topics(self, names: list[str]) -> None:
        doomed = set(names)
        await self._update(lambda s: replace(s, topics=MappingProxyType(
            {name: t for name, t in s.topics.items() if name not in doomed})))

    async def set_partitions(self, topic: str, partitions: Mapping[int, PartitionRecord]) -> None:
        await self._update(lambda s: replace(s, topics=MappingProxyType(
            {**s.topics, topic: s.topics[topic].with_partitions(partitions)})))

    async def set_topic_configs(self, topic: str, configs: Mapping[str, str]) -> None:
        await self._update(lambda s: replace(s, topics=MappingProxyType(
            {**s.topics, topic: s.topics[topic].with_configs(configs)})))

    async def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        def change(s: ClusterState) -> ClusterState:
            values = {k: v for k, v in s.broker_configs.items() if k != entity}
            if configs:
                values[entity] = MappingProxyType(dict(configs))
            return replace(s, broker_configs=MappingProxyType(values))
        await self._update(change)

    async def set_acls(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        def change(s: ClusterState) -> ClusterState:
            acls = {p: e for p, e in s.acls.items() if p != pattern}
            if entries:
                acls[pattern] = frozenset(entries)
            return replace(s, acls=MappingProxyType(acls))
        await self._update(change)

    async def _update(self, change: Callable[[ClusterState], ClusterState]) -> ClusterState:
        """Apply ``change`` to the current state and make the result durable, one update at a time.

        The new state becomes current only once it is on disk: on failure nothing changes.
        """
        await self.load()
        await self._lock.acquire()
        try:
            state = change(self._state)
            await deferToThreadPool(self.reactor, self.threadpool, self._write, self._snapshot(state))
            self._state = state
            return state
        finally:
            self._lock.release()

    @staticmethod
    def _snapshot(state: ClusterState) -> bytes:
        data = {
            "version": FORMAT_VERSION,
            "controller_epoch": state.controller_epoch,
            "broker_configs": {entity: dict(values) for entity, values in state.broker_configs.items()},
            "topics": {
                name: {
                    "topic_id": str(topic.topic_id),
                    "configs": dict(topic.configs),
                    "partitions": {str(index): _partition_json(p) for index, p in sorted(topic.partitions.items())},
                }
                for name, topic in sorted(state.topics.items())
            },
        }
        if state.acls:   # written only when there are ACLs, so a file without them keeps its shape
            data["acls"] = [{"resource_type": p.resource_type.camel, "name": p.name,
                             "pattern_type": p.pattern_type.camel, **entries_json(entries)}
                            for p, entries in sorted(state.acls.items())]
        return json.dumps(data, indent=1, sort_keys=True).encode("utf-8")

    def _write(self, payload: bytes) -> None:
        if self._keep_backup:
            self._back_up()
        write_atomically(self.path, payload, space=self.space, mode=PRIVATE_MODE)
        self._keep_backup = True

    def _back_up(self) -> None:
        """Make the current main file the backup: a hard link renamed over the old backup
        (no data is copied, so this needs no space); a copy where links are not possible."""
        tmp = self.backup_path + ".tmp"
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            try:
                os.chmod(self.path, PRIVATE_MODE)    # the link shares it: the backup is private too
                os.link(self.path, tmp)
            except FileNotFoundError:
                return
            except OSError:
                with open(self.path, "rb") as fh:
                    write_atomically(self.backup_path, fh.read(), space=self.space, mode=PRIVATE_MODE)
                return
            os.replace(tmp, self.backup_path)
        except OSError as e:
            log.warn("cannot keep the previous version of {path} as {backup}: {e}", path=self.path,
                     backup=self.backup_path, e=e)


__all__ = ["ClusterMetadataStore", "JsonFileMetadataStore", "ClusterState", "TopicRecord", "PartitionRecord",
           "topic_record", "STORE_FILE", "ControllerMovedError", "NO_LEADER", "NO_STATE", "RECOVERED", "RECOVERING"]

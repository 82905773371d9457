"""File and directory names under ``log.dirs``, as Apache Kafka lays them out.

Keeping Kafka's names means an operator's habits and tools (``ls``,
``kafka-dump-log``-style inspection of ``00000000000000000000.log``) carry
over.  Everything that decides "is this a partition directory?" lives here,
so the broker's own files under ``log.dirs`` (``meta.properties``, the
metadata store, checkpoints) are never mistaken for partitions.
"""

from __future__ import annotations

import os
import re
import uuid

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"   # aborted transactions whose markers are in the segment (``txn_index``)
DELETED_SUFFIX = ".deleted"      # segment files waiting for file.delete.delay.ms
CLEANED_SUFFIX = ".cleaned"      # compaction output in progress (``cleaner``)
SWAP_SUFFIX = ".swap"            # compaction output being swapped in (``cleaner``)
TMP_SUFFIX = ".tmp"              # atomic-write temporaries
PRODUCER_SNAPSHOT_SUFFIX = ".snapshot"   # producer state at an offset (``producer_state``)

DELETE_DIR_SUFFIX = "-delete"    # <topic>-<partition>.<uuid>-delete
FUTURE_DIR_SUFFIX = "-future"    # alter-log-dirs target (not supported; left alone)
STRAY_DIR_SUFFIX = "-stray"

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"   # high watermarks
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
DAMAGED_RANGES = "damaged-ranges"       # this broker's record of damaged data below the recovery point

#: Topics whose directories belong to the broker itself, never to LogManager.
RESERVED_TOPICS = frozenset({"__cluster_metadata"})

_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_SEGMENT_RE = re.compile(r"^(\d{20})\.(log|index|timeindex|txnindex)(\.deleted|\.cleaned|\.swap)?$")
_SNAPSHOT_RE = re.compile(r"^(\d{20})\.snapshot$")


def segment_file_name(base_offset: int, suffix: str) -> str:
    """``00000000000000000042.log`` for base offset 42 (twenty digits, zero-padded)."""
    return f"{base_offset:020d}{suffix}"


def parse_segment_file(name: str) -> tuple[int, str, str] | None:
    """(base_offset, kind, state suffix or "") for a segment file name, else None."""
    m = _SEGMENT_RE.match(name)
    if not m:
        return None
    return int(m.group(1)), m.group(2), m.group(3) or ""


def parse_snapshot_file(name: str) -> int | None:
    """The offset of a producer state snapshot file (``00000000000000004711.snapshot``), else None."""
    m = _SNAPSHOT_RE.match(name)
    return int(m.group(1)) if m else None


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) when ``name`` is a live partition directory, else None.

    Directories being deleted, future/stray replicas, reserved topics and
    anything that is not ``<legal topic>-<int>`` are not partitions.
    """
    topic, sep, part = name.rpartition("-")
    if not sep or not part.isdigit() or not _TOPIC_RE.match(topic):
        return None
    if topic in RESERVED_TOPICS:
        return None
    return topic, int(part)


def is_delete_dir(name: str) -> bool:
    """``<topic>-<partition>.<32 hex>-delete``: a deleted partition awaiting removal."""
    if not name.endswith(DELETE_DIR_SUFFIX):
        return False
    stem = name[: -len(DELETE_DIR_SUFFIX)]
    head, dot, unique = stem.rpartition(".")
    return bool(dot) and len(unique) == 32 and parse_partition_dir(head) is not None


def delete_dir_name(topic: str, partition: int) -> str:
    return f"{partition_dir_name(topic, partition)}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"


def fsync_dir(path: str) -> None:
    """Make a directory's entries (created, renamed, removed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

"""What the partition directories under ``log.dirs`` say about themselves.

Each ``<topic>-<partition>`` directory holds ``partition.metadata`` (the
topic id, Kafka's format) and ``leader-epoch-checkpoint`` (the leader epochs
its data was written under).  That is enough to rebuild the controller's
topic list when its own file is lost (``JsonFileMetadataStore``): names,
ids, partition counts and leader epochs — not topic configs.  Read-only;
BLOCKING (a few small files per partition).
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass

from twisted_kafka.log.checkpoints import CheckpointError, read_epoch_checkpoint, read_partition_metadata
from twisted_kafka.log.layout import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA, parse_partition_dir


@dataclass(frozen=True)
class PartitionOnDisk:
    topic: str
    partition: int
    dir: str
    topic_id: uuid.UUID | None      # None: no readable partition.metadata
    latest_epoch: int               # -1: none known
    problem: str | None = None      # why the topic id or the epochs could not be read


def partitions_on_disk(log_dirs: list[str]) -> list[PartitionOnDisk]:
    """Every live partition directory under ``log_dirs`` (``-delete`` and other dirs skipped)."""
    found = []
    for log_dir in log_dirs:
        try:
            names = sorted(os.listdir(log_dir))
        except FileNotFoundError:
            continue
        for name in names:
            path = os.path.join(log_dir, name)
            parsed = parse_partition_dir(name)
            if parsed is None or not os.path.isdir(path):
                continue
            problems = []
            try:
                topic_id = read_partition_metadata(os.path.join(path, PARTITION_METADATA))
            except (CheckpointError, OSError) as e:
                topic_id = None
                problems.append(str(e))
            try:
                epochs = read_epoch_checkpoint(os.path.join(path, LEADER_EPOCH_CHECKPOINT))
            except (CheckpointError, OSError) as e:
                epochs = []
                problems.append(str(e))
            latest = max((epoch for epoch, _ in epochs), default=-1)
            found.append(PartitionOnDisk(parsed[0], parsed[1], path, topic_id, latest,
                                         "; ".join(problems) or None))
    return found

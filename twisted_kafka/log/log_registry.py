"""``LogRegistry``: the logs a ``LogManager`` holds, one per partition, and the dir of each.

The manager's registry part: lookups for the broker (``get``), the
partitions of one log dir for its checkpoints, and where a new partition
goes -- the dir holding the fewest logs, the first of ``log.dirs`` on a tie
(Kafka's default placement).  It only keeps the table; building, wiring and
removing the logs is the manager's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import ItemsView

from twisted_kafka.log.unified_log import UnifiedLog

TopicPartition = tuple[str, int]


class LogRegistry:
    """One ``UnifiedLog`` per (topic, partition), with the log dir it lives in."""

    def __init__(self, log_dirs: list[str]):
        self.log_dirs = list(log_dirs)
        self._logs: dict[TopicPartition, UnifiedLog] = {}
        self._dir_of: dict[TopicPartition, str] = {}
        # Logs per dir, kept as logs come and go: placing a new partition must not visit
        # every partition (creating N partitions one by one would be quadratic).
        self._per_dir: Counter[str] = Counter()

    def __len__(self) -> int:
        return len(self._logs)

    def __contains__(self, key: TopicPartition) -> bool:
        return key in self._logs

    def add(self, key: TopicPartition, unified: UnifiedLog, log_dir: str) -> None:
        previous = self._dir_of.get(key)
        if previous is not None:
            self._per_dir[previous] -= 1
        self._logs[key] = unified
        self._dir_of[key] = log_dir
        self._per_dir[log_dir] += 1

    def remove(self, key: TopicPartition) -> tuple[UnifiedLog, str] | None:
        """Forget a partition's log; (the log, its dir), or None if there was none."""
        unified = self._logs.pop(key, None)
        if unified is None:
            return None
        log_dir = self._dir_of.pop(key)
        self._per_dir[log_dir] -= 1
        return unified, log_dir

    def get(self, key: TopicPartition) -> UnifiedLog | None:
        return self._logs.get(key)

    def dir_of(self, key: TopicPartition) -> str | None:
        return self._dir_of.get(key)

    def items(self) -> ItemsView[TopicPartition, UnifiedLog]:
        return self._logs.items()

    def entries(self) -> list[tuple[TopicPartition, UnifiedLog, str]]:
        """(partition, its log, its dir) of every log."""
        return [(key, unified, self._dir_of[key]) for key, unified in self._logs.items()]

    def logs(self) -> list[UnifiedLog]:
        return list(self._logs.values())

    def in_dir(self, log_dir: str) -> list[tuple[TopicPartition, UnifiedLog]]:
        return [(key, unified) for key, unified in self._logs.items() if self._dir_of[key] == log_dir]

    def dir_for_new_log(self) -> str:
        """The dir a new partition goes to: the one holding the fewest logs (the first on a tie)."""
        counts = self._per_dir
        return min(self.log_dirs, key=lambda d: (counts[d], self.log_dirs.index(d)))

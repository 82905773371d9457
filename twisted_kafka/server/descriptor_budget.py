"""The broker's file descriptors: the open-file limit, and the partition budget it allows.

Every connection and every open segment file takes a descriptor, and a
process has ``RLIMIT_NOFILE`` of them.  At start the broker raises its soft
limit to the hard limit (what ``ulimit -n`` could raise it to; Kafka's
start scripts leave this to the operator, but a shell's default soft limit
of 1024 is far below what a broker needs), then splits the limit:

* for connections: ``max.connections`` when it is smaller, else a quarter
  of the limit (``max.connections`` defaults to unlimited, as in Kafka);
* for the broker itself: ``BROKER_DESCRIPTORS`` -- listeners, the event
  loop, the metadata store, log output, and files the I/O threads open for
  a moment (checkpoints, index writes, fsyncs); about 20 are open when an
  idle broker has started;
* the rest for segment files, opened on demand and closed when idle
  (``twisted_kafka.log.file_handles``).  A partition being written or read
  holds one (its active ``.log`` file; index files hold none between
  writes), so the **partition budget** is that many partitions.

The controller refuses to create partitions beyond a broker's budget
(POLICY_VIOLATION, like a create-topic policy: Kafka has no such limit;
KIP-578 proposed ``max.broker.partitions`` but was never adopted).  A broker
that already holds more -- restarted with a lower limit -- still starts and
serves them all, reopening idle partitions' files as they are used.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

__all__ = ["BROKER_DESCRIPTORS", "DESCRIPTORS_PER_PARTITION", "DescriptorBudget", "raise_open_file_limit",
           "descriptor_budget"]

#: Descriptors kept for the broker's own use (see the module docstring).
BROKER_DESCRIPTORS = 128
#: What a partition in use holds: its active segment's ``.log`` file.
DESCRIPTORS_PER_PARTITION = 1
#: Soft limit to ask for when the hard limit is unlimited (Linux caps it by fs.nr_open anyway).
_UNLIMITED_TARGET = 1 << 20


@dataclass(frozen=True)
class DescriptorBudget:
    limit: int                 # the soft RLIMIT_NOFILE in effect
    hard: int                  # the hard limit (-1: unlimited)
    raised_from: int | None    # the soft limit found at start, when it was raised
    connections: int           # kept for connections
    broker: int                # kept for the broker itself
    log_files: int             # for segment files (at least 16: loading must make progress)

    @property
    def partitions(self) -> int:
        """How many partitions this broker takes on (creations beyond are refused)."""
        return max(0, self.limit - self.connections - self.broker) // DESCRIPTORS_PER_PARTITION

    def describe(self) -> str:
        hard = "unlimited" if self.hard < 0 else str(self.hard)
        if self.raised_from is not None:
            origin = f"soft limit raised from {self.raised_from} to the hard limit {hard}"
        else:
            origin = f"hard limit {hard}"
        return (f"Open-file limit {self.limit} ({origin}): {self.connections} descriptors kept for "
                f"connections, {self.broker} for the broker itself, {self.log_files} for log segment "
                f"files; partition budget {self.partitions}")


def raise_open_file_limit() -> tuple[int, int, int | None]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit: (soft now, hard, soft before if raised)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _UNLIMITED_TARGET if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            pass              # e.g. above fs.nr_open: keep what we have
        else:
            return target, hard, soft
    return soft, hard, None


def descriptor_budget(limit: int, hard: int, *, max_connections: int,
                      raised_from: int | None = None) -> DescriptorBudget:
    """How ``limit`` descriptors are shared (see the module docstring)."""
    if limit == resource.RLIM_INFINITY or limit < 0:
        limit = _UNLIMITED_TARGET
    connections = max(0, min(max_connections, limit // 4))
    log_files = max(16, limit - connections - BROKER_DESCRIPTORS)
    return DescriptorBudget(limit=limit, hard=-1 if hard == resource.RLIM_INFINITY else hard,
                            raised_from=raised_from, connections=connections, broker=BROKER_DESCRIPTORS,
                            log_files=log_files)

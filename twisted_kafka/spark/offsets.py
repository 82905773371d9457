"""Kafka offsets as Spark sees them: the offset JSON, offset ranges, rate limits, data loss.

Pure functions on plain values (no client, no Spark), shared by the batch
reader, the stream reader and the executors.

* A partition is a ``(topic, partition)`` tuple; an offset map is
  ``{(topic, partition): offset}``.
* Structured Streaming stores a source's offsets as JSON in the checkpoint;
  this source uses the JSON of Spark's Kafka source,
  ``{"topic": {"0": 42, "1": 7}}`` — for each partition the next offset to
  read — always rendered in sorted order, so equal offsets give equal JSON.
* An ``OffsetRange`` is ``[start, end)`` of one partition: what one Spark
  task reads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

__all__ = ["EARLIEST", "LATEST", "EARLIEST_OFFSET", "LATEST_OFFSET", "OffsetRange", "DataLossError",
           "to_json", "from_json", "resolve", "rate_limit", "plan_ranges", "split_ranges", "data_loss_message"]

EARLIEST = "earliest"
LATEST = "latest"
#: In JSON offsets (as in Spark's Kafka source): -2 is the earliest offset, -1 the latest.
EARLIEST_OFFSET = -2
LATEST_OFFSET = -1


class DataLossError(RuntimeError):
    """Offsets a query had to read are not in Kafka any more (and failOnDataLoss is true)."""


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def tp(self) -> tuple[str, int]:
        return self.topic, self.partition


def _sorted(offsets: Mapping[tuple[str, int], int]) -> list[tuple[tuple[str, int], int]]:
    return sorted(offsets.items(), key=lambda item: (item[0][0], item[0][1]))


def to_json(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    """``{(t, p): o}`` -> ``{"t": {"p": o}}`` in sorted order (topics by name, partitions by number)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in _sorted(offsets):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json(offsets: Mapping[str, Mapping[str, int]]) -> dict[tuple[str, int], int]:
    return {(topic, int(partition)): int(offset)
            for topic, parts in offsets.items() for partition, offset in parts.items()}


def resolve(spec, partitions: Iterable[tuple[str, int]], earliest: Mapping, latest: Mapping, *,
            name: str) -> dict[tuple[str, int], int]:
    """Offsets of ``partitions`` for ``spec`` ('earliest', 'latest' or a specific offset map).

    Specific offsets must name exactly the partitions read (as in Spark's
    Kafka source), with -2/-1 standing for the earliest/latest offset.
    """
    partitions = sorted(partitions)
    if spec == EARLIEST:
        return {tp: earliest[tp] for tp in partitions}
    if spec == LATEST:
        return {tp: latest[tp] for tp in partitions}
    missing = [tp for tp in partitions if tp not in spec]
    unknown = [tp for tp in spec if tp not in set(partitions)]
    if missing or unknown:
        problems = []
        if missing:
            problems.append(f"partitions without an offset: {_names(missing)}")
        if unknown:
            problems.append(f"partitions that do not exist: {_names(sorted(unknown))}")
        raise ValueError(f"Option '{name}' must give an offset for every partition the query reads "
                         f"(-2: earliest, -1: latest); {'; '.join(problems)}")
    out = {}
    for tp in partitions:
        offset = spec[tp]
        out[tp] = earliest[tp] if offset == EARLIEST_OFFSET else latest[tp] if offset == LATEST_OFFSET else offset
    return out


def rate_limit(start: Mapping, latest: Mapping, limit: int) -> dict[tuple[str, int], int]:
    """End offsets reading at most about ``limit`` records from ``start`` towards ``latest``.

    As Spark's Kafka source does for ``maxOffsetsPerTrigger``: the limit is
    shared among the partitions in proportion to how far each is behind, each
    share rounded down (a share below one record is rounded up, so no
    partition starves). ``start`` must have an offset for every partition of
    ``latest``.
    """
    sizes = {tp: end - start[tp] for tp, end in latest.items() if end - start[tp] > 0}
    total = sum(sizes.values())
    if total <= limit:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = end
            continue
        share = limit * size / total
        out[tp] = min(end, start[tp] + (math.ceil(share) if share < 1 else math.floor(share)))
    return out


def data_loss_message(what: str, *, fail: bool) -> str:
    if fail:
        return (f"twisted_kafka source: data loss: {what}. The records were removed from Kafka (retention or "
                "DeleteRecords) or the topic was deleted before the query read them. Set the source option "
                "failOnDataLoss to false to skip what was lost and continue.")
    return f"twisted_kafka source: data loss ignored (failOnDataLoss=false): {what}; skipping it."


def plan_ranges(start: Mapping, end: Mapping, earliest: Mapping, *, fail_on_data_loss: bool,
                warn: Callable[[str], None]) -> list[OffsetRange]:
    """The ranges between two offset maps, checked against the partitions' log start offsets.

    ``start`` may lack partitions that appeared since (they start at offset
    0) and may have partitions that are gone; ``earliest`` is each
    partition's log start offset now. Data loss — offsets below the log start
    that were never read, a partition gone, offsets that went backwards —
    raises ``DataLossError`` (one message naming every case) when
    ``fail_on_data_loss``; otherwise each case is passed to ``warn`` and the
    ranges skip what is gone.
    """
    problems = []
    for tp, offset in _sorted(start):
        if tp not in end:
            problems.append(f"partition {_name(tp)} is gone (topic or partition deleted), "
                            f"offsets from {offset} were not read")
    ranges = []
    for tp, until in _sorted(end):
        begin = start.get(tp, 0)
        if until < begin:
            problems.append(f"the offsets of partition {_name(tp)} went back from {begin} to {until} "
                            "(topic deleted and re-created?)")
            continue
        log_start = earliest.get(tp, 0)
        if log_start > begin:
            new = "" if tp in start else " (a partition added since the previous batch)"
            problems.append(f"offsets {begin} to {min(log_start, until) - 1} of {_name(tp)}{new} were never read "
                            f"and are gone: its log start offset is now {log_start}")
            begin = min(log_start, until)
        if until > begin:
            ranges.append(OffsetRange(tp[0], tp[1], begin, until))
    if problems:
        if fail_on_data_loss:
            raise DataLossError(data_loss_message("; ".join(problems), fail=True))
        for problem in problems:
            warn(data_loss_message(problem, fail=False))
    return ranges


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Ranges as Spark tasks: one per partition, or at least ``min_partitions`` pieces.

    Empty ranges are dropped. With ``min_partitions`` above the number of
    ranges, each range is cut into consecutive pieces, their number in
    proportion to its size (at least one piece per range, never a piece
    smaller than one record); the pieces of a range have sizes that differ
    by at most one.
    """
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    quotas = [r.size / total * min_partitions for r in ranges]
    parts = [max(1, min(r.size, math.floor(q))) for r, q in zip(ranges, quotas, strict=True)]
    # Hand out what rounding down left, largest remainders first.
    order = sorted(range(len(ranges)), key=lambda i: (-(quotas[i] - math.floor(quotas[i])), i))
    left = min_partitions - sum(parts)
    while left > 0:
        grown = False
        for i in order:
            if left == 0:
                break
            if parts[i] < ranges[i].size:
                parts[i] += 1
                left -= 1
                grown = True
        if not grown:
            break
    out = []
    for r, n in zip(ranges, parts, strict=True):
        base, extra = divmod(r.size, n)
        begin = r.start
        for i in range(n):
            size = base + (1 if i < extra else 0)
            out.append(OffsetRange(r.topic, r.partition, begin, begin + size))
            begin += size
    return out


def _name(tp) -> str:
    return f"{tp[0]}-{tp[1]}"


def _names(tps) -> str:
    return ", ".join(_name(tp) for tp in tps)

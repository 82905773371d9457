"""Structured Streaming reads: ``spark.readStream.format("twisted_kafka")``.

A micro-batch is the offsets between two offset maps in the JSON of Spark's
Kafka source (``offsets.to_json``), which Spark keeps in the query's
checkpoint; a restarted query resumes at exactly the offsets its checkpoint
holds, and a batch planned but not committed is read again with the same
offsets.

* ``initialOffset``: ``startingOffsets`` (default latest) resolved against the
  partitions the query reads now; used only when the checkpoint has none.
* ``latestOffset(start, limit)``: the partitions the subscription reads now,
  up to their latest offsets; a partition that appeared since ``start``
  (a new topic matching the pattern, partitions added) starts at its
  earliest offset. ``ReadMaxRows`` (``maxOffsetsPerTrigger``) caps the batch
  as Spark's Kafka source does (``offsets.rate_limit``); under
  ``Trigger.AvailableNow`` the latest offsets are those recorded by
  ``prepareForTriggerAvailableNow``, so the query ends.
* ``partitions(start, end)``: the ranges, checked for data loss against each
  partition's log start offset (``offsets.plan_ranges``); one Spark task per
  range, split further with ``minPartitions``.

The stream reader lives in one long-running Python process on the driver,
so it keeps its admin client between calls; the copy Spark ships to the
executors for ``read`` carries the options only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from .admin import OffsetReader
from .offsets import from_json, plan_ranges, rate_limit, resolve, split_ranges, to_json
from .options import OptionError, SourceOptions
from .reader import KafkaInputPartition, read_partition

__all__ = ["KafkaStreamReader"]

log = logging.getLogger(__name__)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions, schema: StructType):
        self.options = options
        self.schema = schema
        self._brokers: OffsetReader | None = None
        #: Trigger.AvailableNow: the latest offsets when the query started.
        self._target: dict | None = None
        self._latest: dict | None = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_brokers"] = None
        return state

    @property
    def brokers(self) -> OffsetReader:
        if self._brokers is None:
            self._brokers = OffsetReader(self.options.client)
        return self._brokers

    # -- offsets (driver) ----------------------------------------------------------------

    def initialOffset(self) -> dict:
        tps = self.brokers.partitions(self.options.subscription)
        earliest = self.brokers.earliest(tps)
        latest = self.brokers.latest(tps)
        try:
            start = resolve(self.options.starting, tps, earliest, latest, name="startingOffsets")
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        return to_json(start)

    def _latest_now(self) -> dict:
        if self._target is not None:
            return dict(self._target)
        return self.brokers.latest(self.brokers.partitions(self.options.subscription))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_json(start)
        latest = self._latest_now()
        self._latest = latest
        if isinstance(limit, ReadMaxRows):
            new = [tp for tp in latest if tp not in begin]
            if new:
                begin.update(self.brokers.earliest(new))
            return to_json(rate_limit({tp: begin[tp] for tp in latest}, latest, limit.max_rows))
        return to_json(latest)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict | None:
        return None if self._latest is None else to_json(self._latest)

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.brokers.latest(self.brokers.partitions(self.options.subscription))

    def partitions(self, start: dict, end: dict) -> list[KafkaInputPartition]:
        begin, until = from_json(start), from_json(end)
        if begin == until:
            return []
        earliest = self.brokers.earliest(until)
        ranges = plan_ranges(begin, until, earliest, fail_on_data_loss=self.options.fail_on_data_loss,
                             warn=log.warning)
        return [KafkaInputPartition(r) for r in split_ranges(ranges, self.options.min_partitions)]

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, never in a Kafka consumer group."""

    def stop(self) -> None:
        self._brokers = None

    # -- records (executors) ---------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator:
        return read_partition(self.options, self.schema, partition)

"""Batch reads: ``spark.read.format("twisted_kafka")``.

The offsets are fixed when the query is planned (on the driver): for every
partition the query reads, ``startingOffsets`` (default earliest) to
``endingOffsets`` (default latest). Each partition's range becomes one
Spark task, or several with ``minPartitions``; executors read their range
with their own consumer (``fetch.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from .admin import OffsetReader
from .offsets import OffsetRange, plan_ranges, resolve, split_ranges
from .options import OptionError, SourceOptions

__all__ = ["KafkaInputPartition", "KafkaBatchReader", "read_partition"]

log = logging.getLogger(__name__)


class KafkaInputPartition(InputPartition):
    """One Spark task: one offset range of one topic partition."""

    def __init__(self, rng: OffsetRange):
        super().__init__(rng)
        self.range = rng


def read_partition(options: SourceOptions, schema: StructType, partition: InputPartition) -> Iterator:
    """The record batches of one input partition (run on executors, by batch and stream readers)."""
    from .fetch import read_range
    from .schema import arrow_schema

    rng = getattr(partition, "range", None)
    if rng is None:  # Spark plans one empty partition when a batch read has no data at all
        return iter(())
    return read_range(options.client, rng, arrow_schema(schema), include_headers=options.include_headers,
                      fail_on_data_loss=options.fail_on_data_loss, poll_timeout_ms=options.poll_timeout_ms)


class KafkaBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions, schema: StructType):
        self.options = options
        self.schema = schema

    def partitions(self) -> list[KafkaInputPartition]:
        options = self.options
        brokers = OffsetReader(options.client)
        tps = brokers.partitions(options.subscription)
        earliest = brokers.earliest(tps)
        latest = brokers.latest(tps)
        try:
            start = resolve(options.starting, tps, earliest, latest, name="startingOffsets")
            end = resolve(options.ending, tps, earliest, latest, name="endingOffsets")
        except ValueError as exc:
            raise OptionError(str(exc)) from None
        backwards = [f"{t}-{p}: {start[(t, p)]} > {end[(t, p)]}" for t, p in tps if start[(t, p)] > end[(t, p)]]
        if backwards:
            raise OptionError(f"startingOffsets is after endingOffsets for {', '.join(backwards)}")
        ranges = plan_ranges(start, end, earliest, fail_on_data_loss=options.fail_on_data_loss, warn=log.warning)
        return [KafkaInputPartition(r) for r in split_ranges(ranges, options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator:
        return read_partition(self.options, self.schema, partition)

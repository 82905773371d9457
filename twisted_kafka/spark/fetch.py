"""Executors: read one offset range from the brokers and return it as Arrow record batches.

Each Spark task opens a librdkafka consumer (confluent-kafka) in assign
mode — no consumer group is joined and nothing is committed: the group id
librdkafka insists on is never used — positions it at the range's start and
reads until the end offset. Records come back as ``pyarrow.RecordBatch``
in the source's schema (``schema.py``), at most ``batch_rows`` per batch.

Offsets inside a range can be missing for two reasons: compaction,
transaction markers and (read_committed) aborted transactions, which is
normal -- librdkafka never delivers a marker, so a range whose last offsets
are markers ends when the consumer reports the end of the partition past
them -- and records removed by retention or
DeleteRecords after the query planned the range. The second is data loss:
the partition's log start offset has moved past the next offset to read.
It fails the task when ``failOnDataLoss`` is true; otherwise the reader
skips to the log start offset. Records that are never delivered although
the range says they exist (the log was truncated below the range's end)
are data loss as well; a range the broker keeps serving nothing for fails
after ``kafkaConsumer.pollTimeoutMs``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from .offsets import DataLossError, OffsetRange, data_loss_message

__all__ = ["consumer_config", "read_range", "DEFAULT_BATCH_ROWS"]

log = logging.getLogger(__name__)

DEFAULT_BATCH_ROWS = 10_000
#: How long one consume() call waits before the reader looks at the partition's offsets.
_POLL_SECONDS = 0.5

#: librdkafka settings the reader starts from; ``kafka.*`` options override them.
_CONSUMER_DEFAULTS = {
    "client.id": "twisted-kafka-spark",
    # librdkafka stops fetching for fetch.queue.backoff.ms (default 1 s) each time
    # queued.min.messages are waiting locally: with small records that is most of a read.
    "fetch.queue.backoff.ms": 10,
    "fetch.wait.max.ms": 100,
}
#: librdkafka keeps fetching ahead until this many records wait locally; it does not know
#: where the range ends, so this bounds what it fetches past the end (queued.min.messages).
_PREFETCH_RECORDS = 20_000
#: Settings the reader relies on (no group, no commits, out-of-range is reported, not reset, and the end
#: of the partition is reported: its offset is the fetch position, past transaction markers and aborted
#: records that are never delivered).
_CONSUMER_FIXED = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "error",
    "enable.partition.eof": True,
}
_UNUSED_GROUP = "twisted-kafka-spark-assign-only"


def consumer_config(client: Mapping[str, str], records: int = _PREFETCH_RECORDS) -> dict:
    """The consumer's settings for reading ``records`` records."""
    prefetch = {"queued.min.messages": max(1, min(records, _PREFETCH_RECORDS))}
    return {"group.id": _UNUSED_GROUP, **_CONSUMER_DEFAULTS, **prefetch, **client, **_CONSUMER_FIXED}


class _Columns:
    """Record fields gathered column by column until they become one RecordBatch."""

    def __init__(self, include_headers: bool):
        self.include_headers = include_headers
        self.keys: list = []
        self.values: list = []
        self.offsets: list = []
        self.timestamps: list = []
        self.types: list = []
        self.headers: list = []

    def clear(self) -> None:
        """Empty the lists in place (the read loop holds references to them)."""
        for column in (self.keys, self.values, self.offsets, self.timestamps, self.types, self.headers):
            column.clear()

    def __len__(self) -> int:
        return len(self.offsets)

    def batch(self, topic: str, partition: int, schema: pa.Schema) -> pa.RecordBatch:
        n = len(self.offsets)
        millis = pa.array(self.timestamps, pa.int64())
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            pc.multiply(millis, 1000).cast(schema.field("timestamp").type),
            pa.array(self.types, pa.int32()),
        ]
        if self.include_headers:
            columns.append(pa.array(self.headers, schema.field("headers").type))
        self.clear()
        return pa.RecordBatch.from_arrays(columns, schema=schema)


def read_range(client: Mapping[str, str], rng: OffsetRange, schema: pa.Schema, *, include_headers: bool,
               fail_on_data_loss: bool, poll_timeout_ms: int,
               batch_rows: int = DEFAULT_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """The records of ``rng`` (offsets ``start`` to ``end - 1``), in offset order."""
    if rng.size <= 0:
        return
    consumer = Consumer(consumer_config(client, rng.size))
    try:
        yield from _read(consumer, rng, schema, include_headers, fail_on_data_loss, poll_timeout_ms / 1000.0,
                         batch_rows)
    finally:
        consumer.close()


def _read(consumer: Consumer, rng: OffsetRange, schema: pa.Schema, include_headers: bool, fail_on_data_loss: bool,
          poll_timeout: float, batch_rows: int) -> Iterator[pa.RecordBatch]:
    topic, partition, end = rng.topic, rng.partition, rng.end
    columns = _Columns(include_headers)
    keys, values, offsets = columns.keys, columns.values, columns.offsets
    timestamps, types, headers = columns.timestamps, columns.types, columns.headers
    next_offset = rng.start
    consumer.assign([TopicPartition(topic, partition, next_offset)])
    idle_since = time.monotonic()

    def lost(what: str) -> None:
        if fail_on_data_loss:
            raise DataLossError(data_loss_message(what, fail=True))
        log.warning(data_loss_message(what, fail=False))

    while next_offset < end:
        messages = consumer.consume(min(batch_rows, end - next_offset), _POLL_SECONDS)
        if not messages:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=poll_timeout,
                                                       cached=False)
            if low > next_offset:
                lost(f"offsets {next_offset} to {min(low, end) - 1} of {topic}-{partition} were removed before "
                     f"they were read (its log start offset is now {low})")
                next_offset = min(low, end)
                consumer.assign([TopicPartition(topic, partition, next_offset)])
            elif high < end and high <= next_offset:
                lost(f"offsets {next_offset} to {end - 1} of {topic}-{partition} are not in the log "
                     f"(its end offset is now {high})")
                break
            elif time.monotonic() - idle_since > poll_timeout:
                raise TimeoutError(f"twisted_kafka source: no record of {topic}-{partition} from offset {next_offset} "
                                   f"(reading up to {end}) within kafkaConsumer.pollTimeoutMs "
                                   f"({poll_timeout * 1000:.0f} ms); the partition's offsets are {low} to {high}")
            continue
        idle_since = time.monotonic()
        for message in messages:
            error = message.error()
            if error is not None:
                code = error.code()
                if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition),
                                                               timeout=poll_timeout, cached=False)
                    if low > next_offset:
                        lost(f"offsets {next_offset} to {min(low, end) - 1} of {topic}-{partition} were removed "
                             f"before they were read (its log start offset is now {low})")
                        next_offset = min(low, end)
                    else:
                        lost(f"offsets {next_offset} to {end - 1} of {topic}-{partition} are not in the log "
                             f"(its offsets are now {low} to {high})")
                        next_offset = end
                    if next_offset < end:
                        consumer.assign([TopicPartition(topic, partition, next_offset)])
                    break
                if code == KafkaError._PARTITION_EOF:
                    # The fetch reached the end of the log (the LSO for read_committed): offsets below it
                    # that were not delivered are markers or aborted records, not data loss.
                    reached = message.offset()
                    if reached is not None and reached >= end:
                        next_offset = end
                        break
                    continue
                raise KafkaException(error)
            offset = message.offset()
            assert offset is not None   # a message without an error always has one
            if offset < next_offset:
                continue
            if offset >= end:
                next_offset = end
                break
            if offset > next_offset and fail_on_data_loss:
                # A gap: compaction, or records removed since the range was planned.
                low, _ = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=poll_timeout,
                                                        cached=False)
                if low > next_offset:
                    lost(f"offsets {next_offset} to {min(low, offset) - 1} of {topic}-{partition} were removed "
                         f"before they were read (its log start offset is now {low})")
            kind, millis = message.timestamp()
            keys.append(message.key())
            values.append(message.value())
            offsets.append(offset)
            timestamps.append(millis)
            types.append(kind - 1)  # librdkafka 0/1/2 (none/create/log-append) -> Kafka's id -1/0/1
            if include_headers:
                headers.append(message.headers())
            next_offset = offset + 1
        if len(columns) >= batch_rows:
            yield columns.batch(topic, partition, schema)
    if len(columns):
        yield columns.batch(topic, partition, schema)

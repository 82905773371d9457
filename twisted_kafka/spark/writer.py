"""Writes: ``df.write.format("twisted_kafka")`` and ``df.writeStream.format("twisted_kafka")``.

The columns are those of Spark's Kafka sink:

* ``value`` (required), ``key``: binary or string (strings are sent UTF-8);
* ``topic`` (string): the record's topic, unless the ``topic`` option is set,
  which overrides it;
* ``partition`` (int): the record's partition; null or absent: librdkafka's
  partitioner (by key);
* ``headers``: ``array<struct<key: string, value: binary>>``.

Other columns are ignored. Each Spark task produces its rows with a
librdkafka producer (confluent-kafka) and waits until every record is
acknowledged; a delivery error fails the task, and Spark runs it again.
That is at-least-once, as Spark's Kafka sink: a task that fails after some
of its records were acknowledged writes them again when it is retried.  The
sink does not run transactions (``kafka.transactional.id`` is refused):
exactly-once per batch would need a transaction spanning Spark's tasks,
which neither this sink nor Spark's offers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from .options import OptionError, SinkOptions

__all__ = ["KafkaWriteResult", "KafkaWriter", "KafkaStreamWriter", "check_sink_schema", "produce_batches"]

#: librdkafka settings the producer starts from; ``kafka.*`` options override them.
_PRODUCER_DEFAULTS = {"client.id": "twisted-kafka-spark", "linger.ms": 5}


@dataclass
class KafkaWriteResult(WriterCommitMessage):
    """What one task wrote: the number of records acknowledged."""

    records: int


def _is_headers_type(data_type) -> bool:
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = data_type.elementType.fields
    return ([f.name for f in fields] == ["key", "value"] and isinstance(fields[0].dataType, StringType)
            and isinstance(fields[1].dataType, BinaryType))


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Refuse, on the driver, input columns a Kafka sink cannot write (as Spark's Kafka sink does)."""
    types = {f.name: f.dataType for f in schema.fields}
    if "value" not in types:
        raise OptionError("Required attribute 'value' not found (the record value, binary or string)")
    for name in ("key", "value"):
        if name in types and not isinstance(types[name], (BinaryType, StringType)):
            raise OptionError(f"Attribute '{name}' must be of type binary or string, not {types[name].simpleString()}")
    if "topic" in types:
        if not isinstance(types["topic"], StringType):
            raise OptionError(f"Attribute 'topic' must be of type string, not {types['topic'].simpleString()}")
    elif options.topic is None:
        raise OptionError("The 'topic' option is required when there is no 'topic' attribute")
    if "partition" in types and not isinstance(types["partition"], IntegerType):
        raise OptionError(f"Attribute 'partition' must be of type int, not {types['partition'].simpleString()}")
    if "headers" in types and not _is_headers_type(types["headers"]):
        raise OptionError("Attribute 'headers' must be of type array<struct<key: string, value: binary>>, "
                          f"not {types['headers'].simpleString()}")


def produce_batches(options: SinkOptions, batches: Iterator) -> int:
    """Produce the rows of ``batches`` (pyarrow record batches); returns how many were acknowledged."""
    from confluent_kafka import Producer

    producer = Producer({**_PRODUCER_DEFAULTS, **options.client})
    errors: list = []
    delivered = 0

    def on_delivery(err, _msg):
        nonlocal delivered
        if err is not None:
            errors.append(err)
        else:
            delivered += 1

    produce = producer.produce
    sent = 0
    for batch in batches:
        names = batch.schema.names
        n = batch.num_rows
        column = {name: batch.column(i).to_pylist() for i, name in enumerate(names)
                  if name in ("key", "value", "topic", "partition", "headers")}
        values = column["value"]
        keys = column.get("key") or [None] * n
        topics = [options.topic] * n if options.topic is not None else column["topic"]
        partitions = column.get("partition") or [None] * n
        headers = column.get("headers") or [None] * n
        for i in range(n):
            topic = topics[i]
            if topic is None:
                raise ValueError("Null topic in the data; set the 'topic' option or fill the 'topic' column")
            kwargs: dict[str, Any] = {"on_delivery": on_delivery}
            if partitions[i] is not None:
                kwargs["partition"] = partitions[i]
            if headers[i]:
                kwargs["headers"] = [(h["key"], h["value"]) for h in headers[i]]
            while True:
                try:
                    produce(topic, values[i], keys[i], **kwargs)
                    break
                except BufferError:  # librdkafka's queue is full: let it deliver some
                    producer.poll(0.1)
            sent += 1
            if errors:
                break
        producer.poll(0)
        if errors:
            break
    left = producer.flush()
    if errors:
        raise RuntimeError(f"twisted_kafka sink: {len(errors)} record(s) were not written; first error: {errors[0]}")
    if left or delivered != sent:
        raise RuntimeError(f"twisted_kafka sink: {sent - delivered} of {sent} record(s) were not acknowledged")
    return delivered


class KafkaWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType, overwrite: bool):
        if overwrite:
            raise OptionError("Save mode Overwrite is not allowed for Kafka; use Append or ErrorIfExists")
        check_sink_schema(schema, options)
        self.options = options

    def write(self, iterator) -> KafkaWriteResult:
        return KafkaWriteResult(produce_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to do: every task's records were acknowledged before the task ended."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo: records a failed job wrote stay in Kafka (at-least-once)."""


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType):
        check_sink_schema(schema, options)
        self.options = options

    def write(self, iterator) -> KafkaWriteResult:
        return KafkaWriteResult(produce_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every task's records were acknowledged before the task ended."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: records of a failed micro-batch stay in Kafka (at-least-once)."""

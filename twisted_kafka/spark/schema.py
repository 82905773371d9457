"""The row schema of the source (Spark's Kafka source schema) and its Arrow form.

Spark's Kafka source declares, all fields nullable::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int
    [, headers array<struct<key: string, value: binary>>]   (includeHeaders=true)

``timestampType`` is Kafka's ``TimestampType`` id: -1 none, 0 CreateTime,
1 LogAppendTime. ``headers`` is null for a record without headers.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

__all__ = ["HEADERS_TYPE", "kafka_schema", "arrow_schema"]

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))

_FIELDS = (
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
)


def kafka_schema(include_headers: bool) -> StructType:
    fields = list(_FIELDS)
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


def arrow_schema(schema: StructType):
    """The Arrow schema Spark expects of record batches returned for ``schema``.

    Spark compares a data source's record batches with the Arrow form of the
    declared schema (timestamps in microseconds, UTC); pyspark's own
    conversion gives exactly that form.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema, timezone="UTC")

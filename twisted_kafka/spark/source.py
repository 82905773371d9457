"""The data source Spark knows as format ``twisted_kafka``.

Spark creates it with the query's options (case-insensitive names) and asks
it for the schema, a batch or streaming reader, or a batch or streaming
writer; the readers and writers are in their own modules.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from .options import OptionError, parse_sink_options, parse_source_options
from .reader import KafkaBatchReader
from .schema import kafka_schema
from .stream_reader import KafkaStreamReader
from .writer import KafkaStreamWriter, KafkaWriter

__all__ = ["KafkaDataSource", "FORMAT"]

FORMAT = "twisted_kafka"


class KafkaDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _include_headers(self) -> bool:
        value = self.options.get("includeheaders", self.options.get("includeHeaders", "false"))
        return str(value).strip().lower() == "true"

    def schema(self) -> StructType:
        return kafka_schema(self._include_headers())

    def _check_schema(self, schema: StructType) -> None:
        expected = kafka_schema(self._include_headers())
        if schema != expected:
            raise OptionError(f"The {FORMAT} source has a fixed schema ({expected.simpleString()}) and does not "
                              f"take a user-specified one ({schema.simpleString()})")

    def reader(self, schema: StructType) -> KafkaBatchReader:
        self._check_schema(schema)
        return KafkaBatchReader(parse_source_options(self.options, streaming=False), schema)

    def streamReader(self, schema: StructType) -> KafkaStreamReader:
        self._check_schema(schema)
        return KafkaStreamReader(parse_source_options(self.options, streaming=True), schema)

    def writer(self, schema: StructType, overwrite: bool) -> KafkaWriter:
        return KafkaWriter(parse_sink_options(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        return KafkaStreamWriter(parse_sink_options(self.options), schema)

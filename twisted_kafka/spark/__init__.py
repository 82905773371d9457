"""A PySpark data source for Kafka brokers (format ``twisted_kafka``), with the contract of Spark's Kafka source.

    from twisted_kafka.spark import register
    register(spark)                      # spark.dataSource.register(KafkaDataSource)
    df = (spark.read.format("twisted_kafka")
          .option("kafka.bootstrap.servers", "127.0.0.1:9092")
          .option("subscribe", "events").load())

Needs pyspark >= 4.2 (Python data sources with read limits and
Trigger.AvailableNow), pyarrow and confluent-kafka on the driver and on every
executor: ``pip install twisted_kafka[spark]``. docs/spark.md has the options
and a spark-submit example.
"""

from __future__ import annotations

from .source import FORMAT, KafkaDataSource

__all__ = ["FORMAT", "KafkaDataSource", "register"]


def register(spark) -> None:
    """Make ``spark.read/readStream/write/writeStream.format("twisted_kafka")`` available in ``spark``.

    Registering again (a re-run notebook cell, a session made with
    ``newSession()``, which shares its parent's data sources) does nothing.
    """
    from pyspark.errors import AnalysisException

    try:
        spark.dataSource.register(KafkaDataSource)
    except AnalysisException as exc:
        if exc.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
            raise

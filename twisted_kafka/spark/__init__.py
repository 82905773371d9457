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

import os
import sys

from .source import FORMAT, KafkaDataSource

__all__ = ["FORMAT", "KafkaDataSource", "register"]


def register(spark) -> None:
    """Make ``spark.read/readStream/write/writeStream.format("twisted_kafka")`` available in ``spark``.

    Registering again (a re-run notebook cell, a session made with
    ``newSession()``, which shares its parent's data sources) does nothing.

    Spark runs a Python data source in Python workers it starts with the
    interpreter named when the data source is registered: ``PYSPARK_PYTHON``
    (``spark-submit`` sets it from ``spark.pyspark.python``), else ``python3``
    from ``PATH`` -- which, for a job started as ``.venv/bin/python job.py``
    without an activated virtualenv, is not the interpreter that has
    twisted_kafka.  So when ``PYSPARK_PYTHON`` is unset, this data source's
    workers run ``spark.pyspark.python`` if the session names it, else, with
    a local master (the workers run on this machine), the driver's own
    interpreter, ``sys.executable``.  Nothing else changes: the session's
    other Python workers keep Spark's choice, and on a cluster without
    ``spark.pyspark.python`` the executors run Spark's default (docs/spark.md).
    """
    from pyspark.errors import AnalysisException

    context, python = _workers_python(spark)
    previous = context.pythonExec if context is not None else None
    try:
        if context is not None:
            context.pythonExec = python     # read by spark.dataSource.register, for this source only
        spark.dataSource.register(KafkaDataSource)
    except AnalysisException as exc:
        if exc.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
            raise
    finally:
        if context is not None:
            context.pythonExec = previous


def _workers_python(spark):
    """``(SparkContext, interpreter)`` for this data source's Python workers, or ``(None, None)`` to leave
    Spark's choice (``PYSPARK_PYTHON`` set; no rule applies; a Spark Connect session, whose workers run on
    the server, has no SparkContext here)."""
    if os.environ.get("PYSPARK_PYTHON"):
        return None, None
    try:
        context = spark.sparkContext
    except Exception:                       # Spark Connect: PySparkNotImplementedError
        return None, None
    named = context.getConf().get("spark.pyspark.python")
    if named:
        return context, named
    if context.master.startswith("local"):
        return context, sys.executable
    return None, None

"""A Spark application run with spark-submit by the tests: one Trigger.AvailableNow run of a stream.

    spark-submit --master 'local[2]' available_now_job.py BOOTSTRAP TOPIC CHECKPOINT OUTPUT [name=value ...]

Reads ``TOPIC`` with the twisted_kafka source (extra source options as
``name=value``) until the query ends by itself, and writes every row as a
JSON line (batch id, partition, offset, key and value in hex) to ``OUTPUT``.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession

from twisted_kafka.spark import register


def main(argv: list[str]) -> int:
    bootstrap, topic, checkpoint, output, *extra = argv
    spark = SparkSession.builder.appName("twisted_kafka-available-now-job").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    reader = (spark.readStream.format("twisted_kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic))
    for item in extra:
        name, _, value = item.partition("=")
        reader = reader.option(name, value)

    with open(output, "w", encoding="utf-8") as out:
        def write_batch(df, batch_id):
            for row in df.select("partition", "offset", "key", "value").collect():
                out.write(json.dumps({"batch": batch_id, "partition": row.partition, "offset": row.offset,
                                      "key": None if row.key is None else bytes(row.key).hex(),
                                      "value": bytes(row.value).hex()}) + "\n")
            out.flush()

        query = (reader.load().writeStream.foreachBatch(write_batch).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Reading partitions back to their end with librdkafka, for tests that check what a broker kept."""

from __future__ import annotations

import time
from collections.abc import Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition


def read_to_end(bootstrap: str, topic: str, partitions: int | Iterable[int] = 1, *, start: int = 0,
                timeout: float = 20) -> dict[int, list[tuple[int, bytes | None, bytes | None]]]:
    """``{partition: [(offset, key, value)]}`` from ``start`` up to each partition's high watermark.

    ``partitions`` is a count (partitions 0..n-1) or the partition numbers.
    The end is librdkafka's partition-EOF event, so nothing is waited for
    once the last record arrived; ``timeout`` bounds a broker that never
    gets there.
    """
    wanted = list(range(partitions)) if isinstance(partitions, int) else list(partitions)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                         "enable.partition.eof": True, "fetch.wait.max.ms": 50})
    consumer.assign([TopicPartition(topic, p, start) for p in wanted])
    out: dict[int, list] = {p: [] for p in wanted}
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < len(wanted):
            assert time.monotonic() < deadline, f"did not reach the end of {topic} {sorted(set(wanted) - at_end)}"
            for msg in consumer.consume(10_000, timeout=0.5):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                        continue
                    raise KafkaException(msg.error())
                at_end.discard(msg.partition())
                out[msg.partition()].append((msg.offset(), msg.key(), msg.value()))
    finally:
        consumer.close()
    return out

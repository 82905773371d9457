"""Totals per customer, computed by the members of a consumer group (or by one aiokafka consumer)."""

from __future__ import annotations

import time
from collections import Counter

from aiokafka import AIOKafkaConsumer
from confluent_kafka import Consumer, KafkaException

from .events import decode


class TotalsWorker:
    """One member of the ``totals`` consumer group: sums the orders of the partitions it is assigned."""

    def __init__(self, config: dict, topic: str, group: str = "totals"):
        self.consumer = Consumer({**config, "group.id": group, "auto.offset.reset": "earliest",
                                  "enable.auto.commit": False})
        self.consumer.subscribe([topic])
        self.totals: Counter[str] = Counter()
        self.seen = 0

    def poll_once(self, timeout: float = 0.2) -> None:
        message = self.consumer.poll(timeout)
        if message is None:
            return
        if message.error():
            raise KafkaException(message.error())
        order = decode(message.value())
        self.totals[order.customer] += order.amount_cents
        self.seen += 1
        self.consumer.commit(message, asynchronous=False)

    def assignment(self) -> list[int]:
        return sorted(tp.partition for tp in self.consumer.assignment())

    def close(self) -> None:
        self.consumer.close()


def run_until(workers: list[TotalsWorker], done, timeout: float = 30.0) -> None:
    """Poll every worker in turn until ``done()`` holds."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("the consumer group did not get there in time")
        for worker in workers:
            worker.poll_once(0.05)


async def async_totals(consumer_kwargs: dict, topic: str, expected: int) -> Counter[str]:
    """Read ``expected`` orders from the start of ``topic`` with aiokafka; the totals per customer."""
    consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", enable_auto_commit=False, **consumer_kwargs)
    await consumer.start()
    try:
        totals: Counter[str] = Counter()
        seen = 0
        async for message in consumer:
            order = decode(message.value)
            totals[order.customer] += order.amount_cents
            seen += 1
            if seen == expected:
                return totals
    finally:
        await consumer.stop()
    raise AssertionError("unreachable: the consumer stopped iterating")

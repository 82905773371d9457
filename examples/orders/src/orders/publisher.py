"""Publishing orders: keyed by customer, so one customer's orders stay in order on one partition."""

from __future__ import annotations

from collections.abc import Iterable

from confluent_kafka import KafkaException, Producer

from .events import Order, encode


class OrderPublisher:
    def __init__(self, config: dict, topic: str, *, idempotent: bool = True):
        # An idempotent producer (KIP-98): retries never duplicate or reorder an order.
        self.producer = Producer({**config, "enable.idempotence": idempotent, "acks": "all", "linger.ms": 5})
        self.topic = topic

    def publish(self, orders: Iterable[Order], timeout: float = 30.0) -> list[tuple[int, int]]:
        """Send the orders and wait for every acknowledgement; (partition, offset) of each, in order."""
        results: list = []
        for order in orders:
            self.producer.produce(self.topic, key=order.customer.encode(), value=encode(order),
                                  on_delivery=lambda err, msg: results.append(err or (msg.partition(),
                                                                                      msg.offset())))
        remaining = self.producer.flush(timeout)
        if remaining:
            raise KafkaException(f"{remaining} order(s) not acknowledged within {timeout}s")
        errors = [r for r in results if not isinstance(r, tuple)]
        if errors:
            raise KafkaException(errors[0])
        return results

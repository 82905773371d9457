"""An idempotent producer (KIP-98): many batches in flight, each order written exactly once, in order."""

import pytest
from orders import Order, OrderPublisher, decode

from .helpers import read_back


@pytest.mark.kafka_topic(partitions=3)
def test_every_order_is_written_once_and_each_customers_orders_stay_in_order(kafka_client_config, kafka_topic):
    orders = [Order(f"order-{i}", f"customer-{i % 5}", i) for i in range(300)]
    publisher = OrderPublisher({**kafka_client_config, "max.in.flight.requests.per.connection": 5,
                                "batch.num.messages": 10}, kafka_topic, idempotent=True)
    acks = publisher.publish(orders)
    # Every (partition, offset) once: no duplicate written.
    assert len(set(acks)) == 300
    read = read_back(kafka_client_config, kafka_topic, 3, 300)
    assert sorted(decode(m.value()).order_id for m in read) == sorted(o.order_id for o in orders)
    for customer in {o.customer for o in orders}:
        written = [decode(m.value()).order_id for m in read if m.key() == customer.encode()]
        assert written == [o.order_id for o in orders if o.customer == customer]

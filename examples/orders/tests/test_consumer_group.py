"""A consumer group: two members share the topic's partitions and commit what they processed."""

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from orders import Order, OrderPublisher, TotalsWorker, run_until


@pytest.mark.kafka_topic(partitions=4)
def test_two_members_split_the_partitions_and_commit_every_order(kafka_client_config, kafka_admin, kafka_topic):
    group = f"totals-{kafka_topic}"
    workers = [TotalsWorker(kafka_client_config, kafka_topic, group) for _ in range(2)]
    try:
        # Both members joined and got partitions before anything is published: no rebalance mid-stream.
        run_until(workers, lambda: all(worker.assignment() for worker in workers))
        first, second = (set(worker.assignment()) for worker in workers)
        assert first.isdisjoint(second) and first | second == {0, 1, 2, 3}

        orders = [Order(f"order-{i}", f"customer-{i % 8}", 10 * i) for i in range(40)]
        OrderPublisher(kafka_client_config, kafka_topic).publish(orders)
        run_until(workers, lambda: sum(worker.seen for worker in workers) == 40)

        totals = workers[0].totals + workers[1].totals
        assert totals == {f"customer-{c}": sum(10 * i for i in range(40) if i % 8 == c) for c in range(8)}
        # Every member processed some orders: the work was shared.
        assert all(worker.seen for worker in workers)
    finally:
        for worker in workers:
            worker.close()

    committed = kafka_admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert sum(tp.offset for tp in committed.topic_partitions) == 40

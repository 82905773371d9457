"""Produce and consume: what the application publishes is what a consumer reads, in order."""

from kafka import KafkaConsumer, KafkaProducer
from orders import Order, OrderPublisher, decode

from .helpers import read_back


def test_published_orders_are_read_back_in_order(kafka_client_config, kafka_topic):
    orders = [Order(f"order-{i}", "ada", 100 + i) for i in range(20)]
    acks = OrderPublisher(kafka_client_config, kafka_topic).publish(orders)
    assert acks == [(0, offset) for offset in range(20)]
    assert [decode(m.value()) for m in read_back(kafka_client_config, kafka_topic, 1, 20)] == orders


def test_kafka_python_clients_see_the_same_topic(kafka_bootstrap_servers, kafka_topic):
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap_servers, acks="all")
    for i in range(5):
        producer.send(kafka_topic, key=b"k", value=f"v{i}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(kafka_topic, bootstrap_servers=kafka_bootstrap_servers, auto_offset_reset="earliest",
                             consumer_timeout_ms=10_000)
    values = [message.value for _, message in zip(range(5), consumer, strict=False)]
    consumer.close()
    assert values == [f"v{i}".encode() for i in range(5)]


def test_the_topic_is_this_tests_own(kafka_admin, kafka_topic):
    topics = kafka_admin.list_topics(timeout=10).topics
    assert kafka_topic in topics and "test_the_topic_is_this_tests_own" in kafka_topic
    assert len(topics[kafka_topic].partitions) == 1
